"""Foundation benchmarks: index build, random access, sequential iteration, open time, peak RSS.

Every ratio compares against a baseline measured in the same run: ``wc -l``, a plain readline indexer,
a bare memory map + ``orjson.loads``, seek + readline + ``json.loads``, an orjson line loop, 🤗 datasets.

    python benchmarks/bench_core.py [--quick]
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import orjson

sys.path.insert(0, os.path.dirname(__file__))
from common import REPEATS, bench_main, corpus, figure, median_seconds
from sjsonl import JSONLDataset, JSONLIndexer
from sjsonl.index import scan
from sjsonl.index.scan import CHUNK_BYTES, _buffer_load, _buffer_peek, _ChunkScanner, offset_dtype


def wc_l(path) -> None:
    subprocess.run(["wc", "-l", str(path)], check=True, capture_output=True)


def readline_indexer(path) -> list[int]:
    offsets, pos = [], 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                offsets.append(pos)
            pos += len(line)
    return offsets


def _scan_in_process(args):
    path, lo, hi, size = args
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return _ChunkScanner(_buffer_peek(mm), size, offset_dtype(size), CHUNK_BYTES, _buffer_load(mm))((lo, hi))


def process_indexer(path, pool: ProcessPoolExecutor) -> np.ndarray:
    """The same chunk scanner run in worker processes: the alternative to threads we measured."""
    size = os.path.getsize(path)
    chunks = [(str(path), lo, min(lo + CHUNK_BYTES, size), size) for lo in range(0, size, CHUNK_BYTES)]
    return np.concatenate(list(pool.map(_scan_in_process, chunks, chunksize=4)))


def peak_rss_mb(code: str) -> float:
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


# VmHWM, not getrusage: Linux carries ru_maxrss across fork+exec, so a child would report our own peak.
_RSS = (
    "{body}\nprint([int(l.split()[1]) / 1024 for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"
)


def bench_index(path, label: str, kind: str) -> list[dict]:
    wc = median_seconds(lambda: wc_l(path))
    ours = median_seconds(lambda: JSONLIndexer(path).populate_index())
    one = median_seconds(lambda: JSONLIndexer(path, workers=1).populate_index())
    with ProcessPoolExecutor(2) as pool:
        procs = median_seconds(lambda: process_indexer(path, pool))
    readline = median_seconds(lambda: readline_indexer(path))
    size = os.path.getsize(path)
    rss_base = peak_rss_mb(_RSS.format(body="import numpy, orjson, sjsonl"))
    rss_ours = peak_rss_mb(
        _RSS.format(body=f"import sjsonl\nsjsonl.JSONLIndexer({str(path)!r}).populate_index()")
    )
    how = f"{'compiled' if scan.NATIVE is not None else 'numpy'} scan, 2 threads"
    figure(
        f"build_{kind}",
        ours,
        "s",
        what=f"index build, {label} ({how})",
        median_of=REPEATS,
        baseline="`wc -l`",
        baseline_value=wc,
    )
    figure(
        f"build_{kind}_vs_readline",
        ours,
        "s",
        what=f"index build, {label} ({how})",
        median_of=REPEATS,
        baseline="a Python readline indexer",
        baseline_value=readline,
    )
    figure(
        f"rss_{kind}",
        rss_ours,
        "MB",
        what=f"peak RSS of a process indexing {label}",
        median_of=1,
        baseline="Python + numpy + sjsonl imported",
        baseline_value=rss_base,
    )
    n = len(readline_indexer(path)) if size < (64 << 20) else None
    rows = [
        {
            "benchmark": f"index build, {label}",
            "variant": "`wc -l` (baseline)",
            "median": f"{wc:.3f} s",
            "ratio": "1.00×",
            "note": f"{size / wc / 1e9:.2f} GB/s",
        },
        {
            "benchmark": f"index build, {label}",
            "variant": "sjsonl, 2 threads",
            "median": f"{ours:.3f} s",
            "ratio": f"{ours / wc:.2f}× wc",
            "note": f"{size / ours / 1e9:.2f} GB/s",
        },
        {
            "benchmark": f"index build, {label}",
            "variant": "sjsonl, 1 thread",
            "median": f"{one:.3f} s",
            "ratio": f"{one / wc:.2f}× wc",
            "note": "",
        },
        {
            "benchmark": f"index build, {label}",
            "variant": "same scan, 2 processes",
            "median": f"{procs:.3f} s",
            "ratio": f"{procs / wc:.2f}× wc",
            "note": "threads kept: faster",
        },
        {
            "benchmark": f"index build, {label}",
            "variant": "readline indexer",
            "median": f"{readline:.3f} s",
            "ratio": f"{readline / wc:.2f}× wc",
            "note": f"sjsonl is {readline / ours:.1f}× faster",
        },
        {
            "benchmark": f"index build, {label}",
            "variant": "peak RSS while indexing",
            "median": f"{rss_ours:.0f} MB",
            "ratio": "",
            "note": f"interpreter+imports alone: {rss_base:.0f} MB",
        },
    ]
    if n is not None:
        rows[0]["note"] += f", {n:,} records"
    return rows


_FIRST_OPEN = """
import time, sjsonl
t0 = time.perf_counter()
ds = sjsonl.JSONLDataset({path!r})
t1 = time.perf_counter()
ds[len(ds) // 2]
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def first_open(path, runs: int = REPEATS) -> tuple[float, float]:
    """Medians over fresh processes (sjsonl imported, the files page-cached) of ``JSONLDataset(path)`` and
    of the first ``ds[i]`` after it, which waits for the index's checks (made on a thread from the open)."""
    times = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", _FIRST_OPEN.format(path=str(path))],
            check=True,
            capture_output=True,
            text=True,
        )
        times.append([float(v) for v in out.stdout.split()])
    return statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)


def bench_access(path, label: str, kind: str, n_reads: int = 200_000) -> list[dict]:
    indexer = JSONLIndexer(path)
    indexer.write_index_to_disk()
    open_s = median_seconds(lambda: JSONLDataset(path, build_index_on_load=False), repeats=21)
    fresh_open, fresh_read = first_open(path)
    ds = JSONLDataset(path)
    picks = np.random.default_rng(0).integers(0, len(ds), size=n_reads).tolist()
    bounds = [*indexer.index.tolist(), os.path.getsize(path)]
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)

    def bare():
        for i in picks:
            orjson.loads(mm[bounds[i] : bounds[i + 1]])

    def ours():
        for i in picks:
            ds[i]

    def seek_readline():
        with open(path, "rb") as f:
            for i in picks:
                f.seek(bounds[i])
                json.loads(f.readline())

    def line_loop():
        with open(path, "rb") as f:
            for line in f:
                orjson.loads(line)

    def iterate():
        for _ in ds:
            pass

    t_bare, t_ours = median_seconds(bare), median_seconds(ours)
    t_seek = median_seconds(seek_readline)
    t_loop, t_iter = median_seconds(line_loop), median_seconds(iterate)
    projected = ds.select_columns(["id"])
    t_proj = median_seconds(lambda: sum(1 for _ in projected))
    us = 1e6 / n_reads
    n = len(ds)
    figure(
        f"get_{kind}",
        t_ours * us,
        "µs",
        what=f"random `ds[i]`, {label}",
        median_of=REPEATS,
        baseline="bare mmap slice + `orjson.loads`",
        baseline_value=t_bare * us,
    )
    figure(
        f"get_{kind}_vs_seek_readline",
        t_ours * us,
        "µs",
        what=f"random `ds[i]`, {label}",
        median_of=REPEATS,
        baseline="seek + readline + `json.loads`",
        baseline_value=t_seek * us,
    )
    figure(
        f"iter_{kind}",
        n / t_iter,
        "rec/s",
        what=f"`for r in ds`, {label}",
        median_of=REPEATS,
        baseline="orjson line loop",
        baseline_value=n / t_loop,
    )
    figure(
        f"select_{kind}",
        n / t_proj,
        "rec/s",
        what=f'`select_columns(["id"])`, {label}',
        median_of=REPEATS,
        baseline="`for r in ds`",
        baseline_value=n / t_iter,
    )
    figure(
        f"open_{kind}",
        open_s * 1e3,
        "ms",
        median_of=21,
        what=f"`JSONLDataset(path)`, index on disk (verified once per process), {label}, {n:,} records",
    )
    figure(
        f"first_open_{kind}",
        fresh_open * 1e3,
        "ms",
        median_of=REPEATS,
        what=f"first `JSONLDataset(path)` in a fresh process, index on disk, {label}, {n:,} records",
    )
    figure(
        f"first_read_{kind}",
        fresh_read * 1e3,
        "ms",
        median_of=REPEATS,
        what=f"the first `ds[i]` after it (waits for the index's checks, begun at the open), {label}",
    )
    return [
        {
            "benchmark": f"random `ds[i]`, {label}",
            "variant": "bare mmap slice + orjson (baseline)",
            "median": f"{t_bare * us:.2f} µs",
            "ratio": "1.00×",
            "note": "",
        },
        {
            "benchmark": f"random `ds[i]`, {label}",
            "variant": "sjsonl `ds[i]`",
            "median": f"{t_ours * us:.2f} µs",
            "ratio": f"{t_ours / t_bare:.2f}× bare",
            "note": "",
        },
        {
            "benchmark": f"random `ds[i]`, {label}",
            "variant": "seek + readline + json.loads",
            "median": f"{t_seek * us:.2f} µs",
            "ratio": f"{t_seek / t_bare:.2f}× bare",
            "note": "",
        },
        {
            "benchmark": f"sequential, {label}",
            "variant": "orjson line loop (baseline)",
            "median": f"{len(ds) / t_loop / 1e3:,.0f} k rec/s",
            "ratio": "1.00×",
            "note": "",
        },
        {
            "benchmark": f"sequential, {label}",
            "variant": "`for r in ds`",
            "median": f"{len(ds) / t_iter / 1e3:,.0f} k rec/s",
            "ratio": f"{t_loop / t_iter:.2f}× speed",
            "note": "",
        },
        {
            "benchmark": f"sequential, {label}",
            "variant": '`select_columns(["id"])`',
            "median": f"{len(ds) / t_proj / 1e3:,.0f} k rec/s",
            "ratio": f"{t_loop / t_proj:.2f}× speed",
            "note": "partial parsing (msgspec)",
        },
        {
            "benchmark": f"open with index, {label}",
            "variant": "`JSONLDataset(path)`",
            "median": f"{open_s * 1e3:.2f} ms",
            "ratio": "",
            "note": f"{len(ds):,} records; again in this process (checked once per process)",
        },
        {
            "benchmark": f"open with index, {label}",
            "variant": "first `JSONLDataset(path)` in a fresh process",
            "median": f"{fresh_open * 1e3:.2f} ms",
            "ratio": "",
            "note": "the index's O(records) checks run on a thread from here",
        },
        {
            "benchmark": f"open with index, {label}",
            "variant": "then the first `ds[i]`",
            "median": f"{fresh_read * 1e3:.2f} ms",
            "ratio": "",
            "note": "waits for those checks",
        },
    ]


def _hf_load_seconds(datasets, path, root: str) -> float:
    """Seconds of one ``load_dataset("json")`` into an empty cache (the Arrow conversion), cache removed."""
    cache = tempfile.mkdtemp(dir=root)
    t0 = time.perf_counter()
    datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=cache)
    seconds = time.perf_counter() - t0
    shutil.rmtree(cache, ignore_errors=True)
    return seconds


def bench_hf(path, label: str, n_reads: int = 20_000) -> list[dict]:
    try:
        import datasets
    except ImportError:
        return []
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    datasets.disable_progress_bars()
    wc = median_seconds(lambda: wc_l(path))
    root = tempfile.mkdtemp(prefix="sjsonl-bench-hf-")
    try:
        t_load = statistics.median(_hf_load_seconds(datasets, path, root) for _ in range(REPEATS))
        hf = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=root)
        ds = JSONLDataset(path)
        picks = np.random.default_rng(1).integers(0, len(ds), size=n_reads).tolist()
        t_hf = median_seconds(lambda: [hf[i] for i in picks])
        t_ours = median_seconds(lambda: [ds[i] for i in picks])
        t_index = median_seconds(lambda: JSONLIndexer(path).populate_index())

    finally:
        shutil.rmtree(root, ignore_errors=True)
    figure(
        "hf_load",
        t_index,
        "s",
        what=f"index build, {label}",
        median_of=REPEATS,
        baseline='🤗 `load_dataset("json")` (Arrow conversion)',
        baseline_value=t_load,
    )
    figure(
        "hf_get",
        t_ours / n_reads * 1e6,
        "µs",
        what=f"random `ds[i]`, {label}",
        median_of=REPEATS,
        baseline="🤗 `ds[i]` on the converted dataset",
        baseline_value=t_hf / n_reads * 1e6,
    )
    return [
        {
            "benchmark": f"🤗 datasets, {label}",
            "variant": '`load_dataset("json")` (Arrow conversion)',
            "median": f"{t_load:.2f} s",
            "ratio": f"{t_load / wc:.0f}× wc",
            "note": f"sjsonl index: {t_index:.3f} s ({t_load / t_index:.0f}× faster)",
        },
        {
            "benchmark": f"🤗 datasets, {label}",
            "variant": "🤗 `ds[i]` random",
            "median": f"{t_hf / n_reads * 1e6:.1f} µs",
            "ratio": f"{t_hf / t_ours:.1f}× sjsonl",
            "note": f"sjsonl: {t_ours / n_reads * 1e6:.2f} µs",
        },
    ]


def run(quick: bool = False) -> list[dict]:
    long_path = corpus("long", (64 if quick else 1024) << 20)
    short_path = corpus("short", (16 if quick else 256) << 20)
    tiny_path = corpus("tiny", (16 if quick else 256) << 20)  # ~50-byte records: per-line costs show most
    long_label = "long records, " + ("64 MiB" if quick else "1 GiB")
    short_label = "short records, " + ("16 MiB" if quick else "256 MiB")
    tiny_label = "50-byte records, " + ("16 MiB" if quick else "256 MiB")
    rows = bench_index(long_path, long_label, "long") + bench_index(short_path, short_label, "short")
    rows += bench_index(tiny_path, tiny_label, "tiny")
    rows += bench_access(short_path, short_label, "short") + bench_access(
        long_path, long_label, "long", 50_000
    )
    rows += bench_access(tiny_path, tiny_label, "tiny")
    rows += bench_hf(short_path, short_label)
    return rows


COLUMNS = ["benchmark", "variant", "median", "ratio", "note"]

if __name__ == "__main__":
    bench_main(__doc__, run, COLUMNS, "small corpora, for a smoke run")
