"""The ways the compiled type pass reads a string's body (sjsonl/records/_types.c): the SSE2/scalar loop,
32-byte blocks with AVX2 (_string_avx2.h) and 64-byte blocks with AVX-512 (_string_avx512.h), each checking
UTF-8 as it goes — every way this CPU has, on the same bytes, against Python's strict decoder: every lead
and second byte, every kind of sequence at every offset around the block boundaries, and strings that end
where readable memory does."""

from __future__ import annotations

import ctypes
import itertools
import mmap
from collections.abc import Iterator

import numpy as np
import pytest

from sjsonl.records import fast_types
from sjsonl.records.decode import _decodes

from .test_fast_types import WAYS, _bounds, compiled, reading_strings  # noqa: F401  (compiled: autouse)


@pytest.fixture(params=WAYS)
def string_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each way string bodies are read in C that this CPU has."""
    with reading_strings(request.param):
        yield request.param


def test_utf8_in_strings_as_the_strict_decoder(string_path: str) -> None:
    """Every lead byte with every second byte, 3- and 4-byte leads with edge continuations, inside a string:
    typed in C exactly when Python's strict decoder takes the bytes (no overlong forms, surrogates, or cut
    sequences)."""
    edges = [0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0]
    seqs = [bytes([lead, second]) for lead in range(0x80, 0x100) for second in [0x41, *range(0x80, 0x100)]]
    seqs += [
        bytes([lead, second, *rest])
        for lead in range(0xE0, 0xF8)
        for second in edges
        for n in (1, 2)
        for rest in itertools.product(edges, repeat=n)
    ]
    lines = [b'{"a": "x' + seq + b'x"}' for seq in seqs]
    data, bounds = _bounds(lines)
    handed = [p for p in fast_types.scan_parts(data, bounds, 0, len(lines)) if isinstance(p, int)]
    valid = [k for k, seq in enumerate(seqs) if _decodes(seq)]
    assert sorted(set(range(len(seqs))) - set(handed)) == valid


def test_utf8_across_block_boundaries_as_the_strict_decoder(string_path: str) -> None:
    """The AVX2 and AVX-512 paths check 32 and 64 bytes at a time, each block with the one before it: every
    kind of sequence (well formed, cut short, overlong, a surrogate, too large, a stray continuation) at
    every offset around the first two block boundaries of a string (after the 16 bytes looked at inline),
    before its closing quote, an escape or a control byte, and right at the end of the buffer (the last
    block is read short) — as the strict decoder takes it."""
    seqs = [
        "é".encode(), "数".encode(), "🚀".encode(), b"\xc3", b"\xe6\x95", b"\xf0\x9f\x9a", b"\xc0\xaf",
        b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xbf\xbf", "é".encode() + b"\x80",
    ]  # fmt: skip
    lines, valid = [], []
    for offset in range(0, 150):
        for seq in seqs:
            for before, after in [(b"", b""), (b"", b"\\n"), (b"\\t", b"z"), ("数".encode() * 7, b"")]:
                text = before + b"a" * offset + seq + after
                lines.append(b'{"a": "' + text + b'"}')
                valid.append(_decodes(text))
    lines.append(b'{"a": "x' + b"y" * 40 + "é".encode() + b"\x01" + b'"}')  # a control byte stops it: refused
    valid.append(False)
    data, bounds = _bounds(lines)
    for end_of_buffer in (False, True):
        handed = []
        for k in range(len(lines)):  # each record alone in its buffer too: its last block is read short
            one = data[bounds[k] : bounds[k + 1]] if end_of_buffer else data
            at = (np.array([0, len(one)], np.int64), 0) if end_of_buffer else (bounds, k)
            parts = fast_types.scan_parts(one, at[0], at[1], at[1] + 1)
            handed += [k for p in parts if isinstance(p, int)]
        assert sorted(set(range(len(lines))) - set(handed)) == [k for k, v in enumerate(valid) if v]


def test_a_string_ending_where_readable_memory_ends_reads_nothing_past_it(string_path: str) -> None:
    """A block of a string's body that would run past the buffer is read short (AVX2: copied; AVX-512: a
    masked load): each record here ends at a page that cannot be read, its body 1 to 63 bytes and more short
    of a whole block from there, so a whole block read past the end would fault. It types as the same bytes
    in an ordinary buffer do."""
    page = mmap.PAGESIZE
    area = mmap.mmap(-1, 2 * page)
    libc = ctypes.CDLL(None, use_errno=True)
    anchor = ctypes.c_char.from_buffer(area)
    guard = ctypes.c_void_p(ctypes.addressof(anchor) + page)
    no_access = 0  # PROT_NONE (the mmap module does not name it)
    assert libc.mprotect(guard, ctypes.c_size_t(page), no_access) == 0, ctypes.get_errno()
    try:
        for n in range(0, 140):
            for text in (b"a" * n, "é".encode() * (n // 2) + b"a" * (n % 2), b"a" * n + b"\xc3"):
                for after in (b'"}', b'", "b": [1, 2.5]}'):
                    line = b'{"a": "' + text + after
                    with memoryview(area)[page - len(line) : page] as at_the_end:
                        at_the_end[:] = line
                        bounds = np.array([0, len(line)], np.int64)
                        got = list(fast_types.scan_parts(at_the_end, bounds, 0, 1))
                    assert got == list(fast_types.scan_parts(line + b"\n", bounds, 0, 1)), line
    finally:
        assert libc.mprotect(guard, ctypes.c_size_t(page), mmap.PROT_READ | mmap.PROT_WRITE) == 0
        del anchor
        area.close()
