"""An S3 proxy for tests and benchmarks: moto behind it, fast ranged reads and injected faults in front.

Stock moto reads a whole object for every ranged GET (~35 ms of CPU on 64 MiB), so a benchmark through it
measures moto. :class:`S3Proxy` is an aiohttp server on 127.0.0.1 (its own thread and event loop) that
forwards every request to moto unchanged — method, path, query, headers (the client's ``Host`` included,
so a SigV4 signature stays valid; moto checks none by default anyway) and body — and streams the answer
back, except:

* GETs (ranged or whole) of an object registered with :meth:`S3Proxy.serve_locally` are answered
  from its bytes in O(range): ``206`` (``200`` for the whole object) with moto's own ``ETag`` and
  ``Last-Modified``; a differing ``If-Match`` gets S3's
  ``412 PreconditionFailed``. A PUT, POST or DELETE of that key (forwarded) drops the registration;
* faults, changeable at any time (:meth:`S3Proxy.set_faults`): latency on every request, and a share of
  requests (ranged GETs only, unless asked) answered ``503 SlowDown``, reset without an answer, or stalled;
* :meth:`S3Proxy.forbid`: ``403 AccessDenied`` for every request for a key.

Fixture ``s3_proxy`` (module scope, over conftest's ``s3``); a test module takes it with
``from ._s3_proxy import s3_proxy  # noqa: F401``.
"""

from __future__ import annotations

import asyncio
import random
import re
import socket
import struct
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import unquote

import boto3
import pytest
from aiohttp import ClientError, ClientSession, ClientTimeout, TCPConnector, web

#: Request/response headers that belong to one connection, never forwarded (Expect: the proxy itself
#: answers ``100 Continue`` and forwards the whole body). ``Host`` is forwarded as the client sent it.
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers"}
    | {"transfer-encoding", "upgrade", "expect"}
)
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")
_CHUNK = 256 * 1024
_STAT_NAMES = (
    "requests", "ranged_gets", "served_locally", "bytes_served", "forwarded", "errors_injected",
    "resets_injected", "stalls_injected", "forbidden", "preconditions_failed", "whole_gets",
    "max_in_flight",
)  # fmt: skip


@dataclass(frozen=True)
class Faults:
    """What :meth:`S3Proxy.set_faults` set. The three rates are shares of the requests they apply to,
    one draw per request choosing (so they add up: ``error_rate=0.2, reset_rate=0.1`` → 30% faulty)."""

    latency: float = 0.0
    error_rate: float = 0.0
    reset_rate: float = 0.0
    stall_rate: float = 0.0
    stall_seconds: float = 5.0
    only_ranged: bool = True


@dataclass(frozen=True)
class _Local:
    data: bytes
    etag: str
    last_modified: str
    content_type: str


def s3_error(status: int, code: str, message: str, **extra: str) -> web.Response:
    """An S3 error answer: ``<Error><Code>…</Code><Message>…</Message>…</Error>``."""
    more = "".join(f"<{k}>{v}</{k}>" for k, v in extra.items())
    body = f"<Error><Code>{code}</Code><Message>{message}</Message>{more}</Error>"
    head = '<?xml version="1.0" encoding="UTF-8"?>\n'
    return web.Response(status=status, text=head + body, content_type="application/xml")


def _bucket_key(raw_path: str) -> tuple[str, str]:
    """``/bucket/some/key`` (path style, URL-encoded) → ``("bucket", "some/key")``."""
    bucket, _, key = raw_path.lstrip("/").partition("/")
    return unquote(bucket), unquote(key)


def _byte_range(header: str, size: int) -> tuple[int, int] | None:
    """First and last byte of a single ``bytes=a-b`` / ``a-`` / ``-n`` range, clamped as S3 does;
    ``None`` for anything the proxy leaves to moto (several ranges, unsatisfiable, malformed)."""
    m = _RANGE.fullmatch(header.strip())
    if m is None or m.group(1) == m.group(2) == "":
        return None
    if m.group(1) == "":  # the last n bytes
        first, last = max(0, size - int(m.group(2))), size - 1
    else:
        first = int(m.group(1))
        last = min(size - 1, int(m.group(2))) if m.group(2) else size - 1
    return (first, last) if first <= last and first < size else None


def _etag_matches(wanted: str, etag: str) -> bool:
    tags = {t.strip().removeprefix("W/").strip('"') for t in wanted.split(",")}
    return "*" in tags or etag.strip('"') in tags


class S3Proxy:
    """A proxy in front of the S3 endpoint ``upstream``; see the module's docstring.

    ``options`` are the client's fsspec/s3fs storage options (credentials, region); :attr:`options` is
    the same with ``endpoint_url`` pointing at the proxy. Use as a context manager or ``start``/``stop``."""

    def __init__(self, upstream: str, options: dict[str, Any] | None = None, host: str = "127.0.0.1"):
        self.upstream = upstream.rstrip("/")
        self._client_options = dict(options or {"key": "x", "secret": "x"})
        self._host = host
        self._lock = threading.Lock()
        self._faults = Faults()
        self._rng = random.Random(0)
        self._local: dict[tuple[str, str], _Local] = {}
        self._forbidden: set[tuple[str, str]] = set()
        self._stats: Counter[str] = Counter()
        self._in_flight = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: ClientSession | None = None
        self.endpoint = ""

    # ---- life
    def start(self, timeout: float = 10.0) -> S3Proxy:
        if self._thread is not None:
            raise RuntimeError("the proxy is already running")
        sock = socket.socket()
        sock.bind((self._host, 0))
        self.endpoint = f"http://{self._host}:{sock.getsockname()[1]}"
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, args=(loop,), name="s3-proxy", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._setup(sock), loop).result(timeout)
        except BaseException:
            sock.close()
            self.stop(timeout)
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Close the server (a request in flight, a stall included, is cut within 0.5 s), the upstream
        connections and the loop; join the thread. Raises if it did not end within ``timeout``."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            if thread.is_alive():
                asyncio.run_coroutine_threadsafe(self._teardown(), loop).result(timeout)
        finally:
            if thread.is_alive():
                loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)
            if thread.is_alive():
                raise RuntimeError(f"the S3 proxy's thread did not end within {timeout} s")
            loop.close()
            self._loop = self._thread = None

    def __enter__(self) -> S3Proxy:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def options(self) -> dict[str, Any]:
        """fsspec/s3fs storage options for the proxy: the client's, ``endpoint_url`` replaced."""
        options = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self._client_options.items()}
        options["endpoint_url"] = self.endpoint
        return options

    # ---- what the proxy does (any thread, any time)
    def serve_locally(self, bucket: str, key: str, data: bytes) -> str:
        """Answer GETs (ranged or whole) of ``s3://bucket/key`` from ``data`` (the bytes already PUT to
        moto, whose ETag and Last-Modified a HEAD now fetches and the answers carry). Returns the ETag."""
        opts = self._client_options
        client = boto3.client(
            "s3",
            endpoint_url=self.upstream,
            aws_access_key_id=opts.get("key"),
            aws_secret_access_key=opts.get("secret"),
            region_name=(opts.get("client_kwargs") or {}).get("region_name", "us-east-1"),
        )
        try:
            head = client.head_object(Bucket=bucket, Key=key)["ResponseMetadata"]["HTTPHeaders"]
        finally:
            client.close()
        if int(head["content-length"]) != len(data):
            raise ValueError(f"s3://{bucket}/{key} holds {head['content-length']} bytes, not {len(data)}")
        local = _Local(bytes(data), head["etag"], head.get("last-modified", ""), head.get("content-type", ""))
        with self._lock:
            self._local[(bucket, key)] = local
        return local.etag

    def forget(self, bucket: str, key: str) -> None:
        """Leave ``s3://bucket/key`` to moto again."""
        with self._lock:
            self._local.pop((bucket, key), None)

    def is_served_locally(self, bucket: str, key: str) -> bool:
        with self._lock:
            return (bucket, key) in self._local

    def forbid(self, bucket: str, key: str, forbidden: bool = True) -> None:
        """``403 AccessDenied`` to every request for ``s3://bucket/key`` (``forbidden=False``: stop)."""
        with self._lock:
            (self._forbidden.add if forbidden else self._forbidden.discard)((bucket, key))

    def set_faults(
        self,
        latency: float = 0.0,
        error_rate: float = 0.0,
        reset_rate: float = 0.0,
        stall_rate: float = 0.0,
        stall_seconds: float = 5.0,
        seed: int = 0,
        only_ranged: bool = True,
    ) -> None:
        """Faults from now on (the defaults: none). ``latency`` seconds before every answer; of the ranged
        GETs (every request: ``only_ranged=False``) a share ``error_rate`` answered ``503 SlowDown``, a
        share ``reset_rate`` reset without an answer, a share ``stall_rate`` answered after
        ``stall_seconds`` more. ``seed`` starts the draws again."""
        faults = Faults(latency, error_rate, reset_rate, stall_rate, stall_seconds, only_ranged)
        with self._lock:
            self._faults, self._rng = faults, random.Random(seed)

    def stats(self) -> dict[str, int]:
        """Counters since the last :meth:`reset_stats`: ``requests`` (all), ``ranged_gets``,
        ``served_locally`` (GETs answered from registered bytes), ``whole_gets`` (those of them without a
        range), ``bytes_served`` (body bytes of ranged GETs, either way, and of whole GETs answered from
        registered bytes), ``forwarded`` (requests moto was asked), ``errors_injected``,
        ``resets_injected``, ``stalls_injected``, ``forbidden``, ``preconditions_failed`` (local 412s);
        and ``max_in_flight``, the most requests the proxy held at once."""
        with self._lock:
            return {name: self._stats[name] for name in _STAT_NAMES}

    def reset_stats(self) -> None:
        with self._lock:
            self._stats.clear()

    def reset(self) -> None:
        """No faults, nothing served locally or forbidden, counters zero."""
        self.set_faults()
        with self._lock:
            self._local.clear()
            self._forbidden.clear()
            self._stats.clear()

    # ---- the loop's side
    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())  # a resolver's threads, if any

    async def _setup(self, sock: socket.socket) -> None:
        connector = TCPConnector(limit=128, force_close=False)
        self._session = ClientSession(
            connector=connector, auto_decompress=False, timeout=ClientTimeout(total=None, sock_connect=10)
        )
        app = web.Application(client_max_size=1 << 40)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    async def _teardown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def _count(self, **counts: int) -> None:
        with self._lock:
            self._stats.update(counts)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            self._in_flight += 1
            self._stats["max_in_flight"] = max(self._stats["max_in_flight"], self._in_flight)
        try:
            return await self._answer(request)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        bucket, key = _bucket_key(request.rel_url.raw_path)
        ranged = request.method == "GET" and "Range" in request.headers
        with self._lock:
            self._stats.update(requests=1, ranged_gets=int(ranged))
            faults, forbidden = self._faults, (bucket, key) in self._forbidden
            draw = self._rng.random() if ranged or not faults.only_ranged else 1.0
            if key and request.method in ("PUT", "POST", "DELETE"):  # it may change: moto answers from now on
                self._local.pop((bucket, key), None)
            elif request.method == "POST" and "delete" in request.query:  # DeleteObjects: drop the bucket's
                self._local = {bk: v for bk, v in self._local.items() if bk[0] != bucket}
            local = self._local.get((bucket, key)) if request.method == "GET" else None
        if faults.latency > 0:
            await asyncio.sleep(faults.latency)
        if forbidden:
            self._count(forbidden=1)
            return s3_error(403, "AccessDenied", "Access Denied")
        if draw < faults.error_rate:
            self._count(errors_injected=1)
            return s3_error(503, "SlowDown", "Please reduce your request rate.")
        if draw < faults.error_rate + faults.reset_rate:
            self._count(resets_injected=1)
            return self._reset(request)
        if draw < faults.error_rate + faults.reset_rate + faults.stall_rate:
            self._count(stalls_injected=1)
            await asyncio.sleep(faults.stall_seconds)
        if local is not None and set(request.query) <= {"x-id"}:
            answer = self._serve(request, local)
            if answer is not None:
                return answer
        return await self._forward(request, ranged)

    def _reset(self, request: web.Request) -> web.StreamResponse:
        """Reset the connection (RST: SO_LINGER 0, then abort), answering nothing."""
        transport = request.transport
        if transport is not None:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
        return web.Response(status=599)  # never reaches anyone: the transport is gone

    def _serve(self, request: web.Request, local: _Local) -> web.Response | None:
        """A GET (ranged, or of the whole object) answered from registered bytes; ``None``: leave it to moto
        (conditions other than If-Match, several ranges, an unsatisfiable range, an empty object)."""
        headers = request.headers
        if any(h in headers for h in ("If-None-Match", "If-Modified-Since", "If-Unmodified-Since")):
            return None
        size = len(local.data)
        span = _byte_range(headers["Range"], size) if "Range" in headers else (0, size - 1)
        if span is None or size == 0:
            return None
        request_id = uuid.uuid4().hex[:16].upper()
        if "If-Match" in headers and not _etag_matches(headers["If-Match"], local.etag):
            self._count(preconditions_failed=1)
            text = "At least one of the pre-conditions you specified did not hold"
            return s3_error(412, "PreconditionFailed", text, Condition="If-Match", RequestId=request_id)
        first, last = span
        body = local.data[first : last + 1]
        ranged = "Range" in headers
        self._count(served_locally=1, bytes_served=len(body), whole_gets=int(not ranged))
        out = {"Content-Range": f"bytes {first}-{last}/{size}"} if ranged else {}
        out["Accept-Ranges"] = "bytes"
        out |= {"ETag": local.etag, "Last-Modified": local.last_modified, "x-amz-request-id": request_id}
        out["Content-Type"] = local.content_type or "binary/octet-stream"
        return web.Response(status=206 if ranged else 200, body=body, headers=out)

    async def _forward(self, request: web.Request, ranged: bool) -> web.StreamResponse:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        body = await request.read() if request.body_exists else None
        if body is not None:
            headers["Content-Length"] = str(len(body))
        self._count(forwarded=1)
        url = self.upstream + request.rel_url.raw_path_qs
        skip = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
        try:
            upstream = await self._session.request(
                request.method, url, headers=headers, data=body, allow_redirects=False, skip_auto_headers=skip
            )
        except ClientError as exc:
            return s3_error(502, "BadGateway", f"the proxy could not reach {self.upstream}: {exc}")
        async with upstream:
            answer = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for name, value in upstream.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    answer.headers.add(name, value)
            await answer.prepare(request)
            counted = ranged and upstream.status < 300
            try:
                async for chunk in upstream.content.iter_chunked(_CHUNK):
                    if counted:  # before the client can have it
                        self._count(bytes_served=len(chunk))
                    await answer.write(chunk)
            except ClientError:  # moto went away mid-answer: so does the client's connection
                return self._reset(request)
            await answer.write_eof()
            return answer


@pytest.fixture(scope="module")
def s3_proxy(s3: Any) -> Iterator[S3Proxy]:
    """An :class:`S3Proxy` in front of conftest's moto server (``s3``), for the module; ``.reset()`` it
    between tests that change it."""
    proxy = S3Proxy(s3.options["endpoint_url"], s3.options).start()
    try:
        yield proxy
    finally:
        proxy.stop()


def serving_bucket(s3: Any, proxy: S3Proxy) -> Iterator[S3Proxy]:
    """A fresh bucket behind ``proxy``, for a fixture to ``yield from``: ``proxy.put(data, key=...)`` stores
    an object and serves its ranges from memory in O(range), returning its s3:// URL; no faults to begin
    with, and the proxy reset after."""
    proxy.reset()
    name = f"sjsonl-{uuid.uuid4().hex[:12]}"
    s3.client.create_bucket(Bucket=name)

    def put(data: bytes, key: str = "train.jsonl") -> str:
        s3.client.put_object(Bucket=name, Key=key, Body=data)
        proxy.serve_locally(name, key, data)
        return f"s3://{name}/{key}"

    proxy.put = put  # type: ignore[attr-defined]
    yield proxy
    proxy.reset()
