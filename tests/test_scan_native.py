"""The compiled newline scan and the numpy fallback give identical offsets: on the real files, generated
corpora and hypothesis-generated files (blank lines, CRLF, BOM, no final newline, chunk boundaries)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sjsonl.index import scan as scan_module
from sjsonl.index.scan import scan_file, scan_record_starts, scan_stream
from sjsonl.sample import write_corpus

from .conftest import missing
from .test_scan import reference_starts

native = scan_module.NATIVE


@pytest.fixture(autouse=True)
def _needs_native():
    if native is None:
        why = "$SJSONL_SCAN=numpy" if os.environ.get("SJSONL_SCAN") == "numpy" else "not built here"
        missing(
            f"the compiled scan (sjsonl.index._newlines) is off ({why}): pip install -e . with a C compiler",
            "SJSONL_REQUIRE_NATIVE",
        )


def both_ways(fn, monkeypatch):
    """``fn()`` with the compiled scan, then with the numpy one."""
    monkeypatch.setattr(scan_module, "NATIVE", native)
    compiled = fn()
    monkeypatch.setattr(scan_module, "NATIVE", None)
    fallback = fn()
    monkeypatch.setattr(scan_module, "NATIVE", native)
    return compiled, fallback


def scan_all_ways(data: bytes, chunk: int, monkeypatch, tmp_path: Path) -> list[list[int]]:
    path = tmp_path / "d.jsonl"
    path.write_bytes(data)
    results = []
    for fn in (
        lambda: scan_record_starts(data, chunk_bytes=chunk, workers=2),
        lambda: scan_stream([data[i : i + chunk] for i in range(0, len(data), chunk)])[0],
        lambda: _scan_path(path, chunk),
    ):
        compiled, fallback = both_ways(fn, monkeypatch)
        assert compiled.dtype == fallback.dtype
        results += [compiled.tolist(), fallback.tolist()]
    return results


def _scan_path(path: Path, chunk: int) -> np.ndarray:
    fd = os.open(path, os.O_RDONLY)
    try:
        return scan_file(fd, os.fstat(fd).st_size, chunk_bytes=chunk, workers=2)
    finally:
        os.close(fd)


pieces = st.sampled_from(
    [b"{}", b'{"a": 1}', b"[1]", b'"x"', b"", b"  ", b"\t\r", b"\r", b" {}", b"\xe4\xb8\xad"]
)


@settings(max_examples=120, deadline=None)
@given(
    lines=st.lists(pieces, max_size=40),
    endings=st.lists(st.sampled_from([b"\n", b"\r\n", b"\n\n"]), min_size=40, max_size=40),
    bom=st.booleans(),
    final_newline=st.booleans(),
    chunk=st.sampled_from([1, 2, 3, 7, 16, 4096]),
)
def test_compiled_equals_numpy_on_generated_files(
    tmp_path_factory, lines, endings, bom, final_newline, chunk
):
    data = (b"\xef\xbb\xbf" if bom else b"") + b"".join(line + end for line, end in zip(lines, endings))
    if not final_newline:
        data = data.rstrip(b"\n")
    with pytest.MonkeyPatch.context() as mp:
        results = scan_all_ways(data, chunk, mp, tmp_path_factory.mktemp("native"))
    assert all(r == reference_starts(data) for r in results)


def test_compiled_equals_numpy_on_the_real_files(shared_data, monkeypatch, tmp_path):
    files = [
        p
        for p in sorted(shared_data.rglob("*"))
        if p.is_file() and p.suffix in (".jsonl", ".json", ".ndjson")
    ]
    assert len(files) >= 20
    for p in files:
        data = p.read_bytes()
        for chunk in (4096, 1 << 20):
            results = scan_all_ways(data, chunk, monkeypatch, tmp_path)
            assert all(r == results[0] for r in results) and results[0] == reference_starts(data), p.name


@pytest.mark.parametrize("kind", ["short", "long"])
def test_compiled_equals_numpy_on_generated_corpora(tmp_path, monkeypatch, kind):
    path = tmp_path / f"{kind}.jsonl"
    write_corpus(path, n_bytes=8 << 20, kind=kind, seed=3)
    data = path.read_bytes()
    results = scan_all_ways(data, 1 << 20, monkeypatch, tmp_path)
    assert all(r == results[0] for r in results) and len(results[0]) == data.count(b"\n")


def test_the_extension_itself():
    data = b"ab\ncd\n\nx"
    out64, out32 = np.empty(3, np.uint64), np.empty(3, np.uint32)
    assert (
        native.count(data) == 3 and native.fill(data, 100, out64) == 3 and out64.tolist() == [103, 106, 107]
    )
    assert native.fill(np.frombuffer(data, np.uint8), 0, out32) == 3 and out32.tolist() == [3, 6, 7]
    with pytest.raises(ValueError, match="too small"):
        native.fill(data, 0, np.empty(2, np.uint64))
    with pytest.raises(OverflowError):
        native.fill(data, 2**32, np.empty(3, np.uint32))
    with pytest.raises(TypeError, match="uint32 or uint64"):
        native.fill(data, 0, np.empty(3, np.float64))


def test_starts_and_its_ways():
    data = b"ab\n cd\n\nx\n\t\n"
    assert native.ways()[-1] == "memchr"
    for way in native.ways():
        out = np.empty(5, np.uint32)
        # lines begun inside data: " cd" and "" (at 7) and "\t" are suspects; the one at 12 is past data
        assert native.starts(data, 10, out, way) == (5, 3) and out.tolist() == [13, 17, 18, 20, 22]
        assert native.fill(data, 10, out, way) == 5
    with pytest.raises(ValueError, match="no way"):
        native.starts(data, 0, np.empty(5, np.uint64), "sse9")


def _reference_fill(data: bytes, base: int) -> tuple[list[int], int]:
    at = [i for i, b in enumerate(data) if b == 0x0A]
    suspects = sum(1 for i in at if i + 1 < len(data) and data[i + 1] in b"\n \t\r")
    return [base + i + 1 for i in at], suspects


@settings(max_examples=200, deadline=None)
@given(
    data=st.lists(
        st.sampled_from([b"\n", b" ", b"\t", b"\r", b"a", b"\x80", b"\xff", b"\x00", b"\x29", b"\x2a"]),
        max_size=400,
    ).map(b"".join),
    skip=st.integers(0, 63),
    base=st.sampled_from([0, 1, 2**32 - 500, 2**32 - 1, 2**40]),
)
def test_every_way_gives_the_same_offsets(data, skip, base):
    """Each way the machine has (AVX-512, AVX2, memchr) against a plain reference: 64-byte blocks and
    their tails, any alignment, dense newlines (more than 16 in a block), uint32 offsets that do not fit."""
    data = data[skip:] if skip < len(data) else data
    buffer = np.frombuffer(b"." * skip + data, np.uint8)[skip:]  # an unaligned start
    expected, suspects = _reference_fill(data, base)
    for way in native.ways():
        for dtype in (np.uint64, np.uint32):
            out = np.empty(len(expected), dtype)
            if dtype is np.uint32 and expected and expected[-1] >= 2**32:
                with pytest.raises(OverflowError):
                    native.starts(buffer, base, out, way)
                continue
            assert native.starts(buffer, base, out, way) == (len(expected), suspects), way
            assert out.tolist() == expected, way
            room = np.zeros(len(expected) + 70, dtype)
            assert native.starts(buffer, base, room, way) == (len(expected), suspects), way
            assert room[: len(expected)].tolist() == expected, way
            if expected:
                with pytest.raises(ValueError, match="too small"):
                    native.starts(buffer, base, np.empty(len(expected) - 1, dtype), way)


def test_every_way_on_long_and_short_lines_in_turn():
    """Kilobytes of long lines, then of short ones, and back (the vector ways skip newline-free blocks
    only after 4 KiB of long lines): every way, any alignment, against the reference."""
    rng = np.random.default_rng(5)
    parts = []
    for round_ in range(12):
        width = [3000, 40, 700, 1, 150, 9000][round_ % 6]
        for _ in range(int(rng.integers(2, 60))):
            parts.append(b" " * int(rng.integers(0, 2)) + b"x" * int(rng.integers(0, 2 * width)) + b"\n")
    data = b"".join(parts)
    for skip in (0, 1, 33):
        chunk = data[skip:]
        expected, suspects = _reference_fill(chunk, 7)
        for way in native.ways():
            out = np.empty(len(expected), np.uint32)
            assert native.starts(chunk, 7, out, way) == (len(expected), suspects), way
            assert out.tolist() == expected, way


def test_numpy_is_forced_by_the_environment(tmp_path):
    import subprocess
    import sys

    code = "from sjsonl.index import scan; print(scan.NATIVE is None)"

    def fallback_in_use(value: str) -> str:
        env = {**os.environ, "SJSONL_SCAN": value}
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env
        ).stdout.strip()

    assert fallback_in_use("numpy") == "True" and fallback_in_use("") == "False"
