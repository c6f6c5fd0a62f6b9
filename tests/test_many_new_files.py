"""Opening many files that have no index yet costs O(files), not O(files²): the indexes written in one open
sweep each directory of killed writers' temp files once, not once per index (a listing of the whole
directory at every write made a first open of 10,000 small files take minutes). Counted, never timed."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from sjsonl import ArtifactWarning, JSONLDataset, build_indexes
from sjsonl.data.corpus import index_files
from sjsonl.index import store
from sjsonl.index.store import read_index
from sjsonl.storage.atomic import _temp_tag


def _corpus(root: Path, n: int) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(n):
        path = root / f"s{k:04d}.jsonl"
        path.write_bytes(b"".join(b'{"file": %d, "i": %d}\n' % (k, i) for i in range(3)))
        paths.append(str(path))
    return paths


@pytest.fixture
def listings(monkeypatch):
    """The directories listed (``os.listdir``, ``os.scandir``), each time one is."""
    seen: list[str] = []
    for name in ("listdir", "scandir"):
        real = getattr(os, name)

        def counted(path=".", _real=real):
            seen.append(os.path.realpath(os.fsdecode(path)))
            return _real(path)

        monkeypatch.setattr(os, name, counted)
    return seen


def _opened(paths: list[str], listings: list[str], root: Path) -> int:
    """How many times opening ``paths`` (no index yet) listed ``root``."""
    listings.clear()
    ds = JSONLDataset(paths)
    assert len(ds) == 3 * len(paths) and ds[len(ds) - 1] == {"file": len(paths) - 1, "i": 2}
    assert len(ds.index_paths) == len(paths) and all(os.path.exists(p) for p in ds.index_paths)
    return listings.count(os.path.realpath(root))


def test_a_first_open_lists_each_directory_once_whatever_the_file_count(tmp_path, listings):
    few = _opened(_corpus(tmp_path / "few", 4), listings, tmp_path / "few")
    many = _opened(_corpus(tmp_path / "many", 40), listings, tmp_path / "many")
    assert few == many == 1  # (it was one listing per index written: 4 and 40)


def test_each_directory_of_a_corpus_is_listed_once(tmp_path, listings):
    paths = [p for d in ("a", "b", "c") for p in _corpus(tmp_path / d, 10)]
    JSONLDataset(sorted(paths, key=os.path.basename))  # the directories interleaved
    assert sorted(listings) == sorted(os.path.realpath(tmp_path / d) for d in ("a", "b", "c"))


def test_indexing_files_one_after_another_lists_each_directory_once(tmp_path, listings):
    paths = _corpus(tmp_path, 20)
    build_indexes(paths)
    assert listings.count(os.path.realpath(tmp_path)) == 1
    listings.clear()
    for k in range(0, 20, 2):  # rewritten: their indexes are written again
        Path(paths[k]).write_bytes(b'{"file": %d, "i": 0, "v": 2}\n' % k)
    reports = [r for _, r in index_files(paths)]
    assert sum(r.built for r in reports) == 10
    assert listings.count(os.path.realpath(tmp_path)) == 1


def _leftovers(root: Path, stem: str) -> tuple[Path, Path, Path]:
    """Temp files of ``stem``'s index: a killed writer's of this host, another host's two days old, and one
    of a writer still running (this process)."""
    host = _temp_tag().split("-")[0]
    dead = root / f"{stem}.index.npy.{host}-999999999.abc.tmp"
    old = root / f"{stem}.index.npy.otherhost-1.def.tmp"
    live = root / f"{stem}.index.npy.{host}-{os.getpid()}.ghi.tmp"
    for p in (dead, old, live):
        p.write_bytes(b"partial")
    os.utime(old, (0, 1))
    return dead, old, live


def test_a_many_file_open_still_sweeps_killed_writers_temps(tmp_path):
    paths = _corpus(tmp_path, 12)
    left = [_leftovers(tmp_path, f"s{k:04d}") for k in (0, 5, 11)]
    user = tmp_path / "notes.txt.old.tmp"  # not an index's: never touched
    user.write_bytes(b"mine")
    os.utime(user, (0, 1))
    assert len(JSONLDataset(paths)) == 36
    for dead, old, live in left:
        assert not dead.exists() and not old.exists() and live.exists()
    assert user.read_bytes() == b"mine"


def test_a_temp_left_after_one_open_is_swept_by_the_next(tmp_path):
    paths = _corpus(tmp_path, 6)
    JSONLDataset(paths)  # lists the directory, writes six indexes
    dead, old, live = _leftovers(tmp_path, "s0003")  # a writer killed after that listing
    Path(paths[3]).write_bytes(b'{"file": 3, "v": 2}\n')  # so the next open writes its index again
    ds = JSONLDataset(paths)
    assert len(ds) == 16 and ds[9] == {"file": 3, "v": 2}
    assert not dead.exists() and not old.exists() and live.exists()


@pytest.fixture
def fsyncs(monkeypatch):
    """The descriptors ``os.fsync`` was called with."""
    calls: list[int] = []
    real = os.fsync

    def counted(fd):
        calls.append(fd)
        return real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return calls


def test_the_indexes_of_one_open_are_not_fsynced_one_by_one(tmp_path, fsyncs):
    assert len(JSONLDataset(_corpus(tmp_path / "many", 30))) == 90
    assert fsyncs == []  # (it was one per index written)
    JSONLDataset(_corpus(tmp_path / "one", 1)[0])
    assert len(fsyncs) == 1  # an index written alone still is


@pytest.mark.parametrize("left", ["nothing", "zeros", "zeroed offsets"])
def test_what_a_system_crash_may_leave_of_an_unsynced_index_is_rebuilt(tmp_path, left):
    paths = _corpus(tmp_path, 5)
    index = Path(JSONLDataset(paths).index_paths[2])
    raw = index.read_bytes()
    if left == "nothing":  # the name made durable, the bytes never written
        raw = b""
    elif left == "zeros":
        raw = bytes(len(raw))
    else:  # header and trailer written back, the offsets not
        found = read_index(str(index))
        start = raw.index(found.offsets.tobytes())
        raw = raw[:start] + bytes(found.offsets.nbytes) + raw[start + found.offsets.nbytes :]
    index.write_bytes(raw)
    store._VERIFIED.clear()  # as in the process after the crash
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ArtifactWarning)  # (a corrupt index is reported as it is rebuilt)
        ds = JSONLDataset(paths)
        assert list(ds) == [{"file": k, "i": i} for k in range(5) for i in range(3)]
    assert read_index(str(index)).offsets.tolist() == [0, 20, 40]  # rebuilt and saved
