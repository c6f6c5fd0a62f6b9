"""Sampling benchmarks: exact-shuffled vs sequential iteration, DataLoader throughput, 🤗 shuffled iteration.

Every ratio is against a baseline measured in the same run (sequential iteration of the same dataset, or
torch's own DistributedSampler). Medians of at least 5 repeats after one warm-up, page-cached data.

    python benchmarks/bench_sampling.py [--quick]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import REPEATS, bench_main, corpus, figure, median_seconds
from sjsonl import JSONLDataset
from sjsonl.sampling import Permutation

COLUMNS = ["benchmark", "variant", "median", "ratio", "note"]


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds / 1e3:,.0f} k rec/s"


def bench_iteration(ds: JSONLDataset, label: str, kind: str) -> list[dict]:
    n = len(ds)
    shuffled = ds.shuffle(seed=0)

    def drain(it) -> None:
        for _ in it:
            pass

    in_order = ds.skip(0)  # a view in file order: the shuffled code path without the random access
    t_seq = median_seconds(lambda: drain(ds), repeats=REPEATS)
    t_shuf = median_seconds(lambda: drain(shuffled), repeats=REPEATS)
    t_view = median_seconds(lambda: drain(in_order), repeats=REPEATS)
    perm = Permutation(n, seed=0)
    t_perm = median_seconds(
        lambda: [perm.take(np.arange(a, min(n, a + 8192))) for a in range(0, n, 8192)], repeats=REPEATS
    )
    figure(
        f"shuffle_{kind}",
        n / t_shuf,
        "rec/s",
        what=f"exact global shuffle, iteration, {label}",
        median_of=REPEATS,
        baseline="sequential `for r in ds`",
        baseline_value=n / t_seq,
    )
    return [
        {
            "benchmark": f"iteration, {label}",
            "variant": "sequential `for r in ds` (baseline)",
            "median": _rate(n, t_seq),
            "ratio": "1.00×",
            "note": f"{n:,} records",
        },
        {
            "benchmark": f"iteration, {label}",
            "variant": "exact global shuffle `for r in ds.shuffle(0)`",
            "median": _rate(n, t_shuf),
            "ratio": f"{t_seq / t_shuf:.2f}× speed",
            "note": "O(1) memory Feistel permutation",
        },
        {
            "benchmark": f"iteration, {label}",
            "variant": "view in file order `for r in ds.skip(0)`",
            "median": _rate(n, t_view),
            "ratio": f"{t_seq / t_view:.2f}× speed",
            "note": "the view code path, sequential access",
        },
        {
            "benchmark": f"iteration, {label}",
            "variant": "permutation alone, blocks of 8192",
            "median": f"{n / t_perm / 1e6:,.1f} M idx/s",
            "ratio": f"{t_perm / t_shuf:.0%} of shuffled pass",
            "note": "",
        },
    ]


def bench_samplers(quick: bool) -> list[dict]:
    import torch.utils.data

    from sjsonl.torch import DistributedSampler

    n = 10**6 if quick else 10**7
    data = range(n)
    torch_s = torch.utils.data.DistributedSampler(data, num_replicas=2, rank=0, seed=0)
    ours_s = DistributedSampler(data, num_replicas=2, rank=0, seed=0)

    def first_batch(s) -> None:
        it = iter(s)
        for _ in range(256):
            next(it)

    def full(s) -> None:
        for _ in s:
            pass

    t_first_torch, t_first_ours = (
        median_seconds(lambda: first_batch(torch_s)),
        median_seconds(lambda: first_batch(ours_s)),
    )
    t_full_torch, t_full_ours = median_seconds(lambda: full(torch_s)), median_seconds(lambda: full(ours_s))
    label = f"DistributedSampler, n = {n:,}, 2 ranks"
    figure(
        "sampler_first",
        t_first_ours * 1e3,
        "ms",
        what=f"{label}: first 256 indices",
        median_of=REPEATS,
        baseline="torch's DistributedSampler",
        baseline_value=t_first_torch * 1e3,
    )
    return [
        {
            "benchmark": label,
            "variant": "torch: first 256 indices",
            "median": f"{t_first_torch * 1e3:,.1f} ms",
            "ratio": "1.00×",
            "note": "randperm(n).tolist(): n Python ints",
        },
        {
            "benchmark": label,
            "variant": "sjsonl: first 256 indices",
            "median": f"{t_first_ours * 1e3:,.2f} ms",
            "ratio": f"{t_first_torch / t_first_ours:,.0f}× faster",
            "note": "one 8192-index block",
        },
        {
            "benchmark": label,
            "variant": "torch: whole epoch",
            "median": f"{n / 2 / t_full_torch / 1e6:,.1f} M idx/s",
            "ratio": "1.00×",
            "note": "",
        },
        {
            "benchmark": label,
            "variant": "sjsonl: whole epoch",
            "median": f"{n / 2 / t_full_ours / 1e6:,.1f} M idx/s",
            "ratio": f"{t_full_torch / t_full_ours:.2f}× speed",
            "note": "O(1) memory",
        },
    ]


def bench_dataloader(ds: JSONLDataset, label: str) -> list[dict]:
    from torch.utils.data import DataLoader

    from sjsonl.torch import DistributedSampler, IterableDataset, collate_records

    rows = []
    n = len(ds)
    base = None
    for kind in ("sampler", "iterable"):
        for workers in (0, 1, 2):
            extra = {"persistent_workers": True} if workers else {}
            if kind == "sampler":
                sampler = DistributedSampler(ds, num_replicas=1, rank=0, seed=0)
                loader = DataLoader(
                    ds,
                    batch_size=256,
                    sampler=sampler,
                    num_workers=workers,
                    collate_fn=collate_records,
                    **extra,
                )
                variant = f"map-style + sjsonl DistributedSampler, {workers} workers"
            else:
                it_ds = IterableDataset(ds, seed=0)
                loader = DataLoader(
                    it_ds, batch_size=256, num_workers=workers, collate_fn=collate_records, **extra
                )
                variant = f"sjsonl IterableDataset, {workers} workers"

            def drain(loader=loader) -> None:
                for _ in loader:
                    pass

            t = median_seconds(drain, repeats=REPEATS)
            base = base or t
            rows.append(
                {
                    "benchmark": f"DataLoader, shuffled, batch 256, {label}",
                    "variant": variant,
                    "median": _rate(n, t),
                    "ratio": f"{base / t:.2f}× speed",
                    "note": "collate_records; persistent workers" if workers else "collate_records",
                }
            )
            del loader
    return rows


def bench_hf(path, ds: JSONLDataset, label: str) -> list[dict]:
    home = tempfile.mkdtemp(prefix="sjsonl-bench-hf-")
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("HF_HOME", home)  # only effective if datasets is not imported yet; cache_dir below
    import datasets

    datasets.disable_progress_bars()
    hf = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=os.path.join(home, "c"))
    n = len(hf)
    shuffled = hf.shuffle(seed=0)
    ours = ds.shuffle(seed=0)

    def drain(it) -> None:
        for _ in it:
            pass

    t_hf_seq = median_seconds(lambda: drain(hf), repeats=REPEATS)
    t_hf = median_seconds(lambda: drain(shuffled), repeats=REPEATS)
    t_ours = median_seconds(lambda: drain(ours), repeats=REPEATS)

    shutil.rmtree(os.path.join(home, "c"), ignore_errors=True)  # the Arrow copy (HF_HOME may be home)
    figure(
        "hf_shuffled",
        n / t_ours,
        "rec/s",
        what=f"shuffled iteration `ds.shuffle(0)`, {label}",
        median_of=REPEATS,
        baseline="🤗 `.shuffle(0)` iteration (after the Arrow conversion)",
        baseline_value=n / t_hf,
    )
    return [
        {
            "benchmark": f"🤗 comparison, {label}",
            "variant": "sjsonl `ds.shuffle(0)` iteration (baseline)",
            "median": _rate(n, t_ours),
            "ratio": "1.00×",
            "note": "reads the JSONL in place",
        },
        {
            "benchmark": f"🤗 comparison, {label}",
            "variant": "🤗 `load_dataset(...).shuffle(0)` iteration",
            "median": _rate(n, t_hf),
            "ratio": f"{t_ours / t_hf:.2f}× speed",
            "note": "after converting to Arrow (not timed)",
        },
        {
            "benchmark": f"🤗 comparison, {label}",
            "variant": "🤗 unshuffled iteration",
            "median": _rate(n, t_hf_seq),
            "ratio": f"{t_ours / t_hf_seq:.2f}× speed",
            "note": "",
        },
    ]


def run(quick: bool = False) -> list[dict]:
    """Rows for ``benchmarks/run.py``: ``quick`` uses an 8 MiB corpus instead of 64 MiB."""
    size = (8 if quick else 64) << 20
    path = corpus("short", size)
    label = f"short records, {size >> 20} MiB"
    ds = JSONLDataset(path)
    rows = bench_iteration(ds, label, "short")
    long_path = corpus("long", size)  # decoding dominates long records; random access matters less
    rows += bench_iteration(JSONLDataset(long_path), f"long records, {size >> 20} MiB", "long")
    rows += bench_samplers(quick)
    rows += bench_dataloader(ds, label)
    rows += bench_hf(path, ds, label)
    return rows


if __name__ == "__main__":
    bench_main(__doc__, run, COLUMNS, "8 MiB corpus instead of 64 MiB")
