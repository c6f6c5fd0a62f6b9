"""Elastic resume through real MindSpore (CPU): four ``to_generator_dataset(batch_size=...)`` shards take
some steps, and three shards — fresh GeneratorDatasets, another batch size — deliver the rest of the epoch
with ``resume_from=point``: every record of the epoch exactly once, then the next epoch as usual."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mindspore")

from sjsonl import JSONLDataset
from sjsonl.mindspore import to_generator_dataset

N, SEED = 97, 3


def test_four_shards_stop_and_three_finish_the_epoch(tmp_path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": "x" * (i % 5)}) + "\n" for i in range(N)))
    ds = JSONLDataset(path)

    def shard(shards: int, shard_id: int, batch: int, point: dict | None = None):
        return to_generator_dataset(
            ds,
            batch_size=batch,
            shuffle=True,
            seed=SEED,
            num_shards=shards,
            shard_id=shard_id,
            resume_from=point,
        )

    before, steps = [], 3
    old = [shard(4, s, 4) for s in range(4)]
    for gd in old:
        it = gd.create_dict_iterator(output_numpy=True, num_epochs=1)
        before += [int(i) for _, row in zip(range(steps), it) for i in row["id"]]
    point = old[0].source.resume_point(steps)  # what the training loop saves with its checkpoint
    assert point["records_done"] == steps * 4 * 4 == len(before)
    after = []
    for s in range(3):
        gd = shard(3, s, 5, point)
        after += [
            int(i) for row in gd.create_dict_iterator(output_numpy=True, num_epochs=1) for i in row["id"]
        ]
    assert sorted(before + after) == list(range(N))
    # the next epoch: a dataset made as usual, its order that of epoch 1
    nxt = shard(3, 0, 5)
    nxt.source.set_epoch(1)
    fresh = [int(i) for row in nxt.create_dict_iterator(output_numpy=True, num_epochs=1) for i in row["id"]]
    assert len(fresh) == len(range(0, N, 3))


def test_resume_from_needs_batches(tmp_path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": 1}\n')
    with pytest.raises(ValueError, match="resume_from needs batch_size="):
        to_generator_dataset(JSONLDataset(path), resume_from={"epoch": 0, "records_done": 0})


def test_a_shape_probe_before_the_epoch_does_not_use_up_the_resume(tmp_path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(20)))
    point = {"epoch": 0, "records_done": 8, "n": 20, "shuffle": False, "seed": 0}
    gd = to_generator_dataset(JSONLDataset(path), batch_size=3, resume_from=point)
    gd.output_shapes()  # MindSpore takes a batch to learn the shapes, then starts again
    rows = [int(i) for row in gd.create_dict_iterator(output_numpy=True, num_epochs=1) for i in row["id"]]
    assert rows == list(range(8, 20))


def test_a_point_at_the_end_of_an_epoch_is_an_empty_rest(tmp_path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(20)))
    point = {"epoch": 0, "records_done": 20, "n": 20, "shuffle": False, "seed": 0}
    gd = to_generator_dataset(JSONLDataset(path), batch_size=3, resume_from=point)
    assert list(gd.create_dict_iterator(output_numpy=True, num_epochs=1)) == []
