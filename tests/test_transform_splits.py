"""sjsonl.data.transforms.splits and export: train_test_split (the rows 🤗 picks), DatasetDict, to_* and
iter."""

from __future__ import annotations

import pytest

import sjsonl
from tests._hf_pair import pair

pytest.importorskip("datasets")


def test_train_test_split_picks_hfs_rows(tmp_path):
    hf, ds, _ = pair(tmp_path)
    for kwargs in (
        {"test_size": 0.2, "seed": 3},
        {"test_size": 5, "train_size": 20, "seed": 1},
        {"shuffle": False},
    ):
        ours, theirs = ds.train_test_split(**kwargs), hf.train_test_split(**kwargs)
        assert {k: v.to_list() for k, v in ours.items()} == {k: v.to_list() for k, v in theirs.items()}
    with pytest.raises(ValueError):
        ds.train_test_split(test_size=1.5)


def test_exports_like_hf(tmp_path):
    hf, ds, _ = pair(tmp_path)
    assert ds.to_list() == hf.to_list() and ds.to_dict() == hf.to_dict()
    assert list(ds.iter(batch_size=7)) == list(hf.iter(batch_size=7))
    ours, theirs = ds.to_pandas(), hf.to_pandas()  # 🤗 gives numpy arrays for list cells, sjsonl lists
    assert ours.drop(columns="ids").equals(theirs.drop(columns="ids"))
    assert [list(x) for x in ours["ids"]] == [list(x) for x in theirs["ids"]]


def test_load_dataset_returns_a_datasetdict(tmp_path):
    _, ds, _ = pair(tmp_path)
    dd = sjsonl.load_dataset("json", data_files={"train": ds.files[0], "test": ds.files[0]})
    assert isinstance(dd, sjsonl.data.transforms.DatasetDict) and dd.num_rows == {"train": 40, "test": 40}
    assert dd.map(lambda r: {"x": 1}).remove_columns(["ids"]).column_names["test"] == [
        "id",
        "text",
        "score",
        "x",
    ]
