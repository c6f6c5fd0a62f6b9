"""Mixtures against 🤗's ``interleave_datasets`` / ``concatenate_datasets``, record for record, with 🤗
reading its own copy of each file (``load_dataset("json")``: no record on its side comes from sjsonl)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

datasets = pytest.importorskip("datasets")

from sjsonl import JSONLDataset, concatenate_datasets, interleave_datasets  # noqa: E402

from .test_mixture import PROBS, SIZES, write_source  # noqa: E402


def hf_json(path: str | Path, tmp_path: Path):
    """``path`` as 🤗 reads it: ``load_dataset("json")`` on a copy of the file of its own."""
    copies = tmp_path / "hf-copies"
    copies.mkdir(exist_ok=True)
    copy = copies / f"{len(list(copies.iterdir()))}-{Path(path).name}"
    shutil.copyfile(path, copy)
    return datasets.load_dataset(
        "json", data_files=str(copy), split="train", cache_dir=str(tmp_path / "hf-cache")
    )


@pytest.mark.parametrize("strategy", ["first_exhausted", "all_exhausted"])
def test_round_robin_equals_hf_record_for_record(tmp_path, strategy):
    lengths = {"a": 3, "b": 4, "c": 5}  # 🤗's own example
    paths = [write_source(tmp_path / f"{k}.jsonl", k, n) for k, n in lengths.items()]
    ours = interleave_datasets([JSONLDataset(p) for p in paths], stopping_strategy=strategy)
    theirs = datasets.interleave_datasets([hf_json(p, tmp_path) for p in paths], stopping_strategy=strategy)
    assert len(ours) == len(theirs) and ours[:] == theirs.to_list()
    # 🤗's documented result for this example ([0, 10, 20, 1, 11, 21, 2, 12, 22] first_exhausted, then
    # 0, 13, 23, 1, 10, 24 all_exhausted), as source and record
    first = [("a", 0), ("b", 0), ("c", 0), ("a", 1), ("b", 1), ("c", 1), ("a", 2), ("b", 2), ("c", 2)]
    more = [("a", 0), ("b", 3), ("c", 3), ("a", 1), ("b", 0), ("c", 4)] if strategy == "all_exhausted" else []
    assert [(r["src"], r["i"]) for r in ours] == first + more


def test_round_robin_of_real_files_equals_hf(shared_data, tmp_path):
    files = [
        shared_data / "jsonl/gsm8k/test.jsonl",
        shared_data / "jsonl/human_eval/HumanEval.jsonl",
        shared_data / "jsonl/llama_factory/v1_sft_demo.jsonl",
    ]
    ours = interleave_datasets(
        [JSONLDataset(str(f)) for f in files], stopping_strategy="all_exhausted", fill_missing=True
    )
    theirs = datasets.interleave_datasets(
        [hf_json(f, tmp_path) for f in files], stopping_strategy="all_exhausted"
    )
    assert len(ours) == len(theirs) == 3 * 1319  # gsm8k's 1319 test problems are the longest source
    assert ours[:] == theirs.to_list()  # 🤗 gives every row the union of columns, as fill_missing does
    plain = interleave_datasets([JSONLDataset(str(f)) for f in files], stopping_strategy="all_exhausted")
    assert plain[1] == JSONLDataset(str(files[1]))[0]  # by default a record is as in its file


def test_concatenate_equals_hf(tmp_path):
    paths = [write_source(tmp_path / f"{name}.jsonl", name, 50 + 10 * k) for k, name in enumerate(SIZES)]
    ours = concatenate_datasets([JSONLDataset(p) for p in paths])
    theirs = datasets.concatenate_datasets([hf_json(p, tmp_path) for p in paths])
    assert ours[:] == theirs.to_list() and len(ours) == theirs.num_rows == ours.num_rows == 180
    assert ours[55] == theirs[55] and ours[[3, 140, 60]] == [theirs[3], theirs[140], theirs[60]]


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
def test_hf_random_draws_drift_where_ours_do_not():
    """The reason for the schedule, measured on 🤗 itself: its i.i.d. draws wander by tens of records."""
    hf = datasets.interleave_datasets(
        [datasets.Dataset.from_list([{"src": name}] * n) for name, n in SIZES.items()],
        probabilities=PROBS,
        seed=0,
    )
    names = list(SIZES)
    src = np.array([names.index(s) for s in hf.select(range(100_000))["src"]])
    counts = np.stack([np.cumsum(src == k) for k in range(3)], axis=1)
    theirs = np.abs(counts - np.arange(1, 100_001)[:, None] * np.array(PROBS)).max()
    assert theirs > 20  # √(t·p·(1-p)) at t=10⁵ is ≈ 145 for the 0.7 source
    assert np.all(np.abs(counts[-1] / 100_000 - PROBS) < 0.005)  # both meet the 0.5% bound at 10⁵
