"""Members of a ``.zip`` archive read in place: ``train.zip`` is its data members, each a file of its own
(named ``train.zip::member``), as 🤗 reads the files an archive holds: every member but folders, hidden
files (a name part starting with ``.``, other than ``.`` and ``..``) and ``__MACOSX/`` and other
``__special__`` parts, which 🤗 skips too. Names are never paths here — nothing is extracted, and an index
name percent-encodes the member's ``/`` — so a member named ``../../x.jsonl``, ``/x.jsonl`` or
``a\\..\\x.jsonl`` is read like any other, by that name.

A *stored* member is a byte range of the archive: random access costs what a plain file's does. A
*deflated* member is decompressed once front to back — the index scan does it — leaving restart points
every :data:`ZIP_SPACING` decompressed bytes (a copy of zlib's state, with its 32 KiB window), so a read
decompresses from the nearest point before it. The points live in memory: a forked worker inherits them,
a spawned one (a pickled copy) makes them again with one pass on its first read. Other methods (bzip2,
lzma inside a zip) and encrypted members are refused, saying so, with a recipe.

Checked as ``unzip`` checks: every pass over a whole member — the index build's, a spawned worker's first
— verifies its CRC-32 against the archive's directory (a mismatch is a
:class:`~sjsonl.errors.DataFileError` naming ``archive::member``), and each member's local header must
agree with the directory. Two members under one name are refused — the archive's data members, and a
member opened by that name — rather than read as one of them (``unzip`` would keep the last, and 🤗
reads the same bytes twice): re-create the archive with distinct names. Every other member stays
readable by its name. Member index names keep the whole member name (``a.zip::x%2Ft.jsonl.index.npy``,
:func:`~sjsonl.index.layout.default_index_path`), so no two members share an index, however they are named.

Every member is pinned to the archive's version: any change to the ``.zip`` makes each member's index
stale, and an open dataset refuses the new bytes.

Example:
    >>> import os, tempfile, zipfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.zip")
    >>> with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
    ...     z.writestr("a.jsonl", '{"a": 1}\\n{"a": 2}\\n')
    ...     z.writestr("__MACOSX/._a.jsonl", "junk")
    >>> members = zip_members(path)
    >>> [m.rsplit("/", 1)[-1] for m in members]
    ['d.zip::a.jsonl']
    >>> ZipMemberFile(LocalFile(path), "a.jsonl").read(9, 17)
    b'{"a": 2}'
"""

from __future__ import annotations

import bisect
import errno
import os
import struct
import threading
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from sjsonl.errors import DataFileError, StaleDataError
from sjsonl.storage.base import MEMBER_SEP, is_url, split_member
from sjsonl.storage.formats import HEAD_BYTES, check_format, format_of_name
from sjsonl.storage.local import LocalFile
from sjsonl.storage.seekable import SeekableStreamFile

__all__ = [
    "MEMBER_SEP",
    "ZIP_SPACING",
    "BadCRCError",
    "LocalFile",
    "ZipMemberFile",
    "expand_archives",
    "open_member",
    "split_member",
    "zip_members",
]

#: decompressed bytes between restart points of a deflated member (each keeps ~40 KiB of zlib state)
ZIP_SPACING = 1 << 20
_IN_CHUNK = 64 << 10
_OUT_STEP = 256 << 10  # decompressed bytes per zlib call: points land within this of their place
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # signature .. file name length, extra field length
_METHODS = {
    9: "deflate64",
    12: "bzip2",
    14: "lzma",
    93: "zstd",
    95: "xz",
    97: "WavPack",
    98: "PPMd",
    99: "AES",
}


def _is_data_member(info: zipfile.ZipInfo) -> bool:
    # what 🤗 skips of an archive: folders, hidden files, __MACOSX and other __special__ parts. "", "." and
    # ".." parts hide nothing: a member is read by its whole name, never extracted, so "../../x.jsonl" and
    # "/x.jsonl" are data like any other (🤗 5 drops the first silently, fails on the second and on
    # "a\\..\\x.jsonl")
    parts = [p for p in info.filename.split("/") if p not in ("", ".", "..")]
    return not info.is_dir() and not any(p.startswith((".", "__")) for p in parts)


def _duplicate_error(archive: str, name: str, count: int) -> DataFileError:
    return DataFileError(
        errno.EINVAL,
        f"zip archive {archive} holds {count} members named {name!r}: sjsonl cannot tell them apart (unzip "
        "would keep only the last); re-create the archive with distinct member names",
    )


def zip_members(path: str | os.PathLike[str]) -> list[str]:
    """The data members of the archive at ``path`` as ``archive::member`` paths, in name order; an archive
    with two data members of one name is refused (see the module docstring).

    Example:
        >>> import os, tempfile, zipfile
        >>> path = os.path.join(tempfile.mkdtemp(), "e.zip")
        >>> zipfile.ZipFile(path, "w").close()
        >>> zip_members(path)
        []
    """
    text = os.fspath(path)
    try:
        with zipfile.ZipFile(text) as archive:
            infos = archive.infolist()
    except zipfile.BadZipFile as exc:
        raise DataFileError(errno.EINVAL, f"cannot read zip archive {text}: {exc}") from None
    names = sorted(i.filename for i in infos if _is_data_member(i))
    for name, count in Counter(names).items():
        if count > 1:
            raise _duplicate_error(text, name, count)
    return [f"{text}{MEMBER_SEP}{name}" for name in names]


def open_member(path: str) -> ZipMemberFile:
    """The storage for ``archive.zip::member``; a member whose name or first bytes say it is compressed
    itself is refused (extract it), never read as text.

    Example:
        >>> import os, tempfile, zipfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.zip")
        >>> with zipfile.ZipFile(path, "w") as z:
        ...     z.writestr("t.jsonl.gz", b"\\x1f\\x8b...")
        >>> open_member(path + "::t.jsonl.gz")
        Traceback (most recent call last):
        ...
        sjsonl.errors.DataFileError: ...d.zip::t.jsonl.gz is gzip-compressed inside a zip archive: ...
    """
    archive, member = split_member(path)
    if member is None:
        raise DataFileError(errno.EINVAL, f"{path} names no member of a zip archive (archive.zip::member)")
    nested = format_of_name(member.lower())
    if nested is not None:
        raise DataFileError(
            errno.EINVAL,
            f"{path} is {nested}-compressed inside a zip archive: sjsonl reads one level of compression "
            f"in place; extract it: unzip {archive} {member!r}",
        )
    storage = ZipMemberFile(LocalFile(archive), member)
    check_format(storage.path, member.lower(), storage.read(0, HEAD_BYTES))
    return storage


def expand_archives(paths: Iterable[str | os.PathLike[str]]) -> list[str | os.PathLike[str]]:
    """``paths`` with each local ``.zip`` replaced by its data members (:func:`zip_members`).

    Example:
        >>> expand_archives(["a.jsonl", "s3://b/c.jsonl"])
        ['a.jsonl', 's3://b/c.jsonl']
    """
    out: list[str | os.PathLike[str]] = []
    for p in paths:
        text = os.fspath(p)
        if text.lower().endswith(".zip") and not is_url(text):
            members = zip_members(text)
            if not members:
                raise DataFileError(errno.ENOENT, f"zip archive {text} holds no data files")
            out.extend(members)
        else:
            out.append(p)
    return out


class BadCRCError(ValueError):
    """A member's bytes do not have the CRC-32 its archive records."""


class _StoredMember:
    """An uncompressed member: a window on the archive's file object. Bytes read in order from the start
    are folded into a CRC-32, checked against ``crc`` when they reach the end."""

    def __init__(self, fileobj: Any, start: int, size: int, crc: int) -> None:
        self.fileobj, self.start, self.size, self.pos = fileobj, start, size, 0
        self.expected_crc, self.crc_pos, self.crc = crc, 0, 0

    def _fold(self, at: int, data: bytes) -> None:
        """Fold ``data`` (decompressed offset ``at``) into the running CRC-32 where it continues it."""
        if at <= self.crc_pos < at + len(data):
            self.crc = zlib.crc32(memoryview(data)[self.crc_pos - at :], self.crc)
            self.crc_pos = at + len(data)
            if self.crc_pos >= self.size and self.crc != self.expected_crc:
                raise BadCRCError(
                    f"CRC-32 mismatch: the archive records {self.expected_crc:08x}, the bytes give "
                    f"{self.crc:08x} (a corrupt archive: re-download or re-create it)"
                )

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        self.pos = max(0, offset if whence == os.SEEK_SET else self.size + offset)
        return self.pos

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.pos if n < 0 else min(n, self.size - self.pos)
        if n <= 0:
            return b""
        self.fileobj.seek(self.start + self.pos)
        data = self.fileobj.read(n)
        if len(data) != n:
            raise EOFError(f"the member ends {n - len(data)} bytes early: the archive was cut short")
        self._fold(self.pos, data)
        self.pos += n
        return bytes(data)


class _DeflatedMember(_StoredMember):
    """A deflated member, read from the nearest restart point; the points are made as reads first pass
    them (the index scan's pass makes them all)."""

    def __init__(self, fileobj: Any, start: int, compressed: int, size: int, crc: int) -> None:
        super().__init__(fileobj, start, size, crc)
        self.compressed = compressed
        # (decompressed offset, offset of the next compressed byte, zlib's state there): never used
        # itself, only copied, so a forked child may share the parent's
        self.points: list[tuple[int, int, Any]] = [(0, 0, zlib.decompressobj(-15))]
        self.complete = False

    def _inflate(self, point: tuple[int, int, Any], until: int, learn: bool) -> Iterator[tuple[int, bytes]]:
        """(decompressed offset, bytes) from ``point`` on, to ``until``; ``learn``: add points passed."""
        out_pos, in_pos, state = point
        d, pending = state.copy(), b""
        while out_pos < until:
            if not pending:
                if in_pos >= self.compressed:
                    break
                self.fileobj.seek(self.start + in_pos)
                pending = self.fileobj.read(min(_IN_CHUNK, self.compressed - in_pos))
                if not pending:
                    raise EOFError("the archive was cut short inside this member")
                in_pos += len(pending)
            if learn and out_pos >= self.points[-1][0] + ZIP_SPACING:
                self.points.append((out_pos, in_pos - len(pending), d.copy()))
            data = d.decompress(pending, _OUT_STEP)
            pending = d.unconsumed_tail
            if data:
                self._fold(out_pos, data)
                yield out_pos, data
                out_pos += len(data)
            elif d.eof:
                break
        if learn and out_pos >= self.size:
            if out_pos != self.size or not d.eof:
                raise zlib.error(f"decompressed to {out_pos}+ bytes; the archive says {self.size}")
            self.complete = True

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.pos if n < 0 else min(n, self.size - self.pos)
        if n <= 0:
            return b""
        start, end = self.pos, self.pos + n
        i = bisect.bisect_right(self.points, start, key=lambda p: p[0]) - 1
        learn = not self.complete and i == len(self.points) - 1  # past the last point: make more
        parts = []
        for at, data in self._inflate(self.points[i], end, learn):
            lo, hi = max(start - at, 0), min(end - at, len(data))
            if hi > lo:
                parts.append(data[lo:hi])
        got = b"".join(parts)
        if len(got) != n:
            raise EOFError(f"the member ends {n - len(got)} bytes early: the archive was cut short")
        self.pos = end
        return got


class ZipMemberFile(SeekableStreamFile):
    """One member of a zip archive, read at random offsets (see the module docstring).

    Example:
        >>> import os, tempfile, zipfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.zip")
        >>> with zipfile.ZipFile(path, "w") as z:   # stored: a byte range of the archive
        ...     z.writestr("t.jsonl", "[1]\\n[2]\\n")
        >>> f = ZipMemberFile(LocalFile(path), "t.jsonl")
        >>> f.read(4, 7), f.size, f.path.endswith("d.zip::t.jsonl")
        (b'[2]', 8, True)
    """

    coalesce_gap = ZIP_SPACING // 2
    _errors = (*SeekableStreamFile._errors, zipfile.BadZipFile, zlib.error)

    def __init__(self, source: Any, member: str) -> None:
        super().__init__(source)
        self.member = member
        self.path = f"{source.path}{MEMBER_SEP}{member}"

    def _decompressor(self, fileobj: Any) -> Any:
        with zipfile.ZipFile(fileobj) as archive:
            same = [i for i in archive.infolist() if i.filename == self.member]
        where = f"member {self.member!r} of {self.source.path}"
        if not same:
            raise DataFileError(errno.ENOENT, f"no member {self.member!r} in zip archive {self.source.path}")
        if len(same) > 1:
            raise _duplicate_error(self.source.path, self.member, len(same))
        info = same[0]
        if info.flag_bits & 0x1:
            raise DataFileError(
                errno.EINVAL,
                f"{where} is encrypted; sjsonl does not decrypt zip members: extract it with its password "
                f"(unzip {self.source.path} {self.member!r})",
            )
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            method = _METHODS.get(info.compress_type, "unknown")
            raise DataFileError(
                errno.EINVAL,
                f"{where} uses zip compression method {info.compress_type} ({method}); sjsonl reads stored "
                f"and deflated members: extract it (unzip -p {self.source.path} {self.member!r} > "
                f"{os.path.basename(self.member)!r})",
            )
        fileobj.seek(info.header_offset)
        fields = _LOCAL_HEADER.unpack(fileobj.read(_LOCAL_HEADER.size))
        if fields[0] != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"bad local header for {where}")
        name = fileobj.read(fields[-2])
        if name != info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437"):
            raise zipfile.BadZipFile(f"the local header of {where} names another file, {name!r}")
        start = info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1]
        if info.compress_type == zipfile.ZIP_STORED:
            return _StoredMember(fileobj, start, info.file_size, info.CRC)
        return _DeflatedMember(fileobj, start, info.compress_size, info.file_size, info.CRC)

    def _failed(self, exc: BaseException) -> Exception:
        failed = super()._failed(exc)
        if isinstance(exc, BadCRCError) and not isinstance(failed, StaleDataError):
            return DataFileError(errno.EIO, f"corrupt zip member {self.path}: {exc}")
        return failed

    def _open_handle(self, inherited: tuple[threading.Lock, Any] | None) -> Any:
        handle = super()._open_handle(inherited)
        if isinstance(handle, _DeflatedMember) and inherited is not None and inherited[1] is not None:
            lock, parent = inherited  # after a fork: the parent's restart points, when it is not mid-read
            if lock.acquire(blocking=False):
                try:
                    handle.points, handle.complete = list(parent.points), parent.complete
                    handle.crc_pos, handle.crc = parent.crc_pos, parent.crc
                finally:
                    lock.release()
        if handle is not None:
            self._size = handle.size  # the archive's directory says it: no pass needed
        return handle
