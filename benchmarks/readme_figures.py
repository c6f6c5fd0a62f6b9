"""The README's headline benchmark table, generated from the figures in ``benchmarks/results/*.json``.

    python benchmarks/readme_figures.py          # rewrite the block in README.md from the results
    python benchmarks/readme_figures.py --check  # exit 1 if README.md's block is not what they give

The block sits between ``<!-- figures:start -->`` and ``<!-- figures:end -->`` in README.md; ``KEYS``
chooses its rows (``suite.figure``). ``benchmarks/run.py`` rewrites it after every run, and
``tests/test_bench_provenance.py`` fails when it differs from what the committed results give — so a number
edited by hand there, or a results file deleted, is caught.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import HIGHER_IS_BETTER, LOWER_IS_BETTER, REPO, format_value, load_results, markdown_table

README = REPO / "README.md"
START, END = "<!-- figures:start -->", "<!-- figures:end -->"
RESULTS_LINK = "benchmarks/results/RESULTS.md"

#: The README's rows, in order: what a user weighs sjsonl by — its speed against the usual alternatives.
KEYS = [
    "core.build_long",
    "core.build_short",
    "core.build_tiny",
    "scan.numpy_long",
    "core.build_short_vs_readline",
    "core.get_short",
    "core.get_long",
    "core.get_short_vs_seek_readline",
    "core.iter_short",
    "core.iter_long",
    "core.select_short",
    "sampling.shuffle_short",
    "sampling.sampler_first",
    "core.hf_load",
    "core.hf_get",
    "sampling.hf_shuffled",
    "mindspore.ttfb_first_early",
    "types.ttfb_short",
    "types.types_short",
    "mindspore.ttfb_reused",
    "mindspore.rows_batch_shuffled",
    "gzip.build_short",
    "gzip.get_short",
    "append.reopen_long",
    "append.reopen_long_trust",
    "index_size.bytes_long",
    "index_size.bytes_short",
    "cold.readahead_long",
    "pipeline.prefetch_8",
    "safe_reads.get_short",
    "core.first_open_short",
    "billion.open",
    "many_files.many_first_open_100000",
    "many_files.many_reopen_100000",
    "clusters.ray_count",
    "clusters.ray_pass",
    "packing.pack_first",
    "packing.pack_stream_first",
    "packing.pack_first_vs_torchtune",
    "packing.pack_disk",
    "packing.efficiency_bfd",
    "remote.nocache_short_30ms",
    "remote.nocache_iterable_short_30ms",
    "remote.epoch1_short_30ms",
    "remote.epoch2whole_short_30ms",
    "remote.epoch1_long_30ms",
    "remote.epoch2whole_long_30ms",
]

_SIZES = {"B/rec", "MB", "MiB"}


def ratio(fig: dict) -> str:
    """How ``value`` compares with ``baseline_value``, in words a reader does not have to decode.

    >>> ratio({"value": 0.05, "baseline_value": 5.0, "unit": "s"})
    '100× faster'
    >>> ratio({"value": 1.6, "baseline_value": 4.0, "unit": "B/rec"})
    '2.50× smaller'
    >>> ratio({"value": 90e3, "baseline_value": 100e3, "unit": "rec/s"})
    '1.11× slower'
    """
    value, base, unit = fig["value"], fig.get("baseline_value"), fig["unit"]
    if base is None or value == 0 or base == 0:
        return "—"
    if unit in LOWER_IS_BETTER:
        factor = base / value
    elif unit in HIGHER_IS_BETTER:
        factor = value / base
    else:
        return f"{value / base:.2f}×"
    better, worse = ("smaller", "larger") if unit in _SIZES else ("faster", "slower")
    word = better if factor >= 1 else worse
    factor = factor if factor >= 1 else 1 / factor
    number = f"{factor:,.0f}" if factor >= 10 else f"{factor:.2f}"
    return f"{number}× {word}"


def lookup(docs: dict[str, dict], key: str) -> dict | None:
    suite, _, name = key.partition(".")
    doc = docs.get(suite)
    return doc["figures"].get(name) if doc else None


def missing(docs: dict[str, dict]) -> list[str]:
    """The keys in KEYS that the results do not hold."""
    return [key for key in KEYS if lookup(docs, key) is None]


def render(docs: dict[str, dict]) -> str:
    """The block's text (between the markers), from the results documents."""
    absent = missing(docs)
    if absent:
        raise KeyError(f"no figure {', '.join(absent)} in benchmarks/results/ (run benchmarks/run.py)")
    rows = []
    for key in KEYS:
        fig = lookup(docs, key)
        assert fig is not None
        suite = key.partition(".")[0]
        base = fig.get("baseline", "—")
        if "baseline_value" in fig:
            base += " " + format_value(fig["baseline_value"], fig["unit"])
        link = f"[`{key}`]({RESULTS_LINK}#{suite})" + (" (quick)" if docs[suite]["quick"] else "")
        rows.append(
            {
                "figure": fig["what"],
                "value": format_value(fig["value"], fig["unit"]),
                "baseline (same run)": base,
                "ratio": ratio(fig),
                "suite": link,
            }
        )
    lines = [markdown_table(rows, ["figure", "value", "baseline (same run)", "ratio", "suite"])]
    used = sorted({key.partition(".")[0] for key in KEYS})
    quick = [s for s in used if docs[s]["quick"]]
    lines.append("")
    lines.append(
        f"Generated by `benchmarks/readme_figures.py` from `benchmarks/results/<suite>.json` (`make bench`);"
        f" medians, each ratio against a baseline measured in the same run. Every table, with the date,"
        f" commit and machine of each run: [`{RESULTS_LINK}`]({RESULTS_LINK})."
    )
    if quick:
        lines.append("")
        lines.append(
            f"**Quick runs** (small corpora on a busy machine, a smoke test — not numbers to quote yet):"
            f" {', '.join(quick)}."
        )
    return "\n".join(lines)


def block_of(text: str) -> str:
    """The text between the markers in ``text`` (ValueError if they are not there, once each, in order)."""
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        raise ValueError(f"README.md must hold {START} … {END} once")
    return text[text.index(START) + len(START) : text.index(END)].strip("\n")


def update_readme(docs: dict[str, dict], path: Path = README) -> list[str]:
    """Rewrite the block in ``path`` from ``docs``; return the keys missing from them (then nothing is
    written)."""
    absent = missing(docs)
    if absent:
        return absent
    text = path.read_text()
    block_of(text)  # the markers are there
    new = text[: text.index(START) + len(START)] + "\n" + render(docs) + "\n" + text[text.index(END) :]
    if new != text:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(new)
        os.replace(tmp, path)
    return []


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="only check that README.md is up to date")
    args = parser.parse_args()
    docs = load_results()
    if args.check:
        sys.exit(0 if block_of(README.read_text()) == render(docs) else "README.md's figures block is stale")
    absent = update_readme(docs)
    if absent:
        sys.exit(f"no figure {', '.join(absent)} in benchmarks/results/")


if __name__ == "__main__":
    main()
