"""Draw the README's benchmark chart from ``benchmarks/results.md`` (needs matplotlib: ``sjsonl[bench]``).

    python benchmarks/plot.py [results.md] [out.png]

Each bar is one measurement from the results table, as time relative to its same-run baseline (1.0 = the
baseline; lower is faster).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).parent

# (section prefix, benchmark prefix, variant prefix, label on the chart, is it sjsonl?)
PICKS = [
    ("Index build", "index build, long", "sjsonl, 2 threads", "index build, 1 GiB long\nvs wc -l", True),
    ("Index build", "index build, short", "sjsonl, 2 threads", "index build, 256 MiB short\nvs wc -l", True),
    ("Index build", "index build, short", "readline indexer", "readline indexer\nvs wc -l", False),
    ("Index build", "random `ds[i]`, short", "sjsonl", "random ds[i], short\nvs mmap+orjson", True),
    ("Index build", "random `ds[i]`, short", "seek + readline", "seek+readline+json\nvs mmap+orjson", False),
    ("Index build", "sequential, short", "`for r in ds`", "iteration, short\nvs orjson line loop", True),
    ("Index build", "sequential, long", "`select_columns", "select_columns, long\nvs orjson line loop", True),
    ("Index build", "🤗 datasets", '`load_dataset("json")`', "HF load_dataset(json)\nvs wc -l", False),
]


def _tables(text: str) -> dict[str, list[list[str]]]:
    sections: dict[str, list[list[str]]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("### "):
            current = line[4:]
            sections[current] = []
        elif line.startswith("| ") and not line.startswith("| benchmark"):
            sections.setdefault(current, []).append([c.strip() for c in line.strip("|").split("|")])
    return sections


def _relative_time(ratio: str) -> float | None:
    m = re.match(r"([\d.,]+)×", ratio)
    if not m:
        return None
    value = float(m.group(1).replace(",", ""))
    return 1 / value if "speed" in ratio else value  # "× speed" is a throughput ratio


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    src = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results.md"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "results.png"
    tables = _tables(src.read_text())
    labels, values, ours = [], [], []
    for section, bench, variant, label, is_ours in PICKS:
        rows = next(rows for name, rows in tables.items() if name.startswith(section))
        row = next(r for r in rows if r[0].startswith(bench) and r[1].startswith(variant))
        value = _relative_time(row[3])
        if value is not None:
            labels.append(label)
            values.append(value)
            ours.append(is_ours)
    fig, ax = plt.subplots(figsize=(9, 4.8))
    colors = ["#2a7" if mine else "#999" for mine in ours]  # green: sjsonl; grey: the alternatives
    ax.barh(labels[::-1], values[::-1], color=colors[::-1])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("time relative to the same-run baseline (log scale; 1 = baseline, lower is faster)")
    for y, v in enumerate(values[::-1]):
        ax.text(v, y, f" {v:.2f}×", va="center", fontsize=8)
    ax.set_title("sjsonl (green) and the alternatives (grey); medians, 2-core VM, page-cached data")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
