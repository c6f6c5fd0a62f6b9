"""sjsonl.data.batches_ahead without a server: the batches a worker is dealt, and a prediction shared with
another dataset (a view copied with it) that reads nothing for it. Through S3 and a DataLoader:
tests/test_remote_training.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sjsonl import JSONLDataset
from sjsonl.data.batches_ahead import BatchesAhead, mine


def test_each_worker_is_dealt_every_workers_th_batch() -> None:
    blocks = [np.arange(0, 5), np.arange(5, 11)]
    dealt = [[b.tolist() for b in mine(iter(blocks), batch=3, worker=w, workers=2)] for w in (0, 1)]
    assert dealt == [[[0, 1, 2], [6, 7, 8]], [[3, 4, 5], [9, 10]]]


def test_a_dataset_sharing_the_prediction_reads_as_asked(tmp_path: Path) -> None:
    """The stream belongs to the dataset that first asked: a view holding the same prediction (views are
    copies) gets None — read as asked — even for the batch predicted next, and the stream goes on."""
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(8)))
    ds = JSONLDataset(str(path))
    view = ds.shuffle(seed=1)  # another order over the same file
    ahead = BatchesAhead(lambda: iter([np.arange(8)]), lambda: (1, 0))
    assert ahead(ds, [0, 1]) == [{"i": 0}, {"i": 1}]
    assert ahead(view, [2, 3]) is None
    assert ahead(ds, [2, 3]) == [{"i": 2}, {"i": 3}]
