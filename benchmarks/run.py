"""Run every benchmark and print one markdown report (the README's tables come from here).

    python benchmarks/run.py [--quick] [--out benchmarks/results.md]
        [--only core,sampling,mindspore,storage,gzip,pipeline,cold,decode,append,billion,index_size,parallel]

Medians of repeated runs; every ratio is against a baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import markdown_table

SUITES = {
    "core": ("bench_core", "Index build, random access, iteration, open time"),
    "sampling": ("bench_sampling", "Shuffled iteration, DataLoader, 🤗 shuffled iteration"),
    "mindspore": ("bench_mindspore", "Into MindSpore: sjsonl vs 🤗 + MindNLP-style adapter"),
    "storage": ("bench_storage", "Compressed (.gz, seekable .zst) and remote (S3 via moto) vs local"),
    "gzip": ("bench_gzip", "gzip backends: rapidgzip vs indexed_gzip (index build, random access, reopen)"),
    "pipeline": ("bench_pipeline", "Mixtures, and background prefetch on a storage with 5 ms latency"),
    "cold": ("bench_cold", "Cold page cache: random ds[i], shuffled passes, read-ahead, block shuffle"),
    "decode": ("bench_decode", "Partial (fields=) and typed (schema=) decoding vs a full parse"),
    "append": ("bench_append", "Reopening after a 1% append (index extended) vs a full index build"),
    "billion": ("bench_billion", "10^9 records in 1,000 files: open time, memory, checked reads"),
    "index_size": ("bench_index_size", "Compact vs plain index: bytes per record, build, ds[i], iteration"),
    "parallel": ("bench_parallel", "Schema and bad-line passes: one process vs workers=2 (sjsonl.parallel)"),
}


def main() -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("--quick", action="store_true", help="small corpora, for a smoke run")
    parser.add_argument("--only", default=",".join(SUITES), help="comma-separated suites")
    parser.add_argument("--out", default=None, help="also write the report to this file")
    args = parser.parse_args()
    parts = [
        f"Run {datetime.date.today()} on {os.cpu_count()} cores, Python {platform.python_version()}"
        f"{' (quick)' if args.quick else ''}."
    ]
    for name in args.only.split(","):
        module_name, title = SUITES[name]
        module = importlib.import_module(module_name)
        rows = module.run(args.quick)
        columns = getattr(module, "COLUMNS", None) or (list(rows[0]) if rows else [])
        parts.append(f"### {title}\n\n{markdown_table(rows, columns)}")
        print(parts[-1] + "\n", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
