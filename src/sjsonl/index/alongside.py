"""Work that rides along the index scan of a local file: each chunk of the file is handed, while its bytes are
still in the CPU's cache, to an observer — the all-rows type pass (:mod:`sjsonl.records.alongside`) types a
chunk's records there, instead of reading the whole file a second time once the index is built.

Asked for with :func:`observing_chunks`: an index built within it for a local JSON Lines file is scanned
from the file's guarded map (``storage.buffer()``: read in place, a file cut short under the scan raises
instead of SIGBUS; the map the dataset's reads use afterwards), each chunk's newlines and content-hash
digest found in one compiled pass (``_newlines.starts_in_map``), and then ``observer(map, lo, hi, starts)``
is called in the scanning thread. Outside it — or where a piece is missing: the compiled scan, guarded
maps, or the xxhash extension's ``XXH3_64bits`` giving the digest :mod:`sjsonl.storage.content` takes — an
index is read with ``pread`` as always, and an observer sees nothing.

Measured on a 1 GiB file of ~1.8 KB records (``benchmarks/bench_types.py``, turn about on two threads): the
scan and the type pass together take 0.30 s instead of 0.44 s one after the other — the bytes are read from
memory once, by the map, instead of copied by ``pread`` and then faulted in again by the type pass; on
256 MiB of ~150-byte records, where typing is most of the work, 0.19 s instead of 0.22 s.

Example:
    >>> import os, tempfile
    >>> from sjsonl.storage import open_storage
    >>> class Seen(list):
    ...     def begin(self, size): self.clear()
    ...     def __call__(self, data, lo, hi, starts): self.append(starts.tolist())
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "wb").write(b'{"a": 1}\\n{"a": 2}\\n')
    >>> with observing_chunks(Seen):
    ...     observer = new_observer()
    >>> found = scan_in_place(open_storage(path), 18, None, None, {}, observer)
    >>> observer if MAPPED else [[0, 9]], new_observer()
    ([[0, 9]], None)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, Protocol

import numpy as np

from sjsonl.errors import StaleDataError
from sjsonl.index.scan import (
    FILE_CHUNK_BYTES,
    NATIVE,
    _ChunkScanner,
    offset_dtype,
    scan_chunks,
)
from sjsonl.storage import LocalFile
from sjsonl.storage.content import LEAF_BYTES


class ChunkObserver(Protocol):
    """What sees the chunks of one index build."""

    def begin(self, size: int) -> None:
        """A scan of the file's first ``size`` bytes starts (again, if the file changed under the last
        one): forget what was seen."""

    def __call__(self, data: Any, lo: int, hi: int, starts: np.ndarray) -> None:
        """Chunk ``[lo, hi)`` of the guarded map ``data`` holds the record starts ``starts`` (absolute
        offsets); called from a scanning thread, chunks in any order."""


_making: ContextVar[Callable[[], ChunkObserver] | None] = ContextVar("sjsonl_chunk_observer", default=None)


@contextlib.contextmanager
def observing_chunks(make: Callable[[], ChunkObserver]) -> Iterator[None]:
    """Within the block, an index built for a local JSON Lines file is scanned in place and each of its
    chunks shown to an observer ``make()`` returns (one per index built: see :func:`new_observer`)."""
    token = _making.set(make)
    try:
        yield
    finally:
        _making.reset(token)


def new_observer() -> ChunkObserver | None:
    """An observer for an index about to be built, if :func:`observing_chunks` asked for one here."""
    make = _making.get()
    return None if make is None else make()


def _linked() -> bool:
    """Whether the compiled scan takes the content digest itself, with xxh3 as the xxhash package has it
    (``storage.content`` calls the same function: checked on a few lengths around its internal cases)."""
    if NATIVE is None or not hasattr(NATIVE, "starts_in_map"):
        return False
    try:
        import xxhash
        from xxhash import _xxhash  # type: ignore[attr-defined]

        if not NATIVE.link_xxh3(_xxhash.__file__):
            return False
    except (ImportError, AttributeError, TypeError, OSError):
        return False
    sample = bytes(range(256)) * 40
    lengths = (0, 1, 3, 9, 17, 129, 240, 241, 1024, 10_240)  # xxh3's cases: up to 3, 16, 128, 240 bytes, more
    return all(NATIVE.digest(sample[:n]) == xxhash.xxh3_64_intdigest(sample[:n]) for n in lengths)


#: The in-place scan can run here (checked once, at import).
MAPPED = _linked()


def scan_in_place(
    storage: Any,
    size: int,
    workers: int | None,
    on_progress: Callable[[int], None] | None,
    digests: dict[int, int],
    observer: ChunkObserver,
) -> np.ndarray | None:
    """The record starts of ``storage`` (a local file) up to ``size``, scanned from its guarded map with
    ``digests`` filled as :func:`~sjsonl.index.scan.scan_file` fills them, each chunk then shown to
    ``observer``; None where this cannot run (see the module docstring), or where the file changed under it
    (a writer appending: the caller's ``pread`` scan keeps the lines complete when it began)."""
    observer.begin(size)  # (each attempt of a build starts afresh, whether or not it runs here)
    buffer = _map_of(storage) if MAPPED and FILE_CHUNK_BYTES == LEAF_BYTES else None
    if buffer is None or len(buffer) < size:
        return None
    assert NATIVE is not None
    scanner = _ChunkScanner(lambda lo, hi: buffer[lo:hi], size, offset_dtype(size), FILE_CHUNK_BYTES)

    def chunk(bounds: tuple[int, int]) -> np.ndarray:
        lo, hi = bounds
        fill = lambda room: NATIVE.starts_in_map(buffer, lo, hi, room)  # noqa: E731
        newlines, (suspects, digest) = scanner.filled(fill, lambda: buffer.count_newlines(lo, hi), lo, hi)
        digests[lo // LEAF_BYTES] = digest
        starts = scanner.settled(newlines, suspects, lambda: np.frombuffer(buffer[lo:hi], np.uint8), lo, hi)
        observer(buffer, lo, hi, starts)
        return starts

    try:
        return scan_chunks(chunk, size, workers, on_progress, FILE_CHUNK_BYTES)
    except (StaleDataError, OSError):
        # The map's version check refuses any change while the build has the file pinned — a writer
        # appending too, which the pread scan serves (it keeps the complete lines it saw); a file cut
        # short, or a page that cannot be read, that scan reports itself.
        observer.begin(size)
        return None


def _map_of(storage: Any) -> Any:
    buffer = getattr(storage, "buffer", None)
    if not isinstance(storage, LocalFile) or buffer is None:  # not mapped: mmap=False, or a remote cache's
        return None
    try:
        return buffer()  # (a file cut short before it is mapped raises StaleDataError: scanned again)
    except (RuntimeError, ValueError, OSError):  # no guarded maps built; a file that cannot be mapped
        return None
