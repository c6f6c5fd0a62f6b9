"""The index scan against ``wc -l``: the compiled newline scan and the numpy fallback, same run, both
benchmark corpora (page-cached; medians).

    python benchmarks/bench_scan.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import corpus, markdown_table, median_seconds
from sjsonl import JSONLIndexer
from sjsonl.index import scan

COLUMNS = ["benchmark", "variant", "median", "ratio", "note"]


def wc_l(path) -> None:
    subprocess.run(["wc", "-l", str(path)], check=True, capture_output=True)


def build(path, workers: int | None, native) -> float:
    def once() -> None:
        previous, scan.NATIVE = scan.NATIVE, native
        try:
            JSONLIndexer(path, workers=workers).populate_index()
        finally:
            scan.NATIVE = previous

    return median_seconds(once, repeats=7)


def rows_for(path, label: str) -> list[dict]:
    size = os.path.getsize(path)
    wc = median_seconds(lambda: wc_l(path), repeats=7)
    rows = [
        {
            "benchmark": label,
            "variant": "`wc -l`",
            "median": f"{wc:.3f} s",
            "ratio": "1.00×",
            "note": f"{size / wc / 1e9:.2f} GB/s",
        }
    ]
    variants = [
        ("compiled scan, 2 threads", None, scan.NATIVE),
        ("compiled scan, 1 thread", 1, scan.NATIVE),
        ("numpy fallback, 2 threads", None, None),
        ("numpy fallback, 1 thread", 1, None),
    ]
    for name, workers, native in variants:
        if name.startswith("compiled") and native is None:
            continue  # not built here
        t = build(path, workers, native)
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
    return rows_for(long_path, "index build, long records " + ("64 MiB" if quick else "1 GiB")) + rows_for(
        short_path, "index build, short records " + ("16 MiB" if quick else "256 MiB")
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    print(markdown_table(run(parser.parse_args().quick), COLUMNS))
