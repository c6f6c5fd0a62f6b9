"""The S3 proxy for tests and benchmarks (tests/_s3_proxy.py): ranged reads answered from memory with moto's
ETag, If-Match, a replaced object left to moto, injected latency/503s/resets/stalls/403s, what s3fs makes of
each, and a stop that leaves no thread or descriptor behind."""

from __future__ import annotations

import errno
import gc
import http.client
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import fsspec
import pytest
from botocore.exceptions import EndpointConnectionError

from ._s3_proxy import S3Proxy, s3_proxy  # noqa: F401

DATA = os.urandom(1 << 20)


@pytest.fixture
def proxy(s3_proxy: S3Proxy) -> Iterator[S3Proxy]:  # noqa: F811
    s3_proxy.reset()
    yield s3_proxy
    s3_proxy.reset()


def filesystem(proxy: S3Proxy, **extra: Any) -> Any:
    return fsspec.filesystem("s3", skip_instance_cache=True, **proxy.options, **extra)


def raw_get(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> tuple[int, Any, bytes]:
    """One plain HTTP request (no retries): status, headers, body."""
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers or {}, method=method), timeout=30
        ) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


@pytest.fixture
def obj(proxy: S3Proxy, bucket: Any) -> tuple[str, str]:
    """A 1 MiB object put to moto and registered with the proxy: (bucket, key)."""
    bucket.put("dir/data 1.bin", DATA)
    proxy.serve_locally(bucket.name, "dir/data 1.bin", DATA)
    proxy.reset_stats()
    return bucket.name, "dir/data 1.bin"


def url(proxy: S3Proxy, bucket: str, key: str) -> str:
    return f"{proxy.endpoint}/{bucket}/{urllib.parse.quote(key)}"


def test_ranged_reads_served_locally(proxy: S3Proxy, obj: tuple[str, str], s3: Any) -> None:
    fs = filesystem(proxy)
    path = "/".join(obj)
    spans = [(0, 1), (0, 4096), (1000, 300_000), (len(DATA) - 17, len(DATA)), (5, len(DATA))]
    for start, end in spans:
        assert fs.cat_file(path, start=start, end=end) == DATA[start:end]
    stats = proxy.stats()
    assert stats["ranged_gets"] == stats["served_locally"] == len(spans)
    assert stats["bytes_served"] == sum(end - start for start, end in spans)
    assert stats["forwarded"] == 0  # moto was not asked

    # the answer as S3 gives it: moto's own ETag and Last-Modified
    head = s3.client.head_object(Bucket=obj[0], Key=obj[1])["ResponseMetadata"]["HTTPHeaders"]
    status, headers, body = raw_get(url(proxy, *obj), {"Range": "bytes=10-19"})
    assert (status, body) == (206, DATA[10:20])
    assert headers["Content-Range"] == f"bytes 10-19/{len(DATA)}"
    assert headers["Content-Length"] == "10" and headers["Accept-Ranges"] == "bytes"
    assert headers["ETag"] == head["etag"] and headers["Last-Modified"] == head["last-modified"]
    for rng, want in [
        ("bytes=-7", DATA[-7:]),
        (f"bytes={len(DATA) - 3}-", DATA[-3:]),
        ("bytes=0-9999999", DATA),
    ]:
        assert raw_get(url(proxy, *obj), {"Range": rng})[::2] == (206, want)
    assert proxy.stats()["forwarded"] == 0

    # a whole-object GET is answered from the bytes too (200); metadata goes to moto
    proxy.reset_stats()
    assert fs.cat_file(path) == DATA
    assert raw_get(url(proxy, *obj), {})[::2] == (200, DATA)
    stats = proxy.stats()
    assert stats["whole_gets"] == 2 and stats["bytes_served"] == 2 * len(DATA)  # (s3fs asked moto a HEAD)
    assert fs.info(path)["size"] == len(DATA)
    assert proxy.stats()["forwarded"] >= 1


def test_unregistered_objects_are_forwarded(proxy: S3Proxy, bucket: Any) -> None:
    bucket.put("plain", DATA)
    fs = filesystem(proxy)
    assert fs.cat_file(f"{bucket.name}/plain", start=100, end=5000) == DATA[100:5000]
    stats = proxy.stats()
    assert stats["ranged_gets"] == stats["forwarded"] == 1 and stats["served_locally"] == 0
    assert stats["bytes_served"] == 4900
    fs.pipe_file(f"{bucket.name}/written", b"through the proxy")
    assert bucket.keys() == ["plain", "written"]
    with pytest.raises(ValueError, match="bytes"):
        proxy.serve_locally(bucket.name, "plain", DATA[:-1])


def test_if_match(proxy: S3Proxy, obj: tuple[str, str], s3: Any) -> None:
    path = "/".join(obj)
    etag = s3.client.head_object(Bucket=obj[0], Key=obj[1])["ETag"]
    assert (
        filesystem(proxy, s3_additional_kwargs={"IfMatch": etag}).cat_file(path, start=0, end=8) == DATA[:8]
    )
    # s3fs turns a 412 PreconditionFailed into OSError(errno.EINVAL, "At least one of the pre-conditions
    # you specified did not hold") — not retried, the same whether the proxy or moto answered
    wrong = filesystem(proxy, s3_additional_kwargs={"IfMatch": '"0123456789abcdef0123456789abcdef"'})
    with pytest.raises(OSError, match="pre-conditions") as info:
        wrong.cat_file(path, start=0, end=8)
    assert info.value.errno == errno.EINVAL and type(info.value) is OSError
    assert proxy.stats()["preconditions_failed"] == 1 and proxy.stats()["forwarded"] == 0
    status, _, body = raw_get(url(proxy, *obj), {"Range": "bytes=0-3", "If-Match": '"other"'})
    assert status == 412 and b"<Code>PreconditionFailed</Code>" in body


def test_a_replaced_object_is_left_to_moto(proxy: S3Proxy, obj: tuple[str, str], s3: Any) -> None:
    path = "/".join(obj)
    old_etag = s3.client.head_object(Bucket=obj[0], Key=obj[1])["ETag"]
    fs = filesystem(proxy)
    fs.pipe_file(path, b"a new body")  # through the proxy: the registration goes
    assert not proxy.is_served_locally(*obj)
    assert fs.cat_file(path, start=2, end=5) == b"new"
    assert proxy.stats()["served_locally"] == 0
    with pytest.raises(OSError, match="pre-conditions") as info:  # moto's own 412
        filesystem(proxy, s3_additional_kwargs={"IfMatch": old_etag}).cat_file(path, start=0, end=3)
    assert info.value.errno == errno.EINVAL
    # a DELETE drops it too
    proxy.serve_locally(*obj, b"a new body")
    fs.rm_file(path)
    assert not proxy.is_served_locally(*obj)
    with pytest.raises(FileNotFoundError):
        fs.cat_file(path, start=0, end=3)


def test_latency(proxy: S3Proxy, obj: tuple[str, str]) -> None:
    fs = filesystem(proxy)
    proxy.set_faults(latency=0.3)
    t0 = time.perf_counter()
    assert fs.cat_file("/".join(obj), start=0, end=10) == DATA[:10]
    assert time.perf_counter() - t0 >= 0.3
    t0 = time.perf_counter()
    assert raw_get(url(proxy, *obj), method="HEAD")[0] in (200, 403)  # every request waits, forwarded too
    assert time.perf_counter() - t0 >= 0.3


def test_slow_down(proxy: S3Proxy, obj: tuple[str, str]) -> None:
    proxy.set_faults(error_rate=1.0)
    status, headers, body = raw_get(url(proxy, *obj), {"Range": "bytes=0-9"})
    assert status == 503 and headers["Content-Type"].startswith("application/xml")
    want = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
    assert want in body
    fs = filesystem(proxy, config_kwargs={"retries": {"total_max_attempts": 1}})  # botocore: no retries
    fs.retries = 2  # s3fs retries SlowDown itself
    assert fs.info("/".join(obj))["size"] == len(DATA)  # only ranged GETs fail by default
    # persistent 503 SlowDown: s3fs raises OSError(errno.EBUSY, "Please reduce your request rate.")
    with pytest.raises(OSError, match="reduce your request rate") as info:
        fs.cat_file("/".join(obj), start=0, end=10)
    assert info.value.errno == errno.EBUSY
    stats = proxy.stats()
    assert stats["errors_injected"] == 3 and stats["forwarded"] == 1  # 1: the HEAD
    proxy.set_faults(error_rate=1.0, only_ranged=False)
    assert raw_get(url(proxy, *obj), method="HEAD")[0] == 503
    proxy.set_faults(error_rate=0.5, seed=7)
    first = [raw_get(url(proxy, *obj), {"Range": "bytes=0-0"})[0] for _ in range(20)]
    proxy.set_faults(error_rate=0.5, seed=7)
    assert [raw_get(url(proxy, *obj), {"Range": "bytes=0-0"})[0] for _ in range(20)] == first
    assert set(first) == {206, 503}


def test_reset_and_stall(proxy: S3Proxy, obj: tuple[str, str]) -> None:
    proxy.set_faults(reset_rate=1.0)
    with pytest.raises((ConnectionError, http.client.RemoteDisconnected, urllib.error.URLError)):
        raw_get(url(proxy, *obj), {"Range": "bytes=0-9"})
    assert proxy.stats()["resets_injected"] == 1
    proxy.set_faults(stall_rate=1.0, stall_seconds=0.3)
    t0 = time.perf_counter()
    assert raw_get(url(proxy, *obj), {"Range": "bytes=0-9"})[::2] == (206, DATA[:10])
    assert time.perf_counter() - t0 >= 0.3
    assert proxy.stats()["stalls_injected"] == 1
    # through s3fs, with botocore's retries off: a reset surfaces untranslated, as botocore's
    # EndpointConnectionError ("Could not connect to the endpoint URL"; not an OSError, s3fs retries nothing)
    proxy.set_faults(reset_rate=1.0)
    fs = filesystem(proxy, config_kwargs={"retries": {"total_max_attempts": 1}})
    with pytest.raises(EndpointConnectionError):
        fs.cat_file("/".join(obj), start=0, end=10)
    assert proxy.stats()["resets_injected"] >= 2
    proxy.set_faults()
    assert fs.cat_file("/".join(obj), start=0, end=10) == DATA[:10]


def test_forbid(proxy: S3Proxy, obj: tuple[str, str]) -> None:
    fs = filesystem(proxy)
    proxy.forbid(*obj)
    # s3fs turns 403 AccessDenied into PermissionError("Access Denied")
    with pytest.raises(PermissionError):
        fs.cat_file("/".join(obj), start=0, end=10)
    with pytest.raises(PermissionError):
        fs.info("/".join(obj))
    assert proxy.stats()["forbidden"] >= 2 and proxy.stats()["forwarded"] == 0
    proxy.forbid(*obj, forbidden=False)
    assert fs.cat_file("/".join(obj), start=0, end=10) == DATA[:10]


def _settled(before_threads: set[int | None], before_fds: int | None) -> bool:
    threads = {t.ident for t in threading.enumerate()} - before_threads
    fds = len(os.listdir("/proc/self/fd")) if before_fds is not None else None
    return not threads and (fds is None or before_fds is None or fds <= before_fds)


def test_stop_leaves_nothing(s3: Any, bucket: Any) -> None:
    bucket.put("k", DATA)
    gc.collect()  # sockets of earlier tests' filesystems close now, not during the count
    has_proc = os.path.isdir("/proc/self/fd")
    before_threads = {t.ident for t in threading.enumerate()}
    before_fds = len(os.listdir("/proc/self/fd")) if has_proc else None
    with S3Proxy(s3.options["endpoint_url"], s3.options) as proxy:
        with pytest.raises(RuntimeError):
            proxy.start()
        endpoint = proxy.endpoint
        assert raw_get(f"{endpoint}/{bucket.name}/k", {"Range": "bytes=0-9"})[0] == 403  # forwarded, unsigned
        proxy.set_faults(stall_rate=1.0, stall_seconds=60)
        cut: list[BaseException] = []

        def stalled() -> None:
            try:
                raw_get(f"{endpoint}/{bucket.name}/k", {"Range": "bytes=0-9"})
            except Exception as exc:
                cut.append(exc)

        waiter = threading.Thread(target=stalled)
        waiter.start()
        deadline = time.monotonic() + 10
        while proxy.stats()["stalls_injected"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
    # stop() raises unless its thread ended in time; the stalled request was cut, not waited for
    waiter.join(10)
    assert not waiter.is_alive() and len(cut) == 1
    with pytest.raises(urllib.error.URLError):
        raw_get(f"{endpoint}/{bucket.name}/k")
    deadline = time.monotonic() + 10  # moto's handler threads end as the proxy's connections close
    while not _settled(before_threads, before_fds) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _settled(before_threads, before_fds), [t.name for t in threading.enumerate()]
