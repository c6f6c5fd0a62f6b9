"""Remote data files (``s3://…`` or any fsspec URL), read by byte ranges; nothing is downloaded whole.

Each read is one ranged request (``fs.cat_file(path, start=, end=)``); several ranges wanted at once go
out concurrently (``fs.cat_ranges``), which is how the layers above read a batch of records or the
chunks of an index scan. ``storage_options`` are handed to fsspec unchanged.

Staleness: a remote object's stamp is its size, its ETag (when the protocol reports one — S3 does), its
modification time converted to nanoseconds (S3's ``LastModified`` has 1-second resolution; ``0`` where
the protocol reports none), and the usual hash of its first and last 64 KiB, fetched with two range
reads. Any of them changing marks the index stale.

Pinning: once the index layer pins the object (``pin(stamp)``), every range read of an S3 object carries
``If-Match: <ETag seen at index time>``, so a replaced object is never read at the old offsets: the read
fails and raises :class:`~sjsonl.errors.StaleDataError`. Protocols without conditional reads are checked
(size, ETag, mtime) when a read fails and in each new process, not on every read.

The local chunk cache (:mod:`~sjsonl.storage.chunk_store`): reads are served from it once their chunks are
in. Once it holds the whole object and is sealed (every chunk's CRC checked this boot), a process that
looks (at most every :data:`MAP_RECHECK_SECONDS`) maps it whole: :attr:`RemoteFile.buffer` appears, and the
layers above read it like a local file — in C, without a ``pread`` per batch. A process reading single
records (``ds[i]``) decides once, at its first read; batches (a DataLoader's) decide at each batch.

Range support: an HTTP server that ignores ``Range`` (answering 200 with the whole body) is refused when
the file is opened — one probe for byte 1, which fsspec's HTTP file refuses from the response headers,
without downloading the body — and every read checks it got exactly the bytes it asked for, so such a
server is named as the problem, never the data or its index.

fsspec filesystems are not fork-safe (s3fs's event loop and connections belong to the process that made
them), so the filesystem is looked up lazily per process id and never pickled.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "wb").write(b'{"a": 1}\\n')
    >>> f = RemoteFile("file://" + path)   # any fsspec URL; file:// keeps the example offline
    >>> f.size, f.read(0, 8)
    (9, b'{"a": 1}')
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from sjsonl.errors import DataFileError, InvalidArgumentError, StaleDataError, require
from sjsonl.storage.base import DataStamp, data_file_error, fingerprint_of, iter_ranges
from sjsonl.storage.chunk_fill import ChunkFiller
from sjsonl.storage.chunk_store import ChunkStore, cache_settings
from sjsonl.storage.fetch import fetcher_for
from sjsonl.storage.local import CHECK_SECONDS, GUARDED, version_check
from sjsonl.storage.retry import RetryPolicy, is_transient, with_retries

#: Bytes per ranged request during an index scan, and how many are in flight at once.
SCAN_REQUEST_BYTES = 8 << 20
SCAN_CONCURRENCY = 4
#: A read that needs more uncached chunks than this reads its own ranges and leaves the chunks to the
#: background filler: the first batches of a fresh cache cost a round trip, not whole chunks.
DIRECT_ABOVE = 4
_ETAG_KEYS = ("ETag", "etag", "md5Hash", "md5")
_CONDITIONAL_PROTOCOLS = ("s3", "s3a")  # protocols whose reads take If-Match (s3fs: s3_additional_kwargs)
_MTIME_KEYS = ("LastModified", "last_modified", "mtime", "updated", "modified", "created")
_HTTP_PROTOCOLS = ("http", "https")  # where the server may ignore a Range header
#: The background filler's requests: up to FILL_RUN adjacent chunks each, and up to FILL_MORE times the
#: chunks it was given in a call (with the absent ones after them).
FILL_RUN, FILL_MORE = 8, 2
#: Seconds between looks for a sealed (complete, checked) local cache to map, while there is none.
MAP_RECHECK_SECONDS = 1.0


def _check_seconds() -> float:
    """``$SJSONL_REMOTE_CHECK_SECONDS`` (1 s unset or unreadable), read when a process first reads."""
    raw = os.environ.get("SJSONL_REMOTE_CHECK_SECONDS", "")
    try:
        return max(0.0, float(raw)) if raw.strip() else 1.0
    except ValueError:
        return 1.0


def _etag(info: dict[str, Any]) -> str:
    return next((str(info[k]) for k in _ETAG_KEYS if info.get(k)), "")


def _mtime_ns(value: Any) -> int:
    if isinstance(value, dt.datetime):
        return int(value.timestamp()) * 10**9 + value.microsecond * 1000
    if isinstance(value, (int, float)):
        return int(value * 10**9)
    if isinstance(value, str):
        try:
            return _mtime_ns(dt.datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return 0
    return 0


class RemoteFile:
    """A remote file read through fsspec by byte ranges.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "wb").write(b"[1]\\n[2]\\n")
        >>> RemoteFile("file://" + path).read_many([(0, 3), (4, 7)])
        [b'[1]', b'[2]']
    """

    #: A request costs a round trip (tens of ms on S3), in which ~100 MB/s moves several MiB; but the
    #: requests of a batch go out concurrently, and bytes read through gaps are wasted (on every batch of
    #: a medium-sized file, 1 MiB gaps merged 256 random records into reading all 64 MiB). 256 KiB: a
    #: few ms of transfer, bounded waste. ``$SJSONL_REMOTE_GAP`` (bytes) overrides it: 0 where bytes are
    #: billed (egress, a metered link), so that only the records' own bytes are fetched.
    REMOTE_GAP = 256 << 10
    #: With the chunk cache a read is a local ``pread``: reading through a gap is a wasted copy.
    CACHED_GAP = 4 << 10
    #: Iterating an order reads it in windows (:mod:`sjsonl.data.readahead`): its first records wait for one
    #: small window's round trips, not for a block of thousands.
    reads_in_windows = True

    @property
    def fetches_ahead(self) -> bool:
        """Whether the next windows of an iterated order are fetched while one is decoded
        (:func:`sjsonl.storage.ahead.fetch_ahead`) — without the chunk cache. With it, the cache's filler
        brings whole chunks behind the reads, and ranges read ahead would crowd its requests out (measured:
        a first epoch fell from ~8,500 to ~500 records/s)."""
        return self._store() is None

    @property
    def coalesce_gap(self) -> int:
        if self._store() is not None:
            return self.CACHED_GAP
        raw = os.environ.get("SJSONL_REMOTE_GAP", "").strip()
        if not raw:
            return self.REMOTE_GAP
        if not (raw.isascii() and raw.isdigit()):
            raise InvalidArgumentError(f"SJSONL_REMOTE_GAP must be a number of bytes >= 0, got {raw!r}")
        return int(raw)

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        self._fsspec = require("fsspec", "remote")
        self.path = url
        self.storage_options = dict(storage_options or {})
        self.pinned: DataStamp | None = None
        self._fs_state: tuple[int, Any, str] | None = None
        self._read_fs_state: tuple[int, Any, str] | None = None
        # per process: (pid, the chunk store and the version-check interval), (pid, the filler)
        self._store_state: tuple[int, ChunkStore | None, float] | None = None
        self._filler_state: tuple[int, ChunkFiller] | None = None
        self._map_state: tuple[int, Any, float] | None = None  # (pid, the cache's map or None, next look)
        self._checked_at: tuple[int, float] | None = None  # (pid, monotonic time) of the last version check
        self._version_error: tuple[int, Exception] | None = None  # (pid, what a background check found)
        self._info = self._fetch_info()  # fails now, with a clear message, if the object is missing
        self._check_ranges()

    # ---- per-process filesystems: one for metadata, one for reads (conditional once pinned)
    def _fs(self) -> tuple[Any, str]:
        state = self._fs_state
        if state is None or state[0] != os.getpid():
            fs, key = self._fsspec.core.url_to_fs(self.path, **self.storage_options)
            state = self._fs_state = (os.getpid(), fs, key)
        return state[1], state[2]

    def _read_fs(self) -> tuple[Any, str]:
        state = self._read_fs_state
        if state is None or state[0] != os.getpid():
            options = dict(self.storage_options)
            protocol = self.path.split("://", 1)[0].lower()
            if self.pinned is not None and self.pinned.etag and protocol in _CONDITIONAL_PROTOCOLS:
                extra = dict(options.get("s3_additional_kwargs") or {})
                extra["IfMatch"] = self.pinned.etag
                options["s3_additional_kwargs"] = extra
            fs, key = self._fsspec.core.url_to_fs(self.path, **options)
            state = self._read_fs_state = (os.getpid(), fs, key)
        return state[1], state[2]

    def _no_ranges(self, how: str) -> DataFileError:
        return DataFileError(
            errno.EOPNOTSUPP,
            f"{self.path}: the server ignored the Range header ({how}); sjsonl reads remote files by byte "
            "ranges: serve the file from a server with range support, or download it and open the copy",
        )

    def _check_ranges(self) -> None:
        """Refuse an HTTP server that ignores ``Range``: one read of byte 1 (fsspec's HTTP file raises from
        the response headers, before the body, when the answer is not that byte)."""
        if self.size < 2 or self.path.split("://", 1)[0].lower() not in _HTTP_PROTOCOLS:
            return
        fs, key = self._read_fs()
        try:
            with fs.open(key, "rb", block_size=1, cache_type="none", size=self.size) as f:
                f.seek(1)
                got = f.read(1)
        except ValueError as exc:
            if "range" not in str(exc).lower():
                raise
            raise self._no_ranges("it answered a request for byte 1 with the whole file") from None
        except OSError as exc:
            raise self._read_failed(exc) from None
        self._check_length(got, 1)

    def _check_length(self, data: bytes, wanted: int) -> bytes:
        """``data`` when it is the ``wanted`` bytes long it should be; more is a server ignoring ``Range``,
        less an object that changed (or a transfer cut short)."""
        if len(data) > wanted:
            raise self._no_ranges(f"asked for {wanted} bytes, it sent {len(data)}")
        if len(data) < wanted:
            failed = self._read_failed(EOFError(f"asked for {wanted} bytes, got {len(data)}"))
            raise failed
        return data

    def pin(self, stamp: DataStamp) -> None:
        """Read only the object version ``stamp`` describes (its ETag) from now on."""
        self.pinned = stamp
        self._read_fs_state = self._store_state = self._filler_state = self._map_state = None

    def _store(self) -> ChunkStore | None:
        """This process's local chunk cache of the object (:mod:`~sjsonl.storage.chunk_store`), if any: only
        for a version named by an ETag (and the pinned one, once pinned)."""
        return self._process_state()[1]

    def _process_state(self) -> tuple[int, ChunkStore | None, float]:
        state = self._store_state
        if state is None or state[0] != os.getpid():
            settings, etag, pinned = cache_settings(), _etag(self._info), self.pinned
            store = None
            if settings is not None and etag and (pinned is None or pinned.etag in ("", etag)):
                where, limit = settings
                store = ChunkStore.open(where, (self.path, self.size, etag), self.size, limit=limit)
            state = self._store_state = (os.getpid(), store, _check_seconds())
        return state

    def _read_failed(self, exc: BaseException) -> BaseException:
        """The error to raise for a failed read: stale data when the object is no longer the pinned one."""
        if isinstance(exc, FileNotFoundError):
            return DataFileError(errno.ENOENT, f"data file disappeared: {self.path}")
        pinned = self.pinned
        if pinned is not None:
            try:
                now = self.stamp(fingerprint=False)
            except DataFileError as gone:
                return gone
            change = pinned.describe_change(now, content=False)
            if change is not None:
                return self._stale(change)
        return DataFileError(errno.EIO, f"cannot read {self.path}: {exc}")

    def _fetch_info(self) -> dict[str, Any]:
        fs, key = self._fs()
        fs.invalidate_cache(key)  # a listing cached earlier would hide a replaced object
        try:
            info = with_retries(lambda: fs.info(key))
        except FileNotFoundError:
            raise data_file_error(errno.ENOENT, self.path) from None
        except PermissionError:
            raise data_file_error(errno.EACCES, self.path) from None
        if info.get("type") == "directory":
            raise data_file_error(errno.EISDIR, self.path)
        if info.get("size") is None:
            raise DataFileError(errno.EINVAL, f"{self.path}: the server does not report the file's size")
        return info

    @property
    def size(self) -> int:
        return int(self._info["size"])

    # ---- reads: through the local chunk cache when there is one, else by ranges; transient faults retried
    def read(self, start: int, end: int) -> bytes:
        return self.read_many([(start, end)])[0]

    def read_many(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Several ranges, fetched concurrently where the protocol allows."""
        size = self.size
        wanted = [(min(s, size), min(e, size)) for s, e in ranges]
        store = self._store()
        if store is None:
            return self._fetch(wanted)
        self._check_version()
        missing = store.missing(store.chunks_of(wanted))
        if len(missing) > DIRECT_ABOVE:  # a fresh cache: these ranges now, their chunks in the background
            self._filler(store).want(missing)
            return self._fetch(wanted)
        if missing:
            self._fill(store, missing)
        return [store.read(s, e) if e > s else b"" for s, e in wanted]

    def _fill(self, store: ChunkStore, chunks: Sequence[int], runs: bool = False) -> None:
        """Fetch ``chunks`` into ``store`` (those another process fetched meanwhile are not asked again).
        ``runs`` (the background filler): each chunk with the missing ones after it, up to :data:`FILL_RUN`
        chunks in one request and :data:`FILL_MORE` times the chunks given in all — a shuffled epoch needs
        every chunk soon, and one request of a few MiB costs a round trip where several of 1 MiB cost
        several."""
        if runs:
            chunks = _with_runs(store, chunks)
        with store.locked(chunks):
            todo = store.missing(chunks)
            groups: list[list[int]] = []
            for c in todo:
                if groups and c == groups[-1][-1] + 1 and len(groups[-1]) < FILL_RUN:
                    groups[-1].append(c)
                else:
                    groups.append([c])
            spans = [(store.span(g[0])[0], store.span(g[-1])[1]) for g in groups]
            for group, (base, _), data in zip(groups, spans, self._fetch(spans, background=runs)):
                for c in group:
                    lo, hi = store.span(c)
                    store.put(c, data[lo - base : hi - base])

    def _filler(self, store: ChunkStore) -> ChunkFiller:
        state = self._filler_state
        if state is None or state[0] != os.getpid():
            filler = ChunkFiller(
                store, lambda s, cs: self._fill(s, cs, runs=True), idle=lambda: _seal_if_complete(store)
            )
            state = self._filler_state = (os.getpid(), filler)
        return state[1]

    @property
    def buffer(self) -> Any:
        """The map's getter (``buffer()[a:b]``, as :meth:`~sjsonl.storage.MappedFile.buffer`) once the local
        cache holds the whole object, sealed — else ``None``: reads by ranges (see the module)."""
        state, pid = self._map_state, os.getpid()
        if state is None or state[0] != pid or (state[1] is None and time.monotonic() >= state[2]):
            state = self._map_state = (pid, self._map_cache(), time.monotonic() + MAP_RECHECK_SECONDS)
        mapped = state[1]
        return None if mapped is None else lambda: mapped

    def _map_cache(self) -> Any:
        """A guarded map of the sealed cache of the (pinned) object; ``None`` while it is not sealed — and
        then, if it holds every chunk, the filler's thread is asked to seal it."""
        store = self._store()
        if store is None or GUARDED is None or self.pinned is None:
            return None
        if not store.sealed():
            if store.complete():
                self._filler(store).poke()
            return None
        every = min(CHECK_SECONDS, self._process_state()[2])  # (0: every read checks, as without the map)
        return GUARDED(store.data_fd, self.size, version_check(self), every)

    def check_unchanged(self) -> None:
        """Raise :class:`~sjsonl.errors.StaleDataError` once a version check found the object replaced
        (checks at most every second, in the background: see :meth:`_check_version`)."""
        self._check_version()

    def _check_version(self) -> None:
        """Reads served from the local cache ask the server nothing, so the pinned version is checked
        with a metadata request at most every ``$SJSONL_REMOTE_CHECK_SECONDS`` (1 s), on a background thread
        (a read does not wait for the round trip): once a check finds the object replaced, every read
        raises :class:`~sjsonl.errors.StaleDataError`. With ``0`` every read checks first, synchronously.
        The processes of one machine take turns (:meth:`~sjsonl.storage.chunk_store.ChunkStore.claim_check`):
        one check per interval for them all. A check that finds the object replaced says so to them, and they
        each check at their next read; one that fails gives its turn back. What the cache serves meanwhile
        are the pinned version's bytes (CRC-checked), the very bytes the index addresses — never a record of
        the new object at the old offsets."""
        pinned = self.pinned
        if pinned is None:
            return
        found = self._version_error
        if found is not None and found[0] == os.getpid():
            raise type(found[1])(str(found[1]))
        _, store, interval = self._process_state()
        now, last = time.monotonic(), self._checked_at
        if last is not None and now - last[1] < interval:  # (a forked worker inherits its parent's)
            return
        taken = store.claim_check(interval) if store is not None and interval > 0 else 0.0
        self._checked_at = (os.getpid(), now - taken)
        if taken:  # another process of this machine checks this second's version
            return
        if interval == 0:
            self._compare(pinned)
        else:
            threading.Thread(target=self._compare_in_background, args=(pinned,), daemon=True).start()

    def _compare(self, pinned: DataStamp) -> None:
        current = with_retries(lambda: self.stamp(fingerprint=False))
        change = pinned.describe_change(current, content=False)
        if change is not None:
            raise self._stale(change)

    def _stale(self, change: str) -> StaleDataError:
        return StaleDataError(f"{self.path} changed after it was indexed: {change}; reopen the dataset")

    def _compare_in_background(self, pinned: DataStamp) -> None:
        store = self._store()
        try:
            self._compare(pinned)
        except (StaleDataError, DataFileError) as err:  # replaced or gone: every read from now on says so
            if store is not None:  # ...and every process of the machine checks at its next read
                store.end_check(replaced=True)
            self._version_error = (os.getpid(), err)
        except Exception:  # the network: the next check asks again (a read that needs the server raises)
            self._checked_at = None
            if store is not None:
                store.end_check(replaced=False)

    def _fetch(self, wanted: Sequence[tuple[int, int]], background: bool = False) -> list[bytes]:
        """The ranges from the server, concurrently (:mod:`~sjsonl.storage.fetch`; ``background``: the
        filler's, in at most half the window); the ranges that failed transiently are asked again
        (:mod:`~sjsonl.storage.retry`), any other failure raises at once."""
        out = [b""] * len(wanted)
        todo = [k for k, (s, e) in enumerate(wanted) if e > s]
        policy = RetryPolicy.from_env()
        for attempt in range(policy.attempts):
            if not todo:
                break
            fs, key = self._read_fs()
            try:  # (under the host's window of requests in flight, the slowest hedged: storage.fetch)
                got = fetcher_for(self.path).fetch(fs, key, [wanted[k] for k in todo], background)
            except Exception as exc:  # the whole call failed (the filesystem itself)
                got = [exc] * len(todo)
            failed = []
            for k, data in zip(todo, got):
                if not isinstance(data, BaseException):
                    out[k] = self._check_length(data, wanted[k][1] - wanted[k][0])
                elif attempt + 1 < policy.attempts and is_transient(data):
                    failed.append(k)
                else:
                    raise self._read_failed(data) from None
            todo = failed
            if todo:
                time.sleep(policy.delay(attempt))
        return out

    def chunks(self, chunk_bytes: int) -> Iterator[bytes]:
        """The file front to back in large ranges, a few requests in flight at a time (kept in the chunk
        cache on the way: an index build brings the bytes of the first epoch)."""
        pieces = list(iter_ranges(self.size, max(chunk_bytes, SCAN_REQUEST_BYTES)))
        store = self._store()
        for k in range(0, len(pieces), SCAN_CONCURRENCY):
            batch = pieces[k : k + SCAN_CONCURRENCY]
            if store is not None and not store.missing(store.chunks_of(batch)):  # cached already
                yield from (store.read(start, end) for start, end in batch)
                continue
            got = self._fetch(batch)
            if store is not None:
                for (start, end), data in zip(batch, got):
                    for c in store.chunks_of([(start, end)]):
                        lo, hi = store.span(c)
                        if lo >= start and hi <= end:
                            store.put(c, data[lo - start : hi - start])
            yield from got
        if store is not None:  # (every chunk checked as it arrived: sealing reads nothing again)
            _seal_if_complete(store)

    def open_file(self) -> Any:
        """A seekable file object (for the decompressors of ``s3://…/x.jsonl.gz``), one per caller."""
        fs, key = self._read_fs()
        return fs.open(key, "rb", block_size=1 << 20)

    # ---- staleness
    def stamp(self, *, fingerprint: bool = True) -> DataStamp:
        """Size, mtime, ETag (one metadata request) and, unless told not to, the head/tail hash."""
        self._info = info = self._fetch_info()
        self._checked_at = (os.getpid(), time.monotonic())  # (a fresh look: the next version check can wait)
        size = int(info["size"])
        etag = _etag(info)
        mtime = next((_mtime_ns(info[k]) for k in _MTIME_KEYS if info.get(k) is not None), 0)
        return DataStamp(size, mtime, fingerprint_of(self.read_many, size) if fingerprint else "", etag=etag)

    def refresh(self) -> None:
        self._info = self._fetch_info()

    def reopen(self) -> RemoteFile:
        self.refresh()
        return self

    def close(self) -> None:
        state = self._store_state
        if state is not None and state[0] == os.getpid() and state[1] is not None:
            state[1].close()  # (the filler's thread holds no descriptor of its own)
        # fsspec's (cached, shared) instances are not ours to close
        self._fs_state = self._read_fs_state = self._store_state = self._filler_state = self._map_state = None

    # Pickling carries the URL and options; the receiving process makes its own filesystem.
    def __getstate__(self) -> dict:
        return {
            "path": self.path,
            "storage_options": self.storage_options,
            "_info": self._info,
            "pinned": self.pinned,
        }

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._fs_state = self._read_fs_state = self._store_state = self._checked_at = None
        self._filler_state = self._version_error = self._map_state = None
        self._fsspec = require("fsspec", "remote")

    def __repr__(self) -> str:
        return f"RemoteFile({self.path!r})"


def _with_runs(store: ChunkStore, chunks: Sequence[int]) -> list[int]:
    """``chunks``, each followed by the next ones up to :data:`FILL_RUN` in all, while the table marks them
    absent; at most :data:`FILL_MORE` times as many (ascending)."""
    wanted: set[int] = set()
    most = FILL_MORE * len(chunks)
    for c in chunks:
        wanted.add(c)
        for nxt in range(c + 1, min(store.count, c + FILL_RUN)):
            if len(wanted) >= most or not store.absent(nxt):
                break
            wanted.add(nxt)
        if len(wanted) >= most:
            break
    return sorted(wanted)


def _seal_if_complete(store: ChunkStore) -> None:
    if store.complete() and not store.sealed():
        store.seal()
