"""The ``sjsonl demo``: generate a sample corpus, index it, and show random access and its speed.

Example:
    >>> import tempfile
    >>> run_demo(tempfile.mkdtemp(), n_records=2000, out=lambda *a: None)["records"]
    2000
"""

from __future__ import annotations

import itertools
import os
import subprocess
import tempfile
import time
from collections.abc import Callable

import numpy as np
import orjson

from sjsonl.cli.output import artifact_paths
from sjsonl.data.dataset import JSONLDataset
from sjsonl.data.indexer import JSONLIndexer
from sjsonl.sample import write_corpus
from sjsonl.storage.atomic import atomic_output


def _median_time(fn: Callable[[], object], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _wc_seconds(path: str) -> float | None:
    try:
        return _median_time(lambda: subprocess.run(["wc", "-l", path], capture_output=True, check=True))
    except (OSError, subprocess.CalledProcessError):
        return None


def new_sample_path(directory: str) -> str:
    """``directory/sample.jsonl``, or the first ``sample-N.jsonl`` for which neither the file nor any of the
    index files sjsonl would keep for it exists.

    Example:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> _ = open(os.path.join(d, "sample.jsonl"), "w")
        >>> os.path.basename(new_sample_path(d))
        'sample-1.jsonl'
    """
    for k in itertools.count():
        path = os.path.join(directory, "sample.jsonl" if k == 0 else f"sample-{k}.jsonl")
        names = [path, *(p for p, _ in artifact_paths(path, None))]
        if not any(os.path.lexists(p) for p in names):
            break
    return path


def run_demo(
    directory: str | None = None, n_records: int = 200_000, out: Callable[..., None] = print
) -> dict:
    """Write ``sample.jsonl`` (generated, deterministic) — or ``sample-1.jsonl``, ``-2``, … when that or one
    of its index files exists: nothing is ever replaced — index it, read it back; print what happens."""
    directory = directory or tempfile.mkdtemp(prefix="sjsonl-demo-")
    os.makedirs(directory, exist_ok=True)
    path = new_sample_path(directory)
    taken = "" if os.path.basename(path) == "sample.jsonl" else " (sample.jsonl is taken: a new name)"
    out(f"1. generating {n_records:,} records (text and chat messages, some non-ASCII) -> {path}{taken}")
    with atomic_output(path, replace=False) as f:
        write_corpus(f.name, n_records, kind="short", seed=0)
    size = os.path.getsize(path)

    out("2. indexing: one pass records where every record starts")
    build = _median_time(lambda: JSONLIndexer(path).populate_index())
    indexer = JSONLIndexer(path)
    indexer.populate_index()
    index_path = indexer.write_index_to_disk()
    wc = _wc_seconds(path)
    versus = f" ({build / wc:.2f}x the time of `wc -l`)" if wc else ""
    out(f"   {len(indexer):,} records, {size / 1e6:.1f} MB indexed in {build * 1e3:.1f} ms{versus}")
    out(f"   index: {index_path} ({os.path.getsize(index_path):,} bytes; plain numpy: np.load reads it)")

    t0 = time.perf_counter()
    ds = JSONLDataset(path)
    opened = time.perf_counter() - t0
    out(f"3. JSONLDataset(path) with the index on disk opens in {opened * 1e3:.2f} ms")
    out(f"   ds[12345 % len(ds)] = {orjson.dumps(ds[12345 % len(ds)]).decode()[:150]}")

    picks = np.random.default_rng(0).integers(0, len(ds), size=min(100_000, len(ds))).tolist()
    rand = _median_time(lambda: [ds[i] for i in picks], repeats=3) / len(picks)
    seq = _median_time(lambda: sum(1 for _ in ds), repeats=3)
    shuffled = ds.shuffle(seed=0)
    shuf = _median_time(lambda: sum(1 for _ in shuffled), repeats=3)
    out(f"4. random access: {rand * 1e6:.2f} µs per record (slice of a memory map + one JSON parse)")
    out(f"   sequential iteration: {len(ds) / seq:,.0f} records/s")
    out(
        f"   exact global shuffle (O(1) memory): {len(ds) / shuf:,.0f} records/s; first ids: "
        f"{[r['id'] for r in shuffled.take(5)]}"
    )
    return {"path": path, "records": len(ds), "build_s": build, "wc_s": wc, "random_us": rand * 1e6}
