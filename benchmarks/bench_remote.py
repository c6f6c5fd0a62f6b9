"""Training from S3: a shuffled epoch (exact: ``DistributedSampler``) through a DataLoader with 4 workers,
batch 64, from an S3 object, at 0 and 30 ms of latency per request — sjsonl with its local chunk cache (first
epoch from an empty cache, second epoch — over the first 20,000 records and over a whole epoch, against the
local copy's whole epoch), without it (one ranged read per record, merged per batch: the
path before the cache), and on a local copy of the file. The same exact shuffle through
``sjsonl.torch.IterableDataset`` (each worker reads its share in order, its next windows fetched while one is
decoded: ``sjsonl.storage.ahead``) without the cache and from an empty one — its rows read 20,000 records at
30 ms too: the windows read ahead (four per worker) would inflate the GETs and bytes of a shorter run.

The server is moto's S3 behind the proxy of ``tests/_s3_proxy.py``, which answers ranged GETs of the
benchmark objects itself from memory in O(range) (stock moto reads the whole object for every ranged GET,
~35 ms of CPU on 64 MiB: it would measure moto) and adds the latency; it counts requests and bytes, which
give GETs and MB per 1,000 records. The index is built beforehand (its own figure: the scan over the wire vs
the local scan); the cache-on first epoch starts from an empty chunk cache (the index built with the cache
off), so it measures chunk fetches, not the scan's filling. Each variant reads the first 20,000 records of
the epoch (2,000 without the cache at 30 ms); records/s is over them, first batch is the time to the first
batch from a new DataLoader iterator; each variant runs 3 times (the first epoch from an emptied cache each
time) and the medians are reported (GETs and MB: of the last run). Corpora: 64 MiB of ~180-byte records
and 128 MiB of ~2 KB ones (``--quick``: 8 and 16 MiB, 0 ms only).

MosaicML ``streaming`` and LitData run on the same corpora, server and latencies, with their default shuffles
(``remote_baselines.py``, in the ``.venv-baselines`` environment ``make bench`` makes: Mosaic cannot share
sjsonl's numpy): each corpus converted first (MDS shards, LitData chunks: 64 MB by default; the seconds in
the note), the shards uploaded, then the first 20,000 records of a shuffled epoch from an empty local cache,
DataLoader with 4 workers, batch 64 — one run each (a run at 30 ms takes minutes), GETs counting whole-object
ones.

    python benchmarks/bench_remote.py [--quick]
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests._s3_proxy
from common import bench_main, corpus, environ, figure
from sjsonl import JSONLDataset
from sjsonl.torch import DistributedSampler, IterableDataset

os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")  # (the server is local)

COLUMNS = [
    "corpus",
    "latency",
    "variant",
    "records/s",
    "first batch",
    "GETs/1k rec",
    "MB/1k rec",
    "disk",
    "note",
]
RECORDS, RECORDS_UNCACHED = 20_000, 2_000
WORKERS, BATCH = 4, 64
RUNS = 3  # of each variant; the median is reported
BASELINES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv-baselines")


def _ids(batch: list[Any]) -> list[int]:
    return [r["id"] for r in batch]


def _epoch(ds: JSONLDataset, records: int | None, iterable: bool = False) -> tuple[float, float]:
    """(records/s over the first ``records`` of a shuffled epoch — all of it for ``None`` — seconds to the
    first batch): ``ds`` through ``DistributedSampler`` (each batch asked for by the loader), or with
    ``iterable`` through ``sjsonl.torch.IterableDataset`` (each worker reads its share of the same exact
    shuffle in order, the next windows fetched ahead)."""
    source: Any = IterableDataset(ds, seed=0, num_replicas=1, rank=0) if iterable else ds
    sampler = None if iterable else DistributedSampler(ds, num_replicas=1, rank=0, seed=0)
    loader = torch.utils.data.DataLoader(
        source, batch_size=BATCH, sampler=sampler, num_workers=WORKERS, collate_fn=_ids
    )
    t0 = time.perf_counter()
    it = iter(loader)
    next(it)
    first = time.perf_counter() - t0
    got = BATCH + sum(len(b) for b in itertools.islice(it, None if records is None else records // BATCH - 1))
    total = time.perf_counter() - t0
    del it
    return got / total, first


def _median_epoch(make: Any, records: int | None, iterable: bool = False) -> tuple[float, float]:
    """:func:`_epoch` over ``make()``'s dataset, the median of :data:`RUNS` runs (a lone run of a DataLoader
    with 4 workers on 2 cores strays by several times now and then)."""
    runs = [_epoch(make(), records, iterable) for _ in range(RUNS)]
    return statistics.median(r for r, _ in runs), statistics.median(f for _, f in runs)


def _disk(directory: str) -> int:
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512 for d, _, fs in os.walk(directory) for f in fs)


def _start_server() -> tuple[Any, Any, Any]:
    import boto3
    from moto.server import ThreadedMotoServer
    from tests._s3_proxy import S3Proxy  # type: ignore[import-not-found]
    from tests.conftest import _free_port  # type: ignore[import-not-found]

    port = _free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    endpoint = f"http://127.0.0.1:{port}"
    options = {
        "endpoint_url": endpoint,
        "key": "x",
        "secret": "x",
        "client_kwargs": {"region_name": "us-east-1"},
    }
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1"
    )
    proxy = S3Proxy(endpoint, options).start()
    return moto, proxy, client


def _one_corpus(
    kind: str, size: int, latencies: list[float], proxy: Any, client: Any, work: str,
    local_copy: tuple[float, float, float, float],
) -> list[dict]:  # fmt: skip
    path = str(corpus(kind, size))
    with open(path, "rb") as f:
        data = f.read()
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="train.jsonl", Body=data)
    proxy.serve_locally(bucket, "train.jsonl", data)
    url = f"s3://{bucket}/train.jsonl"
    label = f"{kind}, {size >> 20} MiB"
    rows: list[dict] = []
    index_dir = os.path.join(work, f"index-{kind}")
    os.makedirs(index_dir)
    local_rate, local_first, local_build, local_whole = local_copy
    with environ("SJSONL_REMOTE_CACHE", "off"):
        t0 = time.perf_counter()
        JSONLDataset(url, storage_options=proxy.options, index_dir=index_dir)
        remote_build = time.perf_counter() - t0
    figure(f"index_{kind}", remote_build, "s", what=f"index build of an S3 object over the wire ({label})",
           median_of=1, baseline="the same file's local index build", baseline_value=local_build)  # fmt: skip
    rows.append({"corpus": label, "latency": "—", "variant": "local copy", "records/s": f"{local_rate:,.0f}",
                 "first batch": f"{local_first:.2f} s",
                 "note": f"a whole epoch: {local_whole:,.0f} records/s"})  # fmt: skip
    for latency in latencies:
        proxy.set_faults(latency=latency)
        ms = f"{latency * 1e3:.0f} ms"
        cache = os.path.join(work, f"chunks-{kind}-{latency}")
        for variant, env, records, iterable, key in (
            ("no cache (ranged reads)", "off", RECORDS_UNCACHED if latency else RECORDS, False, "nocache"),
            ("no cache, IterableDataset (read ahead)", "off", RECORDS, True, "nocache_iterable"),
            ("cache, 1st epoch (empty cache)", cache, RECORDS, False, "epoch1"),
            ("cache, 1st epoch, IterableDataset", cache, RECORDS, True, "epoch1_iterable"),
            ("cache, 2nd epoch", cache, RECORDS, False, "epoch2"),
            ("cache, 2nd epoch, whole", cache, None, False, "epoch2whole"),
        ):  # fmt: skip
            with environ("SJSONL_REMOTE_CACHE", env):

                def fresh(empty: bool = variant.startswith("cache, 1st"), cache: str = cache) -> JSONLDataset:
                    if empty:  # each run of the first epoch from an empty cache
                        shutil.rmtree(cache, ignore_errors=True)
                    proxy.reset_stats()
                    return JSONLDataset(url, storage_options=proxy.options, index_dir=index_dir)

                rate, first = _median_epoch(fresh, records, iterable)
                stats = proxy.stats()  # (of the last run)
            whole = records is None
            base = local_whole if whole else local_rate
            per_k = 1000 / (records or len(fresh()))
            disk = _disk(cache) if env != "off" else 0
            rows.append({
                "corpus": label, "latency": ms, "variant": variant, "records/s": f"{rate:,.0f}",
                "first batch": f"{first:.2f} s", "GETs/1k rec": f"{stats['ranged_gets'] * per_k:.1f}",
                "MB/1k rec": f"{stats['bytes_served'] * per_k / 1e6:.2f}", "disk": f"{disk / 2**20:.0f} MiB",
                "note": f"{rate / base:.2f}x the local copy" + (" (a whole epoch each)" if whole else ""),
            })  # fmt: skip
            figure(f"{key}_{kind}_{latency * 1e3:.0f}ms", rate, "rec/s",
                   what=f"shuffled epoch from S3, {variant}, {ms} per request, {label}, DataLoader 4 workers",
                   median_of=RUNS, baseline="the local copy" + (", a whole epoch" if whole else ""),
                   baseline_value=base)  # fmt: skip
        proxy.set_faults()
    rows += _half_cache(url, proxy, index_dir, work, label, len(data), local_rate)
    return rows + _baselines(path, label, latencies, proxy, client, bucket, work, local_rate)


def belady_bytes(starts: Any, ends: Any, order: Any, capacity: int, chunk: int = 1 << 20) -> int:
    """Bytes a cache of ``capacity`` bytes in ``chunk``-byte chunks must fetch to read the records at
    ``order`` (record ``i`` is bytes ``starts[i]:ends[i]``) when it evicts the chunk next needed farthest in
    the future — Belady's MIN, the optimum for a known order.

    Example:
        >>> belady_bytes([0, 10, 20], [10, 20, 30], [0, 2, 0, 1], capacity=10, chunk=10)
        40
        >>> belady_bytes([0, 10, 20], [10, 20, 30], [0, 2, 0, 1], capacity=20, chunk=10)
        30
    """
    import heapq

    seq = [c for i in order for c in range(int(starts[i]) // chunk, (int(ends[i]) - 1) // chunk + 1)]
    never = len(seq)
    nxt, seen = [never] * len(seq), {}
    for k in range(len(seq) - 1, -1, -1):
        nxt[k], seen[seq[k]] = seen.get(seq[k], never), k
    slots, held, heap, fetched = max(1, capacity // chunk), {}, [], 0
    for k, c in enumerate(seq):
        if c not in held:
            fetched += 1
            while len(held) >= slots:  # evict the chunk used farthest ahead (stale heap entries skipped)
                use, victim = heapq.heappop(heap)
                if held.get(victim) == -use:
                    del held[victim]
        held[c] = nxt[k]
        heapq.heappush(heap, (-nxt[k], c))
    return fetched * chunk


def _half_cache(
    url: str, proxy: Any, index_dir: str, work: str, label: str, size: int, local_rate: float
) -> list[dict]:  # fmt: skip
    """At 0 ms, a cache limit of half the object: measured (the object is over the limit, so it is read by
    ranges), and beside it the bytes Belady's optimal chunk cache of that size would fetch for the same
    records (simulated from the sampler's order)."""
    cache = os.path.join(work, f"chunks-half-{label.split(',')[0]}")
    with environ("SJSONL_REMOTE_CACHE", cache), environ("SJSONL_REMOTE_CACHE_BYTES", str(size // 2)):

        def fresh() -> JSONLDataset:
            proxy.reset_stats()
            return JSONLDataset(url, storage_options=proxy.options, index_dir=index_dir)

        rate, first = _median_epoch(fresh, RECORDS)
        stats = proxy.stats()
        ds = fresh()
    f = ds._files[0]
    starts = f.offsets.astype("int64")
    ends = [*starts[1:].tolist(), f.end]
    order = list(DistributedSampler(ds, num_replicas=1, rank=0, seed=0))
    per_k = 1000 / RECORDS
    optimum = belady_bytes(starts, ends, order[:RECORDS], size // 2)
    epoch = belady_bytes(starts, ends, order, size // 2)
    rows = [
        {"corpus": label, "latency": "0 ms", "variant": "cache limit half the object (measured)",
         "records/s": f"{rate:,.0f}", "first batch": f"{first:.2f} s",
         "GETs/1k rec": f"{stats['ranged_gets'] * per_k:.1f}",
         "MB/1k rec": f"{stats['bytes_served'] * per_k / 1e6:.2f}", "disk": f"{_disk(cache) / 2**20:.0f} MiB",
         "note": f"{rate / local_rate:.2f}x the local copy; over the limit: read by ranges, nothing cached"},
        {"corpus": label, "latency": "—",
         "variant": "Belady's optimum, chunk cache of half the object (simulated)",
         "MB/1k rec": f"{optimum * per_k / 1e6:.2f}",
         "note": f"a whole epoch: {epoch / size:.1f}x the object's bytes (1 MiB chunks, the same order)"},
    ]  # fmt: skip
    figure(f"half_cache_mb_{label.split(',')[0]}", stats["bytes_served"] * per_k / 1e6, "MB",
           what=f"bytes fetched per 1,000 records, cache limit half the object ({label}), 0 ms", median_of=1,
           baseline="Belady's optimum for that cache", baseline_value=optimum * per_k / 1e6)  # fmt: skip
    return rows


def _baseline(*args: str) -> dict:
    """One step of ``remote_baselines.py`` in the baselines' environment: its JSON answer."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "remote_baselines.py")
    # their scratch files (LitData's file locks, …) in a directory of their own, removed after the step
    with tempfile.TemporaryDirectory(prefix="sjsonl-bench-baseline-") as scratch:
        env = {**os.environ, "PYTHONWARNINGS": "ignore", "TMPDIR": scratch}
        out = subprocess.run([os.path.join(BASELINES, "bin", "python"), script, *args], capture_output=True,
                             text=True, timeout=1800, env=env)  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"remote_baselines.py {args[0]} {args[1]} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _baselines(
    path: str, label: str, latencies: list[float], proxy: Any, client: Any, bucket: str, work: str,
    local_rate: float,
) -> list[dict]:  # fmt: skip
    """MosaicML ``streaming`` and LitData rows: convert, upload the shards, a shuffled epoch per latency."""
    rows: list[dict] = []
    for tool, name in (("mosaic", "MosaicML streaming (its shuffle)"), ("litdata", "LitData (its shuffle)")):
        converted = os.path.join(work, f"{tool}-{label.split(',')[0]}")
        seconds = _baseline("convert", tool, path, converted)["seconds"]
        prefix = os.path.basename(converted)
        for d, _, files in os.walk(converted):
            for f in files:
                key = f"{prefix}/{os.path.relpath(os.path.join(d, f), converted)}"
                with open(os.path.join(d, f), "rb") as fh:
                    data = fh.read()
                client.put_object(Bucket=bucket, Key=key, Body=data)
                proxy.serve_locally(bucket, key, data)
        for latency in latencies:
            proxy.set_faults(latency=latency)
            cache = os.path.join(work, f"cache-{prefix}-{latency}")
            failed, got = "", {}
            for attempt in range(3):  # (a Mosaic worker once read a sample it could not decode: run again)
                try:
                    proxy.reset_stats()
                    got = _baseline(
                        "epoch",
                        tool,
                        f"s3://{bucket}/{prefix}",
                        proxy.endpoint,
                        f"{cache}-{attempt}",
                        str(RECORDS),
                    )
                    break
                except RuntimeError as exc:
                    failed = next((ln for ln in reversed(str(exc).splitlines()) if ln.strip()), "")
                    got = {}
            if not got:  # three failed runs: a row that says so (the cause was not found)
                rows.append({"corpus": label, "latency": f"{latency * 1e3:.0f} ms", "variant": name,
                             "note": f"failed 3 runs: {failed[:120]}"})  # fmt: skip
                continue
            cache = f"{cache}-{attempt}"
            retried = f"; run {attempt + 1} (before: {failed[:80]})" if attempt else ""
            stats, per_k = proxy.stats(), 1000 / RECORDS
            rows.append({
                "corpus": label, "latency": f"{latency * 1e3:.0f} ms", "variant": name,
                "records/s": f"{got['rate']:,.0f}", "first batch": f"{got['first']:.2f} s",
                "GETs/1k rec": f"{(stats['ranged_gets'] + stats['whole_gets']) * per_k:.1f}",
                "MB/1k rec": f"{stats['bytes_served'] * per_k / 1e6:.2f}",
                "disk": f"{_disk(cache) / 2**20:.0f} MiB",
                "note": f"{got['rate'] / local_rate:.2f}x the local copy; converted first in {seconds:.1f} s"
                + retried,
            })  # fmt: skip
            figure(f"{tool}_{label.split(',')[0]}_{latency * 1e3:.0f}ms", got["rate"], "rec/s",
                   what=f"shuffled epoch from S3, {name}, {latency * 1e3:.0f} ms per request, {label}, "
                   "DataLoader 4 workers", median_of=1, baseline="the local copy (sjsonl)",
                   baseline_value=local_rate)  # fmt: skip
        proxy.set_faults()
    return rows


def _local_copy(kind: str, size: int, work: str) -> tuple[float, float, float, float]:
    """(records/s, first batch, index build seconds, records/s over a whole epoch) of the local copy —
    measured before the S3 server starts: with moto's server and the proxy in the process, the first
    DataLoaders over the short corpus's local copy were 10x slower than in a process of their own (their
    workers walked that heap in their first full collections; ``sjsonl.runtime.forks`` now freezes it in
    each child), which would flatter the remote rows."""
    path = str(corpus(kind, size))
    index_dir = os.path.join(work, f"local-index-{kind}")
    t0 = time.perf_counter()
    JSONLDataset(path, index_dir=index_dir)
    build = time.perf_counter() - t0
    local = JSONLDataset(path, index_dir=index_dir)
    rate, first = _median_epoch(lambda: local, RECORDS)
    whole, _ = _median_epoch(lambda: local, None)
    return rate, first, build, whole


def run(quick: bool) -> list[dict]:
    work = tempfile.mkdtemp(prefix="sjsonl-bench-remote-")
    sizes = {"short": (8 if quick else 64) << 20, "long": (16 if quick else 128) << 20}
    try:
        locals_ = {kind: _local_copy(kind, size, work) for kind, size in sizes.items()}
        moto, proxy, client = _start_server()
        try:
            latencies = [0.0] if quick else [0.0, 0.030]
            rows = [
                row
                for kind, size in sizes.items()
                for row in _one_corpus(kind, size, latencies, proxy, client, work, locals_[kind])
            ]
        finally:
            proxy.stop()
            moto.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for row in rows:
        for column in COLUMNS:
            row.setdefault(column, "")
    return rows


if __name__ == "__main__":
    bench_main(__doc__, run, COLUMNS, "8 and 16 MiB corpora, 0 ms only")
