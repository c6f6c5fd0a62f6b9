"""What an index file is and where it lives: its format's constants and magic numbers, the metadata its
trailer records (:class:`IndexMeta`), and the names of index files and of the artifacts beside them.

:mod:`sjsonl.index.store` reads and writes index files by these rules; :mod:`sjsonl.index.packed` (the compact
format) shares them, so neither imports the other's half.

Example:
    >>> default_index_path("/data/train.jsonl"), default_index_path("/data/train.jsonl.gz")
    ('/data/train.index.npy', '/data/train.jsonl.gz.index.npy')
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sjsonl.errors import IndexFileError, InvalidArgumentError
from sjsonl.storage import DataStamp, is_url, resolve_path
from sjsonl.storage.atomic import _atomic_write, _temp_tag  # noqa: F401  (_temp_tag: the tests read temp names)
from sjsonl.storage.trust import private_cache_root, untrusted_reason, warn_untrusted
from sjsonl.storage.zip import MEMBER_SEP, split_member

FORMAT_VERSION = 2
INDEX_SUFFIX = ".index.npy"
LEGACY_META_SUFFIX = ".meta.json"  # format 1 kept metadata in a second file; never trusted now
SEEK_STATE_SUFFIX = ".seekpoints"
TRAILER_MAGIC = b"SJSONLix"
PACKED_MAGIC = b"SJSONLpk"  # the first bytes of a compact index (sjsonl.index.packed)
_TAIL = struct.Struct("<Q8s")  # metadata length, magic
_MAX_META = 1 << 20


class UntrustedIndexError(IndexFileError):
    """An index file in a place other users can write (or owned by another user): not read."""


def is_index_artifact(path: str | os.PathLike[str]) -> bool:
    """Whether the file at ``path`` is one sjsonl wrote (an index, a compact index, a sidecar, seek
    points, or the temp file of an atomic write) — told by its bytes, never by its name, so a data file
    is never skipped for being named like one (``search.index.meta.jsonl``).

    sjsonl's artifacts start with ``SJSONL`` (a compact index, the sidecars) or ``sjsonl-`` (seek points),
    or are a ``.npy`` file ending with the index trailer's magic; JSON text starts with none of these.
    Two more: a ``*.tmp`` file that is empty or a ``.npy`` still being written (an atomic write under
    way or killed: it holds no records either way), and two kinds written before artifacts had magic
    numbers: a format-1 ``*.index.meta.json`` and a sidecar (one JSON object, ``{"key": {"version": …},
    "value": …}``, :mod:`sjsonl.storage.sidecar`). Anything unreadable is not an artifact (reading it as data
    says what is wrong).

    Example:
        >>> import os, tempfile, numpy as np
        >>> from sjsonl.index.store import meta_of, write_index
        >>> d = tempfile.mkdtemp()
        >>> data = os.path.join(d, "search.index.meta.jsonl")
        >>> _ = open(data, "w").write('{"q": 1}\\n')
        >>> _ = write_index(os.path.join(d, "search.index.npy"), np.array([0], np.uint8),
        ...                 meta_of(np.array([0], np.uint8), DataStamp(9, 1, "ab"), data))
        >>> is_index_artifact(data), is_index_artifact(os.path.join(d, "search.index.npy"))
        (False, True)
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO: never wait on it
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        head = os.pread(fd, 8, 0)
        if head.startswith((b"SJSONL", b"sjsonl-")):
            return True
        name = os.fsdecode(os.path.basename(path))
        if head.startswith(b"\x93NUMPY"):
            tail = os.pread(fd, _TAIL.size, st.st_size - _TAIL.size) if st.st_size >= 16 else b""
            return tail[-8:] == TRAILER_MAGIC or name.endswith(".tmp")
        if not head:
            return name.endswith(".tmp")
        if os.pread(fd, len(_OLD_SIDECAR), 0) == _OLD_SIDECAR:
            return _is_json_object_with(fd, st.st_size, {"key", "value"}, exactly=True)
        legacy = name.endswith(".index" + LEGACY_META_SUFFIX)
        return legacy and _is_json_object_with(fd, st.st_size, {"stamp", "records", "dtype", "data_path"})
    except OSError:
        return False
    finally:
        os.close(fd)


_OLD_SIDECAR = b'{"key":{"version":'  # how sidecars began before they had a magic number


def _is_json_object_with(fd: int, size: int, keys: set[str], exactly: bool = False) -> bool:
    """Whether the open file is one JSON object with ``keys`` (or ``exactly`` those)."""
    if size > 64 * _MAX_META:
        return False
    try:
        found = json.loads(os.pread(fd, size, 0))
    except (ValueError, RecursionError):
        return False
    return isinstance(found, dict) and (found.keys() == keys if exactly else keys <= found.keys())


_DATA_SUFFIXES = (".jsonl", ".json", ".ndjson", ".jl")


@dataclass(frozen=True)
class IndexMeta:
    """What the trailer of an index file records about the offsets and the data they index."""

    stamp: DataStamp
    records: int
    dtype: str
    data_path: str
    checksum: int = 0  # CRC-32 of the offsets' bytes
    version: int = FORMAT_VERSION
    layout: str = ""  # what the offsets start: "" lines; elements of a JSON document (index.elements)

    def to_json(self) -> bytes:
        d = {
            "stamp": self.stamp.to_dict(),
            "records": self.records,
            "dtype": self.dtype,
            "data_path": self.data_path,
            "checksum": self.checksum,
            "version": self.version,
        }
        if self.layout:  # left out for JSON Lines: their trailers read as before
            d["layout"] = self.layout
        return json.dumps(d, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> IndexMeta:
        d = json.loads(raw)
        meta = cls(
            stamp=DataStamp(**d["stamp"]),
            records=int(d["records"]),
            dtype=str(d["dtype"]),
            data_path=str(d["data_path"]),
            checksum=int(d["checksum"]),
            version=int(d["version"]),
            layout=str(d.get("layout", "")),
        )
        if meta.records < 0 or not isinstance(meta.stamp.size, int):
            raise ValueError("negative record count or a size that is not an integer")
        return meta


@dataclass
class IndexFile:
    """An index file: its offsets (read-only, mapped: a numpy array, or for a compact index a
    :class:`~sjsonl.index.packed.PackedOffsets`), its metadata and its identity; ``verified`` unless
    read with ``verify=False`` (its O(records) checks still to run)."""

    offsets: Any
    meta: IndexMeta
    path: str
    identity: tuple[int, ...]
    verified: bool = True


def artifact_path(index_path: str, suffix: str) -> str:
    """The name of an artifact that goes with the index ``index_path`` (either format's: ``.npy`` or the
    compact ``.packed``, which record the same CRC-32, which binds them): its ``.npy``/``.packed``
    replaced by ``suffix``. Every such name fits (see :data:`_NAME_ROOM`).

    Example:
        >>> artifact_path("/d/t.index.npy", ".schema"), artifact_path("/d/t.index.packed", ".schema")
        ('/d/t.index.schema', '/d/t.index.schema')
    """
    for end in (".npy", ".packed"):
        if index_path.endswith(end):
            return index_path[: -len(end)] + suffix
    return index_path + suffix


def seek_state_path(index_path: str) -> str:
    """Where a storage's seek state (gzip seek points) lives beside the index ``index_path``.

    Example:
        >>> seek_state_path("/data/train.jsonl.gz.index.npy")
        '/data/train.jsonl.gz.index.seekpoints'
    """
    return artifact_path(index_path, SEEK_STATE_SUFFIX)


def _stem(data_path: str, name: str | None = None) -> str:
    """The file name (or ``name``) without its data suffix: ``d/t.jsonl`` → ``t``."""
    name = os.path.basename(data_path) if name is None else name
    for suffix in _DATA_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


#: Bytes of a file name (NAME_MAX on Linux and macOS file systems).
NAME_MAX = 255
#: What sjsonl may append to an index name's stem: ``.index`` + the longest artifact suffix
#: (``.seekpoints``) + an atomic write's temp suffix (``.<host 8>-<pid ≤ 7>.<random 8>.tmp``, atomic.py).
_NAME_ROOM = len(".index.seekpoints") + 30
#: A stem up to this many bytes is kept readable; a longer one becomes ``<its first bytes>-<hash>``, which
#: is longer than this and at most ``NAME_MAX - _NAME_ROOM``: the two kinds of names never meet.
_READABLE_STEM = 190


def _fit_stem(stem: str, key: str | None = None) -> str:
    """``stem`` as the stem of an index file name: itself when it fits, else its first bytes and a hash of
    it (or ``key``, when given: a hash already, appended whatever the length)."""
    raw = os.fsencode(stem)  # any bytes a file name can hold survive (surrogateescape both ways)
    if key is None and len(raw) <= _READABLE_STEM:
        return stem
    tag = key or hashlib.sha256(raw).hexdigest()[:16]
    cut = raw[:_READABLE_STEM]
    try:
        cut.decode()
    except UnicodeDecodeError as exc:  # don't end inside a UTF-8 character
        if exc.reason == "unexpected end of data":
            cut = cut[: exc.start]
    return f"{os.fsdecode(cut)}-{tag}"


def _member_stem(archive: str, member: str) -> str:
    # "archive.zip::member", "%", "/" and ":" of the member percent-encoded: distinct members (and distinct
    # archives: their names hold no ".zip::", or they could not be named) never share a name
    encoded = member.replace("%", "%25").replace("/", "%2F").replace(":", "%3A")
    return f"{os.path.basename(archive)}{MEMBER_SEP}{encoded}"


def default_index_path(data_path: str) -> str:
    """``<dir>/<stem>.index.npy`` beside the data file (``data.jsonl`` → ``data.index.npy``); a zip
    member's beside its archive, under the member's whole name with ``%``, ``/`` and ``:``
    percent-encoded (``d/a.zip::x/t.jsonl`` → ``d/a.zip::x%2Ft.jsonl.index.npy``). A stem too long for
    every name sjsonl derives from it to fit in :data:`NAME_MAX` bytes is cut, with a hash of the whole
    name (``<first bytes>-<16 hex>``).

    Example:
        >>> default_index_path("/d/a.zip::x/t.jsonl"), default_index_path("/d/t.json")
        ('/d/a.zip::x%2Ft.jsonl.index.npy', '/d/t.index.npy')
        >>> len(os.path.basename(default_index_path("/d/" + "x" * 249 + ".jsonl")))
        217
    """
    archive, member = split_member(data_path)
    if member is not None:
        return os.path.join(os.path.dirname(archive), _fit_stem(_member_stem(archive, member)) + INDEX_SUFFIX)
    return os.path.join(os.path.dirname(data_path), _fit_stem(_stem(data_path)) + INDEX_SUFFIX)


def default_cache_dir() -> str:
    """The private index cache: ``$XDG_CACHE_HOME/sjsonl/index`` (or ``~/.cache/sjsonl/index``)."""
    return os.path.join(private_cache_root(), "index")


def cache_index_path(data_path: str, index_dir: str) -> str:
    """Index path inside ``index_dir``, keyed by the data file's absolute path (or its URL).

    Example:
        >>> os.path.basename(cache_index_path("/d/t.jsonl", "/tmp/ix"))  # doctest: +ELLIPSIS
        't-....index.npy'
    """
    where = data_path if is_url(data_path) else resolve_path(data_path)  # a member's name kept as it is
    key = hashlib.sha256(os.fsencode(where)).hexdigest()[:16]
    archive, member = split_member(data_path)
    stem = _stem(data_path) if member is None else _member_stem(archive, member)
    directory = os.path.abspath(os.path.expanduser(index_dir))
    return os.path.join(directory, _fit_stem(stem, key) + INDEX_SUFFIX)


def index_dir_from_env(index_dir: str | os.PathLike[str] | None) -> str | None:
    """``index_dir`` or ``$SJSONL_INDEX_DIR``, as an absolute path (a pickled copy used from another
    working directory must find the same place)."""
    chosen = os.fspath(index_dir) if index_dir is not None else os.environ.get("SJSONL_INDEX_DIR") or None
    if chosen is None:
        return None
    return os.path.abspath(os.path.expanduser(chosen))


def candidate_index_paths(data_path: str, index_dir: str | None = None) -> list[str]:
    """Where the index of ``data_path`` may be read from and written to, in order of preference.

    Places other users can write are left out (with a warning, once), the private cache taking their
    place.

    Example:
        >>> candidate_index_paths("/d/t.jsonl")[0]
        '/d/t.index.npy'
    """
    return list(iter_candidate_index_paths(data_path, index_dir))


def iter_candidate_index_paths(data_path: str, index_dir: str | None = None) -> Iterator[str]:
    """:func:`candidate_index_paths` one by one: the private cache's path (a hash of the data's path) is
    made only if the places before it are passed over — a lookup that finds the index beside the data
    skips it, which is a tenth of a fresh process's first open."""
    chosen = index_dir_from_env(index_dir)
    if chosen is not None:
        # (the build layer has already refused the data file itself as the place)
        if os.path.exists(chosen) and not os.path.isdir(chosen):
            raise InvalidArgumentError(
                f"the index directory {chosen} (index_dir= or $SJSONL_INDEX_DIR) exists and is not a "
                "directory: name a directory for indexes"
            )
        wanted = cache_index_path(data_path, chosen)
    elif is_url(data_path):
        yield cache_index_path(data_path, default_cache_dir())
        return
    else:
        wanted = default_index_path(data_path)
    directory = os.path.dirname(wanted)
    reason = untrusted_reason(directory)
    if reason is None:
        yield wanted
    else:
        warn_untrusted(directory, reason, default_cache_dir())
    private = cache_index_path(data_path, default_cache_dir())
    if private != wanted:
        yield private  # always the last place, whatever its mode


def _fail(path: str, why: str) -> IndexFileError:
    return IndexFileError(f"index file {path} {why}; it will be rebuilt (or delete it)")


@dataclass
class LoadedIndex:
    offsets: Any  # a numpy array, or a compact index's PackedOffsets (sjsonl.index.packed)
    stamp: DataStamp
    path: str | None  # where it lives on disk (None: in memory only)
    checksum: int = 0  # CRC-32 of the offsets, as recorded in the index file
    layout: str = ""  # what the offsets start ("": lines; else elements of a JSON document)
    origin: str = "found"  # "found" on disk, "extended" after an append, or "built" now
    verified: bool = True  # False: read with find_index(defer_verify=True), checks still to run
    alongside: Any = None  # the observer that saw each chunk of a fresh scan (sjsonl.index.alongside)

    @property
    def compact(self) -> bool:
        """Whether the offsets come from a compact index file (:mod:`sjsonl.index.packed`)."""
        return bool(getattr(self.offsets, "is_compact", False))
