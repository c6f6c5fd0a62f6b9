"""sjsonl.data.transforms.columns: column_names / features from the schema of all rows, ds["col"], remove and
rename — compared with 🤗."""

from __future__ import annotations

import pytest

from tests._hf_pair import pair

pytest.importorskip("datasets")


def test_columns_like_hf(tmp_path):
    hf, ds, _ = pair(tmp_path)
    assert ds.column_names == hf.column_names and ds.num_rows == hf.num_rows
    assert ds.features == hf.features
    assert ds["text"] == list(hf["text"]) and ds.shuffle(seed=1)["id"] == [
        r["id"] for r in ds.shuffle(seed=1)
    ]
    for op in (
        lambda d: d.remove_columns(["text", "ids"]),
        lambda d: d.rename_column("text", "body"),
        lambda d: d.rename_columns({"id": "k", "score": "s"}),
        lambda d: d.select_columns(["score", "id"]),
    ):
        assert op(ds).to_list() == op(hf).to_list() and op(ds).column_names == op(hf).column_names
    with pytest.raises(ValueError):
        ds.remove_columns("nope")
    with pytest.raises(ValueError):
        ds.rename_column("id", "text")
    with pytest.raises(KeyError):
        ds["nope"]


def test_column_names_after_map_come_from_the_rows(tmp_path):
    hf, ds, _ = pair(tmp_path)
    fn = lambda r: {"n": len(r["text"])}  # noqa: E731
    assert ds.map(fn, remove_columns=["ids"]).column_names == hf.map(fn, remove_columns=["ids"]).column_names
