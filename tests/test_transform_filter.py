"""sjsonl.data.transforms.filter: 🤗 filter's contract; a sub-index computed once, in processes, cached on
disk."""

from __future__ import annotations

import os

import pytest

from sjsonl import JSONLDataset
from tests._hf_pair import pair

pytest.importorskip("datasets")


def test_filter_like_hf(tmp_path):
    hf, ds, _ = pair(tmp_path)
    assert ds.filter(lambda r: r["id"] % 3 == 0).to_list() == hf.filter(lambda r: r["id"] % 3 == 0).to_list()
    batched = dict(batched=True, batch_size=6, with_indices=True)
    assert (
        ds.filter(lambda b, idx: [i % 2 == 0 and s > 2 for i, s in zip(idx, b["score"])], **batched).to_list()
        == hf.filter(
            lambda b, idx: [i % 2 == 0 and s > 2 for i, s in zip(idx, b["score"])], **batched
        ).to_list()
    )


def test_filter_in_processes_equals_serial(tmp_path):
    _, ds, _ = pair(tmp_path, 500)
    serial = ds.filter(lambda r: "t1" in r["text"])
    assert [r["id"] for r in ds.filter(lambda r: "t1" in r["text"], num_proc=2)] == [r["id"] for r in serial]


def test_filter_cache_is_reused_and_invalidated_with_the_data(tmp_path):
    _, ds, _ = pair(tmp_path)
    cache = str(tmp_path / "keep.npy")
    assert len(ds.filter(lambda r: r["id"] < 10, cache_file_name=cache)) == 10
    # a different predicate with the same cache file gives a new key: recomputed, never the stale result
    assert len(ds.filter(lambda r: r["id"] < 5, cache_file_name=cache)) == 5
    stamp = os.stat(cache).st_mtime_ns
    assert len(ds.filter(lambda r: r["id"] < 5, cache_file_name=cache)) == 5
    assert os.stat(cache).st_mtime_ns == stamp  # reused
    path = ds.files[0]
    with open(path, "a") as fh:
        fh.write('{"id": 1, "text": "new", "score": 0, "ids": []}\n')
    grown = JSONLDataset(path)
    assert len(grown.filter(lambda r: r["id"] < 5, cache_file_name=cache)) == 6  # the data changed
