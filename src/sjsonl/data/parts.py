"""A corpus cut into parts for a cluster engine: the files behind :func:`sjsonl.ray.read_jsonl` and
:func:`sjsonl.dask.read_jsonl`.

:func:`open_corpus` finds the files (paths, globs, directories, URLs), builds the indexes that are missing
or stale with :func:`~sjsonl.build_indexes` on the executor it is given (Ray tasks, a Dask cluster, a process
pool — the files in parallel), and opens each file as a :class:`~sjsonl.JSONLDataset`. :meth:`Corpus.parts`
then cuts its records into balanced, contiguous ranges (:func:`~sjsonl.sampling.ranges.record_ranges`: sizes
differ by at most one record, across file boundaries, compressed and remote files included) and hands each
as a :class:`Part` — a small picklable reader holding only the files it touches, with its exact row count and
the exact bytes of its records — that a read task or a partition runs wherever it is sent. A part reads
the version of each file its index describes: a file changed since is an error, never other records.

Rows become columns by the rules :func:`sjsonl.hf.convert.to_hf` uses (:func:`as_columns`): a key a row lacks
is null there, and a row that is not a JSON object is ``{"value": row}``.

Example:
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
    >>> d = tmp.name
    >>> for i in range(3):
    ...     _ = open(os.path.join(d, f"part{i}.jsonl"), "w").write(f'{{"n": {i}}}\\n' * 3)
    >>> corpus = open_corpus(d)                     # a directory: its JSON Lines files, sorted
    >>> [(p.start, p.rows) for p in corpus.parts(4)]
    [(0, 3), (3, 2), (5, 2), (7, 2)]
    >>> corpus.parts(4)[1].read()
    [{'n': 1}, {'n': 1}]
    >>> tmp.cleanup()
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from sjsonl.data.corpus import build_indexes
from sjsonl.data.dataset import JSONLDataset
from sjsonl.errors import (
    DataFileNotFoundError,
    IndexFileError,
    InvalidArgumentError,
    StaleIndexError,
    require,
)
from sjsonl.index.layout import is_index_artifact
from sjsonl.records.badlines import check_policy
from sjsonl.sampling.ranges import record_ranges
from sjsonl.storage import has_glob_magic, is_url
from sjsonl.storage.formats import format_of_name

__all__ = ["Corpus", "Part", "as_columns", "expand_paths", "open_corpus"]

PathLike = str | os.PathLike[str]
#: What a directory or a URL prefix contributes: files named so (under any compression suffix sjsonl reads).
JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")


def _is_data_name(name: str) -> bool:
    base = os.path.basename(name).lower()
    if format_of_name(base) is not None:
        base = os.path.splitext(base)[0]
    return not base.startswith((".", "_")) and base.endswith(JSON_SUFFIXES)


def _remote_listing(url: str, storage_options: dict[str, Any] | None) -> list[str]:
    fsspec = require("fsspec", "remote")
    fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    protocol = url.split("://", 1)[0]
    found = fs.glob(path) if has_glob_magic(path) else [p for p in fs.find(path) if _is_data_name(p)]
    return [f"{protocol}://{p}" for p in sorted(found)]


def expand_paths(
    paths: PathLike | Sequence[PathLike], storage_options: dict[str, Any] | None = None
) -> list[str]:
    """The data files ``paths`` name, in order: a file (or URL) is itself; a directory (or a URL ending in
    ``/``) is every ``.jsonl``/``.json``/``.ndjson`` file below it (compressed too: ``.jsonl.gz``), sorted,
    hidden and ``_``-prefixed names and sjsonl's own artifacts left out; a glob (local, or over a URL) is the
    files it matches, sorted. A pattern or directory that names no file raises
    :class:`~sjsonl.errors.DataFileNotFoundError`.

    Example:
        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
        >>> d = tmp.name
        >>> for name in ("b.jsonl.gz", "a.jsonl", "notes.txt", ".hidden.jsonl"):
        ...     _ = open(os.path.join(d, name), "w").write("")
        >>> [os.path.basename(p) for p in expand_paths(d)]
        ['a.jsonl', 'b.jsonl.gz']
        >>> [os.path.basename(p) for p in expand_paths(os.path.join(d, "*.jsonl"))]
        ['a.jsonl']
        >>> tmp.cleanup()
    """
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    out: list[str] = []
    for p in items:
        text = os.fspath(p)
        if is_url(text):
            listed = has_glob_magic(text) or text.endswith("/")
            found = _remote_listing(text, storage_options) if listed else [text]
        elif os.path.isdir(text):
            found = sorted(
                os.path.join(root, name)
                for root, dirs, names in os.walk(text)
                for name in names
                if _is_data_name(name) and not any(part.startswith((".", "_")) for part in
                                                   os.path.relpath(root, text).split(os.sep) if part != ".")
            )  # fmt: skip
            found = [f for f in found if not is_index_artifact(f)]
        elif has_glob_magic(text):
            found = [f for f in sorted(glob.glob(text, recursive=True)) if os.path.isfile(f)]
            found = [f for f in found if not is_index_artifact(f)]
        else:
            found = [os.path.abspath(text)]
        if not found:
            raise DataFileNotFoundError(2, f"no JSON Lines files found for {text!r}")
        out.extend(found)
    return out


def _row(rec: Any) -> dict[str, Any]:
    if type(rec) is dict:
        return rec
    if isinstance(rec, (msgspec.Struct, dict)) or hasattr(rec, "__dataclass_fields__"):
        return msgspec.to_builtins(rec)  # a schema= record: its fields, as builtins
    return {"value": rec}


def as_columns(rows: Sequence[Any]) -> dict[str, list[Any]]:
    """``rows`` as ``{column: values}``: columns in the order their keys first appear, ``None`` where a
    row lacks the key, a row that is not a JSON object as ``{"value": row}`` (the rules of
    :func:`sjsonl.hf.convert.to_hf`), a typed record (``schema=``) as its fields.

    Example:
        >>> as_columns([{"a": 1}, {"b": 2}, [3]])
        {'a': [1, None, None], 'b': [None, 2, None], 'value': [None, None, [3]]}
    """
    dicts = [_row(r) for r in rows]
    keys: dict[str, None] = {}
    for d in dicts:
        keys.update(dict.fromkeys(d))
    return {k: [d.get(k) for d in dicts] for k in keys}


@dataclass(frozen=True)
class Part:
    """Records ``[start, start + rows)`` of a corpus: what one read task or partition reads. Picklable; it
    holds only the files it touches (each a :class:`~sjsonl.JSONLDataset`, pickled by path and pinned to
    the version its index describes).

    Example:
        >>> import os, pickle, tempfile
        >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
        >>> for name, n in (("a.jsonl", 4), ("b.jsonl", 2)):
        ...     _ = open(os.path.join(tmp.name, name), "w").write(f'"{name}"\\n' * n)
        >>> part = open_corpus(tmp.name).parts(2)[1]       # the last record of a.jsonl, then b.jsonl's
        >>> part.start, part.rows, part.nbytes, [os.path.basename(p) for p in part.paths]
        (3, 3, 30, ['a.jsonl', 'b.jsonl'])
        >>> pickle.loads(pickle.dumps(part)).read()
        ['a.jsonl', 'b.jsonl', 'b.jsonl']
        >>> tmp.cleanup()
    """

    files: tuple[JSONLDataset, ...]
    pieces: tuple[tuple[int, int, int], ...]  #: ``(file, start, stop)``: records of ``files[file]``
    start: int  #: the global number of its first record
    rows: int  #: exactly the records it yields
    nbytes: int  #: exactly the bytes of those records in the files (decompressed), line endings included
    paths: tuple[str, ...]  #: the data files it reads

    def batches(self, batch_rows: int = 8192) -> Iterator[list[Any]]:
        """Its records, in order, as lists of up to ``batch_rows``."""
        for f, lo, hi in self.pieces:
            ds = self.files[f]
            for a in range(lo, hi, batch_rows):
                yield ds[a : min(hi, a + batch_rows)]

    def read(self) -> list[Any]:
        """All its records, in order."""
        return [r for b in self.batches() for r in b]


class Corpus:
    """The files of a corpus, each an opened :class:`~sjsonl.JSONLDataset` (same options), in order
    (:func:`open_corpus` makes one).

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
        >>> paths = [os.path.join(tmp.name, f"{n}.jsonl") for n in (5, 2)]
        >>> for p, n in zip(paths, (5, 2)):
        ...     _ = open(p, "w").write("{}\\n" * n)
        >>> corpus = Corpus([JSONLDataset(p) for p in paths])
        >>> len(corpus), corpus.counts, [p.rows for p in corpus.parts(3)]
        (7, [5, 2], [3, 2, 2])
        >>> tmp.cleanup()
    """

    def __init__(self, files: Sequence[JSONLDataset]) -> None:
        self.files = list(files)
        self.counts = [len(f) for f in self.files]

    def __len__(self) -> int:
        return sum(self.counts)

    @property
    def nbytes(self) -> int:
        """Bytes of the files (decompressed), as indexed: what the parts read, give or take skipped lines."""
        return sum(f.file_bytes for f in self.files)

    @property
    def paths(self) -> list[str]:
        """The data files, in order (a ``.zip`` counts as its members)."""
        return [p for f in self.files for p in f.files]

    def parts(self, num_parts: int) -> list[Part]:
        """The records cut into ``num_parts`` balanced contiguous :class:`Part` s (fewer when there are
        fewer records): row counts differ by at most one."""
        ranges = record_ranges(self.counts, num_parts)
        wanted: dict[int, list[tuple[int, int]]] = {}
        for r in ranges:
            for f, lo, hi in r.pieces:
                wanted.setdefault(f, []).append((lo, hi))
        sizes: dict[tuple[int, int, int], int] = {}
        for f, spans in wanted.items():  # one pass over each file's record sizes, whatever the part count
            cum = np.concatenate([[0], np.cumsum(self.files[f].record_sizes(), dtype=np.int64)])
            for lo, hi in spans:
                sizes[f, lo, hi] = int(cum[hi] - cum[lo])
        out = []
        for r in ranges:
            used = sorted({f for f, _, _ in r.pieces})
            at = {f: i for i, f in enumerate(used)}
            files = tuple(self.files[f] for f in used)
            out.append(
                Part(
                    files=files,
                    pieces=tuple((at[f], lo, hi) for f, lo, hi in r.pieces),
                    start=r.start,
                    rows=len(r),
                    nbytes=sum(sizes[p] for p in r.pieces),
                    paths=tuple(p for ds in files for p in ds.files),
                )
            )
        return out


def open_corpus(
    paths: PathLike | Sequence[PathLike],
    *,
    executor: Executor | None = None,
    index_dir: PathLike | None = None,
    storage_options: dict[str, Any] | None = None,
    columns: Sequence[str] | None = None,
    **options: Any,
) -> Corpus:
    """Find the files ``paths`` name (:func:`expand_paths`), build the indexes that are missing or stale
    — all of them at once on ``executor`` (:func:`~sjsonl.build_indexes`; ``None``: here, one after
    another), bad lines found there too under ``on_bad_lines="skip"``/``"warn"`` — and open each file.

    ``columns``: keep only these top-level fields (``select_columns``); ``options`` are
    :class:`~sjsonl.JSONLDataset`'s (``fields=``, ``on_bad_lines=``, ``schema=``, ``field=``, ``compact=`` …).

    Example:
        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
        >>> path = os.path.join(tmp.name, "d.jsonl")
        >>> _ = open(path, "w").write('{"a": 1, "b": 2}\\n')
        >>> open_corpus(path, columns=["b"]).parts(1)[0].read()
        [{'b': 2}]
        >>> tmp.cleanup()
    """
    if "build_index_on_load" in options or "index_path" in options:
        raise InvalidArgumentError("a corpus builds its missing indexes itself, in index_dir")
    policy = check_policy(options.get("on_bad_lines", "error"))
    files = expand_paths(paths, storage_options)
    opts = {"index_dir": index_dir, "storage_options": storage_options, **options}

    def open_one(path: str) -> JSONLDataset:
        ds = JSONLDataset(path, build_index_on_load=False, **opts)
        return ds if columns is None else ds.select_columns(list(columns))

    opened: dict[int, JSONLDataset] = {}
    missing: list[int] = []
    for i, path in enumerate(files):
        try:
            opened[i] = open_one(path)
        except (IndexFileError, StaleIndexError):
            missing.append(i)
    if missing:
        build_indexes(
            [files[i] for i in missing], executor=executor, index_dir=index_dir,
            workers=options.get("workers"), progress=options.get("progress"),
            on_bad_lines=None if policy == "error" else "skip", field=options.get("field"),
            storage_options=storage_options, compact=options.get("compact"),
        )  # fmt: skip
        for i in missing:
            opened[i] = open_one(files[i])
    return Corpus([opened[i] for i in range(len(files))])
