"""The index scan against a simple reference: property-based and edge cases."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sjsonl.index.scan import offset_dtype, scan_record_starts

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
