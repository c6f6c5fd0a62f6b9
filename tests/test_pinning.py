"""A dataset reads the version of the data its index describes, for its whole life and in every copy.

Each test is one of the ways the review got wrong records: a file replaced after the index was built, a
pickled copy (what spawned workers get) opening whatever the path names now, compressed readers reopening
by name, and in-place truncation or rewriting (caught by the safe ``mmap=False`` mode on every read, and by
the default mode once per batch and per block of iteration)."""

from __future__ import annotations

import gzip
import os
import pickle
import subprocess
import sys
import time

import pytest

from sjsonl import JSONLDataset, StaleDataError

V1 = b"1\n234\n"
V2 = b"123\n4\n"  # same size: the review's example (ds[0] came back as 12, in neither version)


def _replace(path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@pytest.mark.parametrize("mmap", [True, False])
def test_a_file_replaced_after_open_is_still_read_as_indexed(tmp_path, mmap):
    path = tmp_path / "d.jsonl"
    path.write_bytes(V1)
    ds = JSONLDataset(path, mmap=mmap)  # index built, nothing read yet
    _replace(path, V2)
    assert [ds[0], ds[1]] == [1, 234] and list(ds) == [1, 234] and ds[[1, 0]] == [234, 1]
    assert JSONLDataset(path, mmap=mmap)[:] == [123, 4]  # a fresh open indexes the new version


@pytest.mark.parametrize("mmap", [True, False])
def test_a_pickled_copy_refuses_a_replaced_file(tmp_path, mmap):
    path = tmp_path / "d.jsonl"
    path.write_bytes(V1)
    ds = JSONLDataset(path, mmap=mmap)
    blob = pickle.dumps(ds)
    assert pickle.loads(blob)[:] == [1, 234]  # unchanged: copies work
    _replace(path, V2)
    copy = pickle.loads(blob)
    with pytest.raises(StaleDataError, match="replaced"):
        copy[0]
    assert ds[0] == 1  # the parent goes on reading its version


def test_a_pickled_copy_accepts_an_appended_file_and_refuses_a_rewritten_one(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"".join(b'{"i": %d}\n' % i for i in range(100)))
    blob = pickle.dumps(JSONLDataset(path))
    with open(path, "ab") as f:
        f.write(b'{"i": 100}\n')
    copy = pickle.loads(blob)
    assert len(copy) == 100 and copy[99] == {"i": 99}  # the indexed records are intact
    with open(path, "r+b") as f:  # rewritten in place: same inode, other bytes
        f.write(b'{"i": 7}')
    with pytest.raises(StaleDataError, match="rewritten"):
        pickle.loads(blob)[0]


_SPAWNED_READER = """
import pickle, sys
from sjsonl import StaleDataError
ds = pickle.load(open(sys.argv[1], "rb"))
try:
    print(ds[0])
except StaleDataError as exc:
    print("StaleDataError", exc)
"""


def test_a_spawned_process_never_reads_another_version(tmp_path):
    """What a spawn DataLoader or MindSpore worker does: unpickle in a new interpreter, then read."""
    path = tmp_path / "d.jsonl"
    path.write_bytes(V1)
    state = tmp_path / "ds.pkl"
    state.write_bytes(pickle.dumps(JSONLDataset(path)))
    run = lambda: subprocess.run(  # noqa: E731
        [sys.executable, "-c", _SPAWNED_READER, str(state)], capture_output=True, text=True, timeout=120
    )
    assert run().stdout.strip() == "1"
    _replace(path, V2)
    out = run()
    assert out.stdout.startswith("StaleDataError") and "replaced" in out.stdout, out.stderr


def test_safe_mode_never_returns_bytes_of_a_file_truncated_or_rewritten_in_place(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"".join(b'{"v": 1, "i": %d}\n' % i for i in range(1000)))
    ds = JSONLDataset(path, mmap=False)
    assert ds[500] == {"v": 1, "i": 500}
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    with pytest.raises(StaleDataError, match="truncated"):
        ds[10]  # even a record that still exists: the version is gone
    ds = JSONLDataset(path, mmap=False)
    path.write_bytes(b"".join(b'{"v": 2, "i": %d}\n' % i for i in range(1000)))  # same size, in place
    for read in (lambda: ds[3], lambda: ds[[3, 4]], lambda: list(ds)):
        with pytest.raises(StaleDataError, match=r"rewritten|modified"):
            read()


def test_default_mode_checks_once_per_batch_and_block(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"".join(b'{"v": 1, "i": %d}\n' % i for i in range(1000)))
    ds = JSONLDataset(path)
    assert ds[[1, 2]] == [{"v": 1, "i": 1}, {"v": 1, "i": 2}]
    path.write_bytes(b"".join(b'{"v": 2, "i": %d}\n' % i for i in range(1000)))
    with pytest.raises(StaleDataError):
        ds[[1, 2]]
    with pytest.raises(StaleDataError):
        list(ds)
    with pytest.raises(StaleDataError):
        list(ds.shuffle(seed=1))


def test_an_open_gzip_dataset_reads_the_pinned_file(tmp_path):
    raw = b"".join(b'{"v": 1, "i": %d}\n' % i for i in range(20_000))
    path = tmp_path / "d.jsonl.gz"
    path.write_bytes(gzip.compress(raw, 1))
    ds = JSONLDataset(path)
    blob = pickle.dumps(ds)
    _replace(path, gzip.compress(raw.replace(b'"v": 1', b'"v": 2')[:5000], 1))  # shorter, other version
    assert ds[19_999] == {"v": 1, "i": 19_999} and ds[5] == {"v": 1, "i": 5}
    with pytest.raises(StaleDataError, match="replaced"):
        pickle.loads(blob)[0]


_GZ_TRUNCATED = """
import gzip, os, sys
from sjsonl import JSONLDataset, SJSONLError
path = sys.argv[1]
ds = JSONLDataset(path)
with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 3)
try:
    ds[len(ds) - 1]
    print("read")
except SJSONLError as exc:
    print(type(exc).__name__)
"""


def test_a_gzip_file_truncated_while_open_is_an_error_not_a_spin(tmp_path):
    path = tmp_path / "d.jsonl.gz"
    path.write_bytes(gzip.compress(b"".join(b'{"i": %d}\n' % i for i in range(50_000)), 1))
    out = subprocess.run(
        [sys.executable, "-c", _GZ_TRUNCATED, str(path)], capture_output=True, text=True, timeout=120
    )
    assert out.stdout.strip() == "StaleDataError", out.stderr


@pytest.mark.parametrize("cache", ["off", "on"])
def test_an_open_s3_dataset_never_reads_a_replaced_object(bucket, monkeypatch, tmp_path, cache):
    """Range reads carry If-Match with the ETag seen at index time: a new object under the key is an
    error for the open dataset and for its copies, never records cut at the old offsets. With the local
    chunk cache, the version is checked on every read here (``SJSONL_REMOTE_CHECK_SECONDS=0``; the default
    interval: the next test)."""
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", "off" if cache == "off" else str(tmp_path / "chunks"))
    monkeypatch.setenv("SJSONL_REMOTE_CHECK_SECONDS", "0")
    url = bucket.put("train.jsonl", b"".join(b'{"v": 1, "i": %d}\n' % i for i in range(500)))
    ds = JSONLDataset(url, storage_options=bucket.options)
    blob = pickle.dumps(ds)
    assert ds[7] == {"v": 1, "i": 7}
    bucket.put("train.jsonl", b"".join(b'{"v": 2, "i": %d}\n' % i for i in range(500)))
    for read in (lambda: ds[8], lambda: ds[[1, 2]], lambda: list(ds), lambda: pickle.loads(blob)[0]):
        with pytest.raises(StaleDataError, match="changed after it was indexed"):
            read()
    assert JSONLDataset(url, storage_options=bucket.options)[8] == {"v": 2, "i": 8}


def test_a_cached_s3_dataset_finds_a_replacement_within_the_check_interval(bucket, monkeypatch, tmp_path):
    """Served from the local chunk cache, reads ask the server nothing: until the next version check (at
    most every SJSONL_REMOTE_CHECK_SECONDS, on a background thread) they give the pinned version's records —
    the ones the index addresses — and after it raise StaleDataError."""
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", str(tmp_path / "chunks"))
    monkeypatch.setenv("SJSONL_REMOTE_CHECK_SECONDS", "0.5")
    url = bucket.put("train.jsonl", b"".join(b'{"v": 1, "i": %d}\n' % i for i in range(500)))
    ds = JSONLDataset(url, storage_options=bucket.options)
    assert ds[7] == {"v": 1, "i": 7}
    bucket.put("train.jsonl", b"".join(b'{"v": 2, "i": %d}\n' % i for i in range(500)))
    assert ds[8] == {"v": 1, "i": 8}  # the pinned version, from the cache (checked less than 0.5 s ago)
    time.sleep(0.6)
    with pytest.raises(StaleDataError, match="changed after it was indexed"):  # the check runs in the
        for _ in range(100):  # background: a read starts it, one of the next ones raises
            assert ds[9] == {"v": 1, "i": 9}
            time.sleep(0.05)
