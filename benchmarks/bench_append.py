"""Incremental append: reopening a file that grew by 1% vs building its index from scratch.

A private copy of each benchmark corpus (1 GiB long records, 256 MiB short ones; ``--quick``: 64 MiB
long, 16 MiB short) gets 1% appended (its own first records again); reopening it (``JSONLDataset(path)``)
extends the index — the indexed bytes hashed (an edit anywhere plus an append is a rebuild), the tail
scanned, the index file extended — where a full build scans every byte; both for the plain index and for
the compact one (rewritten atomically: its whole blocks copied, its last block encoded again with the new
offsets). Each run starts from the copy cut back to its original size with a
current index; the full build runs into an empty index directory. Both write and fsync the index file.
After the timed runs the extended offsets are checked against a full build.

Beside the safe default, the opt-in for producers that only append, ``appends="trust"``
(:mod:`sjsonl.index.leaves`): the bytes indexed before are not all hashed again — only their first and
last 64 KiB, the last record's leaves and two sampled 2 MiB leaves — so the reopen costs the bytes
appended plus a constant; its index is built with ``appends="trust"`` too (which keeps the leaf digests).
The goal: at most 5% of a full build.

    python benchmarks/bench_append.py [--quick]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import REPEATS, bench_main, corpus, figure
from sjsonl import JSONLDataset

COLUMNS = ["benchmark", "variant", "median", "ratio", "note"]
RUNS = REPEATS


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _reopens(path: str, base: int, extra: bytes, index_dir: str, compact: bool, appends: str) -> list[float]:
    """Times of reopening ``path`` after ``extra`` was appended, each from a current index of ``base``
    bytes."""
    times = []
    for _ in range(RUNS):
        os.truncate(path, base)  # our own copy: back to the indexed size, with a current index
        shutil.rmtree(index_dir, ignore_errors=True)
        JSONLDataset(path, index_dir=index_dir, compact=compact, appends=appends)
        with open(path, "ab") as f:
            f.write(extra)
        t0 = time.perf_counter()
        ds = JSONLDataset(path, index_dir=index_dir, compact=compact, appends=appends)
        times.append(time.perf_counter() - t0)
        assert ds._files[0].index_origin == "extended", ds._files[0].index_origin
    return times


def _one(kind: str, n_bytes: int, work: str, compact: bool = False) -> list[dict]:
    source = str(corpus(kind, n_bytes))
    fmt = "-compact" if compact else ""
    path = os.path.join(work, f"{kind}{fmt}.jsonl")
    shutil.copyfile(source, path)
    base = os.path.getsize(path)
    with open(source, "rb") as f:  # 1% more, cut at a record boundary
        extra = f.read(base // 100)
    extra = extra[: extra.rindex(b"\n") + 1]
    index_dir = os.path.join(work, f"idx-{kind}{fmt}")

    full = []
    for _ in range(RUNS):
        shutil.rmtree(index_dir, ignore_errors=True)
        full.append(_timed(lambda: JSONLDataset(path, index_dir=index_dir, compact=compact)))
    reference = None
    medians = {}
    for appends in ("verify", "trust"):
        medians[appends] = statistics.median(_reopens(path, base, extra, index_dir, compact, appends))
        extended = JSONLDataset(path, index_dir=index_dir, build_index_on_load=False, compact=compact)
        assert extended._files[0].index_path.endswith(".packed" if compact else ".npy")
        reference = reference or JSONLDataset(path, index_dir=os.path.join(work, f"ref-{kind}{fmt}"))
        same = np.asarray(extended._files[0].offsets) == np.asarray(reference._files[0].offsets)
        assert same.all(), f"extended ({appends}) != full build"
    t_full, t_grown, t_trust = statistics.median(full), medians["verify"], medians["trust"]
    size = f"{base >> 20} MiB + {len(extra) >> 10} KiB, {len(reference):,} records"
    title = f"reopen after a 1% append, {kind} records" + (", compact index" if compact else "")
    figure(
        f"reopen_{kind}{fmt.replace('-', '_')}",
        t_grown * 1e3,
        "ms",
        what=f"{title} ({size}): the index extended",
        median_of=RUNS,
        baseline="a full index build",
        baseline_value=t_full * 1e3,
    )
    figure(
        f"reopen_{kind}{fmt.replace('-', '_')}_trust",
        t_trust * 1e3,
        "ms",
        what=f'{title} ({size}): the index extended, appends="trust"',
        median_of=RUNS,
        baseline="a full index build",
        baseline_value=t_full * 1e3,
    )
    return [
        {"benchmark": title, "variant": "full index build (baseline)", "median": f"{t_full * 1e3:.1f} ms",
         "ratio": "100%", "note": f"{size}; {RUNS} runs"},
        {"benchmark": title, "variant": "sjsonl: index extended", "median": f"{t_grown * 1e3:.1f} ms",
         "ratio": f"{100 * t_grown / t_full:.1f}% of a full build", "note": f"{size}; {RUNS} runs"},
        {"benchmark": title, "variant": 'sjsonl: index extended, appends="trust"',
         "median": f"{t_trust * 1e3:.1f} ms", "ratio": f"{100 * t_trust / t_full:.1f}% of a full build",
         "note": f"{size}; {RUNS} runs; goal <= 5%"},
    ]  # fmt: skip


def run(quick: bool = False) -> list[dict]:
    work = tempfile.mkdtemp(prefix="sjsonl-bench-append-")
    try:
        sizes = (64 << 20, 16 << 20) if quick else (1024 << 20, 256 << 20)
        return [row for compact in (False, True) for kind, size in zip(("long", "short"), sizes)
                for row in _one(kind, size, work, compact)]  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    bench_main(__doc__, run, COLUMNS, "64 MiB long and 16 MiB short records")


if __name__ == "__main__":
    main()
