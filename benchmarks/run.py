"""Run the benchmark suites; record each in ``benchmarks/results/<suite>.json``; regenerate the reports.

    python benchmarks/run.py [--quick] [--only core,sampling,...] [--render-only]

Each suite's json holds its table rows, its *figures* (the headline numbers, recorded by
``common.figure`` where they are computed), and its provenance: date, commit (``+dirty`` when the checkout
differed from it), machine, quick or not. Then ``benchmarks/results/RESULTS.md`` is generated from every
json file present, and the README's headline table (``benchmarks/readme_figures.py``) from their figures.
``--only`` re-runs some suites and keeps the others' files; ``--render-only`` runs nothing.

Medians of repeated runs (``common.REPEATS``, or as the suite says); every ratio is against a baseline
measured in the same run.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import subprocess
import sys
import traceback
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (
    REPO,
    RESULTS_DIR,
    RESULTS_MD,
    SUITES,
    format_value,
    load_results,
    markdown_table,
    take_figures,
)

__all__ = ["REPO", "RESULTS_DIR", "SUITES", "load_results", "main"]


def machine() -> dict:
    """What the numbers were measured on."""
    import msgspec
    import numpy
    import orjson

    def first(path: str, prefix: str) -> str:
        try:
            with open(path) as f:
                return next((line.split(":", 1)[1].strip() for line in f if line.startswith(prefix)), "")
        except OSError:
            return ""

    mem_kib = first("/proc/meminfo", "MemTotal").split()
    return {
        "cpus": os.cpu_count(),
        "cpu": first("/proc/cpuinfo", "model name") or platform.processor() or platform.machine(),
        "memory_gib": round(int(mem_kib[0]) / 2**20, 1) if mem_kib else None,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "orjson": orjson.__version__,
        "msgspec": msgspec.__version__,
        "os": platform.platform(),
    }


def commit() -> str:
    """``git rev-parse HEAD``, ``+dirty`` when anything but the run's own outputs (the results directory
    and the README block) differs from it — taken before the run writes anything."""
    git = ["git", "-C", str(REPO)]
    try:
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        status = subprocess.run(
            [*git, "status", "--porcelain", "--", ".", ":!benchmarks/results", ":!README.md"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+dirty" if status.stdout.strip() else "")


def run_suite(name: str, quick: bool, provenance: dict) -> dict:
    """Run one suite in this process; its results document."""
    module_name, title = SUITES[name]
    take_figures()  # nothing left over from an earlier suite
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    load = list(os.getloadavg())
    module = importlib.import_module(module_name)
    rows = module.run(quick)
    columns = getattr(module, "COLUMNS", None) or (list(rows[0]) if rows else [])
    return {
        "suite": name,
        "title": title,
        "date": started,
        "commit": provenance["commit"],
        "machine": provenance["machine"],
        "load_average": [round(x, 2) for x in load],  # 1, 5, 15 minutes, when the suite started
        "quick": quick,
        "columns": columns,
        "rows": rows,
        "figures": take_figures(),
    }


def provenance_line(doc: dict) -> str:
    m = doc["machine"]
    parts = [
        "**quick run** (small corpora: a smoke test, not for quoting)" if doc["quick"] else "full run",
        f"{doc['date']}, commit `{doc['commit']}`",
        f"{m['cpus']} CPUs ({m['cpu']}), {m['memory_gib']} GiB, {m['os']}",
        f"Python {m['python']}, numpy {m['numpy']}, orjson {m['orjson']}, msgspec {m['msgspec']}",
    ]
    if doc.get("load_average"):
        parts.append("load average " + " / ".join(f"{x:g}" for x in doc["load_average"]) + " at the start")
    return "; ".join(parts) + "."


def figures_rows(doc: dict) -> list[dict]:
    rows = []
    for key, fig in doc["figures"].items():
        base = ""
        if "baseline" in fig:
            base = fig["baseline"]
            if "baseline_value" in fig:
                base += ": " + format_value(fig["baseline_value"], fig["unit"])
        rows.append(
            {
                "figure": f"`{doc['suite']}.{key}`",
                "value": format_value(fig["value"], fig["unit"]),
                "baseline (same run)": base,
                "what": fig["what"],
                "median of": str(fig["median_of"]),
            }
        )
    return rows


def render_results(docs: dict[str, dict]) -> str:
    """``benchmarks/results/RESULTS.md``: per suite its title, provenance, table and figures."""
    parts = [
        "# Benchmark results\n\n"
        "Generated by `benchmarks/run.py` from the `*.json` files beside this one (`make bench` writes them);"
        " do not edit by hand. Medians; every ratio is against a baseline measured in the same run."
    ]
    for name, doc in docs.items():
        section = [f'<a id="{name}"></a>\n## {name}: {doc["title"]}', provenance_line(doc)]
        section.append(markdown_table(doc["rows"], doc["columns"]))
        if doc["figures"]:
            columns = ["figure", "value", "baseline (same run)", "what", "median of"]
            section.append("Figures:\n\n" + markdown_table(figures_rows(doc), columns))
        parts.append("\n\n".join(section))
    return "\n\n".join(parts) + "\n"


def write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main() -> None:
    import readme_figures

    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("--quick", action="store_true", help="small corpora, for a smoke run")
    parser.add_argument("--only", default=",".join(SUITES), help="comma-separated suites")
    parser.add_argument("--render-only", action="store_true", help="run nothing: regenerate the reports")
    args = parser.parse_args()
    names = [] if args.render_only else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; the suites are {', '.join(SUITES)}")
    provenance = {"commit": commit(), "machine": machine()}
    failed = []
    RESULTS_DIR.mkdir(exist_ok=True)
    for name in names:
        print(f"### {name}: {SUITES[name][1]}", flush=True)
        try:
            doc = run_suite(name, args.quick, provenance)
        except Exception:  # one broken suite must not cost the others' results
            traceback.print_exc()
            failed.append(name)
            continue
        write(RESULTS_DIR / f"{name}.json", json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        print(markdown_table(doc["rows"], doc["columns"]) + "\n", flush=True)
    docs = load_results()
    write(RESULTS_MD, render_results(docs))
    print(f"wrote {RESULTS_MD.relative_to(REPO)} ({len(docs)} suites)")
    missing = readme_figures.update_readme(docs)
    if missing:
        print(f"README figures not updated: no figure {', '.join(missing)} in the results", file=sys.stderr)
    if failed or missing:
        sys.exit(f"failed: {', '.join(failed)}" if failed else 1)


if __name__ == "__main__":
    main()
