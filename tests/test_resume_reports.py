"""Resume failures reported against other loaders, ported onto sjsonl with their own numbers (real torch,
torchdata; each test names the report). The reference is always an uninterrupted run, or the set of records
an epoch had left.

- 🤗 datasets #7538: a rank's shard checkpointed mid-chunk lost the rest of the chunk;
- 🤗 datasets #7901: a shuffled stream lost about a shuffle buffer (and repeated one) on every resume;
- 🤗 datasets #8145 (#7630, #8359): after ``map``/``filter``, a resume jumped ahead by a read chunk;
- 🤗 datasets #8295/#8308: the state stopped advancing after a resume, so a second resume restarted;
- LitData #363/#694: mixtures failed to resume after more than one epoch;
- LitData #248/#251: multi-node resume (global worker ids) failed;
- Mosaic streaming #476: a new world size needed divisibility and re-served samples by rounding;
- Mosaic streaming #880/#437: a resumed loader started from sample 0 again;
- MaxText #1760: Grain could not resume on another number of processes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchdata")

from torchdata.stateful_dataloader import StatefulDataLoader  # noqa: E402

from sjsonl import JSONLDataset, interleave_datasets  # noqa: E402
from sjsonl.sampling import Permutation  # noqa: E402
from sjsonl.torch import DistributedSampler, IterableDataset, iterable_state  # noqa: E402


def _file(tmp_path: Path, n: int, name: str = "d") -> JSONLDataset:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"id": i, "src": name}) + "\n" for i in range(n)))
    return JSONLDataset(path)


def _ids(records) -> list[int]:
    return [int(r["id"]) for r in records]


def test_7538_a_ranks_share_checkpointed_mid_block_keeps_the_rest(tmp_path: Path) -> None:
    ds = _file(tmp_path, 24)
    rank0 = IterableDataset(ds, shuffle=False, num_replicas=4, rank=0, block_size=1000)  # one block read
    share = _ids(rank0)
    it = iter(rank0)
    head = _ids(next(it) for _ in range(3))
    fresh = IterableDataset(ds, shuffle=False, num_replicas=4, rank=0, block_size=1000)
    fresh.load_state_dict(rank0.state_dict())
    assert head + _ids(fresh) == share == list(range(0, 24, 4))


@pytest.mark.parametrize("k", [5, 20, 37, 51, 64])
def test_7901_a_shuffled_stream_resumes_with_nothing_missing_or_repeated(tmp_path: Path, k: int) -> None:
    ds = _file(tmp_path, 200)
    full = _ids(IterableDataset(ds, seed=17))
    first = IterableDataset(ds, seed=17)
    it = iter(first)
    head = _ids(next(it) for _ in range(k))
    again = IterableDataset(ds, seed=17)
    again.load_state_dict(first.state_dict())
    assert head + _ids(again) == full and sorted(full) == list(range(200))


@pytest.mark.parametrize("transform", ["map", "filter"])
def test_8145_after_map_or_filter_the_resume_is_where_it_stopped(tmp_path: Path, transform: str) -> None:
    base = _file(tmp_path, 5000)
    if transform == "map":
        ds = base.map(lambda r: {**r, "tag": "X"})
        expected = list(range(200, 205))
    else:  # #8359: a non-batched filter
        ds = base.filter(lambda r: r["id"] % 3 != 0)
        expected = [i for i in range(5000) if i % 3][200:205]
    one = IterableDataset(ds, shuffle=False)
    it = iter(one)
    for _ in range(200):
        next(it)
    state = one.state_dict()
    assert _ids(next(it) for _ in range(5)) == expected
    two = IterableDataset(ds, shuffle=False)
    two.load_state_dict(state)
    assert _ids(r for _, r in zip(range(5), two)) == expected


@pytest.mark.parametrize("workers", [0, 2])
def test_8295_8308_resuming_twice_continues_where_the_second_run_stopped(
    tmp_path: Path, workers: int
) -> None:
    """Run A saves C1, run B loads C1, advances and saves C2 (which must have moved on), run C loads C2:
    A's head + B's part + C's rest is the uninterrupted epoch."""
    ds = _file(tmp_path, 300)

    def loader(state: dict | None) -> StatefulDataLoader:
        out = StatefulDataLoader(IterableDataset(ds, seed=3), batch_size=4, num_workers=workers)
        if state is not None:
            out.load_state_dict(state)
        return out

    full = [i for b in loader(None) for i in b["id"].tolist()]
    a = iter(loader_a := loader(None))
    seen = [i for _ in range(10) for i in next(a)["id"].tolist()]
    c1 = loader_a.state_dict()
    b = iter(loader_b := loader(c1))
    seen += [i for _ in range(15) for i in next(b)["id"].tolist()]
    c2 = loader_b.state_dict()
    assert c2 != c1
    seen += [i for batch in loader(c2) for i in batch["id"].tolist()]
    assert seen == full


def test_363_694_a_mixture_of_five_resumes_past_its_first_epoch(tmp_path: Path) -> None:
    sources = [_file(tmp_path, n, f"s{k}") for k, n in enumerate((50, 31, 17, 9, 64))]
    mix = interleave_datasets(
        sources, probabilities=[0.3, 0.2, 0.2, 0.1, 0.2], seed=1, stopping_strategy="all_exhausted"
    )

    def loader() -> tuple[IterableDataset, StatefulDataLoader]:
        data = IterableDataset(mix, seed=9)
        return data, StatefulDataLoader(data, batch_size=5, num_workers=2)

    def keys(batch) -> list[tuple[str, int]]:
        return list(zip(batch["src"], batch["id"].tolist()))

    data, ref = loader()
    reference = []
    for epoch in (0, 1):
        data.set_epoch(epoch)
        reference.append([k for b in ref for k in keys(b)])
    data, run = loader()
    data.set_epoch(0)
    list(run)  # epoch 0, whole
    data.set_epoch(1)
    it = iter(run)
    k = len(reference[1]) // 5 // 5  # 1.2 epochs in
    head = [key for _ in range(k) for key in keys(next(it))]
    state = run.state_dict()
    data2, resumed = loader()
    data2.set_epoch(1)
    resumed.load_state_dict(state)
    assert head + [key for b in resumed for key in keys(b)] == reference[1]


def test_248_251_four_ranks_of_two_nodes_with_workers_each_continue_exactly(tmp_path: Path) -> None:
    ds = _file(tmp_path, 211)
    for rank in range(4):  # 2 nodes x 2 ranks, 2 workers each: every rank resumes its own loader state

        def make(rank: int = rank) -> StatefulDataLoader:
            return StatefulDataLoader(
                IterableDataset(ds, seed=2, num_replicas=4, rank=rank), batch_size=3, num_workers=2
            )

        full = [i for b in make() for i in b["id"].tolist()]
        run = make()
        it = iter(run)
        head = [i for _ in range(7) for i in next(it)["id"].tolist()]
        resumed = make()
        resumed.load_state_dict(run.state_dict())
        assert head + [i for b in resumed for i in b["id"].tolist()] == full


@pytest.mark.parametrize(("replicas", "batch"), [(3, 16), (6, 8)])
def test_476_a_new_world_keeps_the_global_batches_of_an_uninterrupted_run(replicas: int, batch: int) -> None:
    """Global batch 48: 4 ranks × 12 for 5 steps, then ``replicas`` × ``batch``. Each later global step
    holds exactly the samples the uninterrupted 4-rank run's step holds — nothing re-served by rounding."""
    n, steps = 480, 5
    data = list(range(n))

    def step_sets(samplers: list, batch_size: int, start: int = 0) -> list[set[int]]:
        its = [iter(s) for s in samplers]
        out = []
        for _ in range(start, n // 48):
            out.append({next(it) for it in its for _ in range(batch_size)})
        return out

    uninterrupted = step_sets([DistributedSampler(data, 4, r, seed=0) for r in range(4)], 12)
    old = [DistributedSampler(data, 4, r, seed=0) for r in range(4)]
    its = [iter(s) for s in old]
    before = [{next(it) for it in its for _ in range(12)} for _ in range(steps)]
    new = [DistributedSampler(data, replicas, r, seed=0) for r in range(replicas)]
    for s in new:
        s.load_state_dict(old[0].state_dict())
    after = step_sets(new, batch, start=steps)
    assert before + after == uninterrupted


def test_880_437_a_fresh_or_reused_loader_resumes_at_sample_100(tmp_path: Path) -> None:
    ds = _file(tmp_path, 400)
    order = Permutation(400, seed=0, epoch=0).take(np.arange(400)).tolist()
    sampler = DistributedSampler(ds, 1, 0, seed=0)
    loader = StatefulDataLoader(ds, batch_size=4, sampler=sampler)
    it = iter(loader)
    for _ in range(25):
        next(it)
    state = loader.state_dict()
    fresh = StatefulDataLoader(ds, batch_size=4, sampler=DistributedSampler(ds, 1, 0, seed=0))
    fresh.load_state_dict(state)
    batches = [b["id"].tolist() for b in fresh]
    assert batches[0] == order[100:104] and len(batches) == (400 - 100) // 4
    reused = StatefulDataLoader(ds, batch_size=4, sampler=sampler)  # the same, already iterated sampler
    reused.load_state_dict(state)
    assert next(b["id"].tolist() for b in reused) == order[100:104]


@pytest.mark.parametrize("new_world", [2, 8])
def test_1760_another_number_of_processes_gets_exactly_the_unseen_records(
    tmp_path: Path, new_world: int
) -> None:
    ds = _file(tmp_path, 512)
    old = [IterableDataset(ds, seed=4, num_replicas=4, rank=r) for r in range(4)]
    its = [iter(d) for d in old]
    seen = [int(next(it)["id"]) for it in its for _ in range(37)]
    after = []
    for r in range(new_world):
        d = IterableDataset(ds, seed=4, num_replicas=new_world, rank=r)
        d.load_state_dict(iterable_state({"dataset_state": old[r % 4].state_dict()}))
        after += _ids(d)
    left = set(range(512)) - set(seen)
    assert set(after) == left and len(after) - len(left) == -len(left) % new_world  # plus torch's padding
