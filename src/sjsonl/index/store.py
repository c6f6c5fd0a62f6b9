"""Index files on disk: where they live, how they are written, and how a reader knows it may use one.

The index of ``data.jsonl`` is ``data.index.npy`` beside it: ONE file that ``np.load`` reads as a plain
1-D array of record start offsets, followed by a trailer ``np.load`` ignores — the metadata (the data's
size, mtime and head/tail fingerprint, the record count, the dtype, a CRC-32 of the offsets) as JSON, its
length and a magic tag. Offsets and metadata are one unit, written with one atomic ``os.replace``: a reader
can never pair offsets of one version with metadata of another. (The index of a file that only grew is
extended in place instead, :mod:`sjsonl.index.append`: the new offsets, then the trailer, then the header,
so a reader that opens it part way through finds counts and a CRC-32 that disagree, and rebuilds.)

A reader verifies before use (:func:`read_index`): the trailer parses; the array header is a 1-D
little-endian unsigned array of exactly the recorded length, and header + array + trailer is exactly the
file's size (an empty, truncated or padded file fails); the CRC-32 matches; offsets strictly increase and
stay inside the data. Anything else is an :class:`~sjsonl.errors.IndexFileError` that names the index file
— the layer above rebuilds it. The O(records) part (CRC and order, ~3 ms per million records) runs once per
index file per process: a file with the same identity (device, inode, size, mtime, ctime) is not checked
again.

Where: beside the data by default; in ``index_dir=`` / ``$SJSONL_INDEX_DIR`` when given; in the private
cache directory (``~/.cache/sjsonl/index``, mode 0700) when the data's directory is read-only or other
users can write there (see :mod:`.trust`), under a name keyed by the data file's absolute path. A remote
file's index always lives in the cache, keyed by its URL: sjsonl never writes to remote storage.

A compact index (:mod:`.packed`, ``data.index.packed``, about 1–1.6 bytes a record) may stand in
the plain one's place, with the same trailer, guarantees and checks; :func:`read_index` reads either.

Compressed files keep their whole name: ``data.jsonl.gz`` → ``data.jsonl.gz.index.npy``, so it never
shares an index name with a ``data.jsonl`` beside it. A gzip file's seek points go beside its index as
``data.jsonl.gz.index.seekpoints``.

Example:
    >>> default_index_path("/data/train.jsonl"), default_index_path("/data/train.jsonl.gz")
    ('/data/train.index.npy', '/data/train.jsonl.gz.index.npy')

Any file name maps to an index name that fits (see :func:`default_index_path`: a name too long to take
the suffixes is cut and hashed) and that no other data file's maps to. Artifacts are told from data by
their bytes, not their names (:func:`is_index_artifact`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import struct
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from sjsonl.errors import IndexFileError, IndexNotSavedWarning, InvalidArgumentError, SJSONLError, one_line
from sjsonl.storage import DataStamp, is_url, map_readonly
from sjsonl.storage.atomic import _atomic_write, _temp_tag  # noqa: F401  (_temp_tag: the tests read temp names)
from sjsonl.storage.local import open_regular_file
from sjsonl.storage.trust import untrusted_reason, warn_untrusted
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
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "sjsonl", "index")


def cache_index_path(data_path: str, index_dir: str) -> str:
    """Index path inside ``index_dir``, keyed by the data file's absolute path (or its URL).

    Example:
        >>> os.path.basename(cache_index_path("/d/t.jsonl", "/tmp/ix"))  # doctest: +ELLIPSIS
        't-....index.npy'
    """
    where = data_path if is_url(data_path) else os.path.abspath(data_path)
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
    place."""
    private = cache_index_path(data_path, default_cache_dir())
    chosen = index_dir_from_env(index_dir)
    if chosen is not None:
        # (the build layer has already refused the data file itself as the place)
        if os.path.exists(chosen) and not os.path.isdir(chosen):
            raise InvalidArgumentError(
                f"the index directory {chosen} (index_dir= or $SJSONL_INDEX_DIR) exists and is not a "
                "directory: name a directory for indexes"
            )
        wanted = [cache_index_path(data_path, chosen)]
    elif is_url(data_path):
        return [private]
    else:
        wanted = [default_index_path(data_path), private]
    out = []
    for path in wanted:
        directory = os.path.dirname(path)
        reason = untrusted_reason(directory)
        if reason is None:
            out.append(path)
        elif path != private:
            warn_untrusted(directory, reason, os.path.dirname(private))
    return out if private in out else [*out, private]


def _fail(path: str, why: str) -> IndexFileError:
    return IndexFileError(f"index file {path} {why}; it will be rebuilt (or delete it)")


#: Index files verified in this process, by identity: the O(records) checks run once per file.
_VERIFIED: set[tuple[int, ...]] = set()


def read_index(index_path: str, *, trust_check: bool = True, verify: bool = True) -> IndexFile:
    """Open, parse and verify an index file — plain ``.npy`` or compact (:mod:`.packed`, told apart by
    the file's first bytes); map its offsets (read-only, O(1) memory). ``verify=False``
    leaves out the O(records) checks (CRC-32, order, bounds) unless this process already made them: the
    caller runs them before the first use of an offset (a dataset of many files checks each on first use).

    Raises ``FileNotFoundError`` when there is none, :class:`UntrustedIndexError` when other users could
    have written it, and :class:`~sjsonl.errors.IndexFileError` naming the file for anything malformed.

    Example:
        >>> import os, tempfile, numpy as np
        >>> from sjsonl.storage import DataStamp
        >>> path = os.path.join(tempfile.mkdtemp(), "d.index.npy")
        >>> offsets = np.array([0, 4], dtype=np.uint8)
        >>> _ = write_index(path, offsets, meta_of(offsets, DataStamp(8, 1, "ab"), "/d.jsonl"))
        >>> found = read_index(path)
        >>> found.offsets.tolist(), found.meta.records, np.load(path).tolist()   # np.load still reads it
        ([0, 4], 2, [0, 4])
        >>> _ = open(path, "r+b").truncate(100)                                  # a torn copy
        >>> read_index(path)
        Traceback (most recent call last):
        ...
        sjsonl.errors.IndexFileError: index file ... is not a complete sjsonl index (no trailer): cut short...
    """
    try:
        fd, st = open_regular_file(index_path)
    except SJSONLError as exc:
        if isinstance(exc, OSError) and exc.errno == errno.ENOENT:
            raise FileNotFoundError(errno.ENOENT, "no index file", index_path) from None
        raise _fail(index_path, f"cannot be used: {exc}") from None
    try:
        if trust_check:
            reason = untrusted_reason(os.path.dirname(index_path), st)
            if reason is not None:
                raise UntrustedIndexError(f"index file {index_path} is not trusted: {reason}")
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        meta, trailer_len = _read_trailer(fd, st.st_size, index_path)
        if os.pread(fd, 8, 0) == PACKED_MAGIC:
            from sjsonl.index.packed import open_packed, verify_packed  # (it imports this module)

            offsets: Any = open_packed(fd, st.st_size, meta, trailer_len, index_path)
            check: Callable[[Any, IndexMeta, str], None] = verify_packed
        else:
            header_len = _read_npy_header(fd, st.st_size, meta, index_path)
            mm = map_readonly(fd, st.st_size)  # the array keeps it alive; no fd needed after
            offsets = _offsets_view(mm, meta, header_len, index_path)
            if st.st_size != header_len + offsets.nbytes + trailer_len:
                raise _fail(index_path, "has a size that does not match its header and trailer")
            check = _verify
    finally:
        os.close(fd)
    verified = identity in _VERIFIED
    if verify and not verified:
        check(offsets, meta, index_path)
        _VERIFIED.add(identity)
        verified = True
    return IndexFile(offsets, meta, index_path, identity, verified)


def _read_trailer(fd: int, size: int, path: str) -> tuple[IndexMeta, int]:
    """(metadata, trailer length) from the file's end: the same trailer for either format. Every field is
    checked to be one sjsonl writes, so later steps never meet a value they cannot handle."""
    if size < _TAIL.size:
        raise _fail(path, "is not a complete sjsonl index (no trailer): empty or cut short")
    meta_len, magic = _TAIL.unpack(os.pread(fd, _TAIL.size, size - _TAIL.size))
    if magic != TRAILER_MAGIC:
        raise _fail(path, "is not a complete sjsonl index (no trailer): cut short, or an older format")
    if meta_len > min(_MAX_META, size - _TAIL.size):
        raise _fail(path, "has a trailer of impossible length")
    raw = os.pread(fd, meta_len, size - _TAIL.size - meta_len)
    try:
        meta = IndexMeta.from_json(raw)
    except (ValueError, KeyError, TypeError, RecursionError, AttributeError) as exc:
        raise _fail(path, f"has malformed metadata: {one_line(str(exc))[:200]}") from None
    if meta.version != FORMAT_VERSION:
        raise _fail(path, f"is in another format version ({meta.version})")
    if meta.dtype not in _OFFSET_DTYPES or not 0 <= meta.checksum < 1 << 32:
        raise _fail(path, "has malformed metadata (offset type or checksum)")
    return meta, meta_len + _TAIL.size


#: The offset types an index holds (what sjsonl.index.scan.offset_dtype chooses).
_OFFSET_DTYPES = ("uint8", "uint16", "uint32", "uint64")
#: The only array header sjsonl writes (np.save of a 1-D little-endian unsigned array): matched exactly,
#: not evaluated, so a damaged one is refused as such (numpy's own parser raises whatever it meets).
_NPY_HEADER = re.compile(
    rb"\{'descr': '(<u[248]|\|u1)', 'fortran_order': False, 'shape': \(([1-9][0-9]*|0),\), \} *\n"
)


def _read_npy_header(fd: int, size: int, meta: IndexMeta, path: str) -> int:
    """The length of a plain index's ``.npy`` header, checked against its metadata."""
    head = os.pread(fd, min(size, 65536 + 16), 0)
    version = head[6:8]
    if not head.startswith(b"\x93NUMPY") or version not in (b"\x01\x00", b"\x02\x00", b"\x03\x00"):
        raise _fail(path, "has no valid .npy header")
    start = 10 if version == b"\x01\x00" else 12
    if len(head) < start:
        raise _fail(path, "has no valid .npy header (cut short)")
    end = start + int.from_bytes(head[8:start], "little")
    found = _NPY_HEADER.fullmatch(head[start:end]) if end <= len(head) and end % 16 == 0 else None
    if found is None:
        raise _fail(path, "has no valid .npy header (not the one sjsonl writes)")
    descr, shape = found.groups()
    if int(shape) != meta.records or np.dtype(descr.decode()) != np.dtype(meta.dtype):
        raise _fail(path, "does not match its metadata (shape or dtype)")
    return end


def _offsets_view(mm: Any, meta: IndexMeta, header_len: int, path: str) -> np.ndarray:
    dtype = np.dtype(meta.dtype)  # one of _OFFSET_DTYPES (checked with the trailer)
    if len(mm) < header_len + meta.records * dtype.itemsize:
        raise _fail(path, "is shorter than its header says")
    # a plain ndarray over the map (np.memmap's Python-level __getitem__ is slow on the hot path)
    return np.frombuffer(mm, dtype=dtype, count=meta.records, offset=header_len)


def _verify(offsets: np.ndarray, meta: IndexMeta, path: str) -> None:
    """The O(records) checks: the CRC-32 of the offsets, strict order, and bounds in the data."""
    # ndarray.data is memoryview(offsets); numpy's stubs type ndarray as a Buffer only on Python >= 3.12
    if zlib.crc32(offsets.data.cast("B")) != meta.checksum:
        raise _fail(path, "is corrupt (its checksum does not match)")
    if len(offsets) > 1 and not bool(np.all(offsets[1:] > offsets[:-1])):
        raise _fail(path, "is corrupt (offsets do not increase)")
    if len(offsets) and meta.stamp.size >= 0 and int(offsets[-1]) >= meta.stamp.size:
        raise _fail(path, "points past the end of its data")


def meta_of(
    offsets: np.ndarray,
    stamp: DataStamp,
    data_path: str,
    layout: str = "",
    *,
    crc_of: tuple[int, int] = (0, 0),
) -> IndexMeta:
    """The metadata to write with ``offsets`` (record count, dtype, CRC-32) for data ``stamp``; ``layout``
    says what they start ("": lines; see :mod:`sjsonl.index.elements`). ``crc_of=(k, crc)``: ``crc`` is
    already the CRC-32 of the first ``k`` offsets (an extended index), so only the rest is hashed."""
    known, checksum = crc_of
    checksum = zlib.crc32(np.ascontiguousarray(offsets[known:]).data.cast("B"), checksum)
    return IndexMeta(stamp, len(offsets), str(offsets.dtype), data_path, checksum, layout=layout)


def write_index(index_path: str, offsets: np.ndarray, meta: IndexMeta, *, compact: bool = False) -> str:
    """Write ``offsets`` and ``meta`` as one index file, atomically. Returns ``index_path``.

    ``compact``: in the compact format (:func:`~sjsonl.index.packed.write_packed_index`), not ``.npy``.
    A format-1 metadata file beside it (``*.index.meta.json``, which other tools took for data) is
    removed."""
    if compact:
        from sjsonl.index.packed import write_packed_index  # (it imports this module)

        return write_packed_index(index_path, offsets, meta)
    directory = os.path.dirname(index_path) or "."
    os.makedirs(directory, exist_ok=True)
    blob = meta.to_json()

    def write(f: IO[bytes]) -> None:
        np.save(f, np.ascontiguousarray(offsets), allow_pickle=False)
        f.write(blob)
        f.write(_TAIL.pack(len(blob), TRAILER_MAGIC))

    _atomic_write(index_path, write)
    legacy = (index_path[:-4] if index_path.endswith(".npy") else index_path) + LEGACY_META_SUFFIX
    with contextlib.suppress(OSError):
        os.unlink(legacy)
    return index_path


#: Errors that say "not here" (read-only, a full disk or quota, a file size limit): the next place is tried.
_CANNOT_WRITE = (errno.EPERM, errno.EACCES, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def write_index_somewhere(
    data_path: str, offsets: np.ndarray, meta: IndexMeta, index_dir: str | None, *, compact: bool = False
) -> str:
    """Write to the first trusted place that takes it (see :func:`candidate_index_paths`); the private
    cache, created with mode 0700, is the last resort. ``compact``: as ``<stem>.index.packed``; the
    index in the other format at the same place, if any, is removed (one index per place)."""
    from sjsonl.index.packed import packed_index_path  # packed imports this module

    places = candidate_index_paths(data_path, index_dir)
    for k, path in enumerate(places):
        other = packed_index_path(path)
        target, other = (other, path) if compact else (path, other)
        try:
            if path == places[-1]:
                os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            written = write_index(target, offsets, meta, compact=compact)
            with contextlib.suppress(OSError):
                os.unlink(other)
            return written
        except OSError as exc:
            if exc.errno not in _CANNOT_WRITE or k == len(places) - 1:
                raise
    raise AssertionError("unreachable")


def warn_not_saved(data_path: str, exc: OSError) -> None:
    """Say (once per data file and process) that its index is kept in memory only, and why."""
    if data_path in _NOT_SAVED:
        return
    _NOT_SAVED.add(data_path)
    why = one_line(exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
    where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
    warnings.warn(
        f"could not save the index of {data_path}: {why}{where}; it is kept in memory for this process",
        IndexNotSavedWarning,
        stacklevel=5,
    )


_NOT_SAVED: set[str] = set()


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
