"""The cost of decoding exactly as ``json.loads`` (a key held twice gives its last value; ``NaN``,
``Infinity`` and ``-Infinity`` are floats): random ``ds[i]`` and sequential iteration on a corpus without
NaN, on the same corpus with ``NaN`` in one record of every 1000, and (the worst case) in every record.

Records without NaN never leave msgspec, so the common path should cost what it did; a record with NaN
takes the standard library's second look. ``--baseline SRC`` measures another checkout's ``src`` (e.g. a
worktree of main) in the same run (by default, and under ``make bench``: commit ``BASE``, the code before
these rules, exported and built); every measurement is a fresh process, the versions alternate within
each round, and the table gives medians over the rounds. Where the baseline refuses NaN (before this
rule), its NaN corpus reads ``raises``.

    python benchmarks/bench_json_rules.py [--quick] [--baseline /path/to/other/checkout/src]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from common import DATA_DIR, REPEATS, figure, figures_table, markdown_table, take_figures

COLUMNS = ["corpus", "operation", "this checkout", "baseline", "ratio", "note"]
BASE = "03dbef0"  # main before the json.loads rules were merged (6231ca8, "Merge branch 'decode'")
NAN_EVERY = (1000, 1)  # corpora with NaN in one record of every 1000, and in every record (the worst case)


def nan_name(every: int) -> str:
    return "NaN in every record" if every == 1 else f"NaN in 1 of {every}"


#: Figure-key tags of the NaN corpora, by name.
TAGS = {nan_name(every): "nan_all" if every == 1 else f"nan_1in{every}" for every in NAN_EVERY}


def corpora(n: int) -> dict[str, Path]:
    """The generated short-record corpus of ``n`` records, and copies with ``"score": NaN`` added to one
    record in each of :data:`NAN_EVERY` (cached in the benchmark data directory)."""
    from sjsonl.sample import write_corpus

    DATA_DIR.mkdir(parents=True, exist_ok=True)
    plain = DATA_DIR / f"rules-short-{n}.jsonl"
    if not plain.exists():
        write_corpus(plain, n, kind="short", seed=0)
    out = {"no NaN": plain}
    for every in NAN_EVERY:
        with_nan = DATA_DIR / f"rules-short-{n}-nan{every}.jsonl"
        if not with_nan.exists():
            tmp = with_nan.with_suffix(".tmp")
            with open(plain, "rb") as src, open(tmp, "wb") as dst:
                for i, line in enumerate(src):
                    dst.write(b'{"score": NaN, ' + line[1:] if i % every == 0 else line)
            os.replace(tmp, with_nan)
        out[nan_name(every)] = with_nan
    return out


def child(path: str, index_dir: str, reads: int) -> dict[str, float | None]:
    """Run in a fresh process: µs per record of random ``ds[i]`` and of ``list(ds)`` (None: raised)."""
    import numpy as np

    from sjsonl import JSONLDataset, RecordDecodeError

    ds = JSONLDataset(path, index_dir=index_dir)
    order = np.random.default_rng(0).integers(0, len(ds), reads).tolist()
    out: dict[str, float | None] = {}
    try:
        for i in order[:2000]:  # warm the pages and the interpreter
            ds[i]
        t0 = time.perf_counter()
        for i in order:
            ds[i]
        out["random ds[i]"] = (time.perf_counter() - t0) / reads * 1e6
    except RecordDecodeError:
        out["random ds[i]"] = None
    try:
        t0 = time.perf_counter()
        n = sum(1 for _ in ds)
        out["iteration"] = (time.perf_counter() - t0) / n * 1e6
    except RecordDecodeError:
        out["iteration"] = None
    return out


def _measure(src: str, path: Path, index_dir: str, reads: int) -> dict[str, float | None]:
    env = {**os.environ, "PYTHONPATH": src}
    code = (
        f"import sys, json; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
        f"from bench_json_rules import child; print(json.dumps(child({str(path)!r}, {index_dir!r}, {reads})))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def exported(commit: str, into: str) -> str:
    """``commit``'s ``src``, exported (``git archive``: the repository is left alone) with its compiled
    extensions built in place, so that both versions read through the same kind of code."""
    repo = str(Path(__file__).resolve().parent.parent)
    archive = subprocess.run(
        [
            "git",
            "-C",
            repo,
            "archive",
            "--format=tar",
            commit,
            "src",
            "setup.py",
            "pyproject.toml",
            "README.md",
        ],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    build = [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
    subprocess.run(build, cwd=into, check=True, capture_output=True)
    return os.path.join(into, "src")


def run(quick: bool = False, baseline: str | None = None, rounds: int | None = None) -> list[dict]:
    """The table's rows; without ``baseline`` (as ``benchmarks/run.py`` calls it) the baseline is
    :data:`BASE`, the code before the json.loads rules, exported and built."""
    if baseline is None:
        with tempfile.TemporaryDirectory(prefix="sjsonl-rules-base-") as tmp:
            return _run(quick, exported(BASE, tmp), rounds, baseline_is_base=True)
    return _run(quick, baseline, rounds)


def _run(quick: bool, baseline: str, rounds: int | None, baseline_is_base: bool = False) -> list[dict]:
    rounds = rounds or (REPEATS if quick else 7)
    here = str(Path(__file__).resolve().parent.parent / "src")
    n = 20_000 if quick else 200_000
    versions = {"this checkout": here, "baseline": baseline}
    found: dict[tuple[str, str, str], list[float | None]] = {}
    paths = corpora(n)
    for k in range(rounds):
        for name, path in paths.items():
            order = list(versions.items()) if k % 2 == 0 else list(versions.items())[::-1]
            for version, src in order:
                index_dir = str(DATA_DIR / f"rules-index-{version.replace(' ', '-')}")
                for op, us in _measure(src, path, index_dir, n).items():
                    found.setdefault((name, op, version), []).append(us)
    rows = []
    for name in paths:
        for op in ("random ds[i]", "iteration"):
            row: dict[str, str] = {"corpus": f"{name} ({n:,} short records)", "operation": op}
            medians = {}
            for version in versions:
                values = found[(name, op, version)]
                if any(v is None for v in values):
                    row[version] = "raises"
                    continue
                medians[version] = statistics.median(v for v in values if v is not None)
                spread = f"{min(values):.2f}–{max(values):.2f}"  # type: ignore[type-var]
                row[version] = f"{medians[version]:.2f} µs (range {spread})"
            if len(medians) == 2:
                row["ratio"] = f"{medians['this checkout'] / medians['baseline']:.3f}×"
                if name == "no NaN":  # the common path, before and after the rules
                    figure(
                        f"{'get' if op.startswith('random') else 'iter'}_plain",
                        medians["this checkout"],
                        "µs",
                        what=f"{op} per record, no NaN ({n:,} short records), this checkout",
                        median_of=rounds,
                        baseline="the code before the json.loads rules" if baseline_is_base else "--baseline",
                        baseline_value=medians["baseline"],
                    )
            plain = [v for v in found[("no NaN", op, "this checkout")] if v is not None]
            if name in TAGS and "this checkout" in medians and len(plain) == rounds:
                key = f"{'get' if op.startswith('random') else 'iter'}_{TAGS[name]}"
                figure(
                    key,
                    medians["this checkout"],
                    "µs",
                    what=f"{op} per record, {name} ({n:,} short records)",
                    median_of=rounds,
                    baseline="the same corpus without NaN",
                    baseline_value=statistics.median(plain),
                )
            row["note"] = f"median of {rounds} processes"
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="20k records, 5 rounds: a smoke run")
    parser.add_argument(
        "--baseline", help=f"another checkout's src directory, measured in the same run (default: {BASE}'s)"
    )
    parser.add_argument("--rounds", type=int, default=None, help="processes per measurement (default 7)")
    args = parser.parse_args()
    print(markdown_table(run(args.quick, args.baseline, args.rounds), COLUMNS))
    print("\n" + figures_table(take_figures()))


if __name__ == "__main__":
    main()
