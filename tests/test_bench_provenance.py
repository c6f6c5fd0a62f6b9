"""Every number in the README's benchmark block comes from a committed results file.

``make bench`` writes ``benchmarks/results/<suite>.json`` (rows, figures, date, commit, machine) and
generates ``benchmarks/results/RESULTS.md`` and the README block between ``<!-- figures:start -->`` and
``<!-- figures:end -->`` from them. These tests run no benchmark: they regenerate both from the committed
json files and compare, so a number edited by hand, a results file deleted, or a figure the README lists
but no suite records fails here.
"""

from __future__ import annotations

import datetime
import doctest
import importlib
import math
import re
import shutil
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
README = REPO / "README.md"


@pytest.fixture(scope="module")
def bench():
    """benchmarks/run.py, readme_figures.py and common.py, imported as the benchmarks import each other (by
    bare name, from their folder); sys.path and sys.modules are put back afterwards."""
    names = ("run", "readme_figures", "common")
    saved_path, saved = list(sys.path), {n: sys.modules.pop(n) for n in names if n in sys.modules}
    sys.path.insert(0, str(BENCH))
    try:
        modules = {n: importlib.import_module(n) for n in names}
        yield SimpleNamespace(**modules)
    finally:
        sys.path[:] = saved_path
        for n in names:
            sys.modules.pop(n, None)
        sys.modules.update(saved)


@pytest.fixture(scope="module")
def docs(bench):
    return bench.run.load_results()


def _listed_keys(block: str) -> list[str]:
    return re.findall(r"\[`([a-z_]+\.[a-z0-9_]+)`\]\(benchmarks/results/RESULTS\.md#[a-z_]+\)", block)


def test_readme_block_is_what_the_results_give(bench, docs):
    block = bench.readme_figures.block_of(README.read_text())
    assert block == bench.readme_figures.render(docs), (
        "README.md's figures block differs from benchmarks/results/*.json: "
        "run `python benchmarks/readme_figures.py` (never edit the block by hand)"
    )


def test_results_md_is_what_run_py_generates(bench, docs):
    assert bench.run.RESULTS_MD.read_text() == bench.run.render_results(docs), (
        "RESULTS.md differs from the json files: run `python benchmarks/run.py --render-only`"
    )


def test_every_figure_the_readme_lists_has_a_value(bench, docs):
    listed = _listed_keys(bench.readme_figures.block_of(README.read_text()))
    assert listed == bench.readme_figures.KEYS
    for key in listed:
        suite, _, name = key.partition(".")
        assert (bench.run.RESULTS_DIR / f"{suite}.json").is_file(), key
        fig = docs[suite]["figures"][name]
        assert isinstance(fig["value"], float) and math.isfinite(fig["value"]), key
        assert fig["median_of"] >= 1 and fig["what"] and fig["unit"] in bench.common.UNITS, key
        if "baseline_value" in fig:
            assert fig["baseline"] and math.isfinite(fig["baseline_value"]), key


def test_every_suite_has_a_complete_results_file(bench, docs):
    assert list(docs) == list(bench.run.SUITES), "a suite without results (or results without a suite)"
    for name, doc in docs.items():
        assert doc["suite"] == name and doc["title"] == bench.run.SUITES[name][1]
        assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", doc["commit"]), doc["commit"]
        datetime.datetime.fromisoformat(doc["date"])
        assert isinstance(doc["quick"], bool) and doc["rows"] and doc["figures"], name
        assert doc["machine"]["cpus"] >= 1 and doc["machine"]["cpu"], name
        assert all(set(row) <= set(doc["columns"]) for row in doc["rows"]), name


def test_a_number_edited_by_hand_is_caught(bench, docs):
    block = bench.readme_figures.block_of(README.read_text())
    row = next(line for line in block.splitlines() if "`core.build_long`" in line)
    value = row.split(" | ")[1]  # the value cell, e.g. "0.161 s"
    edited = block.replace(row, row.replace(value, "0" + value, 1))
    assert edited != block and edited != bench.readme_figures.render(docs)


def test_a_deleted_results_file_is_caught(bench, tmp_path):
    for path in bench.run.RESULTS_DIR.glob("*.json"):
        if path.stem != "core":
            shutil.copy(path, tmp_path / path.name)
    fewer = bench.run.load_results(tmp_path)
    with pytest.raises(KeyError, match=r"core\.build_long"):
        bench.readme_figures.render(fewer)
    assert bench.run.render_results(fewer) != bench.run.RESULTS_MD.read_text()


def test_a_figure_without_its_fields_is_refused(bench, tmp_path):
    text = (bench.run.RESULTS_DIR / "append.json").read_text()
    (tmp_path / "append.json").write_text(text.replace('"median_of"', '"median"', 1))
    with pytest.raises(ValueError, match=r"append\.json: figure"):
        bench.run.load_results(tmp_path)


def test_figure_rules_and_formatting(bench, tmp_path, monkeypatch):
    """The doctests of the report modules (benchmarks/ is outside pytest's doctest paths; their
    ``tempfile.mkdtemp()`` goes under ``tmp_path``, so nothing is left in the temp dir), and the registry
    refusing what would make a figure unreadable."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for module in (bench.common, bench.run, bench.readme_figures):
        assert doctest.testmod(module).failed == 0, module.__name__
    bench.common.take_figures()
    bench.common.figure("x", 1.0, "s", what="one", median_of=5)
    with pytest.raises(ValueError, match="twice"):
        bench.common.figure("x", 2.0, "s", what="again", median_of=5)
    with pytest.raises(ValueError, match="unknown unit"):
        bench.common.figure("y", 1.0, "furlongs", what="y", median_of=5)
    with pytest.raises(ValueError, match="finite"):
        bench.common.figure("z", float("nan"), "s", what="z", median_of=5)
    assert list(bench.common.take_figures()) == ["x"]
