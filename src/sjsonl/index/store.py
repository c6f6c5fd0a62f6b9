"""Index files on disk: where they live, how they are written, and whether they still match their data.

The index of ``data.jsonl`` is ``data.index.npy`` beside it — a plain 1-D array of record start offsets
that ``np.load`` reads — plus ``data.index.meta.json`` describing the data it was built from (size,
mtime, a fingerprint of the head and tail bytes, record count). Both are written atomically (temp file
in the same directory, then ``os.replace``), index first, so a reader sees the old pair, the new pair, or
a pair whose metadata does not match and is therefore treated as stale — never a torn array.

When the data's directory is not writable, or ``index_dir=`` / ``$SJSONL_INDEX_DIR`` is given, the index
goes to a cache directory under a name keyed by the data file's absolute path. The index of a remote file
(a URL) always lives in the cache directory, keyed by the URL: sjsonl never writes to remote storage.

Compressed files keep their whole name: ``data.jsonl.gz`` → ``data.jsonl.gz.index.npy``, so it never
shares an index name with a ``data.jsonl`` beside it (the two would evict each other's index on every
open). A gzip file's seek points go beside its index as ``data.jsonl.gz.index.seekpoints``.

Example:
    >>> default_index_path("/data/train.jsonl"), default_index_path("/data/train.jsonl.gz")
    ('/data/train.index.npy', '/data/train.jsonl.gz.index.npy')
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from ..errors import IndexFileError
from ..storage import DataStamp, is_url

FORMAT_VERSION = 1
INDEX_SUFFIX = ".index.npy"
META_SUFFIX = ".meta.json"
SEEK_STATE_SUFFIX = ".seekpoints"


def is_index_artifact(name: str) -> bool:
    """Whether a file name is one sjsonl writes beside data (an index, its metadata, seek points, or a
    temp file of an atomic write) — never data itself, whatever its extension says.

    Example:
        >>> [is_index_artifact(n) for n in ("train.index.npy", "train.index.meta.json", "train.jsonl")]
        [True, True, False]
    """
    base = name[:-4] if name.endswith(".tmp") else name  # temp files: "<final name>.<random>.tmp"
    return ".index." in base and base.rsplit(".index.", 1)[1].split(".")[0] in ("npy", "meta", "seekpoints", "schema")


_DATA_SUFFIXES = (".jsonl", ".json", ".ndjson", ".jl")


@dataclass(frozen=True)
class IndexMeta:
    stamp: DataStamp
    records: int
    dtype: str
    data_path: str
    version: int = FORMAT_VERSION

    def to_json(self) -> bytes:
        d = {
            "stamp": self.stamp.to_dict(),
            "records": self.records,
            "dtype": self.dtype,
            "data_path": self.data_path,
            "version": self.version,
        }
        return json.dumps(d, indent=1).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> IndexMeta:
        d = json.loads(raw)
        return cls(
            stamp=DataStamp(**d["stamp"]),
            records=int(d["records"]),
            dtype=str(d["dtype"]),
            data_path=str(d["data_path"]),
            version=int(d["version"]),
        )


def meta_path_for(index_path: str) -> str:
    base = index_path[:-4] if index_path.endswith(".npy") else index_path
    return base + META_SUFFIX


def seek_state_path(index_path: str) -> str:
    """Where a storage's seek state (gzip seek points) lives beside the index ``index_path``.

    Example:
        >>> seek_state_path("/data/train.jsonl.gz.index.npy")
        '/data/train.jsonl.gz.index.seekpoints'
    """
    base = index_path[:-4] if index_path.endswith(".npy") else index_path
    return base + SEEK_STATE_SUFFIX


def _stem(data_path: str) -> str:
    name = os.path.basename(data_path)
    for suffix in _DATA_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def default_index_path(data_path: str) -> str:
    """``<dir>/<stem>.index.npy`` beside the data file (``data.jsonl`` → ``data.index.npy``)."""
    return os.path.join(os.path.dirname(data_path), _stem(data_path) + INDEX_SUFFIX)


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sjsonl", "index")


def cache_index_path(data_path: str, index_dir: str) -> str:
    """Index path inside ``index_dir``, keyed by the data file's absolute path (or its URL)."""
    where = data_path if is_url(data_path) else os.path.abspath(data_path)
    key = hashlib.sha256(where.encode()).hexdigest()[:16]
    return os.path.join(os.path.expanduser(index_dir), f"{_stem(data_path)}-{key}{INDEX_SUFFIX}")


def index_dir_from_env(index_dir: str | os.PathLike[str] | None) -> str | None:
    if index_dir is not None:
        return os.fspath(index_dir)
    return os.environ.get("SJSONL_INDEX_DIR") or None


def candidate_index_paths(data_path: str, index_dir: str | None = None) -> list[str]:
    """Where to look for an existing index, in order."""
    chosen = index_dir_from_env(index_dir)
    if chosen is not None:
        return [cache_index_path(data_path, chosen)]
    if is_url(data_path):
        return [cache_index_path(data_path, default_cache_dir())]
    return [default_index_path(data_path), cache_index_path(data_path, default_cache_dir())]


def read_meta(index_path: str) -> IndexMeta | None:
    try:
        with open(meta_path_for(index_path), "rb") as f:
            return IndexMeta.from_json(f.read())
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise IndexFileError(f"malformed index metadata {meta_path_for(index_path)}: {exc}") from None


def load_offsets(index_path: str, meta: IndexMeta) -> np.ndarray:
    """Memory-map the offsets array (O(1) open) and check it agrees with its metadata."""
    try:
        arr = np.load(index_path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise
    except (ValueError, OSError) as exc:
        raise IndexFileError(f"unreadable index file {index_path}: {exc}") from None
    if arr.ndim != 1 or arr.dtype.kind != "u" or len(arr) != meta.records or str(arr.dtype) != meta.dtype:
        raise IndexFileError(f"index file {index_path} does not match its metadata")
    if len(arr) and int(arr[-1]) >= meta.stamp.size:
        raise IndexFileError(f"index file {index_path} points past the end of its data")
    return arr.view(np.ndarray)  # a plain ndarray view: np.memmap's Python __getitem__ is slow


def _atomic_write(path: str, write) -> None:
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_index(index_path: str, offsets: np.ndarray, meta: IndexMeta) -> str:
    """Write ``offsets`` then its metadata, each atomically. Returns ``index_path``."""
    os.makedirs(os.path.dirname(index_path) or ".", exist_ok=True)
    _atomic_write(index_path, lambda f: np.save(f, np.ascontiguousarray(offsets), allow_pickle=False))
    _atomic_write(meta_path_for(index_path), lambda f: f.write(meta.to_json()))
    return index_path


def write_index_somewhere(data_path: str, offsets: np.ndarray, meta: IndexMeta, index_dir: str | None) -> str:
    """Write beside the data if possible (unless an index dir is chosen), else into the cache directory."""
    chosen = index_dir_from_env(index_dir)
    if chosen is not None:
        return write_index(cache_index_path(data_path, chosen), offsets, meta)
    if is_url(data_path):
        return write_index(cache_index_path(data_path, default_cache_dir()), offsets, meta)
    try:
        return write_index(default_index_path(data_path), offsets, meta)
    except (PermissionError, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno not in (1, 13, 30):  # EPERM, EACCES, EROFS
            raise
        return write_index(cache_index_path(data_path, default_cache_dir()), offsets, meta)


def write_seek_state(path: str, blob: bytes) -> str:
    """Write a storage's seek state atomically (see :func:`seek_state_path`). Returns ``path``.

    Example:
        >>> import os, tempfile
        >>> path = write_seek_state(os.path.join(tempfile.mkdtemp(), "d.index.seekpoints"), b"points")
        >>> open(path, "rb").read()
        b'points'
    """
    _atomic_write(path, lambda f: f.write(blob))
    return path
