"""Read-ahead (``ds.readahead(k)``) hints pages to the kernel and changes nothing else: the same records
in the same order as without it, for shuffles, shards, batches, several files and ``mmap=False``, and
the same :class:`StaleDataError` when the file changes under it. Real files; no timing assertions."""

from __future__ import annotations

import gzip
import mmap
import os
import pickle

import numpy as np
import pytest

import sjsonl.data.readahead
from sjsonl import JSONLDataset, StaleDataError
from sjsonl.data.readahead import page_runs, readahead_of
from sjsonl.errors import InvalidArgumentError

from ._reference_order import reference_order


def _write(path, n: int, width: int = 40, tag: int = 1):
    # records of varied length, some spanning pages, so hints cover runs of several pages
    path.write_bytes(
        b"".join(b'{"v": %d, "i": %d, "pad": "%s"}\n' % (tag, i, b"x" * (i * 37 % width)) for i in range(n))
    )
    return path


@pytest.fixture
def data(tmp_path):
    return _write(tmp_path / "d.jsonl", 20_000, width=1500)


@pytest.mark.parametrize("mmap", [True, False])
@pytest.mark.parametrize("records", [1, 64, 50_000])
def test_a_shuffled_pass_is_identical_with_and_without_readahead(data, mmap, records):
    ds = JSONLDataset(data, mmap=mmap)
    ahead = ds.readahead(records)
    assert readahead_of(ahead) == records and readahead_of(ds) == 0
    assert list(ahead.shuffle(seed=3)) == list(ds.shuffle(seed=3))
    assert list(ahead.shuffle(seed=3, epoch=1)) == list(ds.shuffle(seed=3, epoch=1))


@pytest.mark.parametrize("mmap", [True, False])
def test_views_batches_and_shards_are_identical(data, mmap):
    ds = JSONLDataset(data, mmap=mmap)
    ahead = ds.readahead(32)
    for make in (
        lambda d: d.shuffle(seed=1).shard(3, 2),
        lambda d: d.shard(4, 1, contiguous=False).shuffle(seed=5),
        lambda d: d.select(np.arange(19_999, -1, -7)),
        lambda d: d.shuffle(seed=2).skip(123).take(5000),
        lambda d: d.block_shuffle(seed=4, block_size=100, window=8),
        lambda d: d.skip(0),  # file order through the view path
    ):
        assert list(make(ahead)) == list(make(ds))
    picks = np.random.default_rng(0).integers(0, len(ds), 3000)
    assert ahead[picks] == ds[picks]  # the batch path (records_at / pread runs)
    assert ahead[5] == ds[5] and ahead[-1] == ds[-1] and ahead.raw(7) == ds.raw(7)
    assert list(ahead.iter_positions(picks)) == ds[picks]


def test_views_made_before_or_after_readahead_agree(data):
    ds = JSONLDataset(data)
    assert list(ds.shuffle(seed=9).readahead(16)) == list(ds.readahead(16).shuffle(seed=9))
    assert list(ds.readahead(16).readahead(0).shuffle(seed=9)) == list(ds.shuffle(seed=9))
    assert readahead_of(ds.readahead(16).readahead(0)) == 0


def test_several_files_and_transforms(tmp_path):
    paths = [_write(tmp_path / f"p{k}.jsonl", 3000 + k, width=500, tag=k) for k in range(3)]
    ds = JSONLDataset(paths, record_transform=lambda r: (r["v"], r["i"]))
    ahead = ds.readahead(50)
    assert list(ahead.shuffle(seed=7)) == list(ds.shuffle(seed=7))
    assert ahead[np.arange(9002)[::-3]] == ds[np.arange(9002)[::-3]]
    fields = JSONLDataset(paths, fields=["i"]).readahead(8)
    assert list(fields.shuffle(seed=1)) == list(JSONLDataset(paths, fields=["i"]).shuffle(seed=1))


def test_pickled_copies_keep_readahead_and_read_the_same(data):
    ahead = JSONLDataset(data).readahead(40).shuffle(seed=2)
    list(ahead.take(100))  # the back-off state exists before pickling
    copy = pickle.loads(pickle.dumps(ahead))
    assert readahead_of(copy) == 40
    assert list(copy) == list(ahead)


def test_other_storages_read_as_before(tmp_path):
    path = tmp_path / "d.jsonl.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"".join(b'{"i": %d}\n' % i for i in range(3000)))
    ds = JSONLDataset(path)
    assert list(ds.readahead(16).shuffle(seed=1)) == list(ds.shuffle(seed=1))


@pytest.mark.parametrize("mmap", [True, False])
def test_a_file_rewritten_in_place_raises_as_without_readahead(tmp_path, mmap):
    path = _write(tmp_path / "d.jsonl", 5000)
    for ds in (JSONLDataset(path, mmap=mmap), JSONLDataset(path, mmap=mmap).readahead(16)):
        assert ds[[1, 2]] == [{"v": 1, "i": 1, "pad": "x" * 37}, {"v": 1, "i": 2, "pad": "x" * 34}]
    plain, ahead = JSONLDataset(path, mmap=mmap), JSONLDataset(path, mmap=mmap).readahead(16)
    _write(path, 5000, tag=2)  # same size, in place
    for ds in (plain, ahead):
        with pytest.raises(StaleDataError):
            ds[[1, 2]]
        with pytest.raises(StaleDataError):
            list(ds.shuffle(seed=1))


def test_a_truncated_file_raises_in_safe_mode(tmp_path):
    path = _write(tmp_path / "d.jsonl", 5000)
    ahead = JSONLDataset(path, mmap=False).readahead(16)
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)
    with pytest.raises(StaleDataError, match="truncated"):
        list(ahead.shuffle(seed=1))


# ----------------------------------------------------------------------------- the hints themselves
# posix_fadvise is replaced by a recorder: the tests below check which pages are hinted and when, against
# record boundaries taken from the file's bytes and the order from its specification (not from sjsonl).
PAGE = mmap.PAGESIZE


def _spans_of(path) -> list[tuple[int, int]]:
    """Each record's line as ``[start, start of the next line)`` (the last: to the end of the file)."""
    data = path.read_bytes()
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A and i + 1 < len(data)]
    return list(zip(starts, [*starts[1:], len(data)]))


def _pages(spans) -> set[int]:
    return {p for lo, hi in spans for p in range(lo // PAGE, (hi - 1) // PAGE + 1)}


def _runs(spans) -> list[tuple[int, int]]:
    """The pages ``spans`` touch, merged into ``(offset, length)`` runs of adjacent pages, in file order."""
    runs: list[list[int]] = []
    for p in sorted(_pages(spans)):
        if runs and p == runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([p, p + 1])
    return [(lo * PAGE, (hi - lo) * PAGE) for lo, hi in runs]


class _Log:
    """Records, in order, the hints given for ``path`` and the reads (``os.pread``) of it."""

    def __init__(self, monkeypatch, path):
        self.events: list[tuple[str, int, int]] = []
        inode = os.stat(path).st_ino
        real_pread = os.pread

        def fadvise(fd, offset, length, advice):
            assert advice == os.POSIX_FADV_WILLNEED and os.fstat(fd).st_ino == inode
            self.events.append(("hint", offset, length))

        def pread(fd, length, offset):
            if os.fstat(fd).st_ino == inode:
                self.events.append(("read", offset, length))
            return real_pread(fd, length, offset)

        monkeypatch.setattr(os, "posix_fadvise", fadvise)
        monkeypatch.setattr(os, "pread", pread)

    def hints(self) -> list[tuple[int, int]]:
        return [(off, n) for kind, off, n in self.events if kind == "hint"]


@pytest.fixture
def every_window_hinted(monkeypatch):
    """No back-off: a recorded hint is instant, which would read as 'already cached' and skip windows."""
    monkeypatch.setattr(sjsonl.data.readahead, "_CACHED_SECONDS", 0.0)


@pytest.mark.parametrize("window", [1, 7, 64])
def test_each_window_hints_the_pages_of_the_next_before_it_is_read(
    tmp_path, monkeypatch, every_window_hinted, window
):
    path = _write(tmp_path / "d.jsonl", 3000, width=1500)
    spans = _spans_of(path)
    ahead = JSONLDataset(path).readahead(window).shuffle(seed=5)
    order = reference_order(len(spans), seed=5)
    log = _Log(monkeypatch, path)
    hinted_before: list[int] = []  # hint calls made before record k was handed out
    for k, record in enumerate(ahead):
        hinted_before.append(len(log.hints()))
        assert record["i"] == order[k]
    windows = [order[lo : lo + window] for lo in range(0, len(order), window)]
    expected = [_runs([spans[i] for i in w]) for w in windows]
    # window 0 and window 1 before the first record; window j + 1 as window j begins
    calls = [len(runs) for runs in expected]
    assert log.hints() == [run for runs in expected for run in runs]
    for j in range(len(windows)):
        assert hinted_before[j * window] == sum(calls[: j + 2])


def test_a_batch_read_hints_its_records_pages(tmp_path, monkeypatch, every_window_hinted):
    path = _write(tmp_path / "d.jsonl", 3000, width=1500)
    spans = _spans_of(path)
    ds = JSONLDataset(path).readahead(16)
    picks = np.random.default_rng(1).integers(0, len(spans), 100)
    log = _Log(monkeypatch, path)
    assert [r["i"] for r in ds[picks]] == picks.tolist()
    assert log.hints() == [
        run for lo in range(0, 100, 16) for run in _runs([spans[i] for i in picks[lo : lo + 16]])
    ]


def test_reads_with_pread_find_their_pages_hinted_first(tmp_path, monkeypatch, every_window_hinted):
    path = _write(tmp_path / "d.jsonl", 3000, width=1500)
    spans = _spans_of(path)
    ahead = JSONLDataset(path, mmap=False).readahead(8)
    # records ~75 kB apart: no two share a read (pread runs merge spans closer than 64 kB)
    picks = np.random.default_rng(2).permutation(np.arange(0, len(spans), 100))
    log = _Log(monkeypatch, path)
    assert [r["i"] for r in ahead[picks]] == picks.tolist()
    hinted_at: dict[int, int] = {}  # page -> how many reads had been made when it was first hinted
    reads = 0
    for kind, off, n in log.events:
        pages = _pages([(off, off + n)])
        if kind == "hint":
            for page in pages:
                hinted_at.setdefault(page, reads)
            continue
        assert pages <= set(hinted_at), f"read of [{off}, {off + n}) before its pages were hinted"
        # reads go in file order, 8 at a time: those of window j were hinted before window j - 1 was read
        window_start = (reads // 8 - 1) * 8
        assert all(hinted_at[p] <= max(0, window_start) for p in pages), f"read {reads} hinted late"
        reads += 1
    assert reads == len(picks) == 30
    assert set(hinted_at) == _pages([spans[i] for i in picks])  # and no page that is not read


def test_no_hints_without_readahead_or_after_readahead_0(tmp_path, monkeypatch, every_window_hinted):
    path = _write(tmp_path / "d.jsonl", 500)
    log = _Log(monkeypatch, path)
    for ds in (JSONLDataset(path), JSONLDataset(path).readahead(8).readahead(0)):
        assert len(list(ds.shuffle(seed=1))) == 500 and len(ds[list(range(0, 500, 3))]) == 167
    assert log.hints() == []


def test_hints_back_off_while_the_data_is_cached(tmp_path, monkeypatch):
    """A window whose hints come back fast (cached pages) makes the next 1, 3, 7, … (at most 31) windows go
    unhinted."""
    monkeypatch.setattr(sjsonl.data.readahead, "_CACHED_SECONDS", 1e9)  # every hint reads as cached
    path = _write(tmp_path / "d.jsonl", 2000)
    spans = _spans_of(path)
    order = reference_order(len(spans), seed=2)
    log = _Log(monkeypatch, path)
    assert [r["i"] for r in JSONLDataset(path).readahead(10).shuffle(seed=2)] == order
    hinted_windows = [0, 2, 6, 14, 30, 62, 94, 126, 158, 190]  # then 1, 3, 7, 15, 31, 31 … skipped
    windows = [order[lo : lo + 10] for lo in range(0, 2000, 10)]
    expected = [run for j in hinted_windows for run in _runs([spans[i] for i in windows[j]])]
    assert log.hints() == expected


def test_page_runs_merge_adjacent_and_overlapping_pages():
    page = mmap.PAGESIZE  # the runs are whole pages of this machine's size
    starts = np.array([3 * page + 10, 0, page - 5, 10 * page, 3 * page])
    ends = np.array([3 * page + 20, 8, page + 5, 12 * page + 1, 3 * page + 9])
    assert page_runs(starts, ends) == ([0, 3 * page, 10 * page], [2 * page, page, 3 * page])


def test_bad_arguments():
    with pytest.raises(InvalidArgumentError):
        JSONLDataset.readahead(None, -1)  # type: ignore[arg-type]
    from sjsonl.data.readahead import with_readahead

    with pytest.raises(InvalidArgumentError, match="JSONLDataset"):
        with_readahead(object(), 4)
