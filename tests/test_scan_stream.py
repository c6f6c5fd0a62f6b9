"""The stream driver of the index scan (compressed and remote data) against the same reference."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sjsonl.index import line_number_at
from sjsonl.index.scan import scan_record_starts, scan_stream
from sjsonl.storage import MemoryFile, open_storage

from .conftest import write_bytes
from .test_scan import BOM, lines, reference_starts


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted({c % (len(data) + 1) for c in cuts}), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(
    lines=lines,
    crlf=st.booleans(),
    final_newline=st.booleans(),
    bom=st.booleans(),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_stream_scan_matches_reference_for_any_chunking(lines, crlf, final_newline, bom, cuts):
    eol = "\r\n" if crlf else "\n"
    text = eol.join(lines) + (eol if final_newline and lines else "")
    data = (BOM if bom else b"") + text.encode()
    offsets, size = scan_stream(split(data, cuts))
    assert size == len(data)
    assert offsets.tolist() == reference_starts(data) == scan_record_starts(data).tolist()
    assert offsets.dtype == scan_record_starts(data).dtype


@pytest.mark.parametrize(
    "data",
    [b"", b"\n\n", BOM, BOM + b"{}", b"{}", b"1\n" + b" " * 300 + b"\n" + b" " * 300 + b"2\n", b"1\n  "],
)
@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 12])
def test_stream_edge_cases(data, chunk):
    chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    assert scan_stream(chunks)[0].tolist() == reference_starts(data)


def test_stream_progress_and_empty_chunks():
    seen: list[int] = []
    offsets, size = scan_stream([b"1\n", b"", b"2\n", b""], on_progress=seen.append)
    assert offsets.tolist() == [0, 2] and size == 4 and sum(seen) == 4


def test_line_number_at_with_and_without_a_map(tmp_path):
    data = b"1\n\n\n2\n   \n3\n"
    f = MemoryFile(data)
    mapped = open_storage(write_bytes(tmp_path / "d.jsonl", data))
    assert hasattr(mapped, "buffer")  # counted in place, under the map's guard
    for offset in (0, 2, 5, 11):
        assert line_number_at(f, offset) == data[:offset].count(b"\n") + 1 == line_number_at(mapped, offset)
    assert np.array_equal(scan_stream(f.chunks(3))[0], scan_record_starts(data))
