"""Streaming: records of JSONL files in file order, read front to back with no index.

:class:`JSONLStream` is what ``sjsonl.load_dataset(..., streaming=True)`` returns. It reads each file once,
line by line, under the same rules as the indexed path (only ``\\n`` ends a line; blank lines are skipped; a
UTF-8 BOM at the start and ``\\r\\n`` endings are fine; a bad line raises a located
:class:`~sjsonl.errors.RecordDecodeError`), so it can start at once on data that has no index yet, or
that is read only once. ``.gz`` files are decompressed on the fly; seekable ``.zst`` files and URLs
(``s3://…``, any fsspec protocol, with ``storage_options``) are read through :mod:`sjsonl.storage` in large
sequential chunks. It pickles as a few paths, so it can be handed to worker processes.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"x": 0}\\n\\n{"x": 1}\\n{"x": 2}')
    >>> stream = JSONLStream(path)
    >>> [r["x"] for r in stream]
    [0, 1, 2]
    >>> [r["x"] for r in stream.shard(2, 1)], [r["x"] for r in stream.skip(1).take(1)]
    ([1], [1])
"""

from __future__ import annotations

import bz2
import copy
import gzip
import itertools
import lzma
import os
import random
import warnings
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, BinaryIO

from sjsonl.data.document import is_array_document, is_json_name
from sjsonl.errors import BadLineWarning, InvalidArgumentError, RecordDecodeError, require
from sjsonl.index.elements import iter_elements
from sjsonl.records.badlines import check_policy
from sjsonl.records.decode import DECODE_ERRORS, excerpt, fast_loads, second_look
from sjsonl.storage import is_url, open_storage, resolve_path, stat_data_file
from sjsonl.storage.formats import HEAD_BYTES, check_format, format_of_name
from sjsonl.storage.zip import expand_archives, split_member

_BOM = b"\xef\xbb\xbf"
_WS = b" \t\r\n"


_CHUNK_BYTES = 4 << 20


def _is_plain_local(path: str) -> bool:
    return not is_url(path) and split_member(path)[1] is None


def _open(path: str) -> BinaryIO:
    # Binary-mode line iteration splits on b"\n" only, as the index does (never on \r or U+2028).
    with open(path, "rb") as f:  # compressed bytes under a text name are refused, as an indexed open does
        check_format(path, path.lower(), f.read(HEAD_BYTES))
    codec = format_of_name(path.lower())
    if codec == "zstd":  # any zstd, plain (one frame) or seekable: read front to back
        return require("pyzstd", "compress").ZstdFile(path, "rb")  # type: ignore[no-any-return]
    if codec == "gzip":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if codec == "bzip2":
        return bz2.open(path, "rb")  # type: ignore[return-value]
    if codec == "xz":
        return lzma.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb", buffering=1 << 20)


def _lines_of(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Lines (each with its ``\n``, but perhaps the last) of a stream of chunks."""
    pending = b""
    for chunk in chunks:
        parts = (pending + chunk).split(b"\n")
        pending = parts.pop()
        for part in parts:
            yield part + b"\n"
    if pending:
        yield pending


def _chunks(path: str, storage_options: dict | None) -> Iterator[bytes]:
    if _is_plain_local(path):
        with _open(path) as f:
            while chunk := f.read(_CHUNK_BYTES):
                yield chunk
    else:
        yield from open_storage(path, storage_options).chunks(_CHUNK_BYTES)  # type: ignore[attr-defined]


def _file_lines(path: str) -> Iterator[bytes]:
    with _open(path) as f:  # binary-mode file iteration: the fastest line split there is
        yield from f


def _non_blank(lines: Iterable[bytes]) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, byte offset, bytes)`` of each line that is not blank (a leading BOM dropped)."""
    offset = 0
    for lineno, line in enumerate(lines, 1):
        start = offset
        offset += len(line)
        body = line[3:] if lineno == 1 and line.startswith(_BOM) else line
        if body.strip(_WS):
            yield lineno, start, body


def _raw_records(
    path: str, storage_options: dict | None, field: str | None
) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, byte offset, bytes)`` of each record of one file: its lines, or the elements of a
    JSON document (decided on its first chunk; the file is read once)."""
    if field is None and not is_json_name(path):
        yield from _non_blank(
            _file_lines(path) if _is_plain_local(path) else _lines_of(_chunks(path, storage_options))
        )
        return
    chunks = _chunks(path, storage_options)
    first = next(chunks, b"")
    data = itertools.chain([first], chunks)
    if field is None and not is_array_document(first[: 1 << 20]):
        yield from _non_blank(_lines_of(data))
        return
    for start, lineno, body in iter_elements(data, field):
        yield lineno, start, body


def iter_lines(
    paths: Sequence[str], storage_options: dict | None = None, field: str | None = None
) -> Iterator[tuple[str, int, int, bytes]]:
    """``(path, line number, byte offset, bytes)`` of every non-blank line of ``paths``, in order — or of
    every element, for a JSON document (see :mod:`sjsonl.data.document`; ``field``: the rows' top-level
    key)."""
    for path in paths:
        for lineno, start, body in _raw_records(path, storage_options, field):
            yield path, lineno, start, body


def decode_line(path: str, lineno: int, start: int, body: bytes, allow_nan: bool = True) -> Any:
    """One record, or a :class:`RecordDecodeError` that says where the bad line is."""
    try:
        return fast_loads(body)
    except DECODE_ERRORS:
        try:
            return second_look(body, allow_nan)
        except ValueError as exc:
            raise RecordDecodeError(path, lineno, start, excerpt(body), str(exc)) from None


class JSONLStream:
    """An iterable over the records of one or more JSONL files, in order, without an index.

    Args:
        path: a file or URL, or a list of them read one after the other.
        storage_options: passed to fsspec for URLs (credentials, ``endpoint_url``, …).
        field: the rows are the list under this top-level key of each file (a JSON document, 🤗's
            ``field=``); without it a ``.json`` file holding one array streams its elements.
        on_bad_lines: ``"error"`` (a bad line raises, located), ``"skip"`` (left out) or ``"warn"``
            (left out with a :class:`~sjsonl.records.badlines.BadLineWarning` naming it). Views count lines,
            so ``take(n)`` of a stream with bad lines may give fewer than ``n`` records; shards stay disjoint
            and together complete.
        allow_nan: ``False`` refuses ``NaN``/``Infinity``/``-Infinity`` (read as floats by default, as
            ``json.loads`` does), as :class:`~sjsonl.JSONLDataset`.

    Views return new streams and read nothing until iterated: :meth:`shard` (records ``index``,
    ``index + num_shards``, …), :meth:`skip`, :meth:`take`, and :meth:`shuffle` (a buffered, approximate
    shuffle, as 🤗 ``IterableDataset.shuffle``).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write("".join(f'{{"i": {i}}}\\n' for i in range(6)))
        >>> sorted(r["i"] for r in JSONLStream([path]).shuffle(seed=1, buffer_size=3))
        [0, 1, 2, 3, 4, 5]
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        storage_options: dict | None = None,
        field: str | None = None,
        on_bad_lines: str = "error",
        allow_nan: bool = True,
    ) -> None:
        paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
        if not paths:
            raise InvalidArgumentError("JSONLStream needs at least one file")
        self._field = field
        self._allow_nan = allow_nan
        self._on_bad_lines = check_policy(on_bad_lines)
        self._files = [os.fspath(p) if is_url(p) else resolve_path(p) for p in expand_archives(paths)]
        self._storage_options = storage_options
        for p in self._files:  # fail now, with a clear message, rather than mid-iteration
            if not _is_plain_local(p):
                open_storage(p, storage_options)
            else:
                stat_data_file(p)
        self._ops: tuple[tuple[Any, ...], ...] = ()  # view operations, applied in the order given

    @property
    def files(self) -> list[str]:
        """Absolute paths of the data files, in order."""
        return list(self._files)

    def __repr__(self) -> str:
        where = self._files[0] if len(self._files) == 1 else f"{len(self._files)} files"
        return f"JSONLStream({where!r})"

    def __iter__(self) -> Iterator[Any]:
        # Views act on raw lines, so skipped and other shards' lines are never parsed, and a bad line
        # still reports its file and line number after a shuffle.
        lines: Iterator[tuple[str, int, int, bytes]] = iter_lines(
            self._files, self._storage_options, self._field
        )
        for op, a, b in self._ops:
            if op == "slice":
                lines = islice(lines, a, b)
            elif op == "shard":
                lines = islice(lines, b, None, a)
            else:
                lines = buffer_shuffle(lines, a, b)
        allow_nan = self._allow_nan
        if self._on_bad_lines == "error":
            for line in lines:
                yield decode_line(*line, allow_nan)
            return
        for line in lines:
            try:
                yield decode_line(*line, allow_nan)
            except RecordDecodeError as exc:
                if self._on_bad_lines == "warn":
                    warnings.warn(f"bad line skipped: {exc}", BadLineWarning, stacklevel=2)

    # ----------------------------------------------------------------- views
    def _view(self, op: str, a: Any, b: Any) -> JSONLStream:
        view = copy.copy(self)
        view._ops = (*self._ops, (op, a, b))
        return view

    def shard(self, num_shards: int, index: int, contiguous: bool = False) -> JSONLStream:
        """Records ``index``, ``index + num_shards``, …: shards are disjoint and together complete — what
        :meth:`JSONLDataset.shard <sjsonl.JSONLDataset.shard>` gives with ``contiguous=False``. A stream has
        no length until it is read, so its shards cannot be contiguous blocks: ``contiguous=True`` (the
        dataset's default) is refused rather than quietly dealt round-robin."""
        if contiguous:
            raise InvalidArgumentError(
                "a stream's shards are every num_shards-th record (contiguous=False): contiguous blocks need "
                "the length first — open the files as a JSONLDataset for those"
            )
        if num_shards < 1 or not 0 <= index < num_shards:
            raise InvalidArgumentError(f"shard index {index} must lie in [0, {num_shards})")
        return self._view("shard", num_shards, index)

    def skip(self, n: int) -> JSONLStream:
        """A stream without its first ``n`` records."""
        return self._view("slice", max(0, n), None)

    def take(self, n: int) -> JSONLStream:
        """A stream of at most the first ``n`` records."""
        return self._view("slice", 0, max(0, n))

    def pack_stream(self, seq_len: int, tokenizer: Any = None, column: Any = "text", **options: Any) -> Any:
        """Packed token sequences made window by window as the stream is read: a
        :class:`~sjsonl.data.packing.PackStream` (see :meth:`JSONLDataset.pack_stream
        <sjsonl.JSONLDataset.pack_stream>`). Resuming reads the stream again up to the saved window, without
        tokenizing what it skips.

        Example:
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
            >>> _ = open(path, "w").write('{"ids": [1, 2]}\\n{"ids": [3]}\\n{"ids": [4, 5, 6]}\\n')
            >>> [p["seq_lengths"] for p in JSONLStream(path).pack_stream(4, column="ids", window=2)]
            [[2, 1], [3]]
        """
        from sjsonl.data.packing.stream import PackStream

        return PackStream(self, seq_len, tokenizer=tokenizer, column=column, **options)

    def shuffle(self, seed: int | None = 0, buffer_size: int = 1000) -> JSONLStream:
        """Records in an approximately shuffled order: each comes out of a random slot of a
        ``buffer_size``-record buffer (as 🤗 ``IterableDataset.shuffle``). Same seed, same order; the
        default seed is 0, as :meth:`JSONLDataset.shuffle <sjsonl.JSONLDataset.shuffle>`'s (🤗 draws a fresh
        one); ``seed=None`` gives a different order every run."""
        if buffer_size < 1:
            raise InvalidArgumentError("buffer_size must be at least 1")
        return self._view("shuffle", seed, buffer_size)


def buffer_shuffle(it: Iterator[Any], seed: int | None, size: int) -> Iterator[Any]:
    """Items of ``it`` in an approximately random order: each leaves from a random slot of a ``size``-item
    buffer (the slot is refilled from ``it``); the rest are shuffled at the end.

    Example:
        >>> sorted(buffer_shuffle(iter(range(5)), seed=0, size=2))
        [0, 1, 2, 3, 4]
    """
    rng = random.Random(seed)
    buf: list[Any] = []
    for item in it:
        if len(buf) < size:
            buf.append(item)
            continue
        j = rng.randrange(size)
        buf[j], item = item, buf[j]
        yield item
    rng.shuffle(buf)
    yield from buf
