"""Mixtures and the framework-free pipeline: what interleaving costs, and what background prefetch buys
on a storage with latency (local files behind fsspec with a fixed delay per read, tests/_slow_storage).

    python benchmarks/bench_pipeline.py [--quick]
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests import _slow_storage

from common import REPEATS, bench_main, corpus, figure, median_seconds
from sjsonl import JSONLDataset, interleave_datasets

COLUMNS = ["benchmark", "variant", "median", "ratio", "note"]
LATENCY = 0.005
BATCH = 64


def _drain(items) -> int:
    n = 0
    for _ in items:
        n += 1
    return n


def split_in_three(path) -> list[str]:
    """The corpus's lines dealt into three files (cached beside it): the mixture's plain sources."""
    parts = [f"{path}.part{k}.jsonl" for k in range(3)]
    if not all(os.path.exists(p) for p in parts):
        with open(path, "rb") as src:
            lines = src.readlines()
        for k, p in enumerate(parts):
            with open(p, "wb") as out:
                out.writelines(lines[k::3])
    return parts


def mixture_rows(path, quick: bool) -> list[dict]:
    ds = JSONLDataset(path)
    sources = [JSONLDataset(p) for p in split_in_three(path)]
    mix = interleave_datasets(sources, probabilities=[0.5, 0.3, 0.2], seed=0)
    m = len(mix)
    idx = np.random.default_rng(0).integers(0, m, 20_000 if not quick else 2_000)
    base_it = median_seconds(lambda: _drain(ds.take(m)))
    mix_it = median_seconds(lambda: _drain(mix))
    base_get = median_seconds(lambda: [ds[int(i)] for i in idx]) / len(idx)
    mix_get = median_seconds(lambda: [mix[int(i)] for i in idx]) / len(idx)
    label = f"iteration, {m:,} records"
    mixture = "a 3-file interleave (0.5/0.3/0.2), page-cached"
    figure(
        "mix_iter",
        mix_it,
        "s",
        what=f"iterating {mixture}, {m:,} records",
        median_of=REPEATS,
        baseline="one plain file of the same records",
        baseline_value=base_it,
    )
    figure(
        "mix_get",
        mix_get * 1e6,
        "µs",
        what=f"random `mix[t]`, {mixture}",
        median_of=REPEATS,
        baseline="a plain `ds[i]`",
        baseline_value=base_get * 1e6,
    )
    return [
        {"benchmark": label, "variant": "one plain file", "median": f"{base_it:.3f} s"},
        {
            "benchmark": label,
            "variant": "interleave of 3 files (0.5/0.3/0.2)",
            "median": f"{mix_it:.3f} s",
            "ratio": f"{mix_it / base_it:.2f}×",
            "note": "ratio = time vs one file",
        },
        {"benchmark": "random ds[i]", "variant": "one plain file", "median": f"{base_get * 1e6:.1f} µs"},
        {
            "benchmark": "random ds[i]",
            "variant": "interleave of 3 files",
            "median": f"{mix_get * 1e6:.1f} µs",
            "ratio": f"{mix_get / base_get:.2f}×",
            "note": "routing: two array lookups, then the source's own ds[j]",
        },
    ]


def prefetch_rows(path, quick: bool) -> list[dict]:
    _slow_storage.register()
    ds = JSONLDataset(_slow_storage.url(path), storage_options={"latency": LATENCY})
    batches = ds.batch(BATCH).take(60 if quick else 300)
    records = sum(len(next(iter(b.values()))) for b in batches)
    rows = []
    base = median_seconds(lambda: _drain(batches))
    rows.append(
        {
            "benchmark": f"{len(batches)} batches of {BATCH}, {LATENCY * 1e3:.0f} ms a read",
            "variant": "no prefetch",
            "median": f"{base:.2f} s",
            "note": f"{records / base:,.0f} records/s",
        }
    )
    for prefetch in (2, 4, 8, 16):
        t = median_seconds(lambda p=prefetch: _drain(batches.prefetch(p, threads=p)))
        what = (
            f"`.prefetch({prefetch})`, batches of {BATCH} from a storage with {LATENCY * 1e3:.0f} ms a read"
        )
        figure(
            f"prefetch_{prefetch}",
            records / t,
            "rec/s",
            what=what,
            median_of=REPEATS,
            baseline="no prefetch",
            baseline_value=records / base,
        )
        rows.append(
            {
                "benchmark": "",
                "variant": f"prefetch={prefetch}, {prefetch} threads",
                "median": f"{t:.2f} s",
                "ratio": f"{base / t:.1f}×",
                "note": f"{records / t:,.0f} records/s; ratio = speed-up",
            }
        )
    return rows


def run(quick: bool = False) -> list[dict]:
    path = corpus("short", (16 if quick else 64) << 20)
    return mixture_rows(path, quick) + prefetch_rows(path, quick)


if __name__ == "__main__":
    bench_main(__doc__, run, COLUMNS, "a 16 MiB corpus, 60 batches")
