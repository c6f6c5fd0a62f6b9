"""A bounded local cache of remote objects' bytes, in chunks, shared by the processes of one machine.

Training reads a remote corpus once per epoch, in an order that jumps anywhere in it. One ranged request per
record is a round trip per record; with the object's bytes on local disk, every epoch after the bytes first
arrive reads at local speed. A :class:`ChunkStore` holds one object *version* (its URL, size and ETag):

- ``<key>.data`` — a sparse file of the object's size; chunk ``c`` (``chunk_bytes``, 1 MiB by default) sits at
  the object's own offsets;
- ``<key>.chunks`` — per chunk 8 bytes: a CRC-32 of its bytes and a "present" flag, written *after* the
  bytes. A reader trusts a chunk only when its flag is set and — once per process — its bytes match the CRC;
  a torn or corrupt chunk is fetched again. Two processes fetching the same chunk write the same bytes (the
  reads are pinned to the version with ``If-Match``), so the DataLoader workers of a node share one copy
  with no lock. After the entries, once every chunk is present, a *seal*: one process checked every
  chunk's CRC (:meth:`ChunkStore.seal`) and recorded the machine's boot id, the data file's inode, size and
  mtime and the CRC of the entries it checked. While all of these still match (:meth:`ChunkStore.sealed`:
  the same boot, no byte written since), other processes skip their own per-chunk check and may map the
  data file whole (:mod:`~sjsonl.storage.remote`: the second epoch reads at local speed). A crash or reboot
  (the only way written pages can be lost or torn without a later write) changes the boot id; any write
  changes the mtime or the entries.

The store sits in the private cache (``~/.cache/sjsonl/remote`` or ``$SJSONL_REMOTE_CACHE``; ``off``
disables it) and holds at most ``$SJSONL_REMOTE_CACHE_BYTES`` (default 16 GiB, and never more than half the
free space when the store is made). An object is cached only if it fits: the least recently used other
objects are removed to make room, and an object larger than the limit is read by ranges as before (its
bytes are never partly cached, so a shuffled epoch never turns a record read into a chunk read it cannot
keep). Files are created with mode 0600 in a directory of mode 0700 that must be the user's own.

Example:
    >>> import tempfile
    >>> store = ChunkStore.open(tempfile.mkdtemp(), ("mem://x", 10, "etag"), 10, chunk_bytes=4)
    >>> store.missing(store.chunks_of([(0, 6)]))
    [0, 1]
    >>> store.put(0, b"0123"); store.put(1, b"4567")
    >>> store.missing([0, 1]), store.read(2, 6)
    ([], b'2345')
    >>> store.put(2, b"89"); store.seal() == store.sealed() == (boot_id() is not None)
    True
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import math
import os
import shutil
import struct
import time
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

from sjsonl.storage.trust import private_cache_root, untrusted_reason

CHUNK_BYTES = 1 << 20
DEFAULT_LIMIT = 16 << 30
_ENTRY = struct.Struct("<IB3x")  # CRC-32, present flag
#: magic, boot id, the data file's inode, size and mtime (ns), the CRC-32 of the entries — then its own CRC
_SEAL = struct.Struct("<8s16sQqqI")
_SEAL_MAGIC = b"SJSONLsl"
_boot: list[bytes | None] = []  # this boot's id, read once


def boot_id() -> bytes | None:
    """This boot's id (Linux: ``/proc/sys/kernel/random/boot_id``), or ``None`` where there is none."""
    if not _boot:
        try:
            with open("/proc/sys/kernel/random/boot_id", "rb") as f:
                _boot.append(bytes.fromhex(f.read().strip().decode("ascii").replace("-", "")))
        except (OSError, ValueError):
            _boot.append(None)
    return _boot[0]


def cache_settings() -> tuple[str, int] | None:
    """``(directory, byte limit)`` from the environment, or ``None`` when caching is off."""
    where = os.environ.get("SJSONL_REMOTE_CACHE", "")
    if where.strip().lower() in ("off", "0", "false", "no"):
        return None
    if not where:
        where = os.path.join(private_cache_root(), "remote")
    raw = os.environ.get("SJSONL_REMOTE_CACHE_BYTES", "")
    limit = int(raw) if raw.strip().isdigit() else DEFAULT_LIMIT
    return where, limit


class ChunkStore:
    """One object version's cached chunks (see the module). Made by :meth:`open`; one per process."""

    def __init__(
        self, data_fd: int, table_fd: int, size: int, chunk_bytes: int, name: str, directory: str
    ) -> None:
        self.size, self.chunk_bytes, self.name, self.directory = size, chunk_bytes, name, directory
        self._data, self._table = data_fd, table_fd
        self._verified: set[int] = set()
        self.count = -(-size // chunk_bytes)

    @classmethod
    def open(
        cls, directory: str, version: tuple[Any, ...], size: int, *, chunk_bytes: int = CHUNK_BYTES,
        limit: int | None = None,
    ) -> ChunkStore | None:  # fmt: skip
        """The store of ``version`` in ``directory``, or ``None`` when it cannot hold it (too large for the
        limit, a directory that is not the user's own and private, no space)."""
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            if untrusted_reason(directory) is not None:  # another user's, or writable by others
                return None
            limit = DEFAULT_LIMIT if limit is None else limit
            limit = min(limit, shutil.disk_usage(directory).free // 2 + _used(directory))
            if size > limit:
                return None
            name = hashlib.sha256(repr((*version, chunk_bytes)).encode()).hexdigest()[:32]
            _make_room(directory, size, limit, keep=name)
            flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
            data = os.open(os.path.join(directory, f"{name}.data"), flags, 0o600)
            table = os.open(os.path.join(directory, f"{name}.chunks"), flags, 0o600)
            count = -(-size // chunk_bytes)
            if os.fstat(data).st_size != size:
                os.ftruncate(data, size)  # sparse: no blocks until chunks arrive
            if os.fstat(table).st_size not in (count * _ENTRY.size, count * _ENTRY.size + _SEAL.size + 4):
                os.ftruncate(table, count * _ENTRY.size)
            os.utime(table)  # recently used (the room-making order)
            return cls(data, table, size, chunk_bytes, name, directory)
        except OSError:
            return None

    def chunks_of(self, ranges: Sequence[tuple[int, int]]) -> list[int]:
        """The chunks that hold any byte of ``ranges``, ascending."""
        wanted: set[int] = set()
        for start, end in ranges:
            if end > start:
                wanted.update(range(start // self.chunk_bytes, (end - 1) // self.chunk_bytes + 1))
        return sorted(wanted)

    def span(self, chunk: int) -> tuple[int, int]:
        start = chunk * self.chunk_bytes
        return start, min(self.size, start + self.chunk_bytes)

    def missing(self, chunks: Sequence[int]) -> list[int]:
        """Those of ``chunks`` not present and intact (checked against their CRC once per process)."""
        out = []
        for c in chunks:
            if c in self._verified:
                continue
            crc, present = _ENTRY.unpack(
                os.pread(self._table, _ENTRY.size, c * _ENTRY.size).ljust(_ENTRY.size, b"\0")
            )
            if present == 1:
                start, end = self.span(c)
                if zlib.crc32(os.pread(self._data, end - start, start)) == crc:
                    self._verified.add(c)
                    continue
            out.append(c)
        return out

    def absent(self, chunk: int) -> bool:
        """Whether the table marks ``chunk`` absent (one 8-byte read; a present one is not checked here)."""
        entry = os.pread(self._table, _ENTRY.size, chunk * _ENTRY.size)
        return len(entry) < _ENTRY.size or entry[4] != 1

    def put(self, chunk: int, data: bytes) -> None:
        """Store chunk ``chunk``'s bytes (its whole span), then mark it present."""
        start, end = self.span(chunk)
        if len(data) != end - start:
            raise ValueError(f"chunk {chunk} is {end - start} bytes, got {len(data)}")
        try:
            os.pwrite(self._data, data, start)
            os.pwrite(self._table, _ENTRY.pack(zlib.crc32(data), 1), chunk * _ENTRY.size)
        except OSError:  # a full disk: the chunk is simply not cached
            return
        self._verified.add(chunk)

    @contextlib.contextmanager
    def locked(self, chunks: Sequence[int]) -> Iterator[None]:
        """Hold ``chunks`` (ascending: no two processes wait on each other) while fetching them, so the
        DataLoader workers of a node fetch each chunk once: a process that waited finds it present."""
        held: list[int] = []
        try:
            for c in sorted(chunks):
                try:
                    fcntl.lockf(self._table, fcntl.LOCK_EX, _ENTRY.size, c * _ENTRY.size)
                except OSError:  # EDEADLK: the kernel sees processes, not this process's two threads
                    break  # (fetched without the locks: at worst a chunk is fetched twice, same bytes)
                held.append(c)
            yield
        finally:
            for c in held:
                fcntl.lockf(self._table, fcntl.LOCK_UN, _ENTRY.size, c * _ENTRY.size)

    def _entries(self) -> tuple[bytes, bool]:
        """The chunk table's entries, and whether every chunk is marked present."""
        entries = os.pread(self._table, self.count * _ENTRY.size, 0)
        return entries, self.count > 0 and entries[4 :: _ENTRY.size] == b"\1" * self.count

    def _seal_record(self) -> bytes | None:
        """What a seal made now would hold (with its CRC), or ``None`` while a chunk is absent or there is
        no boot id."""
        boot = boot_id()
        entries, complete = self._entries()
        if boot is None or not complete:
            return None
        st = os.fstat(self._data)
        record = _SEAL.pack(_SEAL_MAGIC, boot, st.st_ino, st.st_size, st.st_mtime_ns, zlib.crc32(entries))
        return record + struct.pack("<I", zlib.crc32(record))

    def complete(self) -> bool:
        """Whether every chunk is marked present (not yet checked: see :meth:`seal`)."""
        return self._entries()[1]

    def sealed(self) -> bool:
        """Whether a seal vouches for every chunk (see the module): its bytes may be read with no check."""
        try:
            now = self._seal_record()
            return now is not None and os.pread(self._table, len(now), self.count * _ENTRY.size) == now
        except OSError:
            return False

    def seal(self) -> bool:
        """Check every chunk's CRC (those not checked in this process yet) and, when all are intact and
        nothing was written meanwhile, seal the store. One process at a time; ``False`` when a chunk is
        missing or corrupt, when another process is sealing, or on a write error."""
        where = self.count * _ENTRY.size
        try:
            fcntl.lockf(self._table, fcntl.LOCK_EX | fcntl.LOCK_NB, _SEAL.size + 4, where)
        except OSError:
            return False
        try:
            before = self._seal_record()
            if before is None or self.missing(range(self.count)) or self._seal_record() != before:
                return False
            os.pwrite(self._table, before, where)
            return True
        except OSError:
            return False
        finally:
            fcntl.lockf(self._table, fcntl.LOCK_UN, _SEAL.size + 4, where)

    @property
    def data_fd(self) -> int:
        """The data file's descriptor (for a read-only map of a sealed store)."""
        return self._data

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``start..end`` (their chunks must be present: see :meth:`missing`)."""
        return os.pread(self._data, end - start, start)

    def claim_check(self, interval: float) -> float:
        """Take the version check of the next ``interval`` seconds for every process of this machine:
        0.0 when this process should check now (and the time is recorded, in ``<key>.checked``, before
        it checks), else how many seconds ago another process took it. One check a second per node, not
        per DataLoader worker: each new worker's first request builds a client (~0.15-0.3 s of CPU), and
        a node of hundreds of workers would otherwise send hundreds of metadata requests a second."""
        fd = self._turns(os.O_RDWR | os.O_CREAT)
        if fd is None:
            return 0.0
        try:
            raw, now = os.pread(fd, 8, 0), time.time()
            when = struct.unpack("<d", raw)[0] if len(raw) == 8 else 0.0
            if math.isnan(when):  # a check found this version replaced: each process checks for itself
                return 0.0
            age = now - when
            if 0.0 <= age < interval:  # (a clock set back makes a negative age: checked again)
                return age
            os.pwrite(fd, struct.pack("<d", now), 0)  # (two processes may both take it: one check more)
            return 0.0
        except OSError:
            return 0.0
        finally:
            os.close(fd)

    def end_check(self, replaced: bool) -> None:
        """The turn's check did not find this version as it was: ``replaced`` (every process then checks at
        once, each to learn it), else it failed (the turn is given back: the next process checks)."""
        fd = self._turns(os.O_WRONLY)
        if fd is None:
            return
        try:
            os.pwrite(fd, struct.pack("<d", float("nan") if replaced else 0.0), 0)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _turns(self, flags: int) -> int | None:
        """``<key>.checked`` (the time of the last turn's check, or NaN), opened with ``flags``; None where it
        cannot be (the turns are then not shared: each process checks for itself)."""
        flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
        try:
            return os.open(os.path.join(self.directory, f"{self.name}.checked"), flags, 0o600)
        except OSError:
            return None

    def close(self) -> None:
        for fd in (self._data, self._table):
            try:
                os.close(fd)
            except OSError:
                pass


def _used(directory: str) -> int:
    """Bytes the cached objects occupy on disk (their allocated blocks)."""
    total = 0
    with os.scandir(directory) as entries:
        for e in entries:
            if e.name.endswith(".data"):
                try:
                    total += e.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    pass
    return total


def _make_room(directory: str, size: int, limit: int, keep: str) -> None:
    """Remove the least recently used other objects until ``size`` more bytes fit under ``limit``."""
    objects = []
    with os.scandir(directory) as entries:
        for e in entries:
            if e.name.endswith(".chunks") and not e.name.startswith(keep):
                stem = e.name[: -len(".chunks")]
                try:
                    data = os.stat(os.path.join(directory, f"{stem}.data"), follow_symlinks=False)
                    objects.append((e.stat(follow_symlinks=False).st_mtime, stem, data.st_blocks * 512))
                except OSError:
                    pass
    used = sum(blocks for _, _, blocks in objects)
    for _, stem, blocks in sorted(objects):
        if used + size <= limit:
            break
        for suffix in (".data", ".chunks", ".checked"):
            try:
                os.unlink(os.path.join(directory, stem + suffix))
            except OSError:
                pass
        used -= blocks
