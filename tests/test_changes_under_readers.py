"""Data files changed under open datasets, the way users change them: ``python gen.py > train.jsonl``
(truncate, then rewrite the same file), edits in place (with the mtime set back), ``chmod``, renames,
replacements, and a writer appending while the data is opened.

The default read path (a memory map) must never die of SIGBUS and never return a record of another
version: a change is a :class:`StaleDataError` naming the *data* file, or — for status changes that keep
the bytes — nothing at all. Runs that could die of a signal run in a subprocess.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from sjsonl import IndexFileError, JSONLDataset, StaleDataError
from sjsonl.storage.local import CHECK_SECONDS, GUARDED, MappedFile

from .conftest import missing


def version(v: int, n: int = 2000, extra: int = 0) -> bytes:
    """Version ``v`` of a corpus: every record says its version, so a record of another one shows."""
    pad = "x" * (v + extra)
    return "".join(json.dumps({"v": v, "i": i, "pad": pad}) + "\n" for i in range(n)).encode()


def test_the_default_read_path_is_the_guarded_map(tmp_path):
    if GUARDED is None:
        missing("the compiled guard (sjsonl.storage._guarded) was not built", "SJSONL_REQUIRE_NATIVE")
    path = tmp_path / "d.jsonl"
    path.write_bytes(version(0, 10))
    ds = JSONLDataset(path)
    assert isinstance(ds._files[0].storage, MappedFile)
    assert ds[3] == {"v": 0, "i": 3, "pad": ""}


_TRUNCATE_SCRIPT = textwrap.dedent(
    """
    import pickle, sys
    from sjsonl import JSONLDataset, StaleDataError
    path = sys.argv[1]
    ds = JSONLDataset(path)
    view = ds.shuffle(seed=1)
    assert ds[0]["i"] == 0
    copy = pickle.loads(pickle.dumps(ds))   # a worker's copy, opened before the truncation
    assert copy[1]["i"] == 1
    open(path, "w").close()                 # what `> train.jsonl` does before the writer writes
    for name, read in [
        ("ds[i]", lambda: ds[1500]),
        ("batch", lambda: ds[[10, 1900]]),
        ("iteration", lambda: list(ds)),
        ("view", lambda: view[5]),
        ("copy", lambda: copy[1800]),
        ("raw", lambda: ds.raw(1700)),
        ("locate", lambda: ds.locate(1999)),
    ]:
        try:
            read()
        except StaleDataError as exc:
            assert path in str(exc) and "truncated" in str(exc), exc
            print(name, "stale")
        else:
            print(name, "READ")
    """
)


def test_truncation_in_place_under_a_mapped_dataset_raises_instead_of_sigbus(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_bytes(version(0))
    JSONLDataset(path)  # the index exists: the script's open maps the file at once
    run = subprocess.run(
        [sys.executable, "-c", _TRUNCATE_SCRIPT, str(path)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])  # -7 would be SIGBUS
    assert run.stdout.split() == [
        word
        for name in ("ds[i]", "batch", "iteration", "view", "copy", "raw", "locate")
        for word in (name, "stale")
    ]


_READER_SCRIPT = textwrap.dedent(
    """
    import json, random, sys, time
    from sjsonl import JSONLDataset, StaleDataError
    path, seconds = sys.argv[1], float(sys.argv[2])
    rng = random.Random(0)
    reads = stale = wrong = opens = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            ds = JSONLDataset(path)
        except StaleDataError:
            continue
        if not len(ds):
            continue  # opened just after the truncation
        opens += 1
        try:
            first = ds[0]
            v = first["v"]
            for _ in range(2000):
                i = rng.randrange(len(ds))
                rec = ds[i]
                reads += 1
                if rec != {"v": v, "i": i, "pad": "x" * v}:
                    wrong += 1
                    print("WRONG", i, rec, file=sys.stderr)
        except StaleDataError as exc:
            assert str(exc).startswith(path + " changed"), exc  # names the data file, not the index
            stale += 1
        except ValueError:
            pass  # opened mid-write: a line of the new version cut short is reported as bad JSON
    print(json.dumps({"reads": reads, "stale": stale, "wrong": wrong, "opens": opens}))
    """
)

_WRITER_SCRIPT = textwrap.dedent(
    """
    import json, sys
    v = int(sys.argv[1])
    for i in range(2000):
        sys.stdout.write(json.dumps({"v": v, "i": i, "pad": "x" * v}) + "\\n")
        if i % 400 == 0:
            sys.stdout.flush()
    """
)


@pytest.mark.slow
def test_a_shell_regenerating_the_file_under_a_reader(tmp_path):
    """`python gen.py > train.jsonl` again and again (a new version each time: records grow, so every
    boundary moves) while another process reads random records: the reader never dies of a signal, never
    gets a record of another version than the one it opened, and does see the changes as StaleDataError."""
    path = tmp_path / "train.jsonl"
    gen = tmp_path / "gen.py"
    gen.write_text(_WRITER_SCRIPT)
    path.write_bytes(version(1))
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER_SCRIPT, str(path), "6"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    v = 1
    try:
        while reader.poll() is None:
            v += 1
            subprocess.run(f"{sys.executable} {gen} {v % 40 + 1} > {path}", shell=True, check=True)
            time.sleep(0.05)
        out, err = reader.communicate(timeout=60)
    finally:
        reader.kill()
    assert reader.returncode == 0, (reader.returncode, err[-3000:])  # -7 would be SIGBUS
    counts = json.loads(out.decode().strip().splitlines()[-1])
    assert counts["wrong"] == 0, err.decode()[-3000:]
    assert counts["stale"] > 0 and counts["reads"] > 0 and v > 5, counts  # the rewrites met the reads


def _rewrite_in_place(path, data: bytes, keep_times: bool = False) -> None:
    st = os.stat(path)
    with open(path, "r+b") as f:  # the same file (inode), as an editor that writes in place
        f.write(data)
        f.truncate(len(data))
    if keep_times:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_same_size_rewrite_that_keeps_the_boundaries_is_noticed_within_the_check_interval(tmp_path):
    path = tmp_path / "d.jsonl"
    old = version(0, 50)
    path.write_bytes(old)
    ds = JSONLDataset(path)
    assert ds[7]["i"] == 7
    _rewrite_in_place(path, old.replace(b'"v": 0', b'"v": 8'))  # same size, same boundaries
    time.sleep(CHECK_SECONDS * 2)
    with pytest.raises(StaleDataError, match=f"{path}.*rewritten"):
        ds[8]


def test_a_same_size_rewrite_that_moves_boundaries_blames_the_data_not_the_index(tmp_path):
    path = tmp_path / "d.jsonl"
    old = version(0, 50)
    path.write_bytes(old)
    ds = JSONLDataset(path)
    assert ds[7]["i"] == 7
    new = b"  " + old[:-2]  # the same size, every line two bytes later
    _rewrite_in_place(path, new)
    with pytest.raises(StaleDataError, match=f"{path} changed after it was indexed"):
        ds[20]  # the decode fails at once, and the data file is checked before the index is blamed


@pytest.mark.parametrize("mmap", [True, False])
def test_a_rewrite_within_the_stamps_clock_tick_blames_the_data_not_the_index(tmp_path, mmap):
    """A rewrite in place within one tick of the file system's clock keeps size, mtime and ctime, so the
    stamp cannot see it (a test churning the file under reads met it as an IndexFileError). Before bytes
    that do not fit the index are blamed on it, the indexed bytes are hashed again."""
    from dataclasses import replace

    path = tmp_path / "d.jsonl"
    old = version(0, 50)
    path.write_bytes(old)
    ds = JSONLDataset(path, mmap=mmap)
    assert ds[7]["i"] == 7
    _rewrite_in_place(path, b"   " + old[:-3])  # the same size, every line three bytes later
    storage = ds._files[0].storage
    st = os.stat(path)
    storage.pin(replace(storage.pinned, mtime_ns=st.st_mtime_ns, ctime_ns=st.st_ctime_ns))  # the same tick
    with pytest.raises(StaleDataError, match=r"rewritten in place \(the indexed bytes differ\)"):
        ds[20]


def test_an_edit_with_its_mtime_set_back_is_caught_at_open_and_by_an_open_dataset(tmp_path):
    path = tmp_path / "d.jsonl"
    old = version(0, 10_000)  # the middle lies outside the head and tail that are fingerprinted
    path.write_bytes(old)
    ds = JSONLDataset(path)
    assert ds[5000] == {"v": 0, "i": 5000, "pad": ""}
    middle = old.index(b'"i": 5000,')
    new = old[:middle] + b'"i": 9999' + old[middle + 9 :]  # same size, mtime put back
    _rewrite_in_place(path, new, keep_times=True)
    time.sleep(CHECK_SECONDS * 2)
    with pytest.raises(StaleDataError, match="rewritten in place"):
        ds[5000]
    again = JSONLDataset(path)
    assert again._files[0].index_origin == "built"
    assert again[5000] == {"v": 0, "i": 9999, "pad": ""}


def test_an_edit_in_the_middle_plus_an_append_is_a_rebuild_never_an_extension(tmp_path):
    path = tmp_path / "d.jsonl"
    old = version(0, 10_000)
    path.write_bytes(old)
    JSONLDataset(path)
    lines = old.splitlines(keepends=True)
    lines[5000] = b'{"v": 0, "i": 5000, "pad": ""}\n{"extra": "line"}\n'  # a new record in the middle ...
    path.write_bytes(b"".join(lines) + version(1, 5))  # ... and records appended
    ds = JSONLDataset(path)
    assert ds._files[0].index_origin == "built"
    assert list(ds) == [json.loads(line) for line in path.read_bytes().splitlines()]


def test_status_changes_that_keep_the_bytes_are_not_changes(tmp_path):
    """chmod, a hard link, a rename and a replacement of the name change the ctime (or the file the name
    points to) but not the bytes an open dataset reads: it goes on, and a reopen reuses the index when
    the bytes are the same (the content hash decides)."""
    path = tmp_path / "d.jsonl"
    path.write_bytes(version(0, 100))
    ds = JSONLDataset(path)
    copy = pickle.loads(pickle.dumps(ds))
    os.chmod(path, 0o600)
    os.link(path, tmp_path / "hard.jsonl")
    time.sleep(CHECK_SECONDS * 2)
    assert ds[50]["i"] == 50 and copy[60]["i"] == 60
    reopened = JSONLDataset(path)
    assert reopened._files[0].index_origin == "found"
    renamed = tmp_path / "old.jsonl"
    os.rename(path, renamed)
    path.write_bytes(version(1, 100))  # a new file under the old name
    time.sleep(CHECK_SECONDS * 2)
    assert ds[70] == {"v": 0, "i": 70, "pad": ""}  # still the version it opened
    assert JSONLDataset(path)[70] == {"v": 1, "i": 70, "pad": "x"}


def test_an_unterminated_last_line_continued_by_an_append_is_stale(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"a": 1}\n12')  # no final newline: the last record is 12
    ds = JSONLDataset(path)
    assert ds[1] == 12
    with open(path, "ab") as f:
        f.write(b'34\n{"a": 2}\n')  # the last line was 1234 after all
    time.sleep(CHECK_SECONDS * 2)
    with pytest.raises(StaleDataError, match="continuing its last line"):
        ds[1]
    assert ds.refresh()[:] == [{"a": 1}, 1234, {"a": 2}]


@pytest.mark.slow
def test_opening_and_refreshing_while_a_writer_appends(tmp_path):
    """A writer appends records steadily, each in two writes (so lines are often half written): every
    open and refresh succeeds with complete lines only, never fails with "keeps changing", and lengths
    only grow."""
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"")
    stop = threading.Event()

    def write() -> None:
        with open(path, "ab", buffering=0) as f:
            i = 0
            while not stop.is_set():
                line = json.dumps({"i": i, "text": "y" * (i % 300)}).encode() + b"\n"
                f.write(line[: len(line) // 2])
                f.write(line[len(line) // 2 :])
                i += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        time.sleep(0.2)
        lengths = []
        ds = JSONLDataset(path)
        for k in range(40):
            ds = JSONLDataset(path) if k % 2 else ds.refresh()
            n = len(ds)
            lengths.append(n)
            assert [r["i"] for r in ds[max(0, n - 50) :]] == list(range(max(0, n - 50), n))
            assert ds[n - 1]["i"] == n - 1
    finally:
        stop.set()
        writer.join()
    assert lengths == sorted(lengths) and lengths[-1] > lengths[0] > 0
    final = JSONLDataset(path)
    assert [r["i"] for r in final] == list(range(len(path.read_bytes().splitlines())))


def _shifted_reads(storage, by: int) -> None:
    """Make ``storage`` return the bytes ``by`` further on: what wrong seek points do to a decompressor."""
    real = type(storage).read
    storage.read = lambda lo, hi: real(storage, lo + by, hi + by)


@pytest.mark.parametrize("path_kind", ["ds[i]", "batch", "iteration"])
def test_bytes_read_by_range_that_do_not_end_lines_are_never_records(tmp_path, path_kind):
    """Storages read by ranges (compressed, remote: here pread) check that each record read ends a line.
    Bytes from the wrong place (a decompressor started from wrong saved points) are read again once the
    storage has dropped what it saved; if they still do not fit, the index is blamed — never a record."""
    path = tmp_path / "d.jsonl"
    path.write_bytes(version(0, 300))
    ds = JSONLDataset(path, mmap=False)
    storage = ds._files[0].storage
    read = {"ds[i]": lambda: [ds[i] for i in range(5, 300, 37)], "batch": lambda: ds[list(range(5, 300, 37))],
            "iteration": lambda: list(ds)[5::37]}[path_kind]  # fmt: skip
    expected = [{"v": 0, "i": i, "pad": ""} for i in range(5, 300, 37)]
    _shifted_reads(storage, 3)
    dropped = []

    def distrust(why: str) -> bool:
        dropped.append(why)
        del storage.read  # what it saved is forgotten: reads are right again
        return True

    storage.distrust_saved_state = distrust
    assert read() == expected and len(dropped) == 1 and "do not end lines" in dropped[0]
    _shifted_reads(storage, 3)
    storage.distrust_saved_state = lambda why: False
    with pytest.raises(IndexFileError, match="do not end lines"):
        read()
