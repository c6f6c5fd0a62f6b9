"""Read-ahead (``ds.readahead(k)``) hints pages to the kernel and changes nothing else: the same records
in the same order as without it, for shuffles, shards, batches, several files and ``mmap=False``, and
the same :class:`StaleDataError` when the file changes under it. Real files; no timing assertions."""

from __future__ import annotations

import gzip
import mmap
import pickle

import numpy as np
import pytest

from sjsonl import JSONLDataset, StaleDataError
from sjsonl.errors import InvalidArgumentError
from sjsonl.readahead import page_runs, readahead_of


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
    ds = JSONLDataset(paths, transform=lambda r: (r["v"], r["i"]))
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


def test_page_runs_merge_adjacent_and_overlapping_pages():
    page = mmap.PAGESIZE  # the runs are whole pages of this machine's size
    starts = np.array([3 * page + 10, 0, page - 5, 10 * page, 3 * page])
    ends = np.array([3 * page + 20, 8, page + 5, 12 * page + 1, 3 * page + 9])
    assert page_runs(starts, ends) == ([0, 3 * page, 10 * page], [2 * page, page, 3 * page])


def test_bad_arguments():
    with pytest.raises(InvalidArgumentError):
        JSONLDataset.readahead(None, -1)  # type: ignore[arg-type]
    from sjsonl.readahead import with_readahead

    with pytest.raises(InvalidArgumentError, match="JSONLDataset"):
        with_readahead(object(), 4)
