"""The all-rows type pass run alongside the index scan: within :func:`typing_alongside`, a local JSON Lines
file whose index is built there has each chunk's records typed by the compiled pass
(:mod:`sjsonl.records.fast_types`) right after the chunk's newlines are found, while its bytes are in the
CPU's cache (:mod:`sjsonl.index.alongside`). :func:`sjsonl.records.schema.infer_schema` then merges those
runs instead of reading the file again.

The result is the pass's own: the same records typed by the same rules, merged in file order. The chunks'
cuts fall inside records, so each chunk types the records that start in it, the last one read on to the end
of its line. What the compiled pass hands back, it hands back here too (by record number). The runs describe
the index that was built only if they add up to it: the same number of records, each chunk's last record
starting where the index says. A file whose index then changed (a writer appending left the last line for
later), a file with bad lines left out, or one the scan could not map, is typed as before.

Asked for by the loaders that will type every row straight after opening: ``sjsonl.mindspore.load_dataset``
with its default ``infer_rows=None``, and ``sjsonl.load_dataset(fill_missing=True)``.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> from sjsonl.records.schema import infer_schema
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"a": 1}\\n{"a": 2.5, "b": "x"}\\n')
    >>> with typing_alongside():
    ...     ds = JSONLDataset(path)
    >>> infer_schema(ds)
    RecordSchema(a: float64, b: str?; 2 rows)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from sjsonl.errors import StaleDataError
from sjsonl.index.alongside import MAPPED, observing_chunks
from sjsonl.records import fast_types
from sjsonl.records.fast_types import Part, scan_parts


class ChunkTypes:
    """The compiled type pass's parts for each chunk of one index scan (an index-scan observer)."""

    def __init__(self) -> None:
        self._chunks: dict[int, tuple[int, int, list[Part]]] = {}
        self._size = 0
        self._failed = False
        self._lock = threading.Lock()

    def begin(self, size: int) -> None:
        with self._lock:
            self._chunks, self._size, self._failed = {}, size, False

    def __call__(self, data: Any, lo: int, hi: int, starts: np.ndarray) -> None:
        try:
            if not len(starts):  # a chunk inside one record: the chunk where it starts types it
                parts: list[Part] = []
            else:  # record k of the chunk: data[bounds[k]:bounds[k + 1]]; the last runs to its line's end
                bounds = np.append(starts.astype(np.int64), _line_end(data, int(starts[-1]), self._size))
                parts = list(scan_parts(data, bounds, 0, len(starts)))
        except (StaleDataError, OSError):  # the file changed, or cannot be read: the index scan says so
            raise
        except Exception:  # (e.g. no memory for a chunk's columns) the types are left to the pass afterwards
            self._failed = True
            return
        with self._lock:
            self._chunks[lo] = (len(starts), int(starts[-1]) if len(starts) else -1, parts)

    def parts(self, f: Any) -> list[Part] | None:
        """The parts of :func:`~sjsonl.records.fast_types.scan_parts` for every record of ``f`` (an
        :class:`~sjsonl.data.source.IndexedFile`), in file order, with the numbers of the records the
        compiled pass handed back — or None unless the chunks add up to ``f``'s index exactly (see the
        module docstring)."""
        if len(f.bad_records) or not self._chunks or self._failed:
            return None
        offsets, n = f.offsets, int(f.n)
        out: list[Part] = []
        k = 0  # the number of the first record starting in the chunk at hand
        for lo in sorted(self._chunks):
            count, last, parts = self._chunks[lo]
            if not count:
                continue
            if k + count > n or int(offsets[k + count - 1]) != last:
                return None
            out.extend(k + p if isinstance(p, int) else p for p in parts)
            k += count
        return out if k == n else None


def _line_end(data: Any, start: int, size: int) -> int:
    """Where the line that starts at ``start`` ends (past its newline; ``size`` for a last line without
    one), read from ``data`` a few KiB at a time: a record that runs past its chunk's end is typed whole,
    in the chunk where it starts, from its own bytes (any blank lines after it change no type)."""
    pos, step = start, 4096
    while pos < size:
        piece = data[pos : min(size, pos + step)]
        at = piece.find(b"\n")
        if at >= 0:
            return pos + at + 1
        pos, step = pos + len(piece), step * 2
    return size


@contextlib.contextmanager
def typing_alongside(on: bool = True) -> Iterator[None]:
    """Within the block, an index built for a local JSON Lines file types its records as it is scanned (see
    the module docstring); a no-op with ``on=False``, or where the compiled pass or the in-place scan is not
    available here."""
    if not on or fast_types.NATIVE is None or not MAPPED:
        yield
        return
    with observing_chunks(ChunkTypes):
        yield


def parts_typed_alongside(f: Any) -> list[Part] | None:
    """What :func:`typing_alongside` typed of ``f``'s records (see :meth:`ChunkTypes.parts`), taken once:
    None if nothing was, or if it does not describe ``f``'s index."""
    seen, f.alongside = getattr(f, "alongside", None), None
    return seen.parts(f) if isinstance(seen, ChunkTypes) else None
