"""The files the ``sjsonl`` command line writes (``filter -o``, ``stats --plot``, ``demo --dir``): never an
input or one of its index files, never an existing file without ``--force``, always atomically; and
records as valid JSON Lines.

An output is refused when it is — by name, through symlinks or as a hard link (the same device and inode)
— an input data file (the archive, for a ``t.zip::member`` input) or any file sjsonl keeps for one: its
index in every place and format it may have (:func:`sjsonl.index.packed.index_names`), seek points, the
bad-lines and schema sidecars.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> d = tempfile.mkdtemp()
    >>> path = os.path.join(d, "in.jsonl")
    >>> _ = open(path, "w").write('{"a": 1}\\n')
    >>> guard = OutputGuard(JSONLDataset(path), index_dir=None)
    >>> guard.refusal(os.path.join(d, "in.index.npy"), "-o", force=True)  # doctest: +ELLIPSIS
    'refusing to write -o .../in.index.npy: it is the index of the input .../in.jsonl; choose another name'
    >>> guard.refusal(os.path.join(d, "out.jsonl"), "-o", force=False) is None
    True
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import IO, Any

import orjson

from sjsonl.errors import SJSONLError
from sjsonl.index.layout import LEGACY_META_SUFFIX, artifact_path, default_index_path, seek_state_path
from sjsonl.index.leaves import leaves_path
from sjsonl.index.packed import index_names
from sjsonl.records.badlines import badlines_path
from sjsonl.records.decode import loads
from sjsonl.records.schema import schema_cache_path
from sjsonl.runtime.progress import Progress
from sjsonl.storage import is_url
from sjsonl.storage.atomic import atomic_output
from sjsonl.storage.zip import split_member


def _sidecars(index_path: str) -> Iterator[tuple[str, str]]:
    """``(path, what)`` of an index file and the files kept beside it."""
    stem = index_path[:-4] if index_path.endswith(".npy") else index_path
    yield index_path, "the index"
    yield stem + LEGACY_META_SUFFIX, "the index metadata"
    yield seek_state_path(index_path), "the seek points"
    yield badlines_path(index_path), "the bad-lines file"
    yield schema_cache_path(index_path), "the schema file"
    yield artifact_path(index_path, ".tokens"), "the token lengths file"
    yield leaves_path(index_path), "the leaf digests file"


def artifact_paths(data_path: str, index_dir: str | None) -> Iterator[tuple[str, str]]:
    """``(path, what)`` of every file sjsonl may keep for ``data_path``: its index beside it and in its
    other places (``index_dir``, the private cache), plain or compact, and the files kept beside each."""
    places = [] if is_url(data_path) else [default_index_path(data_path)]
    for place in dict.fromkeys(places + index_names(data_path, index_dir)):
        yield from _sidecars(place)


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


class OutputGuard:
    """What the outputs of a command reading ``ds`` must not be: its data files and their index files.

    ``index_dir`` is the command's ``--index-dir`` (its indexes may be there, beside the data, or in the
    private cache)."""

    def __init__(self, ds: Any, index_dir: str | None) -> None:
        self.protected: dict[str, str] = {}  # real path -> what it is
        for data_path, index_path in zip(ds.files, ds.index_paths):
            file, member = split_member(data_path)
            if not is_url(file):
                self._add(file, "the input" if member is None else f"the archive of the input {data_path}")
            kept = [*artifact_paths(data_path, index_dir), *(_sidecars(index_path) if index_path else ())]
            for path, what in kept:
                self._add(path, f"{what} of the input {data_path}")
        self._inodes = {ino: path for path in self.protected if (ino := _identity(path)) is not None}

    def _add(self, path: str, what: str) -> None:
        self.protected.setdefault(os.path.realpath(path), what)

    def refusal(self, out: str, option: str, *, force: bool) -> str | None:
        """Why ``option out`` may not be written (one line), or ``None``: it is an input or one of its
        index files, a directory or another file that is not a regular one (``/dev/null``), or an existing
        file without ``--force``."""
        real = os.path.realpath(out)
        ino = _identity(real)
        same = real if real in self.protected else self._inodes.get(ino) if ino else None
        if same is not None:
            return f"refusing to write {option} {out}: it is {self.protected[same]}; choose another name"
        if os.path.isdir(real):
            return f"{option} {out} is a directory; give a file name"
        if os.path.exists(real) and not os.path.isfile(real):  # a device, a FIFO: not replaced by a file
            return f"{option} {out} is not a regular file; give a file name"
        if os.path.lexists(out) and not force:
            return f"{option} {out} exists; pass --force to replace it"
        return None


def json_line(record: Any, element: bytes) -> bytes:
    """One record of a JSON document (``element``: its bytes, maybe pretty-printed across lines) as one
    line of compact JSON that ``json.loads`` reads back as ``record``.

    orjson cannot write some records exactly: integers beyond 64 bits and lone surrogates it refuses,
    an infinite float (``1e400``) it writes as ``null``. Those keep their own bytes with the line breaks
    taken out (inside a JSON string a line break is always escaped, so each one is whitespace).

    Example:
        >>> json_line({"a": [1, 2]}, b'{\\n  "a": [1,\\n 2]\\n}')
        b'{"a":[1,2]}'
        >>> json_line({"big": 2**70}, b'{"big":\\n 1180591620717411303424}')
        b'{"big": 1180591620717411303424}'
    """
    try:
        line = orjson.dumps(record)
    except orjson.JSONEncodeError:
        return element.replace(b"\r", b"").replace(b"\n", b"")
    if b"null" in line and loads(line) != record:
        return element.replace(b"\r", b"").replace(b"\n", b"")
    return line


def record_line(ds: Any, i: int, record: Any) -> bytes:
    """Record ``i`` of ``ds`` (``record``, as read) as a line of JSON Lines: a JSON Lines record keeps its
    bytes exactly, a JSON document's element is written as :func:`json_line`."""
    f, j = ds._file_record(i)
    raw = f.raw(j)
    return (json_line(record, raw) if f.layout else raw) + b"\n"


def write_matching(
    ds: Any, match: Callable[[Any], bool], out: str, *, replace: bool, progress: bool | None
) -> int:
    """Write the records of ``ds`` that ``match`` to ``out``, each as :func:`record_line`, atomically (a
    failure or Ctrl-C leaves ``out`` as it was; ``replace=False``: never over an existing file); return
    how many."""
    bar = Progress(ds.file_bytes, "filtering", progress)
    step = max(1, ds.file_bytes // max(1, len(ds))) * 4096
    documents = any(f.layout for f in ds._files)  # else every record is a line: its bytes, as they are
    matched = 0
    try:
        with output_file(out, "-o", replace=replace) as f:
            for i, record in enumerate(ds):
                if bar.update and i % 4096 == 4095:
                    bar.update(step)
                if match(record):
                    f.write(record_line(ds, i, record) if documents else ds.raw(i) + b"\n")
                    matched += 1
    finally:
        bar.close()
    return matched


@contextlib.contextmanager
def output_file(out: str, option: str, *, replace: bool) -> Iterator[IO[bytes]]:
    """:func:`~sjsonl.storage.atomic.atomic_output` for ``out`` (through its symlinks: a link stays a link);
    a failure to write it (a full disk, a file size limit) raises an :class:`~sjsonl.errors.SJSONLError`
    that names ``option out``.

    Example:
        >>> import tempfile
        >>> with output_file(os.path.join(tempfile.mkdtemp(), "x", "out.jsonl"), "-o", replace=False):
        ...     pass  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        sjsonl.errors.SJSONLError: cannot write -o .../x/out.jsonl: No such file or directory
    """
    writing = False
    try:
        with atomic_output(os.path.realpath(out), replace=replace) as f:
            writing = True
            yield f
            writing = False
    except OSError as exc:
        if writing and exc.filename is not None:
            raise  # an input's read error, raised inside the block: not about the output
        raise SJSONLError(f"cannot write {option} {out}: {exc.strerror or exc}") from None
