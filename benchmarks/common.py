"""Shared benchmark helpers: cached deterministic corpora, medians, markdown tables."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from sjsonl.sample import write_corpus

DATA_DIR = Path(os.environ.get("SJSONL_BENCH_DATA", Path(__file__).parent / ".data"))


def corpus(kind: str, n_bytes: int) -> Path:
    """A generated corpus of about ``n_bytes`` (``kind`` "long" ≈2 KB/record, "short" ≈180 B), cached."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    path = DATA_DIR / f"{kind}-{n_bytes >> 20}MiB.jsonl"
    if not path.exists():
        write_corpus(path, n_bytes=n_bytes, kind=kind, seed=0)
    return path


def median_seconds(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def bench_main(
    doc: str | None, run: Callable[[bool], list[dict]], columns: list[str], quick_help: str
) -> list[dict]:
    """The command line every benchmark has: ``--quick`` (smaller corpora, a smoke run), then the markdown
    table of ``run``'s rows; returns the rows."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    rows = run(parser.parse_args().quick)
    print(markdown_table(rows, columns))
    return rows
