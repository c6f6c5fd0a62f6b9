"""sjsonl.data.transforms.map: 🤗 map's contract, lazily, and with_transform's batches — compared with 🤗 on
the same file."""

from __future__ import annotations

import pytest

from tests._hf_pair import pair

pytest.importorskip("datasets")


def test_map_like_hf(tmp_path):
    hf, ds, _ = pair(tmp_path)

    def fn(b, k):
        return {"n": [len(t) + k for t in b["text"]]}

    args = dict(batched=True, batch_size=7, remove_columns=["text"], fn_kwargs={"k": 1})
    assert ds.map(fn, **args).to_list() == hf.map(fn, **args).to_list()
    per_row = ds.map(lambda r, i: {"i2": i * 2}, with_indices=True, num_proc=2, desc="x")
    assert per_row.to_list() == hf.map(lambda r, i: {"i2": i * 2}, with_indices=True).to_list()
    assert ds.map(lambda s: {"s": s + 1}, input_columns="score")["s"] == [r["score"] + 1 for r in hf]


def test_map_is_lazy_and_keeps_indices_through_views(tmp_path):
    _, ds, _ = pair(tmp_path)
    calls = []
    mapped = ds.map(lambda r, i: calls.append(i) or {"i": i}, with_indices=True)
    assert calls == [0]  # only the first row, to check the function at map time
    view = mapped.shuffle(seed=3)
    assert all(r["i"] == r["id"] for r in view)  # the index in the mapped dataset, after a shuffle


def test_map_that_changes_row_counts_is_refused(tmp_path):
    _, ds, _ = pair(tmp_path)
    with pytest.raises(ValueError, match="one output row per input row"):
        ds.map(lambda b: {"x": b["id"] + b["id"]}, batched=True)
    with pytest.raises(TypeError):
        ds.map(lambda r: 1)
    with pytest.raises(TypeError, match="unexpected"):
        ds.map(lambda r: r, nonsense=True)


def test_with_transform_takes_batches_like_hf(tmp_path):
    hf, ds, _ = pair(tmp_path)
    seen = []

    def upper(batch):
        seen.append(len(batch["text"]))
        return {"t": [t.upper() for t in batch["text"]]}

    ours, theirs = ds.with_transform(upper), hf.with_transform(upper)
    assert ours.format["type"] == theirs.format["type"] == "custom"
    assert ours[2] == theirs[2]
    seen.clear()
    assert ours.__getitems__([1, 5, 9]) == theirs.__getitems__([1, 5, 9])  # what a DataLoader calls
    assert seen == [3, 3]  # one call per batch, for each library
    ds.set_transform(upper)
    assert ds.format["type"] == "custom" and ds[0] == {"t": "T0 "}
