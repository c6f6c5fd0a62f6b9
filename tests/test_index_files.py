"""Index files: placement, staleness, atomic and concurrent writes, and never touching the data."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sjsonl import JSONLDataset, JSONLIndexer, StaleIndexError
from sjsonl.index.layout import cache_index_path, default_index_path
from sjsonl.index.store import read_index
from sjsonl.sample import write_corpus

from .conftest import run_unprivileged


def _lines(path):
    return [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]


def test_index_beside_data_is_one_file(tmp_path, monkeypatch):
    path = tmp_path / "train.jsonl"
    path.write_bytes(b"1\n2\n")
    ds = JSONLDataset(path)
    assert ds.index_paths == [str(tmp_path / "train.index.npy")]
    assert sorted(os.listdir(tmp_path)) == ["train.index.npy", "train.jsonl"]  # metadata inside: one file
    assert read_index(ds.index_paths[0]).meta.records == 2
    assert np.load(tmp_path / "train.index.npy").tolist() == [0, 2]


def test_index_dir_argument_and_env(tmp_path, monkeypatch):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"1\n")
    cache = tmp_path / "cache"
    ds = JSONLDataset(path, index_dir=cache)
    assert ds.index_paths == [cache_index_path(str(path), str(cache))]
    monkeypatch.setenv("SJSONL_INDEX_DIR", str(tmp_path / "env"))
    assert JSONLDataset(path).index_paths[0].startswith(str(tmp_path / "env"))
    assert not os.path.exists(default_index_path(str(path)))


def test_read_only_data_directory_uses_cache(tmp_path):
    data_dir = tmp_path / "ro"
    data_dir.mkdir()
    path = data_dir / "d.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n')
    data_dir.chmod(0o555)
    cache = tmp_path / "xdg"
    code = (
        "import sjsonl,sys\nds=sjsonl.JSONLDataset(sys.argv[1])\n"
        "print(len(ds), ds[1]['a'], ds.index_paths[0])"
    )
    out = run_unprivileged(code, str(path), env={"SJSONL_INDEX_DIR": None, "XDG_CACHE_HOME": str(cache)})
    count, value, where = out.stdout.split()
    assert (count, value) == ("2", "2") and where.startswith(str(cache / "sjsonl" / "index")), out.stderr
    assert sorted(os.listdir(data_dir)) == ["d.jsonl"]
    data_dir.chmod(0o755)


@pytest.mark.parametrize("change", ["same_size", "same_size_same_mtime", "append", "truncate"])
def test_stale_index_detected_and_rebuilt(tmp_path, change):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"v": 1}\n{"v": 2}\n{"v": 3}\n')
    assert JSONLDataset(path)[1] == {"v": 2}
    st = os.stat(path)
    if change.startswith("same_size"):
        path.write_bytes(b'{"v": 7}\n{"v":88}\n{"v": 9}\n')
        if change == "same_size_same_mtime":
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        expected = [{"v": 7}, {"v": 88}, {"v": 9}]
    elif change == "append":
        with open(path, "ab") as f:
            f.write(b'{"v": 4}\n')
        expected = [{"v": 1}, {"v": 2}, {"v": 3}, {"v": 4}]
    else:
        path.write_bytes(b'{"v": 1}\n{"v": 2}\n')
        expected = [{"v": 1}, {"v": 2}]
    assert os.path.getsize(path) == st.st_size or change in ("append", "truncate")
    with pytest.raises(StaleIndexError, match="stale"):
        JSONLDataset(path, build_index_on_load=False)
    assert list(JSONLDataset(path)) == expected
    assert list(JSONLDataset(path, build_index_on_load=False)) == expected  # rebuilt index was saved


def test_data_file_never_modified(tmp_path, monkeypatch):
    path = tmp_path / "d.jsonl"
    write_corpus(path, 3000, kind="short")
    os.utime(path, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    before = (hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns, os.stat(path).st_size)
    indexer = JSONLIndexer(path, check=True)
    indexer.populate_index()
    indexer.write_index_to_disk()
    ds = JSONLDataset(path)
    _ = ds[5], ds[-1], list(ds.take(10)), ds.raw(3)
    subprocess.run([sys.executable, "-m", "sjsonl.cli", "info", str(path)], check=True, capture_output=True)
    after = (hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns, os.stat(path).st_size)
    assert before == after


_BUILD_LOOP = """
import sys
from sjsonl import JSONLIndexer
for _ in range(int(sys.argv[2])):
    ix = JSONLIndexer(sys.argv[1], workers=1)
    ix.populate_index()
    ix.write_index_to_disk()
print("done")
"""


def test_concurrent_builders_both_succeed(tmp_path, monkeypatch):
    path = tmp_path / "d.jsonl"
    write_corpus(path, 200_000, kind="short")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _BUILD_LOOP, str(path), "5"], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    assert [p.communicate(timeout=300)[0].strip() for p in procs] == ["done", "done"]
    assert [p.returncode for p in procs] == [0, 0]
    ds = JSONLDataset(path, build_index_on_load=False)
    assert len(ds) == 200_000 and ds[123_456]["id"] == 123_456
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


_WRITER_BLOCKED_MID_WRITE = """
import io, sys
import numpy as np
from sjsonl import JSONLIndexer
real_save = np.save
def save(f, array, allow_pickle=False):  # write half of the offsets, then wait to be killed
    whole = io.BytesIO()
    real_save(whole, array, allow_pickle=allow_pickle)
    half = whole.getvalue()[: len(whole.getvalue()) // 2]
    f.write(half)
    f.flush()
    print(f.name, len(half), flush=True)
    sys.stdin.read()
np.save = save
ix = JSONLIndexer(sys.argv[1], workers=1)
ix.populate_index()
ix.write_index_to_disk()
"""


@pytest.mark.parametrize("before", ["no index", "an older index"])
def test_sigkill_mid_write_never_leaves_a_torn_index(tmp_path, before):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"".join(b'{"i": %d}\n' % i for i in range(20_000)))
    index_file = tmp_path / "d.index.npy"
    if before == "an older index":
        JSONLDataset(path)  # then the data is rewritten: the index describes an older version
        path.write_bytes(b"".join(b'{"i": %d, "v": 2}\n' % i for i in range(25_000)))
    old = index_file.read_bytes() if index_file.exists() else None
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER_BLOCKED_MID_WRITE, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        temp_name, written = writer.stdout.readline().split()  # the writer is inside the write now
        temp = Path(temp_name)
        # the half-written bytes are in a temp file beside the index, not in the index
        assert temp.parent == tmp_path and temp.name.startswith("d.index.npy.") and temp.suffix == ".tmp"
        assert temp.stat().st_size == int(written) > 0
        assert (index_file.read_bytes() if index_file.exists() else None) == old
    finally:
        writer.kill()
        writer.wait()
    assert writer.returncode == -signal.SIGKILL and temp.exists()  # killed mid-write, its temp left behind
    assert (index_file.read_bytes() if index_file.exists() else None) == old  # the old index, whole, or none
    ds = JSONLDataset(path)  # a stale index is rebuilt, a missing one built; the killed writer's temp swept
    width = 17 if old else 9  # bytes per record of the version indexed now
    assert len(ds) == (25_000 if old else 20_000) and ds[12_345]["i"] == 12_345
    assert sorted(os.listdir(tmp_path)) == ["d.index.npy", "d.jsonl"]
    assert np.load(index_file).tolist()[:3] == [0, width, 2 * width]  # np.load reads the new one whole


def test_index_of_a_namesake_is_never_used(tmp_path, monkeypatch):
    (tmp_path / "data.jsonl").write_bytes(b"1\n2\n")
    (tmp_path / "data.json").write_bytes(b"3\n4\n")  # same size, same stem: data.index.npy for both
    assert list(JSONLDataset(tmp_path / "data.jsonl")) == [1, 2]
    assert list(JSONLDataset(tmp_path / "data.json")) == [3, 4]
    assert list(JSONLDataset(tmp_path / "data.jsonl")) == [1, 2]


def test_progress_bar_when_asked(tmp_path, capfd):
    path = tmp_path / "d.jsonl"
    write_corpus(path, 2000)
    JSONLIndexer(path, progress=True).populate_index()
    assert "indexing d.jsonl" in capfd.readouterr().err
    JSONLIndexer(path).populate_index()  # small file, not a terminal: silent
    assert capfd.readouterr().err == ""
