"""Paths that are not plain data files: a clear one-line error, without blocking or writing anything."""

from __future__ import annotations

import json
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


_CHURN_DURING_BUILD = """
import json, sys, threading, time
from collections import Counter
from sjsonl import JSONLDataset, SJSONLError
path = sys.argv[1]
versions = [open(path, "rb").read(), open(sys.argv[3], "rb").read()]  # A (the file) and B
expected = [[json.loads(line) for line in v.splitlines()] for v in versions]  # split here, not by sjsonl
stop, churns = False, 0
def churn():  # cut the file short, then write the other version in place, again and again
    global churns
    while not stop:
        with open(path, "r+b") as f:
            f.truncate(len(versions[churns % 2]) // 7)
        time.sleep(0.001)
        churns += 1
        with open(path, "r+b") as f:
            f.write(versions[churns % 2])
            f.truncate()
t = threading.Thread(target=churn)
t.start()
outcomes, wrong, opens, deadline = Counter(), [], 0, time.monotonic() + 120
# at least 40 opens, and on until the file has changed 40 times under them (a busy machine may starve
# the churning thread of the GIL)
while (opens < 40 or churns <= 40) and time.monotonic() < deadline:
    opens += 1
    try:
        ds = JSONLDataset(path, index_dir=sys.argv[2], mmap=False)
    except SJSONLError as exc:
        changing = " (keeps changing)" if "keeps changing while it is indexed" in str(exc) else ""
        outcomes["open: " + type(exc).__name__ + changing] += 1
        continue
    outcomes["opened"] += 1
    for j in sorted({0, len(ds) // 3, len(ds) // 2, len(ds) - 1}):
        try:
            record = ds[j]
        except SJSONLError as exc:
            outcomes["read: " + type(exc).__name__] += 1
            continue
        if all(j >= len(e) or record != e[j] for e in expected):
            wrong.append([j, record])  # a record from the wrong place
        else:
            outcomes["read: right record"] += 1
stop = True
t.join()
print(json.dumps({"outcomes": outcomes, "wrong": wrong[:3], "churns": churns, "opens": opens}))
"""


def test_rewrites_during_the_index_build_never_give_a_wrong_record(tmp_path):
    """The scan reads (never maps) the file: a truncation or rewrite mid-scan is a rescan or an error, not
    SIGBUS — and no read of an index built then returns a record from the wrong place."""
    path, other = tmp_path / "d.jsonl", tmp_path / "b.jsonl"
    path.write_bytes(b"".join(b'{"i": %d, "pad": "%s"}\n' % (i, b"y" * 200) for i in range(60_000)))
    other.write_bytes(b"".join(b'{"i": %d, "pad": "%s"}\n' % (-i, b"z" * (i % 300)) for i in range(60_000)))
    out = subprocess.run(
        [sys.executable, "-c", _CHURN_DURING_BUILD, str(path), str(tmp_path / "idx"), str(other)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])  # no SIGBUS, no traceback
    result = json.loads(out.stdout)
    outcomes = result["outcomes"]
    assert result["wrong"] == [], result
    assert result["churns"] > 40, result  # the file really changed under the opens and reads
    opens = outcomes["opened"] + sum(v for k, v in outcomes.items() if k.startswith("open: "))
    assert opens == result["opens"] >= 40, result
    assert set(outcomes) <= {
        "opened",
        "open: StaleDataError",
        "open: StaleIndexError",
        "open: RecordDecodeError",
        "open: DataFileError",
        "open: SJSONLError (keeps changing)",
        "read: StaleDataError",
        "read: RecordDecodeError",
        "read: right record",
    }, outcomes


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
