"""Elastic resume of MindSpore batches (``BatchSource``, what ``to_generator_dataset(batch_size=...)``
delivers): an epoch stopped after ``b`` steps on R shards continues on R' shards, with another batch size,
any number of times, and every record of the epoch is delivered exactly once (batches are not padded).
The oracle slices the epoch's order with Python's own ``[start::step]``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sjsonl import InvalidArgumentError, JSONLDataset
from sjsonl.mindspore import make_schema
from sjsonl.mindspore.batches import BatchSource
from sjsonl.sampling import Permutation

N, SEED, EPOCH = 103, 7, 2


@pytest.fixture(scope="module")
def ds(tmp_path_factory) -> JSONLDataset:
    path = tmp_path_factory.mktemp("mse") / "d.jsonl"
    path.write_text("".join(json.dumps({"id": i, "ids": list(range(i % 4))}) + "\n" for i in range(N)))
    return JSONLDataset(path)


def _shards(ds: JSONLDataset, shards: int, batch: int) -> list[BatchSource]:
    schema = make_schema(ds)
    out = [
        BatchSource(ds, schema, batch, shuffle=True, seed=SEED, num_shards=shards, shard_id=s)
        for s in range(shards)
    ]
    for src in out:
        src.set_epoch(EPOCH)
    return out


def _ids(batch: tuple[np.ndarray, ...]) -> list[int]:
    return batch[0].tolist()  # the "id" column


def _order() -> list[int]:
    return Permutation(N, seed=SEED, epoch=EPOCH).take(np.arange(N)).tolist()


@pytest.mark.parametrize(("old", "new"), [(4, 3), (1, 4), (3, 1), (2, 8), (8, 2)])
@pytest.mark.parametrize(("old_batch", "new_batch"), [(3, 3), (3, 5)])
@pytest.mark.parametrize("steps", [0, 1, 4])
def test_steps_on_r_shards_then_the_rest_on_r_prime(ds, old, new, old_batch, new_batch, steps) -> None:
    first = _shards(ds, old, old_batch)
    iters = [iter(s) for s in first]
    before = [i for it in iters for _ in range(steps) for i in _ids(next(it))]
    point = first[-1].resume_point(steps)
    done = min(steps * old_batch * old, N)
    assert point == {"epoch": EPOCH, "records_done": done, "n": N, "shuffle": True, "seed": SEED}
    assert sorted(before) == sorted(_order()[:done])  # the lockstep prefix, from the batches themselves
    second = _shards(ds, new, new_batch)
    after = []
    for j, src in enumerate(second):
        src.resume_from(point)
        mine = [i for b in src for i in _ids(b)]
        assert mine == _order()[done:][j::new]
        after += mine
    assert sorted(before + after) == list(range(N))  # every record once
    nxt = _shards(ds, new, new_batch)[0]
    nxt.set_epoch(EPOCH + 1)
    assert [i for b in second[0] for i in _ids(b)] == [i for b in nxt for i in _ids(b)]  # then epoch + 1


def test_resume_twice(ds) -> None:
    seen = []
    layout = [(4, 3, 2), (3, 5, 1), (2, 4, None)]  # (shards, batch size, steps before the next stop)
    point = None
    for shards, batch, steps in layout:
        srcs = _shards(ds, shards, batch)
        for s in srcs:
            if point is not None:
                s.resume_from(point)
        iters = [iter(s) for s in srcs]
        if steps is None:
            seen += [i for it in iters for b in it for i in _ids(b)]
        else:
            seen += [i for it in iters for _ in range(steps) for i in _ids(next(it))]
            point = srcs[0].resume_point(steps)
    assert sorted(seen) == list(range(N))


def test_a_point_at_the_end_of_the_epoch_is_an_empty_rest_then_the_next_epoch(ds) -> None:
    src = _shards(ds, 2, 10)[0]
    list(src)
    point = src.resume_point(len(src))
    assert point["records_done"] == N
    resumed = _shards(ds, 3, 4)[1]
    resumed.resume_from(point)
    assert len(resumed) == 0 and list(resumed) == []  # the rest of the epoch: nothing
    fresh = _shards(ds, 3, 4)[1]
    fresh.set_epoch(EPOCH + 1)
    assert [i for b in resumed for i in _ids(b)] == [i for b in fresh for i in _ids(b)]  # then the next


def test_state_dict_of_a_resumed_pass_resumes_it_at_the_same_layout(ds) -> None:
    src = _shards(ds, 4, 3)[0]
    src.resume_from({"epoch": EPOCH, "records_done": 40, "n": N, "shuffle": True, "seed": SEED})
    it = iter(src)
    head = [i for _ in range(2) for i in _ids(next(it))]
    state = src.state_dict()
    assert state["consumed"] == 40 and state["yielded"] == 2
    again = _shards(ds, 4, 3)[0]
    again.load_state_dict(state)
    assert head + [i for b in again for i in _ids(b)] == _order()[40:][0::4]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"seed": 8}, "saved state has seed=8 but this object has seed=7"),
        ({"n": N + 1}, "saved state has n=104 but this object has n=103"),
        ({"records_done": N + 1}, "records_done=104; expected an integer in \\[0, 103\\]"),
        ({"records_done": "3"}, "records_done='3'"),
        ({"epoch": -1}, "epoch=-1"),
        ({"extra": 1}, "unknown key 'extra'"),
    ],
)
def test_a_point_of_another_dataset_or_a_bad_one_is_refused(ds, change, says) -> None:
    point = _shards(ds, 2, 3)[0].resume_point(1)
    with pytest.raises(InvalidArgumentError, match=says):
        _shards(ds, 3, 3)[0].resume_from({**point, **change})
