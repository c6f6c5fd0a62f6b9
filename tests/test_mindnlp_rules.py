"""MindNLP's ``load_dataset`` rules on ``sjsonl.mindspore.load_dataset``, with real MindSpore (CPU).

The first six tests are MindNLP's own (``tests/ut/dataset/test_imdb.py`` of mindspore-lab/mindnlp, v0.4.0),
adapted from the Hub's ``imdb`` (train/test/unsupervised) to a local folder of real JSON Lines with two splits
(GSM8K's train.jsonl and test.jsonl), and made to assert what MindNLP's prints only showed.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import mindspore.dataset as msd
import numpy as np
import pytest

from sjsonl import JSONLDataset
from sjsonl.data.streaming import JSONLStream
from sjsonl.mindspore import load_dataset


@pytest.fixture(scope="module")
def folder(shared_data: Path, tmp_path_factory) -> Path:
    # A copy: indexes (and their schema caches) are written beside the data, never into shared/data.
    d = tmp_path_factory.mktemp("gsm8k")
    for name in ("train.jsonl", "test.jsonl"):
        shutil.copy(shared_data / "jsonl/gsm8k" / name, d / name)
    return d


def _first(gd) -> tuple:
    return next(gd.create_tuple_iterator(output_numpy=True, num_epochs=1))


def _ids(gd, column: str = "i") -> list[int]:
    return [int(r[column]) for r in gd.create_dict_iterator(output_numpy=True, num_epochs=1)]


# ----------------------------------------------------------------------- MindNLP's test_imdb.py, adapted
def test_load_single(folder: Path) -> None:
    dataset = load_dataset(str(folder), split="train")
    assert isinstance(dataset, msd.GeneratorDataset)
    question, _answer = _first(dataset)
    assert str(question) == JSONLDataset(folder / "train.jsonl")[0]["question"]


def test_load_single_with_tuple(folder: Path) -> None:
    dataset = load_dataset(str(folder), split=("train",))
    assert isinstance(dataset, msd.GeneratorDataset) and dataset.get_dataset_size() == 7473
    assert len(_first(dataset)) == 2


def test_load_single_with_list(folder: Path) -> None:
    dataset = load_dataset(str(folder), split=["train"])
    assert isinstance(dataset, msd.GeneratorDataset) and dataset.get_dataset_size() == 7473


def test_load_single_with_dict(folder: Path) -> None:
    dataset = load_dataset(str(folder), split=None)
    assert sorted(dataset.keys()) == ["test", "train"]
    assert dataset["test"].get_dataset_size() == 1319
    assert dataset["train"].get_col_names() == ["question", "answer"]


def test_load_single_with_streaming(folder: Path) -> None:
    dataset = load_dataset(str(folder), split=None, streaming=True)
    assert sorted(dataset.keys()) == ["test", "train"]
    assert isinstance(dataset["train"].source.ds, JSONLStream)
    assert str(_first(dataset["train"])[0]) == JSONLDataset(folder / "train.jsonl")[0]["question"]


def test_split(folder: Path) -> None:
    dataset = load_dataset(str(folder), split="train")
    train, rest = dataset.split([0.7, 0.3])  # MindSpore's own split, on a random-access source
    assert train.get_dataset_size() + rest.get_dataset_size() == 7473
    assert len(_first(train)) == 2


# ----------------------------------------------------------------------- the rest of MindNLP's load.py
def test_source_ds_is_the_underlying_dataset(folder: Path) -> None:
    gd = load_dataset(str(folder), split="test[:10]")
    assert isinstance(gd.source.ds, JSONLDataset) and len(gd.source.ds) == 10
    assert gd.source.ds[3] == JSONLDataset(folder / "test.jsonl")[3]
    assert gd.source.column_names == ["question", "answer"]


def test_list_of_splits_is_a_dict_keyed_by_spec(folder: Path) -> None:
    out = load_dataset(str(folder), split=["train[:5]", "test"])
    assert list(out) == ["train[:5]", "test"]  # MindNLP: dict(zip(split, datasets))
    assert out["train[:5]"].get_dataset_size() == 5


def test_one_split_folder_is_bare(tmp_path: Path) -> None:
    (tmp_path / "data.jsonl").write_text('{"i": 1}\n{"i": 2}\n')
    gd = load_dataset(str(tmp_path))  # split=None, one split results: bare (🤗 would give a dict)
    assert isinstance(gd, msd.GeneratorDataset) and _ids(gd) == [1, 2]


def test_num_proc_is_num_parallel_workers(folder: Path) -> None:
    assert load_dataset(str(folder), split="test", num_proc=2).num_parallel_workers == 2
    assert load_dataset(str(folder), split="test").num_parallel_workers == 1
    gd = load_dataset(str(folder), split="test", num_proc=2, num_parallel_workers=1)
    assert gd.num_parallel_workers == 1  # an explicit MindSpore setting wins
    rows = load_dataset(str(folder), split="test[:50]", num_proc=2).create_tuple_iterator(output_numpy=True)
    assert [str(q) for q, _ in rows] == [r["question"] for r in JSONLDataset(folder / "test.jsonl")[:50]]


def test_shuffle_keyword_as_mindnlp(folder: Path) -> None:
    plain = [
        str(r[0]) for r in load_dataset(str(folder), split="test").create_tuple_iterator(output_numpy=True)
    ]
    shuffled = [
        str(r[0])
        for r in load_dataset(str(folder), split="test", shuffle=True).create_tuple_iterator(
            output_numpy=True
        )
    ]
    assert Counter(plain) == Counter(shuffled) and plain != shuffled
    assert plain[:3] == [r["question"] for r in JSONLDataset(folder / "test.jsonl")[:3]]


def test_field_goes_to_the_json_builder(tmp_path: Path) -> None:
    doc = tmp_path / "squad.json"
    doc.write_text(json.dumps({"version": 1, "data": [{"q": "a", "n": 1}, {"q": "b", "n": 2}]}))
    gd = load_dataset("json", data_files=str(doc), field="data", split="train")
    assert [(str(r["q"]), int(r["n"])) for r in gd.create_dict_iterator(output_numpy=True, num_epochs=1)] == [
        ("a", 1),
        ("b", 2),
    ]


# ----------------------------------------------------------------------- epochs that never break
def test_a_late_float_does_not_break_the_epoch(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    rows = [{"i": k, "x": k} for k in range(3000)]
    rows[2501]["x"] = 0.25
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    gd = load_dataset(str(path), split="train")
    xs = [float(r["x"]) for r in gd.create_dict_iterator(output_numpy=True, num_epochs=1)]
    assert len(xs) == 3000 and xs[2501] == 0.25 and xs[2500] == 2500.0


def test_transformed_datasets_are_typed_from_their_own_rows(tmp_path: Path) -> None:
    from sjsonl.mindspore import to_generator_dataset

    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"i": {k}}}\n' for k in range(5)))
    ds = JSONLDataset(path, record_transform=lambda r: {"i": r["i"], "half": r["i"] / 2})
    rows = list(to_generator_dataset(ds).create_dict_iterator(output_numpy=True, num_epochs=1))
    assert [float(r["half"]) for r in rows] == [0.0, 0.5, 1.0, 1.5, 2.0]


@pytest.mark.parametrize("streaming", [False, True])
def test_more_shards_than_rows(tmp_path: Path, streaming: bool) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"i": {k}}}\n' for k in range(7)))
    got = []
    for k in range(8):
        gd = load_dataset(str(path), split="train", num_shards=8, shard_id=k, streaming=streaming)
        got.append(_ids(gd))
    assert got[7] == [] and sorted(i for part in got for i in part) == list(range(7))


def test_an_empty_slice_is_refused_as_hf_refuses_it(tmp_path: Path) -> None:
    """MindNLP's load_dataset calls 🤗's, which refuses a slice with no rows (checked against 🤗 in
    tests/test_hf_differential.py, "slice past the end")."""
    path = tmp_path / "d.jsonl"
    path.write_text('{"i": 1}\n')
    with pytest.raises(ValueError, match=r'Instruction "train\[1:\]" corresponds to no data!'):
        load_dataset(str(path), split="train[1:]")


def _stream_epochs(path: Path, epochs: int = 2, **kw) -> list[list[int]]:
    gd = load_dataset(str(path), split="train", streaming=True, shuffle=True, **kw)
    it = gd.create_dict_iterator(output_numpy=True, num_epochs=epochs)
    return [[int(r["i"]) for r in it] for _epoch in range(epochs)]


def test_streaming_shuffle_is_seeded_and_new_each_epoch(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"i": {k}}}\n' for k in range(200)))
    old = msd.config.get_seed()
    try:
        msd.config.set_seed(1234)
        a = _stream_epochs(path)
        b = _stream_epochs(path)
        msd.config.set_seed(99)
        c = _stream_epochs(path)
    finally:
        msd.config.set_seed(old)
    assert a == b  # reproducible under mindspore.dataset.config.set_seed
    assert a[0] != a[1] and sorted(a[0]) == sorted(a[1]) == list(range(200))  # a new order each epoch
    assert a[0] != list(range(200)) and c[0] != a[0]
    assert _stream_epochs(path, seed=7) == _stream_epochs(path, seed=7) != _stream_epochs(path, seed=8)


def test_numpy_values_only(folder: Path) -> None:
    row = _first(load_dataset(str(folder), split="test"))
    assert all(type(v) is np.ndarray for v in row)
