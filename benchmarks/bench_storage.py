"""Storage benchmarks: compressed (.gz, seekable .zst) and remote (S3 on a local moto server) vs local.

Baselines in the same run: the local uncompressed file (the mmap path) for access and iteration; for
index builds, reading the bytes once (``wc -l``; ``gzip -dc`` piped to ``wc -l``; pyzstd decompressing
to nowhere).
S3 numbers come from moto's server in this process on 127.0.0.1: they show request counts and overheads,
not real S3 latency (tens of ms per request).

    python benchmarks/bench_storage.py [--quick]
"""

from __future__ import annotations

import gzip
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import DATA_DIR, REPEATS, bench_main, corpus, environ, figure, median_seconds
from sjsonl import JSONLDataset, JSONLIndexer
from sjsonl.storage.compressed import to_seekable_zstd

COLUMNS = ["benchmark", "variant", "median", "ratio", "note"]


def _compressed_copies(path) -> tuple[str, str]:
    gz, zst = str(path) + ".gz", str(path) + ".zst"
    if not os.path.exists(gz):
        with open(path, "rb") as src, gzip.open(gz + ".tmp", "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(gz + ".tmp", gz)
    if not os.path.exists(zst):
        to_seekable_zstd(path, zst + ".tmp")
        os.replace(zst + ".tmp", zst)
    return gz, zst


def _shell(cmd: str) -> None:
    subprocess.run(cmd, shell=True, check=True, capture_output=True)


def _pyzstd_drain(path: str) -> None:
    import pyzstd

    with pyzstd.SeekableZstdFile(path) as f:
        while f.read(4 << 20):
            pass


class _S3:
    """moto's server on a free local port, one bucket, the options sjsonl needs."""

    def __init__(self) -> None:
        import boto3
        from moto.server import ThreadedMotoServer

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self.server.start()
        endpoint = f"http://127.0.0.1:{port}"
        region = {"region_name": "us-east-1"}
        self.options = {"endpoint_url": endpoint, "key": "x", "secret": "x", "client_kwargs": region}
        self.client = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="x", aws_secret_access_key="x", **region
        )
        self.client.create_bucket(Bucket="bench")

    def put(self, path: str, key: str) -> str:
        self.client.upload_file(path, "bench", key)
        return f"s3://bench/{key}"


def run(quick: bool = False) -> list[dict]:
    mb = 16 if quick else 64
    label = f"short records, {mb} MiB"
    path = str(corpus("short", mb << 20))
    gz, zst = _compressed_copies(path)
    index_dir = tempfile.mkdtemp(prefix="sjsonl-bench-storage-")
    try:
        with environ("SJSONL_INDEX_DIR", index_dir):  # fresh indexes; never beside the cached corpora
            return _measure(path, gz, zst, label)
    finally:
        shutil.rmtree(index_dir, ignore_errors=True)


def _measure(path: str, gz: str, zst: str, label: str) -> list[dict]:
    s3 = _S3()
    url = s3.put(path, "train.jsonl")
    url_gz = s3.put(gz, "train.jsonl.gz")
    opts = s3.options
    rows: list[dict] = []

    def row(bench, variant, median, ratio="", note=""):
        rows.append(
            {
                "benchmark": f"{bench}, {label}",
                "variant": variant,
                "median": median,
                "ratio": ratio,
                "note": note,
            }
        )

    # ---- index build: against reading the bytes once
    wc = median_seconds(lambda: _shell(f"wc -l {path}"))
    zcat = median_seconds(lambda: _shell(f"gzip -dc {gz} | wc -l"))
    zdrain = median_seconds(lambda: _pyzstd_drain(zst))
    builds = {
        "local (mmap, threads)": (lambda: JSONLIndexer(path).populate_index(), wc, "`wc -l`"),
        ".gz": (lambda: JSONLIndexer(gz).populate_index(), zcat, "`zcat`+`wc -l`"),
        ".zst (seekable)": (lambda: JSONLIndexer(zst).populate_index(), zdrain, "pyzstd read-through"),
        "s3 (moto)": (lambda: JSONLIndexer(url, storage_options=opts).populate_index(), wc, "`wc -l` local"),
    }
    for variant, (fn, base, base_name) in builds.items():
        t = median_seconds(fn)
        row(
            "index build", variant, f"{t:.3f} s", f"{t / base:.2f}× {base_name}", f"{base_name}: {base:.3f} s"
        )

    # ---- random access, one record at a time, and as coalesced batches
    datasets = {
        "local": JSONLDataset(path),
        ".gz": JSONLDataset(gz),
        ".zst (seekable)": JSONLDataset(zst),
        "s3 (moto)": JSONLDataset(url, storage_options=opts),
        "s3 .gz (moto)": JSONLDataset(url_gz, storage_options=opts),
    }
    n = len(datasets["local"])
    rng = np.random.default_rng(0)
    singles = {"local": 100_000, ".gz": 500, ".zst (seekable)": 2000, "s3 (moto)": 200, "s3 .gz (moto)": 200}
    base_single = None
    keys = {".gz": "gz_get", ".zst (seekable)": "zst_get", "s3 (moto)": "s3_get"}
    for variant, ds in datasets.items():
        picks = rng.integers(0, n, singles[variant]).tolist()
        t = median_seconds(lambda ds=ds, picks=picks: [ds[i] for i in picks]) / len(picks)
        base_single = base_single or t
        row("random `ds[i]`", variant, f"{t * 1e6:,.1f} µs", f"{t / base_single:,.0f}× local")
        if variant in keys:
            figure(
                keys[variant],
                t * 1e6,
                "µs",
                what=f"random `ds[i]`, {variant}, {label}",
                median_of=REPEATS,
                baseline="the same records from the local uncompressed file",
                baseline_value=base_single * 1e6,
            )
    base_batch = None
    for variant, ds in datasets.items():
        batches = [rng.integers(0, n, 256) for _ in range(5)]
        t = median_seconds(lambda ds=ds, b=batches: [ds[x] for x in b]) / (5 * 256)
        base_batch = base_batch or t
        row(
            "random batch of 256 `ds[idx]`",
            variant,
            f"{t * 1e6:,.1f} µs/rec",
            f"{t / base_batch:,.0f}× local",
            "nearby records share one read",
        )

    # ---- sequential iteration
    base_iter = None
    for variant, ds in datasets.items():
        t = median_seconds(lambda ds=ds: sum(1 for _ in ds))
        base_iter = base_iter or t
        row("sequential `for r in ds`", variant, f"{n / t / 1e3:,.0f} k rec/s", f"{base_iter / t:.2f}× speed")

    # ---- reopening a .gz: seek points saved beside the index vs rebuilt by reading
    def reopen_and_read_last():
        ds = JSONLDataset(gz, build_index_on_load=False)
        ds[n - 1]

    with_points = median_seconds(reopen_and_read_last)
    seek_file = datasets[".gz"].index_paths[0][: -len(".npy")] + ".seekpoints"
    with open(seek_file, "rb") as f:
        saved = f.read()
    os.unlink(seek_file)
    without = median_seconds(reopen_and_read_last)
    with open(seek_file, "wb") as f:
        f.write(saved)
    row(
        "reopen .gz + read the last record",
        "seek points saved beside the index",
        f"{with_points * 1e3:.1f} ms",
        "",
        f"{len(saved) / 1e6:.1f} MB of seek points",
    )
    row(
        "reopen .gz + read the last record",
        "no saved seek points",
        f"{without * 1e3:.1f} ms",
        f"{without / with_points:.0f}× slower",
        "decompresses up to the record",
    )
    s3.server.stop()
    return rows


if __name__ == "__main__":
    t0 = time.perf_counter()
    bench_main(__doc__, run, COLUMNS, "small corpora, for a smoke run")
    print(f"\n({time.perf_counter() - t0:.0f} s; corpora cached in {DATA_DIR})")
