"""Paths that are not plain data files: a clear one-line error, without blocking or writing anything."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sjsonl import DataFileError, JSONLDataset, JSONLIndexer, SJSONLError

_OPEN = """
import sys
from sjsonl import JSONLDataset, SJSONLError
try:
    JSONLDataset(sys.argv[1])
except SJSONLError as exc:
    print(type(exc).__name__, exc)
"""


def _open_in_subprocess(path: str) -> str:
    out = subprocess.run([sys.executable, "-c", _OPEN, path], capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "d.jsonl"
    os.mkfifo(fifo)
    assert _open_in_subprocess(str(fifo)) == f"DataFileError not a regular file (a FIFO): {fifo}"


@pytest.mark.parametrize(
    ("path", "kind"), [("/dev/zero", "a character device"), ("/proc/self/status", "a /proc pseudo-file")]
)
def test_devices_and_proc_files_are_refused_and_nothing_is_written(path, kind, monkeypatch):
    before = set(os.listdir(os.path.dirname(path)))
    with pytest.raises(DataFileError, match="not a regular file") as err:
        JSONLDataset(path)
    assert kind in str(err.value)
    with pytest.raises(DataFileError, match="not a regular file"):
        JSONLIndexer(path).populate_index()
    assert not {n for n in set(os.listdir(os.path.dirname(path))) - before if ".index." in n}


def test_a_file_name_with_a_newline_keeps_errors_on_one_line(tmp_path):
    path = tmp_path / "bad\nname.jsonl"
    with pytest.raises(SJSONLError) as err:
        JSONLDataset(path)
    assert "\n" not in str(err.value) and "bad\\nname.jsonl" in str(err.value)
    path.write_bytes(b'{"a": 1}\n{oops}\n')
    with pytest.raises(SJSONLError) as err:
        JSONLDataset(path)[1]
    assert "\n" not in str(err.value) and ":2: invalid JSON record" in str(err.value)


_TRUNCATE_DURING_BUILD = """
import os, sys, threading, time
from sjsonl import JSONLDataset, SJSONLError
path = sys.argv[1]
data = open(path, "rb").read()
stop = False
def churn():
    while not stop:
        with open(path, "r+b") as f:
            f.truncate(len(data) // 7)
        time.sleep(0.001)
        with open(path, "r+b") as f:
            f.write(data)
t = threading.Thread(target=churn)
t.start()
outcomes = set()
for _ in range(40):
    try:
        ds = JSONLDataset(path, index_dir=sys.argv[2], mmap=False)
        outcomes.add("ok")
    except SJSONLError as exc:
        outcomes.add(type(exc).__name__)
stop = True
t.join()
print("survived", sorted(outcomes))
"""


def test_truncation_during_the_index_build_never_crashes(tmp_path):
    """The scan reads (never maps) the file: a truncation mid-scan is a rescan or an error, not SIGBUS."""
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"".join(b'{"i": %d, "pad": "%s"}\n' % (i, b"y" * 200) for i in range(60_000)))
    out = subprocess.run(
        [sys.executable, "-c", _TRUNCATE_DURING_BUILD, str(path), str(tmp_path / "idx")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and out.stdout.startswith("survived"), (out.returncode, out.stderr[-2000:])


def test_a_seekable_zstd_cut_short_is_not_called_a_plain_file(tmp_path):
    from sjsonl.storage.compressed import to_seekable_zstd

    src = tmp_path / "d.jsonl"
    src.write_bytes(b"".join(b'{"i": %d}\n' % i for i in range(20_000)))
    full = tmp_path / "d.jsonl.zst"
    to_seekable_zstd(src, full, frame_bytes=16 << 10)
    assert JSONLDataset(full)[19_999] == {"i": 19_999}
    cut = tmp_path / "cut.jsonl.zst"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size * 2 // 3])  # a partial copy
    with pytest.raises(DataFileError, match="cut short") as err:
        JSONLDataset(cut)
    assert "\n" not in str(err.value)
