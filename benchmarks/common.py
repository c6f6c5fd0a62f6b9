"""Shared benchmark helpers: cached deterministic corpora, medians, markdown tables, and the figures registry.

A *figure* is a named headline number a suite records where it computes it (``figure("build_long", ours,
"s", what=..., baseline="`wc -l`", baseline_value=wc, median_of=REPEATS)``); ``benchmarks/run.py`` collects
each suite's figures into ``benchmarks/results/<suite>.json``, and the README's headline table is generated
from them — no number is parsed back out of a formatted table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from sjsonl.sample import write_corpus

DATA_DIR = Path(os.environ.get("SJSONL_BENCH_DATA", Path(__file__).parent / ".data"))

#: Runs per median wherever a suite repeats a measurement.
REPEATS = 5

#: Units a figure may have, by which way is better (``readme_figures`` words its ratios from this).
LOWER_IS_BETTER = {"s", "ms", "µs", "ns", "B/rec", "MB", "MiB"}
HIGHER_IS_BETTER = {"rec/s", "rows/s", "idx/s", "GB/s"}
NEUTRAL = {"×", "%", "P", "stretches"}  # ratios, shares, probabilities, counts: no better direction
UNITS = LOWER_IS_BETTER | HIGHER_IS_BETTER | NEUTRAL

#: The figures recorded since the last :func:`take_figures`, by key (one registry: one suite runs at a time).
FIGURES: dict[str, dict] = {}


def figure(
    key: str,
    value: float,
    unit: str,
    *,
    what: str,
    median_of: int,
    baseline: str | None = None,
    baseline_value: float | None = None,
) -> float:
    """Record headline number ``key`` of the running suite (``value`` in ``unit``; ``what`` in one line;
    ``baseline``: what it is compared with, measured in the same run) and return ``value``.

    >>> _ = take_figures()
    >>> figure("get_short", 2.5, "µs", what="random ds[i]", median_of=5, baseline="bare", baseline_value=2.6)
    2.5
    >>> take_figures()["get_short"]["baseline_value"]
    2.6
    """
    if key in FIGURES:
        raise ValueError(f"figure {key!r} recorded twice in one suite")
    if unit not in UNITS:
        raise ValueError(f"figure {key!r}: unknown unit {unit!r} (one of {sorted(UNITS)})")
    if not math.isfinite(value) or (baseline_value is not None and not math.isfinite(baseline_value)):
        raise ValueError(f"figure {key!r}: not a finite number ({value!r}, baseline {baseline_value!r})")
    if "\n" in what or median_of < 1:
        raise ValueError(f"figure {key!r}: 'what' must be one line and median_of ≥ 1")
    entry: dict = {"value": float(value), "unit": unit, "what": what}
    if baseline is not None:
        entry["baseline"] = baseline
    if baseline_value is not None:
        entry["baseline_value"] = float(baseline_value)
    entry["median_of"] = int(median_of)
    FIGURES[key] = entry
    return value


def take_figures() -> dict[str, dict]:
    """The figures recorded so far, emptying the registry for the next suite."""
    taken = dict(FIGURES)
    FIGURES.clear()
    return taken


def corpus(kind: str, n_bytes: int) -> Path:
    """A generated corpus of about ``n_bytes`` (``kind`` "long" ≈2 KB/record, "short" ≈180 B, "tiny"
    ≈50 B), cached."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    path = DATA_DIR / f"{kind}-{n_bytes >> 20}MiB.jsonl"
    if not path.exists():
        if kind == "tiny":
            write_tiny_corpus(path, n_bytes, seed=0)
        else:
            write_corpus(path, n_bytes=n_bytes, kind=kind, seed=0)
    return path


_TINY_WORDS = ["the", "of", "data", "token", "index", "batch", "model", "café", "数据", "🚀", "ok", "record"]


def write_tiny_corpus(path: Path, n_bytes: int, seed: int = 0) -> int:
    """Records of about 50 bytes (``{"id": …, "text": "2 to 8 words"}``, some non-ASCII), deterministic
    for a ``seed``, until ``n_bytes`` are written (to a temporary name, moved into place); the count.

    The shape where a per-line cost shows most: about 3x the lines of the "short" corpus per byte.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "t.jsonl"
    >>> write_tiny_corpus(p, 1000), p.read_bytes().count(b"\\n")
    (22, 22)
    """
    rng = np.random.default_rng(seed)
    words = [w.encode() for w in _TINY_WORDS]
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    written = count = 0
    with open(tmp, "wb") as f:
        while written < n_bytes:
            block = 1 << 16
            lengths = rng.integers(2, 9, size=block)
            picks = rng.integers(0, len(words), size=int(lengths.sum()))
            lines, pos = [], 0
            for j, n in enumerate(lengths.tolist()):
                text = b" ".join(words[k] for k in picks[pos : pos + n].tolist())
                pos += n
                lines.append(b'{"id":%d,"text":"%s"}\n' % (count + j, text))
            out = b"".join(lines)
            if written + len(out) >= n_bytes:  # stop at the first record that reaches n_bytes
                ends = np.cumsum([len(line) for line in lines]) + written
                keep = int(np.searchsorted(ends, n_bytes)) + 1
                lines = lines[:keep]
                out = b"".join(lines)
            f.write(out)
            written += len(out)
            count += len(lines)
    os.replace(tmp, path)
    return count


@contextlib.contextmanager
def environ(name: str, value: str) -> Iterator[None]:
    """``$name`` set to ``value`` inside the block, as it was after it (unset stays unset)."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def median_seconds(fn: Callable[[], object], repeats: int = REPEATS, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def interleaved_medians(
    fns: dict[str, Callable[[], object]], repeats: int = REPEATS, warmup: int = 1
) -> dict[str, float]:
    """Median seconds of each function over ``repeats`` rounds, the functions taking turns within each
    round so that drift (a busy machine, a warming cache) hits them alike."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for round_ in range(warmup + repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            if round_ >= warmup:
                times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    """Rows as a markdown table (a ``|`` inside a cell, as in ``gzip -dc | wc -l``, escaped).

    >>> print(markdown_table([{"a": "x | y", "b": 1}], ["a", "b"]))
    | a | b |
    |---|---|
    | x \\| y | 1 |
    """

    def cells(values: list[str]) -> str:
        return "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"

    lines = [cells(columns), "|" + "---|" * len(columns)]
    lines += [cells([str(row.get(c, "")) for c in columns]) for row in rows]
    return "\n".join(lines)


def format_value(value: float, unit: str) -> str:
    """``value`` with three significant digits (no exponent), thousands as ``k``/``M`` for rates.

    >>> format_value(538123.0, "rec/s"), format_value(0.16149, "s"), format_value(1234.5, "ms")
    ('538 k rec/s', '0.161 s', '1,234 ms')
    >>> format_value(0.99612, "P"), format_value(3.3, "%")
    ('0.996', '3.30%')
    """
    prefix = ""
    if unit.endswith("/s") and value >= 1e3:
        value, prefix = (value / 1e6, "M ") if value >= 1e6 else (value / 1e3, "k ")
    if value >= 1000:
        number = f"{value:,.0f}"
    elif value >= 100:
        number = f"{value:.0f}"
    elif value >= 10:
        number = f"{value:.1f}"
    elif value >= 1:
        number = f"{value:.2f}"
    else:
        number = f"{value:.3g}"
    if unit == "P":  # a probability: the number says it
        return number
    return f"{number}{unit}" if unit in ("%", "×") else f"{number} {prefix}{unit}"


def figures_table(figures: dict[str, dict]) -> str:
    """The figures as a markdown table (what a standalone run prints under its table)."""
    rows = [
        {
            "figure": key,
            "value": format_value(f["value"], f["unit"]),
            "baseline": " ".join(
                [f.get("baseline", "")]
                + ([format_value(f["baseline_value"], f["unit"])] if "baseline_value" in f else [])
            ).strip(),
            "what": f["what"],
        }
        for key, f in figures.items()
    ]
    return markdown_table(rows, ["figure", "value", "baseline", "what"])


def bench_main(
    doc: str | None, run: Callable[[bool], list[dict]], columns: list[str], quick_help: str
) -> list[dict]:
    """The command line every benchmark has: ``--quick`` (smaller corpora, a smoke run), then the markdown
    table of ``run``'s rows and the figures it recorded; returns the rows."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    rows = run(parser.parse_args().quick)
    print(markdown_table(rows, columns))
    print("\n" + figures_table(take_figures()))
    return rows


# ------------------------------------------------------------------- the suites and their results files
# (here, below run.py and readme_figures.py, which both use them)

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "benchmarks" / "results"
RESULTS_MD = RESULTS_DIR / "RESULTS.md"

SUITES = {
    "core": ("bench_core", "Index build, random access, iteration, open time"),
    "scan": ("bench_scan", "Index scan: compiled vs numpy fallback, against `wc -l`"),
    "sampling": ("bench_sampling", "Shuffled iteration, DataLoader, 🤗 shuffled iteration"),
    "mindspore": ("bench_mindspore", "Into MindSpore: sjsonl vs 🤗 + MindNLP-style adapter"),
    "storage": ("bench_storage", "Compressed (.gz, seekable .zst) and remote (S3 via moto) vs local"),
    "gzip": ("bench_gzip", "gzip backends: rapidgzip vs indexed_gzip (index build, random access, reopen)"),
    "pipeline": ("bench_pipeline", "Mixtures, and background prefetch on a storage with 5 ms latency"),
    "cold": ("bench_cold", "Cold page cache: random ds[i], shuffled passes, read-ahead, block shuffle"),
    "decode": ("bench_decode", "Partial (fields=) and typed (schema=) decoding vs a full parse"),
    "json_rules": ("bench_json_rules", "Decoding as json.loads does (NaN, duplicate keys): what it costs"),
    "append": ("bench_append", "Reopening after a 1% append (index extended) vs a full index build"),
    "billion": ("bench_billion", "10^9 records in 1,000 files: open time, memory, checked reads"),
    "many_files": ("bench_many_files", "Many small files: first open and reopen vs one file of the records"),
    "clusters": ("bench_clusters", "Ray Data and Dask: their JSON readers vs sjsonl.ray and sjsonl.dask"),
    "index_size": ("bench_index_size", "Compact vs plain index: bytes per record, build, ds[i], iteration"),
    "safe_reads": (
        "bench_safe_reads",
        "The guarded memory map (the default read path) vs the raw mmap before",
    ),
    "versions": ("bench_versions", "Before and after “never a wrong record”: this checkout vs d36b2b4"),
    "remote": ("bench_remote", "Training from S3: shuffled epochs with and without the local chunk cache"),
    "packing": ("bench_packing", "Packing: ds.pack vs 🤗 load_dataset + map + TRL pack_dataset"),
    "parallel": (
        "bench_parallel",
        "Schema and bad-line passes: one process vs workers=2 (sjsonl.runtime.parallel)",
    ),
    "types": (
        "bench_types",
        "Column types from every row: compiled vs Python vs pyarrow; MindSpore first batch vs MindNLP",
    ),
}

#: Keys every results file has (``figures`` entries: value, unit, what, median_of; baseline optional).
KEYS = ("suite", "title", "date", "commit", "machine", "quick", "columns", "rows", "figures")
MACHINE_KEYS = ("cpus", "cpu", "memory_gib", "python", "numpy", "orjson", "msgspec", "os")


def check(doc: dict, source: str) -> dict:
    """``doc`` if it is a complete results document, else a ValueError naming ``source`` and what is wrong."""
    missing = [k for k in KEYS if k not in doc] + [
        f"machine.{k}" for k in MACHINE_KEYS if k not in doc["machine"]
    ]
    if missing:
        raise ValueError(f"{source}: missing {', '.join(missing)}")
    for key, fig in doc["figures"].items():
        bad = [k for k in ("value", "unit", "what", "median_of") if k not in fig]
        if bad or not isinstance(fig["value"], float) or not isinstance(fig["median_of"], int):
            raise ValueError(f"{source}: figure {key!r} lacks a float value, unit, what or median_of")
    return doc


def load_results(directory: Path = RESULTS_DIR) -> dict[str, dict]:
    """Every results document in ``directory``, by suite: SUITES' order, then any others by name."""
    docs = {p.stem: check(json.loads(p.read_text()), str(p)) for p in directory.glob("*.json")}
    order = [s for s in SUITES if s in docs] + sorted(s for s in docs if s not in SUITES)
    return {s: docs[s] for s in order}
