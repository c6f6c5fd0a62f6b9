"""The default read path, safe (issue #18): guarded map slices vs the raw memory map they replaced.

A local file is read through a memory map whose slices are copied under a SIGBUS guard and whose version
is checked every 0.1 s (:mod:`sjsonl.storage.local`). The raw map it replaced (Python's ``mmap`` object,
sliced unchecked: a truncation in place killed the process) is put back into the same dataset for the
"before" column, so both run in one process on the same index and the same random positions. ``pread``
(``mmap=False``) and a bare ``mmap`` + ``orjson.loads`` loop (the floor) are the other baselines.

    python benchmarks/bench_safe_reads.py [--quick]
"""

from __future__ import annotations

import mmap
import os
import sys

import numpy as np
import orjson

sys.path.insert(0, os.path.dirname(__file__))
from common import REPEATS, bench_main, corpus, figure, interleaved_medians, median_seconds
from sjsonl import JSONLDataset

COLUMNS = [
    "corpus",
    "operation",
    "guarded map (now)",
    "raw mmap (before)",
    "now / before",
    "pread",
    "bare mmap+orjson",
]


def _with_raw_map(path) -> JSONLDataset:
    """The dataset as it read before: its map swapped for Python's unguarded mmap object."""
    ds = JSONLDataset(path)
    storage = ds._files[0].storage
    with open(path, "rb") as f:
        storage._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    ds._hot = ds._files[0]._hot = None
    return ds


def _bare(path, offsets: np.ndarray, size: int):
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    bounds = np.append(offsets.astype(np.int64), size).tolist()
    return mm, bounds


def _rows(label: str, kind: str, path, n_reads: int) -> list[dict]:
    now, before, pread = JSONLDataset(path), _with_raw_map(path), JSONLDataset(path, mmap=False)
    assert type(now._files[0].storage.buffer()).__name__ == "GuardedMap"
    n = len(now)
    rng = np.random.default_rng(0)
    picks = rng.integers(0, n, n_reads).tolist()
    batches = [rng.integers(0, n, 64) for _ in range(n_reads // 64)]
    mm, bounds = _bare(path, now._files[0].offsets, now.file_bytes)
    assert now[picks[0]] == before[picks[0]] == pread[picks[0]]

    def random_reads(ds):
        return lambda: [ds[i] for i in picks]

    def batch_reads(ds):
        return lambda: [ds[b] for b in batches]

    def iterate(ds):
        return lambda: sum(1 for _ in ds)

    def bare_random():
        return [orjson.loads(mm[bounds[i] : bounds[i + 1]]) for i in picks]

    def bare_batches():
        return [[orjson.loads(mm[bounds[i] : bounds[i + 1]]) for i in b.tolist()] for b in batches]

    def bare_iterate():
        return sum(1 for i in range(n) if orjson.loads(mm[bounds[i] : bounds[i + 1]]) is not None)

    rows = []
    for op, make, bare, per, key in (
        ("random ds[i]", random_reads, bare_random, n_reads, f"get_{kind}"),
        ("batch of 64", batch_reads, bare_batches, n_reads, f"batch_{kind}"),
        ("iteration", iterate, bare_iterate, n, f"iter_{kind}"),
    ):
        t = interleaved_medians({"now": make(now), "before": make(before), "pread": make(pread)})
        base = median_seconds(bare)
        figure(
            key,
            t["now"] / per * 1e6,
            "µs",
            what=f"{op} per record, guarded map (the default), {label}",
            median_of=REPEATS,
            baseline="the raw `mmap` it replaced",
            baseline_value=t["before"] / per * 1e6,
        )
        rows.append(
            {
                "corpus": label,
                "operation": op + " (per record)",
                "guarded map (now)": _per(t["now"], per),
                "raw mmap (before)": _per(t["before"], per),
                "now / before": f"{t['now'] / t['before']:.3f}×",
                "pread": _per(t["pread"], per),
                "bare mmap+orjson": _per(base, per),
            }
        )
    return rows


def _per(seconds: float, records: int) -> str:
    return f"{seconds / records * 1e6:.2f} µs"


def run(quick: bool = False) -> list[dict]:
    size = (16 if quick else 128) << 20
    rows = []
    for kind in ("short", "long"):
        rows += _rows(f"{kind}, {size >> 20} MiB", kind, corpus(kind, size), 20_000 if quick else 100_000)
    return rows


if __name__ == "__main__":
    bench_main(__doc__, run, COLUMNS, "16 MiB corpora, fewer reads")
