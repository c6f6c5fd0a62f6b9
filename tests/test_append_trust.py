"""``appends="trust"`` (sjsonl.index.leaves): a file that grew is extended after O(1) checks, not a hash of
every indexed byte — what it still catches, and the one thing it cannot (an edit in place outside the bytes
it reads again), which the default (``appends="verify"``) catches. Both index formats, through ``refresh()``
and a reopen in a new process. Real files of several 2 MiB leaves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sjsonl.index.append as append_module
from sjsonl import JSONLDataset
from sjsonl.errors import InvalidArgumentError, StaleDataError
from sjsonl.index.build import build_offsets
from sjsonl.index.leaves import SAMPLED_LEAVES, checked_leaves, leaves_path, load_leaves
from sjsonl.index.packed import NATIVE
from sjsonl.index.packed_codec import encode, encode_appended
from sjsonl.index.store import read_index
from sjsonl.storage import LocalFile
from sjsonl.storage.base import FINGERPRINT_SPAN
from sjsonl.storage.content import LEAF_BYTES, content_hash, leaf_digests
from sjsonl.storage.sidecar import ArtifactWarning

RECORD = 100  # bytes a record, line ending included: record i starts at i * RECORD
RECORDS = (5 * LEAF_BYTES + LEAF_BYTES // 2) // RECORD  # five full leaves and half a sixth


def record(i: int, value: int | None = None) -> bytes:
    head = b'{"i": %d, "v": %d, "pad": "' % (i, i if value is None else value)
    return head + b"x" * (RECORD - len(head) - 3) + b'"}\n'


def write(path, start: int, n: int, mode: str = "wb") -> None:
    with open(path, mode) as f:
        f.write(b"".join(record(i) for i in range(start, start + n)))


def overwrite(path, i: int, value: int) -> None:
    """Record ``i`` rewritten in place with another value, the same length (the file keeps its inode)."""
    with open(path, "r+b") as f:
        f.seek(i * RECORD)
        f.write(record(i, value))


def append(path, start: int, n: int) -> None:
    write(path, start, n, "ab")


def open_ds(path, compact: bool, appends: str = "trust") -> JSONLDataset:
    return JSONLDataset(path, appends=appends, compact=compact)


@pytest.fixture(params=[False, True], ids=["plain", "compact"])
def compact(request) -> bool:
    return request.param


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "d.jsonl"
    write(path, 0, RECORDS)
    return path


@pytest.fixture
def hashes_everything(monkeypatch):
    """Calls of the default check (every indexed byte hashed), counted."""
    calls = []
    safe = append_module._grew_from

    def spy(*args, **kwargs):
        calls.append(args[0].path)
        return safe(*args, **kwargs)

    monkeypatch.setattr(append_module, "_grew_from", spy)
    return calls


def a_leaf_not_checked(ds: JSONLDataset) -> int:
    """A record in the middle of a leaf that a trusted reopen of ``ds``'s index version does not read again
    (neither end's 64 KiB, not the last record's leaves, not a sampled leaf)."""
    stamp = ds._files[0].stamp
    checked = set(checked_leaves(stamp))
    last_leaf = (RECORDS - 1) * RECORD // LEAF_BYTES
    free = [
        k
        for k in range(1, last_leaf)
        if k not in checked and k * LEAF_BYTES > FINGERPRINT_SPAN and (k + 1) * LEAF_BYTES < stamp.size
    ]
    assert free, (checked, last_leaf)
    return (free[0] * LEAF_BYTES + LEAF_BYTES // 2) // RECORD


def expect_records(ds: JSONLDataset, n: int, changed: dict[int, int] | None = None) -> None:
    changed = changed or {}
    assert len(ds) == n
    for i in (0, 1, n // 2, n - 2, n - 1, *changed):
        assert ds[i]["i"] == i and ds[i]["v"] == changed.get(i, i)


def test_an_append_is_extended_reading_o1_not_every_byte(data, compact, hashes_everything):
    ds = open_ds(data, compact)
    assert ds._files[0].index_origin == "built"
    index = ds.index_paths[0]
    assert index.endswith(".packed" if compact else ".npy")
    assert load_leaves(index, ds._files[0].stamp) is not None  # kept beside the index under "trust"
    for step in range(3):  # each refresh: trusted, its leaf digests kept for the next
        append(data, RECORDS + 10 * step, 10)
        ds.refresh()
        assert ds._files[0].index_origin == "extended"
        expect_records(ds, RECORDS + 10 * (step + 1))
        assert load_leaves(index, ds._files[0].stamp) is not None
    assert hashes_everything == []
    assert build_offsets(LocalFile(str(data)))[0].tolist() == np.asarray(ds._files[0].offsets).tolist()
    assert len(checked_leaves(ds._files[0].stamp)) == 1 + SAMPLED_LEAVES


def test_the_default_keeps_no_leaves_and_hashes_every_byte(data, compact, hashes_everything):
    ds = open_ds(data, compact, appends="verify")
    assert not os.path.exists(leaves_path(ds.index_paths[0]))
    append(data, RECORDS, 5)
    ds.refresh()
    assert ds._files[0].index_origin == "extended" and hashes_everything == [str(data)]
    assert not os.path.exists(leaves_path(ds.index_paths[0]))


def test_an_index_built_without_trust_is_verified_once_then_trusted(data, compact, hashes_everything):
    open_ds(data, compact, appends="verify")
    append(data, RECORDS, 5)
    ds = open_ds(data, compact)  # no leaf digests yet: every byte hashed, and the digests kept
    assert ds._files[0].index_origin == "extended" and len(hashes_everything) == 1
    append(data, RECORDS + 5, 5)
    ds.refresh()
    assert ds._files[0].index_origin == "extended" and len(hashes_everything) == 1
    expect_records(ds, RECORDS + 10)


def test_truncation_is_caught(data, compact):
    ds = open_ds(data, compact)
    os.truncate(data, (RECORDS - 3) * RECORD)
    ds.refresh()
    assert ds._files[0].index_origin == "built"
    expect_records(ds, RECORDS - 3)


def test_truncated_then_grown_past_the_old_end_is_caught(data, compact):
    ds = open_ds(data, compact)
    os.truncate(data, (RECORDS - 3) * RECORD)
    with open(data, "ab") as f:  # the same records again, each with another value: longer than before
        f.write(b"".join(record(i, -i) for i in range(RECORDS - 3, RECORDS + 4)))
    ds.refresh()
    assert ds._files[0].index_origin == "built"
    expect_records(ds, RECORDS + 4, {i: -i for i in range(RECORDS - 3, RECORDS + 4)})


@pytest.mark.parametrize("back", [1, 700], ids=["last-record", "last-leaf"])
def test_a_rewritten_tail_is_caught(data, compact, back):
    """The last indexed record (inside the fingerprint's 64 KiB), or one further back in the last leaf
    (outside it: only the leaf's digest sees it), rewritten with the same length, then an append."""
    ds = open_ds(data, compact)
    i = RECORDS - back
    assert back == 1 or (RECORDS * RECORD - i * RECORD > FINGERPRINT_SPAN and i * RECORD // LEAF_BYTES == 5)
    overwrite(data, i, -7)
    append(data, RECORDS, 3)
    ds.refresh()
    assert ds._files[0].index_origin == "built"
    expect_records(ds, RECORDS + 3, {i: -7})


def _in_a_sampled_leaf(ds) -> int:
    sampled = checked_leaves(ds._files[0].stamp)[1]
    return (sampled * LEAF_BYTES + LEAF_BYTES // 2) // RECORD


@pytest.mark.parametrize(
    "where", [_in_a_sampled_leaf, lambda ds: 3], ids=["in-a-sampled-leaf", "in-the-first-64-KiB"]
)
def test_an_edit_where_trust_reads_again_is_caught(data, compact, where):
    ds = open_ds(data, compact)
    i = where(ds)
    overwrite(data, i, -1)
    append(data, RECORDS, 3)
    ds.refresh()
    assert ds._files[0].index_origin == "built"
    expect_records(ds, RECORDS + 3, {i: -1})


def test_what_trust_cannot_catch_and_the_default_does(tmp_path, compact, hashes_everything):
    """THE CONTRACT: an edit in place outside the bytes read again, plus an append, is taken for an append
    under ``appends="trust"`` — the index is extended, the record reads as the file holds it now, and the
    stamp claims a content hash the bytes no longer have. The default hashes every byte and rebuilds."""
    for appends in ("trust", "verify"):
        path = tmp_path / f"{appends}.jsonl"
        write(path, 0, RECORDS)
        ds = open_ds(path, compact, appends)
        i = a_leaf_not_checked(ds)
        overwrite(path, i, -5)
        append(path, RECORDS, 3)
        ds.refresh()
        expect_records(ds, RECORDS + 3, {i: -5})
        f = ds._files[0]
        if appends == "trust":
            assert f.index_origin == "extended"  # missed: taken for an append
            assert f.stamp.content != content_hash(LocalFile(str(path)).read_unchecked, f.stamp.size)
        else:
            assert f.index_origin == "built"  # caught
    assert hashes_everything == [str(tmp_path / "verify.jsonl")]


def test_a_moved_line_end_outside_the_checks_is_missed_and_reads_raise_or_cut(tmp_path, compact):
    """What the miss can cost: an edit that moves a line end (same size) leaves the index's offsets in the
    wrong places for those records. sjsonl's read checks see the bytes do not fit and raise; a record is
    never silently read from the wrong place where it does not parse."""
    path = tmp_path / "d.jsonl"
    write(path, 0, RECORDS)
    ds = open_ds(path, compact)
    i = a_leaf_not_checked(ds)
    with open(path, "r+b") as f:  # record i one byte longer, record i + 1 one byte shorter
        f.seek(i * RECORD)
        two = record(i) + record(i + 1)
        f.write(two[: RECORD - 3] + b'x"}\n' + two[RECORD : 2 * RECORD - 4] + b"\n")
    append(path, RECORDS, 3)
    ds.refresh()
    assert ds._files[0].index_origin == "extended"  # missed
    with pytest.raises((StaleDataError, ValueError)):
        ds[i + 1]


def test_same_size_with_a_new_mtime_is_not_an_append(data, compact, hashes_everything):
    """No growth: trust does not apply; the default rule for a file that changed in place holds (rebuilt),
    even for an edit in a leaf trust would not read."""
    ds = open_ds(data, compact)
    i = a_leaf_not_checked(ds)
    overwrite(data, i, -9)
    st = os.stat(data)
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    ds.refresh()
    assert ds._files[0].index_origin == "built"
    expect_records(ds, RECORDS, {i: -9})


def test_a_status_change_without_an_edit_keeps_the_index(data, compact):
    ds = open_ds(data, compact)
    os.chmod(data, 0o600)
    ds.refresh()
    assert ds._files[0].index_origin == "found"
    expect_records(ds, RECORDS)


@pytest.mark.parametrize("how", ["replaced", "mtime-set-back"])
def test_growth_that_is_not_an_append_in_place_hashes_every_byte(data, compact, hashes_everything, how):
    """A grown file that was replaced (another inode) or whose mtime went back is checked the default way:
    an edit trust would not read is caught."""
    ds = open_ds(data, compact)
    i = a_leaf_not_checked(ds)
    old = os.stat(data)
    if how == "replaced":
        other = data.with_name("new.jsonl")
        write(other, 0, RECORDS + 3)
        overwrite(other, i, -4)
        os.replace(other, data)
    else:
        overwrite(data, i, -4)
        append(data, RECORDS, 3)
        os.utime(data, ns=(old.st_atime_ns, old.st_mtime_ns - 10**9))
    ds.refresh()
    assert hashes_everything == [str(data)]
    assert ds._files[0].index_origin == "built"
    expect_records(ds, RECORDS + 3, {i: -4})


def test_an_append_continuing_a_last_line_without_a_line_ending(tmp_path, compact):
    path = tmp_path / "d.jsonl"
    write(path, 0, RECORDS)
    with open(path, "ab") as f:
        f.write(b"12")  # a finished record without a line ending (valid JSON)
    old = os.stat(path)
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns - 10 * 10**9))  # not a line being written
    ds = open_ds(path, compact)
    assert len(ds) == RECORDS + 1 and ds[-1] == 12
    with open(path, "ab") as f:
        f.write(b'3\n{"i": -1}\n')  # continues it: the last record is 123 now
    ds.refresh()
    assert ds._files[0].index_origin == "extended"
    assert len(ds) == RECORDS + 2 and ds[RECORDS] == 123 and ds[-1] == {"i": -1}


def test_damaged_leaf_digests_are_ignored_and_every_byte_hashed(data, compact, hashes_everything):
    ds = open_ds(data, compact)
    where = leaves_path(ds.index_paths[0])
    with open(where, "r+b") as f:
        f.seek(70)
        f.write(b"\xff")
    append(data, RECORDS, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds.refresh()
    assert any(issubclass(w.category, ArtifactWarning) and where in str(w.message) for w in caught)
    assert hashes_everything == [str(data)] and ds._files[0].index_origin == "extended"
    expect_records(ds, RECORDS + 3)


def test_a_reopen_in_a_new_process_is_trusted(data, compact):
    open_ds(data, compact)
    append(data, RECORDS, 3)
    script = (
        "import sys, sjsonl.index.append as a\n"
        "from sjsonl import JSONLDataset\n"
        "def refuse(*args, **kwargs): raise AssertionError('every byte hashed')\n"
        "a._grew_from = refuse\n"
        "ds = JSONLDataset(sys.argv[1], appends='trust', compact=sys.argv[2] == '1')\n"
        "print(ds._files[0].index_origin, len(ds), ds[-1]['i'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(data), "1" if compact else "0"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["extended", str(RECORDS + 3), str(RECORDS + 2)]


def test_appends_takes_verify_or_trust(data):
    with pytest.raises(InvalidArgumentError, match="appends"):
        JSONLDataset(data, appends="yes")
    assert json.loads(JSONLDataset(data, appends="verify").raw(0))["i"] == 0


def test_leaf_digests_others_can_write_are_not_read(data, compact, hashes_everything):
    """The leaf digests are held to the index's rules: writable by other users, they are not read (one
    warning) and every byte is hashed as by default."""
    ds = open_ds(data, compact)
    where = leaves_path(ds.index_paths[0])
    os.chmod(where, 0o666)
    append(data, RECORDS, 3)
    with pytest.warns(ArtifactWarning, match="not trusted"):
        ds.refresh()
    assert hashes_everything == [str(data)] and ds._files[0].index_origin == "extended"
    assert os.stat(where).st_mode & 0o777 == 0o644  # written again, as this user's


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.integers(1, 1 << 20), min_size=0, max_size=700),
    split=st.integers(0, 700),
    log2_block=st.sampled_from([1, 3, 7]),
    native=st.booleans(),
)
def test_a_compact_index_extended_is_the_encoding_of_every_offset(gaps, split, log2_block, native):
    """The compact index of a grown file keeps its whole blocks and encodes only the rest again: the bytes
    are those of encoding every offset at once."""
    offsets = np.cumsum([0, *gaps]).astype(np.uint64)
    split = min(split, len(offsets))
    codec = NATIVE if native else None
    headers, packed = encode(offsets[:split], log2_block, codec)
    kept, tail, kept_bytes, stream = encode_appended(
        headers, packed, split, log2_block, offsets[split:], codec
    )
    whole_headers, whole_packed = encode(offsets, log2_block, codec)
    assert np.array_equal(np.concatenate([headers[:kept], tail]), whole_headers)
    assert np.array_equal(np.concatenate([packed[:kept_bytes], stream]), whole_packed)


def test_the_extended_index_is_not_checked_again_here_but_any_change_to_it_is(data, compact):
    """The index file an extension wrote counts as checked in this process (its offsets were just made
    here), so a refresh costs no pass over every offset; a change to the file makes it another file."""
    ds = open_ds(data, compact)
    append(data, RECORDS, 3)
    ds.refresh()
    index = ds.index_paths[0]
    assert read_index(index, verify=False).verified
    with open(index, "r+b") as f:  # one offset's byte flipped, the trailer (and its checksum) kept
        f.seek(200)
        byte = f.read(1)
        f.seek(200)
        f.write(bytes([byte[0] ^ 1]))
    assert not read_index(index, verify=False).verified
    with pytest.warns(ArtifactWarning, match="corrupt"):  # (checked at the open or on first use)
        again = open_ds(data, compact)
        assert again[0]["i"] == 0
    assert again._files[0].index_origin == "built"
    expect_records(again, RECORDS + 3)


@pytest.mark.parametrize("appends", ["trust", "verify"])
def test_a_writer_appending_during_the_refresh(data, compact, monkeypatch, appends):
    """The producer writes on while a refresh scans: the bytes scanned are hashed again to prove no one
    rewrote them meanwhile — under "trust" only the leaves this scan read (a refresh that races the writer
    must not read the whole file), by default every indexed byte, as before."""
    ds = open_ds(data, compact, appends)
    append(data, RECORDS, 5)
    scan, rehashed = append_module.scan_file, []

    def scan_then_grow(*args, **kwargs):
        found = scan(*args, **kwargs)
        append(data, RECORDS + 5, 2)  # written while the scan ran
        return found

    def spy(read, first_leaf, size, threads=1):
        rehashed.append(first_leaf)
        return leaf_digests(read, first_leaf, size, threads)

    monkeypatch.setattr(append_module, "scan_file", scan_then_grow)
    monkeypatch.setattr(append_module, "leaf_digests", spy)
    ds.refresh()
    assert ds._files[0].index_origin == "extended"
    expect_records(ds, RECORDS + 5)  # the bytes written during the scan show at the next refresh
    last_leaf = (RECORDS * RECORD - 1) // LEAF_BYTES
    assert rehashed == ([last_leaf] if appends == "trust" else [0, 0])  # (default: the check, the recheck)
    monkeypatch.undo()
    expect_records(ds.refresh(), RECORDS + 7)


def test_refreshing_while_a_producer_appends_gives_no_wrong_record(data, compact):
    """A producer appends (half lines too) while the trainer refreshes under "trust": every refresh sees
    a prefix of the records written, each the one written."""
    ds = open_ds(data, compact)
    stop = threading.Event()

    def produce() -> None:
        i = RECORDS
        with open(data, "ab", buffering=0) as f:
            while not stop.is_set() and i < RECORDS + 20_000:
                line = record(i)
                f.write(line[:40])  # half a record, then the rest
                f.write(line[40:])
                i += 1

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        seen = RECORDS
        for _ in range(30):
            n = len(ds.refresh())
            assert n >= seen
            seen = n
            for i in (0, n // 2, n - 2, n - 1):
                assert ds[i]["i"] == i and ds[i]["v"] == i
    finally:
        stop.set()
        writer.join()
    expect_records(ds.refresh(), os.path.getsize(data) // RECORD)
