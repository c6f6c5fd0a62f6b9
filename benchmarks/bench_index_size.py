"""Compact vs plain index: bytes per record, build time, ``ds[i]`` and sequential iteration.

On the benchmark corpora (1 GiB of long records, 256 MiB of short ones; ``--quick``: 64 MiB of each) the
index is built both ways into empty directories (``JSONLDataset(path, compact=False / True)``: the scan,
then writing — and for compact, encoding, then mapping and verifying the file written), the spans of
the two are checked equal, then each is timed in the same process, alternating: random ``ds[i]`` over
the same 200,000 positions, the bare offset lookup of the hot path (``bounds[i]``), and iterating the
first 200,000 records in order. Medians of 5 runs.

    python benchmarks/bench_index_size.py [--quick]
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import REPEATS, bench_main, corpus, figure, interleaved_medians, median_seconds
from sjsonl import JSONLDataset
from sjsonl.index import packed

COLUMNS = ["corpus", "measure", "plain", "compact", "compact / plain"]
SAMPLE = 200_000


def _one(kind: str, n_bytes: int, work: str) -> list[dict]:
    path = str(corpus(kind, n_bytes))
    label = f"{kind} {n_bytes >> 20} MiB"
    name = f"{kind} records, {n_bytes >> 20} MiB"
    dirs = {c: os.path.join(work, f"{kind}-{c}") for c in ("plain", "compact")}

    def build(compact: bool):
        def run() -> None:
            shutil.rmtree(dirs["compact" if compact else "plain"], ignore_errors=True)
            JSONLDataset(path, index_dir=dirs["compact" if compact else "plain"], compact=compact)

        return run

    builds = {c: median_seconds(build(c == "compact"), warmup=0) for c in ("plain", "compact")}
    ds = {c: JSONLDataset(path, index_dir=dirs[c]) for c in ("plain", "compact")}
    files = {c: d._files[0] for c, d in ds.items()}
    assert files["compact"].index_path.endswith(".packed") and files["plain"].index_path.endswith(".npy")
    n = len(ds["plain"])
    same = np.array_equal(files["plain"].offsets[:], files["compact"].offsets[:]) and np.array_equal(
        files["plain"].record_sizes(), files["compact"].record_sizes()
    )
    assert same and len(ds["compact"]) == n, "compact and plain spans differ"
    size = {c: os.path.getsize(f.index_path) / n for c, f in files.items()}
    positions = np.random.default_rng(0).integers(0, n, SAMPLE).tolist()

    def random_reads(d):
        return lambda: [d[i] for i in positions]

    def lookups(f):
        bounds = f.hot_state()[1]
        return lambda: [bounds[i] for i in positions]

    def sequential(d):
        return lambda: sum(1 for _ in itertools.islice(d, SAMPLE))

    reads = interleaved_medians({c: random_reads(d) for c, d in ds.items()}, warmup=0)
    look = interleaved_medians({c: lookups(f) for c, f in files.items()}, warmup=0)
    seq = interleaved_medians({c: sequential(d) for c, d in ds.items()}, warmup=0)
    per_seq = min(SAMPLE, n)
    figure(
        f"bytes_{kind}",
        size["compact"],
        "B/rec",
        what=f"compact index, {name}, {n:,} records",
        median_of=1,
        baseline="the plain `.npy` index",
        baseline_value=size["plain"],
    )
    figure(
        f"get_{kind}",
        reads["compact"] / SAMPLE * 1e6,
        "µs",
        what=f"random `ds[i]`, compact index, {name}",
        median_of=REPEATS,
        baseline="the plain index",
        baseline_value=reads["plain"] / SAMPLE * 1e6,
    )

    def row(measure: str, values: dict[str, float], fmt: str) -> dict:
        return {
            "corpus": label,
            "measure": measure,
            "plain": fmt.format(values["plain"]),
            "compact": fmt.format(values["compact"]),
            "compact / plain": f"{values['compact'] / values['plain']:.2f}x",
        }

    return [
        row(f"index bytes per record ({n:,} records)", size, "{:.2f}"),
        row("index build (s)", builds, "{:.2f}"),
        row("ds[i], random (µs per record)", {c: v / SAMPLE * 1e6 for c, v in reads.items()}, "{:.2f}"),
        row("offset lookup bounds[i] (ns)", {c: v / SAMPLE * 1e9 for c, v in look.items()}, "{:.0f}"),
        row("sequential (µs per record)", {c: v / per_seq * 1e6 for c, v in seq.items()}, "{:.2f}"),
    ]


def run(quick: bool) -> list[dict]:
    sizes = [("long", 64 << 20), ("short", 64 << 20)] if quick else [("long", 1 << 30), ("short", 256 << 20)]
    decoder = "compiled" if packed.NATIVE is not None else "numpy"
    print(f"compact index decoder: {decoder}", file=sys.stderr)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="sjsonl-bench-packed-") as work:
        for kind, n_bytes in sizes:
            rows += _one(kind, n_bytes, work)
    return rows


if __name__ == "__main__":
    bench_main(__doc__, run, COLUMNS, "64 MiB corpora (a smoke run)")
