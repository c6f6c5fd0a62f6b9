"""An ``index_dir=`` (or ``$SJSONL_INDEX_DIR``) that cannot be written — read-only, a full disk, a quota —
still gives a working dataset, its index in the private cache; and one :class:`IndexPlaceWarning` says
which directory was asked for, why it failed and where the index went (issue #32, item 3). The default
placement (beside the data, else the cache) stays quiet, as documented.

Read-only is the mode bits, which sjsonl honours even for root (CI runs as root); the full disk is a real
one, a small tmpfs filled up, as in ``test_index_write_failures.py``; a quota is simulated.
"""

from __future__ import annotations

import errno
import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import sjsonl.index.store
from sjsonl import IndexNotSavedWarning, IndexPlaceWarning, JSONLDataset

from .conftest import fill_up


def records(n: int) -> bytes:
    return "".join(json.dumps({"i": i, "text": "t" * (i % 7)}) + "\n" for i in range(n)).encode()


def expected(path: Path) -> list:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SJSONL_INDEX_DIR", raising=False)


def cache_dir(tmp_path: Path) -> str:
    return str(tmp_path / "xdg" / "sjsonl" / "index")


def open_recording(*args, **kwargs) -> tuple[JSONLDataset, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ds = JSONLDataset(*args, **kwargs)
        ds[:]  # the index's deferred checks included
    return ds, seen


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory of mode 0500 (sjsonl honours the bits, even as root), made writable again after."""
    where = tmp_path / "ro"
    where.mkdir()
    where.chmod(0o500)
    try:
        yield where
    finally:
        where.chmod(0o755)


def the_one_warning(seen: list[warnings.WarningMessage]) -> str:
    assert [w.category for w in seen] == [IndexPlaceWarning], [str(w.message) for w in seen]
    return str(seen[0].message)


def test_a_read_only_index_dir_sends_the_index_to_the_cache_with_one_warning(
    tmp_path: Path, read_only_dir: Path
) -> None:
    path, index_dir = tmp_path / "d.jsonl", read_only_dir
    path.write_bytes(records(200))
    ds, seen = open_recording(path, index_dir=index_dir)
    text = the_one_warning(seen)
    (where,) = ds.index_paths
    assert where is not None and os.path.dirname(where) == cache_dir(tmp_path)
    assert str(index_dir) in text and "read-only (mode 500)" in text and where in text
    assert str(path) in text
    assert ds[:] == expected(path) and os.listdir(index_dir) == []
    # the next open finds it in the cache: nothing built, nothing more to say
    again, seen = open_recording(path, index_dir=index_dir)
    assert again._files[0].index_origin == "found" and again.index_paths == [where] and seen == []


def test_the_environment_s_index_dir_is_asked_for_too(
    tmp_path: Path, monkeypatch, read_only_dir: Path
) -> None:
    path, index_dir = tmp_path / "d.jsonl", read_only_dir
    path.write_bytes(records(50))
    monkeypatch.setenv("SJSONL_INDEX_DIR", str(index_dir))
    ds, seen = open_recording(path)
    text = the_one_warning(seen)
    assert str(index_dir) in text and "$SJSONL_INDEX_DIR" in text and ds.index_paths[0] in text
    assert ds[:] == expected(path)


def test_one_warning_for_many_files_in_one_directory(tmp_path: Path, read_only_dir: Path) -> None:
    paths = []
    for k in range(3):
        paths.append(tmp_path / f"d{k}.jsonl")
        paths[-1].write_bytes(records(20 + k))
    ds, seen = open_recording(paths, index_dir=read_only_dir)
    text = the_one_warning(seen)
    assert "other indexes that cannot be written there go to the cache too" in text
    assert all(os.path.dirname(p) == cache_dir(tmp_path) for p in ds.index_paths)
    assert len(ds) == 20 + 21 + 22


def test_a_quota_is_named_as_the_reason(tmp_path: Path, monkeypatch) -> None:
    """Any "cannot write here" error of the directory asked for (EDQUOT here) is the reason given."""
    path = tmp_path / "d.jsonl"
    path.write_bytes(records(30))
    index_dir = tmp_path / "quota"
    real = sjsonl.index.store.write_index

    def write_index(target: str, *args, **kwargs) -> str:
        if os.path.dirname(target) == str(index_dir):
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), target)
        return real(target, *args, **kwargs)

    monkeypatch.setattr(sjsonl.index.store, "write_index", write_index)
    ds, seen = open_recording(path, index_dir=index_dir)
    text = the_one_warning(seen)
    assert str(index_dir) in text and os.strerror(errno.EDQUOT) in text and ds.index_paths[0] in text
    assert os.path.dirname(ds.index_paths[0]) == cache_dir(tmp_path) and ds[:] == expected(path)


def test_the_default_place_falls_back_quietly(tmp_path: Path) -> None:
    """No place was asked for: a read-only data directory sends the index to the cache without a word."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    path = data_dir / "d.jsonl"
    path.write_bytes(records(20))
    data_dir.chmod(0o555)
    try:
        ds, seen = open_recording(path)
        assert seen == [] and os.path.dirname(ds.index_paths[0]) == cache_dir(tmp_path)
    finally:
        data_dir.chmod(0o755)


def test_a_full_index_dir_sends_the_index_to_the_cache_with_one_warning(tmp_path: Path, small_fs) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(records(3000))  # its index (12 KB) does not fit in what the filler leaves
    index_dir = small_fs / "idx"
    index_dir.mkdir()
    fill_up(small_fs, 4096)
    ds, seen = open_recording(path, index_dir=index_dir)
    text = the_one_warning(seen)
    (where,) = ds.index_paths
    assert where is not None and os.path.dirname(where) == cache_dir(tmp_path)
    assert str(index_dir) in text and where in text
    # the reason: ENOSPC, or numpy's short write that it stands for
    assert os.strerror(errno.ENOSPC) in text or ("short write" in text and "the disk is full" in text), text
    assert ds[:] == expected(path) and ds[2999] == {"i": 2999, "text": "t" * (2999 % 7)}
    assert os.listdir(index_dir) == []  # no temp file, no torn index left behind
    # the cache full as well: nowhere to write, so the one warning is the in-memory one
    path.write_bytes(records(3001))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(small_fs / "xdg"))
        again, seen = open_recording(path, index_dir=index_dir)
    assert [w.category for w in seen] == [IndexNotSavedWarning] and again.index_paths == [None]
    assert again[:] == expected(path)
