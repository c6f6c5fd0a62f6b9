"""The index scan against ``wc -l``: the compiled newline scan and the numpy fallback, same run, the
three record sizes (~2 KB, ~155 B and ~50 B: the shorter, the more a per-line cost shows; page-cached;
medians).

    python benchmarks/bench_scan.py [--quick]
"""

from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import bench_main, corpus, figure, median_seconds
from sjsonl import JSONLIndexer
from sjsonl.index import scan

COLUMNS = ["benchmark", "variant", "median", "ratio", "note"]
RUNS = 7  # the scan is short and steady: more runs for a tighter median


def wc_l(path) -> None:
    subprocess.run(["wc", "-l", str(path)], check=True, capture_output=True)


def build(path, workers: int | None, native) -> float:
    def once() -> None:
        previous, scan.NATIVE = scan.NATIVE, native
        try:
            JSONLIndexer(path, workers=workers).populate_index()
        finally:
            scan.NATIVE = previous

    return median_seconds(once, repeats=RUNS)


def rows_for(path, label: str, kind: str) -> list[dict]:
    size = os.path.getsize(path)
    wc = median_seconds(lambda: wc_l(path), repeats=RUNS)
    rows = [
        {
            "benchmark": label,
            "variant": "`wc -l`",
            "median": f"{wc:.3f} s",
            "ratio": "1.00×",
            "note": f"{size / wc / 1e9:.2f} GB/s",
        }
    ]
    variants = [  # (name, scan threads, scan function, figure key)
        ("compiled scan, 2 threads", None, scan.NATIVE, f"compiled_{kind}"),
        ("compiled scan, 1 thread", 1, scan.NATIVE, None),
        ("numpy fallback, 2 threads", None, None, f"numpy_{kind}"),
        ("numpy fallback, 1 thread", 1, None, None),
    ]
    for name, workers, native, key in variants:
        if name.startswith("compiled") and native is None:
            continue  # not built here
        t = build(path, workers, native)
        if key:
            figure(
                key, t, "s", what=f"{label}, {name}", median_of=RUNS, baseline="`wc -l`", baseline_value=wc
            )
        rows.append(
            {
                "benchmark": label,
                "variant": name,
                "median": f"{t:.3f} s",
                "ratio": f"{t / wc:.2f}× wc",
                "note": f"{size / t / 1e9:.2f} GB/s",
            }
        )
    return rows


def run(quick: bool = False) -> list[dict]:
    long_path = corpus("long", (64 if quick else 1024) << 20)
    short_path = corpus("short", (16 if quick else 256) << 20)
    tiny_path = corpus("tiny", (16 if quick else 256) << 20)
    long_label = "index build, long records, " + ("64 MiB" if quick else "1 GiB")
    short_label = "index build, short records, " + ("16 MiB" if quick else "256 MiB")
    tiny_label = "index build, 50-byte records, " + ("16 MiB" if quick else "256 MiB")
    return (
        rows_for(long_path, long_label, "long")
        + rows_for(short_path, short_label, "short")
        + rows_for(tiny_path, tiny_label, "tiny")
    )


if __name__ == "__main__":
    bench_main(__doc__, run, COLUMNS, "small corpora, for a smoke run")
