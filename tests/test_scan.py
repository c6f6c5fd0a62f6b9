"""The index scan against a simple reference: property-based and edge cases."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sjsonl.index import scan as scan_module
from sjsonl.index.scan import DataChangedWhileScanning, offset_dtype, scan_file, scan_record_starts

BOM = b"\xef\xbb\xbf"


def reference_starts(data: bytes) -> list[int]:
    """Obvious, slow definition: a record is a line (ended by b'\\n' only) with a non-whitespace byte."""
    starts = []
    pos = 3 if data.startswith(BOM) else 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl
        if data[pos:end].strip(b" \t\r"):
            starts.append(pos)
        pos = end + 1
    return starts


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=10,
)
blank_lines = st.sampled_from(["", " ", "\t", "\r", "  \t \r", "\r\r"])
lines = st.lists(
    st.one_of(
        json_values.map(lambda v: json.dumps(v, ensure_ascii=False)),
        json_values.map(lambda v: " " + json.dumps(v) + " \t"),  # leading/trailing whitespace
        blank_lines,
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(
    lines=lines,
    crlf=st.booleans(),
    final_newline=st.booleans(),
    bom=st.booleans(),
    chunk=st.integers(1, 64),
    workers=st.sampled_from([1, 2, 3]),
)
def test_scan_matches_reference(lines, crlf, final_newline, bom, chunk, workers):
    eol = "\r\n" if crlf else "\n"
    text = eol.join(lines) + (eol if final_newline and lines else "")
    data = (BOM if bom else b"") + text.encode()
    got = scan_record_starts(data, workers=workers, chunk_bytes=chunk)
    assert got.tolist() == reference_starts(data)
    # every start begins a line holding exactly one JSON value
    for s in got.tolist():
        end = data.find(b"\n", s)
        json.loads(data[s : None if end < 0 else end].decode())


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", []),
        (b"\n\n\n", []),
        (b"  \n\t\r\n", []),
        (BOM, []),
        (BOM + b"{}", [3]),
        (b"{}", [0]),  # no final newline
        (b"{}\r\n[]\r\n", [0, 4]),
        (b'"a\xe2\x80\xa8b"\n1\n', [0, 8]),  # U+2028 inside a string does not end the line
        (b"1\r2\n", [0]),  # a lone \r does not end a line
        (b"\x0c\n", [0]),  # form feed is not JSON whitespace: a (bad) record, not a blank line
    ],
)
def test_edge_cases(data, expected):
    assert scan_record_starts(data).tolist() == expected == reference_starts(data)


def test_dtype_is_smallest_unsigned():
    assert offset_dtype(200) == np.uint8
    assert offset_dtype(2**32 - 1) == np.uint32
    assert offset_dtype(2**32) == np.uint64
    assert scan_record_starts(b"1\n" * 40_000).dtype == np.uint32


def test_whitespace_run_across_chunk_boundary():
    data = b"1\n" + b" " * 100 + b"\n" + b" " * 100 + b"2\n"
    for chunk in (1, 3, 50, 101, 1 << 12):
        assert scan_record_starts(data, chunk_bytes=chunk, workers=2).tolist() == [0, 103]


def test_progress_reports_every_byte():
    seen = []
    scan_record_starts(b"1\n" * 1000, chunk_bytes=64, on_progress=seen.append)
    assert sum(seen) == 2000


def _scan_via_file(tmp_path, data: bytes, **kw) -> list[int]:
    path = tmp_path / "d.jsonl"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        return scan_file(fd, len(data), **kw).tolist()
    finally:
        os.close(fd)


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(
        st.one_of(
            st.sampled_from(["1", '{"a": 2}', "[3]"]),
            st.tuples(st.sampled_from([" ", "\t", "\r", " \t"]), st.integers(0, 70), st.booleans()).map(
                lambda t: t[0] * t[1] + ("7" if t[2] else "")
            ),
        ),
        max_size=40,
    ),
    chunk=st.integers(1, 80),
)
def test_file_scan_matches_reference_on_whitespace_led_lines(tmp_path_factory, lines, chunk):
    """The pread driver and the vectorised whitespace check, with runs longer than its step count."""
    data = "\n".join(lines).encode()
    got = _scan_via_file(tmp_path_factory.mktemp("s"), data, chunk_bytes=chunk, workers=2)
    assert got == reference_starts(data) == scan_record_starts(data, chunk_bytes=chunk).tolist()


def test_file_scan_reports_a_file_shorter_than_promised(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"1\n2\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(DataChangedWhileScanning):
            scan_file(fd, 100, chunk_bytes=16)
    finally:
        os.close(fd)


def test_whitespace_led_lines_take_the_vectorised_path(monkeypatch):
    """1M blank CRLF lines and 100k space-led records: no per-line Python work (the slow path is
    counted, not timed)."""
    calls = []
    real = scan_module._line_is_blank
    monkeypatch.setattr(scan_module, "_line_is_blank", lambda *a: calls.append(a) or real(*a))
    data = b"\r\n" * 1_000_000 + b' {"a": 1}\n' * 100_000 + b"\t\r\n" * 1000
    got = scan_record_starts(data)
    assert len(got) == 100_000 and int(got[0]) == 2_000_000
    assert len(calls) <= len(data) // scan_module.CHUNK_BYTES + 2  # at most a line per chunk edge


@pytest.mark.parametrize("after", [b"\n", b" \n", b"\t\r\n", b"  7\n", b"\r\n"])
def test_a_blank_or_indented_line_just_past_a_chunk_is_looked_at(after):
    """A chunk whose lines all open with a record byte skips the blank-line check, except for the line
    that begins right past its end (its first byte is the next chunk's)."""
    first = b'{"a": 1}\n'
    data = first * 3 + after + b"[2]\n"
    for chunk in (len(first), 2 * len(first), 3 * len(first)):
        for workers in (1, 2):
            assert scan_record_starts(data, chunk_bytes=chunk, workers=workers).tolist() == (
                reference_starts(data)
            )


def test_offsets_reserved_at_the_first_chunks_density_are_exact_either_way(tmp_path):
    """The first chunk's density sizes the offsets' array: a denser rest grows it, a sparser one
    trims it; the offsets are the same."""
    dense, sparse = b"1\n" * 2000, (b'"' + b"x" * 200 + b'"\n') * 20
    for data in (dense + sparse, sparse + dense, dense + b"\n  \n" + dense):
        expected = reference_starts(data)
        assert scan_record_starts(data, chunk_bytes=512, workers=2).tolist() == expected
        assert _scan_via_file(tmp_path, data, chunk_bytes=512, workers=2) == expected


def test_offsets_buffer_reserve_keeps_what_it_holds():
    found = scan_module.OffsetsBuffer(np.dtype(np.uint32), capacity=2)
    found.append(np.array([1, 2], dtype=np.uint32))
    found.reserve(1)  # smaller than held: nothing changes
    found.reserve(1000)
    found.append(np.arange(3, 1003, dtype=np.uint32))
    found.append(np.array([2**32], dtype=np.uint64))  # widens past uint32 after a reserve too
    out = found.result()
    assert out.dtype == np.uint64 and out.tolist() == [1, 2, *range(3, 1003), 2**32]


def test_a_chunk_with_more_lines_than_any_before_gets_room_for_them(monkeypatch):
    """The compiled scan fills a per-thread scratch sized by the chunks before; a chunk with more lines
    is counted, the scratch grown, and filled again."""
    counted = []
    if scan_module.NATIVE is not None:
        real = scan_module.NATIVE

        class Counting:
            def __getattr__(self, name):
                return getattr(real, name)

            def count(self, data):
                counted.append(len(data))
                return real.count(data)

        monkeypatch.setattr(scan_module, "NATIVE", Counting())
    data = b'"' + b"x" * 8000 + b'"\n' + b"1\n" * 12_000 + b"\n \n" + b"22\n" * 3000
    assert scan_record_starts(data, chunk_bytes=8192, workers=1).tolist() == reference_starts(data)
    assert counted or scan_module.NATIVE is None  # the chunks of 4096 lines outgrew the first scratch
