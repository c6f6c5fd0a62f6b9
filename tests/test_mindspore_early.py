"""Early start (sjsonl.mindspore.load_dataset(early_start=True)): rows flow while the index is built; the
first (streamed) epoch equals an indexed epoch row for row, per row and batched, whole and sharded; later
passes read through the index; a shuffled start waits for it; a file that changes meanwhile and column
types the first rows got wrong are reported. Real MindSpore (CPU), real files. The early source alone:
tests/test_mindspore_early_source.py."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mindspore")

from sjsonl.mindspore import MapSource, SchemaMismatchError, load_dataset
from sjsonl.mindspore.early import EarlySource

from .test_mindspore_early_source import N, write


def rows(gd, epochs=1):
    it = gd.create_tuple_iterator(output_numpy=True, num_epochs=epochs)
    return [[np.asarray(v).tolist() for v in row] for _ in range(epochs) for row in it]


def load(path, index_dir, **kw):
    return load_dataset("json", data_files=str(path), split="train", cache_dir=str(index_dir), **kw)


def indexed_twin(path, tmp_path, **kw):
    """The same call without early start, on its own index directory: the reference rows."""
    return rows(load(path, tmp_path / "reference", **kw))


@pytest.mark.parametrize("batch_size", [None, 16])
def test_the_first_epoch_equals_an_indexed_one_and_the_index_is_built(tmp_path, batch_size):
    path = write(tmp_path / "d.jsonl")
    gd = load(path, tmp_path / "idx", early_start=True, batch_size=batch_size)
    assert isinstance(gd.source, EarlySource)
    got = rows(gd)
    assert got == indexed_twin(path, tmp_path, batch_size=batch_size) and len(got) > 1
    assert len(gd.source.wait()) == N
    # built and saved: the next open finds the index and goes the usual (random-access) way
    again = load(path, tmp_path / "idx", early_start=True)
    assert isinstance(again.source, MapSource) and rows(again) == indexed_twin(path, tmp_path)


@pytest.mark.parametrize("batch_size", [None, 7])
def test_shards_are_those_of_the_indexed_source(tmp_path, batch_size):
    path = write(tmp_path / "d.jsonl")
    seen = []
    for k in range(3):
        kw = dict(num_shards=3, shard_id=k, batch_size=batch_size)
        gd = load(path, tmp_path / f"idx{k}", early_start=True, **kw)
        got = rows(gd)
        assert got == indexed_twin(path, tmp_path, **kw)
        seen += [r[0] for r in got]
    ids = [i for r in seen for i in (r if batch_size else [r])]
    assert sorted(ids) == list(range(N))  # disjoint and together complete


def test_later_epochs_go_through_the_index(tmp_path):
    path = write(tmp_path / "d.jsonl")
    gd = load(path, tmp_path / "idx", early_start=True)
    two = rows(gd, epochs=2)
    assert two[:N] == two[N:] == indexed_twin(path, tmp_path)


def test_column_types_the_first_rows_got_wrong_stop_the_pass_early(tmp_path):
    # the first 1,000 rows have integer scores, a late one a float: every row's types say float64
    path = write(tmp_path / "d.jsonl", n=3000, row=lambda i: {"id": i, "score": 2.5 if i == 2999 else i})
    gd = load(path, tmp_path / "idx", early_start=True)
    gd.source.early.wait()  # the background check has run
    # MindSpore re-raises it as a RuntimeError with the message
    with pytest.raises((SchemaMismatchError, RuntimeError), match="do not hold for every row"):
        rows(gd)
    # the rerun opens the index with every row's types
    again = load(path, tmp_path / "idx", early_start=True)
    assert str(again.source.schema) == "Schema(id: int64, score: float64)"
    assert rows(again)[-1] == [2999, 2.5]


def test_given_features_or_sample_size_skip_the_check(tmp_path):
    path = write(tmp_path / "d.jsonl", n=50, row=lambda i: {"id": i, "score": i / 2})
    gd = load(path, tmp_path / "idx", early_start=True, infer_rows=10)
    assert gd.source.early._checked is None and len(rows(gd)) == 50


def test_a_shuffled_start_waits_for_the_index(tmp_path):
    path = write(tmp_path / "d.jsonl")
    gd = load(path, tmp_path / "idx", early_start=True, shuffle=True)
    assert isinstance(gd.source, MapSource)
    assert sorted(r[0] for r in rows(gd)) == list(range(N))


def test_splits_each_go_their_own_way(tmp_path):
    train, test = write(tmp_path / "train.jsonl"), write(tmp_path / "test.jsonl", n=9)
    files = {"train": str(train), "test": str(test)}
    load_dataset("json", data_files=files, split="test", cache_dir=str(tmp_path / "idx"))  # test indexed
    both = load_dataset("json", data_files=files, cache_dir=str(tmp_path / "idx"), early_start=True)
    assert isinstance(both["train"].source, EarlySource) and isinstance(both["test"].source, MapSource)
    assert [r[0] for r in rows(both["test"])] == list(range(9))
    assert both["train"].get_dataset_size() == N  # counted by MindSpore reading the pass
    # a slice needs the length: the usual way
    sliced = load_dataset("json", data_files=files, split="train[:5]", cache_dir=str(tmp_path / "i2"),
                          early_start=True)  # fmt: skip
    assert isinstance(sliced.source, MapSource) and len(rows(sliced)) == 5
