"""``ds.batch()`` against 🤗's ``Dataset.batch``, 🤗 reading its own copy of the file."""

from __future__ import annotations

import shutil

import pytest

datasets = pytest.importorskip("datasets")

from sjsonl import BatchedDataset, JSONLDataset  # noqa: E402

from .test_prefetch import N  # noqa: E402


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("batch") / "d.jsonl"
    with open(path, "w") as f:
        f.writelines(f'{{"id": {i}, "text": "{"x" * (i % 17)}"}}\n' for i in range(N))
    return path


@pytest.fixture(scope="module")
def hf(corpus, tmp_path_factory):
    """The file as 🤗 reads it: ``load_dataset("json")`` on a copy of its own."""
    copy = tmp_path_factory.mktemp("hf") / "d.jsonl"
    shutil.copyfile(corpus, copy)
    return datasets.load_dataset(
        "json", data_files=str(copy), split="train", cache_dir=str(copy.parent / "c")
    )


@pytest.mark.parametrize("size, drop", [(64, False), (64, True), (1, False), (N, False), (N + 5, False)])
def test_batch_equals_hf(corpus, hf, size, drop):
    theirs = hf.batch(size, drop_last_batch=drop)
    ours = JSONLDataset(corpus).batch(size, drop_last_batch=drop)
    assert isinstance(ours, BatchedDataset) and len(ours) == len(theirs)
    assert list(ours) == theirs.to_list()
    if len(ours):
        assert ours[-1] == theirs[-1]


def test_every_batch_dropped_gives_no_batches(corpus, hf):
    """A divergence on purpose: 🤗 5.x returns the *unbatched* rows when drop_last_batch drops every
    batch (its map keeps the input when no batch is produced); we give zero batches."""
    ds = JSONLDataset(corpus)
    assert len(ds.batch(N + 5, drop_last_batch=True)) == 0
    theirs = hf.select(range(10)).batch(15, drop_last_batch=True)
    assert theirs[0] == {
        "id": 0,
        "text": "",
    }  # if this fails, 🤗 fixed it: make the case above compare directly
