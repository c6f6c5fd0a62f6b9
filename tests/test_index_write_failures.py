"""Where an index cannot be written: read-only places (even for root, as in most containers and CI), a
full disk, a file size limit. The open always works (the index serves from memory, with one warning),
the data's directory gets no new file, and no index is ever left torn or half extended.

These run as the test process runs — in CI that is root, which the permission bits do not stop — and
without ``SJSONL_INDEX_DIR``, so the default placement is what is exercised.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from sjsonl import IndexPlaceWarning, JSONLDataset
from sjsonl.index.layout import default_index_path
from sjsonl.index.store import IndexNotSavedWarning, read_index

from .conftest import fill_up


def records(n: int, start: int = 0) -> bytes:
    return "".join(
        json.dumps({"i": i, "text": "t" * (i % 7)}) + "\n" for i in range(start, start + n)
    ).encode()


@pytest.fixture(autouse=True)
def _default_placement(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def _expected(path) -> list:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def test_a_read_only_directory_gets_no_new_file_even_for_root(tmp_path):
    data_dir = tmp_path / "ro"
    data_dir.mkdir()
    path = data_dir / "d.jsonl"
    path.write_bytes(records(100))
    data_dir.chmod(0o555)
    try:
        ds = JSONLDataset(path)
        assert ds[:] == _expected(path)
        assert ds.index_paths[0].startswith(str(tmp_path / "xdg" / "sjsonl" / "index"))
        assert sorted(os.listdir(data_dir)) == ["d.jsonl"]
        assert JSONLDataset(path)._files[0].index_origin == "found"  # reused from the cache
    finally:
        data_dir.chmod(0o755)


def test_an_index_file_without_write_bits_is_not_replaced(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(records(50))
    index = JSONLDataset(path).index_paths[0]
    assert index == default_index_path(str(path))
    os.chmod(index, 0o444)
    kept = Path(index).read_bytes()
    path.write_bytes(records(60, start=5))  # stale now: rebuilt, but not over the read-only file
    ds = JSONLDataset(path)
    assert ds[:] == _expected(path) and ds._files[0].index_origin == "built"
    assert ds.index_paths[0].startswith(str(tmp_path / "xdg"))
    assert Path(index).read_bytes() == kept


_FSIZE_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys, warnings
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
    import sjsonl
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ds = sjsonl.JSONLDataset(sys.argv[1])
        rows = ds[:]
    print(json.dumps({"n": len(ds), "last": rows[-1], "where": ds.index_paths[0],
                      "warnings": [str(w.message) for w in seen]}))
    """
)


def test_a_file_size_limit_leaves_the_index_in_memory_with_one_warning(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(records(5000))  # its index (20 KB) is over the limit; the data was written before
    run = subprocess.run(
        [sys.executable, "-c", _FSIZE_SCRIPT, str(path), "4096"],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "SJSONL_INDEX_DIR"},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    assert out["n"] == 5000 and out["last"] == {"i": 4999, "text": "t" * (4999 % 7)}
    assert out["where"] is None
    assert len(out["warnings"]) == 1 and "could not save the index" in out["warnings"][0], out["warnings"]
    leftovers = [os.path.join(d, f) for d, _, files in os.walk(tmp_path) for f in files]
    assert leftovers == [str(path)], leftovers  # no temp file, no torn index, in either place


def test_a_full_disk_beside_the_data_sends_the_index_to_the_cache(tmp_path, small_fs):
    path = small_fs / "d.jsonl"
    path.write_bytes(records(3000))  # ~90 KB of data; its index (12 KB) does not fit after the filler
    fill_up(small_fs, 4096)
    ds = JSONLDataset(path)
    assert ds[:] == _expected(path)
    assert ds.index_paths[0].startswith(str(tmp_path / "xdg"))
    assert sorted(os.listdir(small_fs)) == ["d.jsonl", "filler"]


def test_extending_an_index_on_a_full_disk_never_leaves_it_torn(tmp_path, small_fs, monkeypatch):
    """The index lives on a disk that then fills up; the data grows (elsewhere). The extension in place
    fails part way (ENOSPC): the old index is put back as it was, the extended one goes to the private
    cache; with the cache full too, it serves from memory with a warning."""
    path = tmp_path / "d.jsonl"
    path.write_bytes(records(3000))  # > 64 KiB: uint32 offsets before and after, so it extends in place
    index_dir = small_fs / "idx"
    first = JSONLDataset(path, index_dir=index_dir)
    old_index = first.index_paths[0]
    old_bytes = Path(old_index).read_bytes()
    old_offsets = np.array(read_index(old_index).offsets)
    assert old_offsets.dtype == np.uint32
    fill_up(small_fs, 1024)
    with open(path, "ab") as f:
        f.write(records(3000, start=3000))  # 12 KB more offsets: more than the disk has left
    with pytest.warns(IndexPlaceWarning, match=f"{re.escape(str(index_dir))} .* went to the private cache"):
        ds = JSONLDataset(path, index_dir=index_dir)  # the place asked for is full: said, once
    assert ds._files[0].index_origin == "extended" and ds[:] == _expected(path)
    assert ds.index_paths[0].startswith(str(tmp_path / "xdg"))
    assert Path(old_index).read_bytes() == old_bytes  # restored, byte for byte
    assert np.array_equal(read_index(old_index).offsets, old_offsets)
    # and with the private cache on the full disk as well: in memory, one warning
    monkeypatch.setenv("XDG_CACHE_HOME", str(small_fs / "xdg"))
    with open(path, "ab") as f:
        f.write(records(10, start=6000))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        again = JSONLDataset(path, index_dir=index_dir)
    assert again[:] == _expected(path) and again.index_paths == [None]
    assert [w.category for w in seen] == [IndexNotSavedWarning]
    assert Path(old_index).read_bytes() == old_bytes
    assert not [n for n in os.listdir(index_dir) if n.endswith(".tmp")]
