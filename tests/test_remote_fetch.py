"""Many ranges of one S3 object at once (sjsonl.storage.fetch), through moto behind the fault-injecting proxy:
the window of requests in flight halves under a 503 storm and grows back, a stalled request is hedged (sent
again; the first answer wins), and under both every range comes back with the right bytes."""

from __future__ import annotations

import json
import uuid

import pytest

pytest.importorskip("aiohttp")
s3fs = pytest.importorskip("s3fs")

from sjsonl.storage import fetch  # noqa: E402
from sjsonl.storage.fetch import RangeFetcher, Window, fetcher_for, is_throttling  # noqa: E402
from sjsonl.storage.remote import RemoteFile  # noqa: E402

from ._s3_proxy import s3_proxy  # noqa: E402, F401

DATA = b"".join(json.dumps({"i": i, "pad": "x" * (i % 50)}).encode() + b"\n" for i in range(20_000))
RANGES = [(k * 997, k * 997 + 300) for k in range(200)]


@pytest.fixture
def obj(s3, s3_proxy, monkeypatch):  # noqa: F811
    """An object served through the proxy (ranges in O(range)); the chunk cache off: every read is a GET."""
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", "off")
    s3_proxy.reset()
    bucket = f"fetch-{uuid.uuid4().hex[:12]}"
    s3.client.create_bucket(Bucket=bucket)
    s3.client.put_object(Bucket=bucket, Key="d.jsonl", Body=DATA)
    s3_proxy.serve_locally(bucket, "d.jsonl", DATA)
    # the backends' own retries off, so what the server answers reaches sjsonl (botocore: max_attempts; s3fs
    # retries SlowDown five times itself)
    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 1)
    options = {**s3_proxy.options, "config_kwargs": {"retries": {"max_attempts": 1}}}
    yield RemoteFile(f"s3://{bucket}/d.jsonl", options), s3_proxy
    s3_proxy.reset()


def test_the_window_halves_at_most_once_a_second_and_grows_back():
    window = Window(ceiling=64)
    assert window.size == 32
    for t in range(6):
        window.throttled(now=float(t))
        window.throttled(now=t + 0.5)  # (the same storm: not cut again)
    assert window.size == 1
    for _ in range(5000):  # (+1/size each: ~size²/2 answers from 1 to 64)
        window.succeeded()
    assert window.size == 64  # back to the ceiling, and no further
    assert is_throttling(OSError(16, "Please reduce your request rate.")) and not is_throttling(
        PermissionError("Access Denied")
    )


@pytest.mark.slow  # (~17 s of backoff: the fast tier stays within the README's 7 minutes)
def test_a_503_storm_narrows_the_window_and_every_range_still_arrives(obj, monkeypatch):
    remote, proxy = obj
    fetcher = fetcher_for(remote.path)
    start = fetcher.window.size
    proxy.set_faults(error_rate=0.5, seed=1)
    assert remote.read_many(RANGES) == [DATA[s:e] for s, e in RANGES]
    assert proxy.stats()["errors_injected"] > 10
    assert fetcher.window.size < start  # the storm lowered it
    proxy.set_faults()
    proxy.reset_stats()
    narrowed = fetcher.window.size
    for _ in range(5):
        assert remote.read_many(RANGES) == [DATA[s:e] for s, e in RANGES]
    assert fetcher.window.size > narrowed  # and calm lets it grow back


def test_the_window_bounds_the_requests_in_flight(obj, monkeypatch):
    remote, proxy = obj
    monkeypatch.setitem(fetch._FETCHERS, (__import__("os").getpid(), "s3://" + remote.path.split("/")[2]),
                        RangeFetcher(ceiling=4))  # fmt: skip
    proxy.set_faults(latency=0.02)
    assert remote.read_many(RANGES) == [DATA[s:e] for s, e in RANGES]
    assert proxy.stats()["max_in_flight"] <= 4 + 1  # its ceiling (+1: a HEAD a fresh filesystem may send);
    # without the window, aiobotocore's pool alone would allow 10


def test_background_requests_take_half_the_window_and_a_batch_finds_room(obj, monkeypatch):
    """The chunk filler's requests (background) hold at most half the window, so a batch's own reads sent
    while a long fill is under way go out beside it at once (the requests in flight rise past the fill's
    share), and both get their bytes."""
    import threading
    import time

    remote, proxy = obj
    fetcher = RangeFetcher(ceiling=8)
    for _ in range(40):  # grown to its ceiling, as after a run of answers
        fetcher.window.succeeded()
    assert fetcher.window.size == 8
    monkeypatch.setitem(
        fetch._FETCHERS, (__import__("os").getpid(), "s3://" + remote.path.split("/")[2]), fetcher
    )
    proxy.set_faults(latency=0.05)
    remote.read(0, 10)  # the filesystem made (its HEAD out of the way)
    proxy.reset_stats()
    fill: list[bytes] = []
    filler = threading.Thread(target=lambda: fill.extend(remote._fetch(RANGES[:60], background=True)))
    filler.start()
    time.sleep(0.12)  # the fill holds its share of the window
    assert proxy.stats()["max_in_flight"] <= 4  # half the window (8), not all of it
    assert remote._fetch(RANGES[100:104]) == [DATA[s:e] for s, e in RANGES[100:104]]
    assert filler.is_alive()  # (60 requests, 4 at a time, 50 ms each: the fill is still under way)
    assert 4 < proxy.stats()["max_in_flight"] <= 8  # the batch's requests beside the fill's, in the window
    filler.join()
    assert fill == [DATA[s:e] for s, e in RANGES[:60]]


def test_a_stalled_request_is_hedged_and_the_first_answer_wins(obj, monkeypatch):
    remote, proxy = obj
    monkeypatch.setattr(fetch, "HEDGE_MAX", 0.3)  # (instead of 2 s: no request is slower here otherwise)
    fetcher = fetcher_for(remote.path)
    proxy.set_faults(stall_rate=0.02, stall_seconds=5, seed=2)
    assert remote.read_many(RANGES) == [DATA[s:e] for s, e in RANGES]
    # a stalled request was sent again and its copy answered first (on this in-process server, requests
    # waiting for it are hedged too: more copies than stalls)
    assert proxy.stats()["stalls_injected"] >= 1 and fetcher.hedge_wins >= 1
