"""sjsonl.torch.DistributedSampler against torch's own, O(1) memory at n = 10⁹, exact resume under
torchdata's StatefulDataLoader (in a fresh process), map-style JSONLDataset in real DataLoaders, collate."""

from __future__ import annotations

import pickle
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data import DistributedSampler as TorchSampler
from torchdata.stateful_dataloader import StatefulDataLoader

from sjsonl import JSONLDataset
from sjsonl.sample import write_corpus
from sjsonl.sampling import Permutation
from sjsonl.torch import DistributedSampler, collate_records


def interleave(per_rank: list[list[int]]) -> list[int]:
    """Rebuild the evened global order from the ranks' strided shares."""
    return [per_rank[r][j] for j in range(len(per_rank[0])) for r in range(len(per_rank))]


def check_structure(per_rank: list[list[int]], n: int, drop_last: bool) -> list[int]:
    """The DistributedSampler contract, for torch's sampler and ours alike."""
    counts = {len(x) for x in per_rank}
    assert len(counts) == 1  # every rank the same count: DDP never waits on an exhausted rank
    g = interleave(per_rank)
    reps = len(per_rank)
    if drop_last:
        assert len(g) == n // reps * reps
        assert len(set(g)) == len(g)  # only the tail is dropped, nothing repeats
    else:
        assert len(g) == -(-n // reps) * reps
        assert sorted(g[:n]) == list(range(n))  # complete
        assert g[n:] == [g[j % n] for j in range(n, len(g))]  # padding repeats the order from its start
    return g


# ----------------------------------------------------------------- layout vs torch
@pytest.mark.parametrize("n", [0, 1, 2, 5, 10, 11, 12, 97])
@pytest.mark.parametrize("reps", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("drop_last", [False, True])
def test_unshuffled_identical_to_torch(n, reps, drop_last):
    data = list(range(n))
    for rank in range(reps):
        ours = DistributedSampler(data, num_replicas=reps, rank=rank, shuffle=False, drop_last=drop_last)
        theirs = TorchSampler(data, num_replicas=reps, rank=rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs)
        assert (len(ours), ours.num_samples, ours.total_size) == (
            len(theirs),
            theirs.num_samples,
            theirs.total_size,
        )
    check_structure(
        [list(DistributedSampler(data, reps, r, shuffle=False, drop_last=drop_last)) for r in range(reps)],
        n,
        drop_last,
    )


@pytest.mark.parametrize("n", [1, 2, 10, 11, 1000, 1001])
@pytest.mark.parametrize("reps", [2, 3])
@pytest.mark.parametrize("drop_last", [False, True])
def test_shuffled_same_structure_as_torch(n, reps, drop_last):
    data = range(n)
    ours = [DistributedSampler(data, reps, r, seed=5, drop_last=drop_last) for r in range(reps)]
    theirs = [TorchSampler(data, reps, r, seed=5, drop_last=drop_last) for r in range(reps)]
    for s in ours + theirs:
        s.set_epoch(3)
    g_ours = check_structure([list(s) for s in ours], n, drop_last)
    check_structure([list(s) for s in theirs], n, drop_last)
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    # the order is Permutation(n, seed, epoch) — the order of JSONLDataset.shuffle(seed, epoch)
    p = Permutation(n, seed=5, epoch=3)
    assert g_ours[: min(n, len(g_ours))] == [p[i] for i in range(min(n, len(g_ours)))]


def test_padding_when_fewer_records_than_ranks():
    per_rank = [list(DistributedSampler(range(2), 5, r, seed=1)) for r in range(5)]
    g = check_structure(per_rank, 2, drop_last=False)
    assert g == [g[0], g[1], g[0], g[1], g[0]]
    assert [list(DistributedSampler(range(2), 5, r, drop_last=True)) for r in range(5)] == [[]] * 5


def test_epochs_and_seeds():
    s = DistributedSampler(range(500), 2, 0, seed=1)
    e0 = list(s)
    assert list(s) == e0  # same epoch, same order (as torch: forgetting set_epoch repeats the order)
    s.set_epoch(1)
    assert s.epoch == 1 and list(s) != e0
    s.set_epoch(0)
    assert list(s) == e0
    assert list(DistributedSampler(range(500), 2, 0, seed=2)) != e0


# (n, num_replicas, seed, epoch, drop_last) -> each rank's first records: pinned (a change to the order or to
# the rank layout would silently change what every rank of a saved run trains on after a resume)
SAMPLER_GOLDEN = [
    ((10, 3, 0, 0, False), [[0, 9, 8, 1], [7, 2, 4, 0], [3, 5, 6, 7]]),  # padded: 12 positions, 0 and 7 twice
    ((11, 4, 5, 1, True), [[1, 8], [3, 0], [4, 7], [5, 9]]),  # cut: 8 positions
    (
        (1000, 3, 7, 2, False),
        [[916, 423, 73, 792, 205, 400], [457, 311, 153, 855, 833, 434], [795, 218, 171, 536, 253, 330]],
    ),
]


@pytest.mark.parametrize(("args", "expected"), SAMPLER_GOLDEN, ids=lambda v: str(v)[:24])
def test_golden_rank_orders(args, expected):
    from ._reference_order import (
        reference_order,
    )  # (this file also runs as a script: no relative import above)

    n, reps, seed, epoch, drop_last = args
    got = []
    for rank in range(reps):
        sampler = DistributedSampler(range(n), reps, rank, shuffle=True, seed=seed, drop_last=drop_last)
        sampler.set_epoch(epoch)
        got.append(list(sampler)[:6])
    assert got == expected
    # the same layout as torch's over the spec's order: rank r takes every reps-th position from r
    order = reference_order(n, seed, epoch)
    total = n // reps * reps if drop_last else -(-n // reps) * reps
    evened = (order * 2)[:total]
    assert [evened[r::reps][:6] for r in range(reps)] == expected


def test_errors_like_torch():
    assert not dist.is_initialized()
    for kwargs in ({}, {"num_replicas": 2}, {"rank": 0}):
        with pytest.raises(Exception) as theirs:
            TorchSampler(range(10), **kwargs)
        with pytest.raises(type(theirs.value)) as ours:
            DistributedSampler(range(10), **kwargs)
        assert str(ours.value) == str(theirs.value)
    for rank in (-1, 2):
        with pytest.raises(ValueError, match=r"Invalid rank .* interval \[0, 1\]"):
            DistributedSampler(range(10), num_replicas=2, rank=rank)


def test_reads_rank_and_world_from_torch_distributed(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        s = DistributedSampler(range(7), shuffle=False)
        assert (s.num_replicas, s.rank) == (1, 0)
        assert list(s) == list(range(7))
    finally:
        dist.destroy_process_group()


class HugeSized:
    """A sized dataset of 10⁹ items that owns no data."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


@pytest.mark.parametrize("n,reps,rank", [(10**9, 2, 1), (10**9 + 1, 3, 2)])
def test_billion_records_in_constant_memory(n, reps, rank):
    tracemalloc.start()
    try:
        s = DistributedSampler(HugeSized(n), num_replicas=reps, rank=rank, seed=3)
        s.set_epoch(2)
        it = iter(s)
        first = [next(it) for _ in range(10_000)]
        state = s.state_dict()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20  # an n-sized index list would be 8 GB
    assert len(s) == -(-n // reps)
    assert len(set(first)) == 10_000 and min(first) >= 0 and max(first) < n
    p = Permutation(n, seed=3, epoch=2)
    assert first[:5] == [p[rank + reps * j] for j in range(5)]
    assert state["yielded"] == 10_000 and state["epoch"] == 2


# ----------------------------------------------------------------- state without a loader
def test_state_dict_resumes_a_bare_sampler():
    s = DistributedSampler(range(100), 3, 1, seed=4)
    s.set_epoch(2)
    full = list(s)
    it = iter(s)
    head = [next(it) for _ in range(10)]
    state = s.state_dict()
    assert state == {
        "epoch": 2,
        "yielded": 10,
        "n": 100,
        "num_replicas": 3,
        "rank": 1,
        "shuffle": True,
        "seed": 4,
        "drop_last": False,
        "consumed": 0,
    }
    t = DistributedSampler(range(100), 3, 1, seed=4)
    t.load_state_dict(pickle.loads(pickle.dumps(state)))
    assert head + list(t) == full
    assert t.epoch == 2  # the saved pass's epoch was restored
    assert list(t) == full  # only the first iter() after loading resumes
    # set_epoch to another epoch drops a pending resume
    t.load_state_dict(state)
    t.set_epoch(3)
    assert len(list(t)) == len(t)


def test_state_of_a_finished_pass_leaves_the_epoch_to_set_epoch():
    s = DistributedSampler(range(20), 2, 0, seed=1)
    s.set_epoch(4)
    list(s)
    state = s.state_dict()
    t = DistributedSampler(range(20), 2, 0, seed=1)
    t.set_epoch(5)
    t.load_state_dict(state)
    assert list(t) == []  # the rest of epoch 4: nothing
    assert t.epoch == 5
    u = DistributedSampler(range(20), 2, 0, seed=1)
    u.set_epoch(5)
    assert list(t) == list(u)


@pytest.mark.parametrize(
    "change",
    [
        {"n": 99},
        {"seed": 5},
        {"shuffle": False},
        {"rank": 3},  # not a rank of the saved world (3 ranks)
        {"num_replicas": 0},
        {"drop_last": 1},
        {"consumed": 101},
        {"consumed": -1},
    ],
)
def test_state_of_another_dataset_or_an_impossible_one_is_refused(change):
    """Another world size, rank or drop_last is an elastic resume (tests/test_elastic_resume.py); another
    dataset or seed, or values no sampler writes, are refused."""
    s = DistributedSampler(range(100), 3, 1, seed=4)
    state = {**s.state_dict(), **change}
    with pytest.raises(ValueError, match="cannot resume"):
        s.load_state_dict(state)
    with pytest.raises(ValueError, match="outside"):
        s.load_state_dict({**s.state_dict(), "yielded": len(s) + 1})


# ----------------------------------------------------------------- map-style JSONLDataset in DataLoaders
@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "data.jsonl"
    write_corpus(path, n_records=61, kind="short", seed=1)
    JSONLDataset(path)  # build the index once, before workers start
    return path


def ids(loader) -> list[int]:
    return [i for batch in loader for i in batch["id"].tolist()]


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_map_style_dataset_with_workers(corpus, ctx):
    ds = JSONLDataset(corpus)
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, seed=3)
    loader = DataLoader(
        ds,
        batch_size=8,
        sampler=sampler,
        num_workers=2,
        persistent_workers=True,
        multiprocessing_context=ctx,
        collate_fn=collate_records,
    )
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        p = Permutation(len(ds), seed=3, epoch=epoch)
        assert ids(loader) == [p[(1 + 2 * j) % 61] for j in range(31)]
    if ctx == "fork":  # (spawning two more interpreters would only repeat the pickling check above)
        # plain records, torch's own shuffling, no collate needed with batch_size=None
        plain = DataLoader(ds, batch_size=None, shuffle=True, num_workers=2, multiprocessing_context=ctx)
        assert sorted(r["id"] for r in plain) == list(range(61))


# ----------------------------------------------------------------- resume with StatefulDataLoader
BATCH, SEED = 4, 11  # 61 records over 2 ranks: 31 for rank 1 → 8 batches, the last of 3


def make_loader(path: str, workers: int):
    ds = JSONLDataset(path)
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, seed=SEED)
    loader = StatefulDataLoader(
        ds, batch_size=BATCH, sampler=sampler, num_workers=workers, collate_fn=collate_records
    )
    return sampler, loader


def run_pass(sampler, loader, epoch: int) -> list[int]:
    sampler.set_epoch(epoch)
    return ids(loader)


def resume_child(state_file: str, out_file: str) -> None:
    """Fresh process: restore each saved state and run the next two passes, as a training loop would."""
    with open(state_file, "rb") as f:
        job = pickle.load(f)
    out = []
    for case in job["cases"]:
        sampler, loader = make_loader(job["path"], job["workers"])
        loader.load_state_dict(case["state"])
        first = case["epoch"] + (1 if case["finished"] else 0)
        out.append([run_pass(sampler, loader, first), run_pass(sampler, loader, first + 1)])
    with open(out_file, "wb") as f:
        pickle.dump(out, f)


def run_child(mode: str, job: dict, tmp: Path) -> list:
    state_file, out_file = tmp / f"{mode}-job.pkl", tmp / f"{mode}-out.pkl"
    state_file.write_bytes(pickle.dumps(job))
    subprocess.run([sys.executable, __file__, mode, str(state_file), str(out_file)], check=True, timeout=300)
    return pickle.loads(out_file.read_bytes())


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resumes_exactly_in_a_fresh_process(corpus, tmp_path, workers):
    sampler, loader = make_loader(str(corpus), 0)
    reference = {e: run_pass(sampler, loader, e) for e in range(4)}
    n_batches = -(-31 // BATCH)
    assert all(len(reference[e]) == 31 for e in reference) and reference[0] != reference[1]

    cases = []  # (epoch, batches consumed, finished the pass)
    for epoch, k, finished in [
        (0, 0, False),
        (0, 1, False),
        (0, 3, False),
        (0, n_batches - 1, False),
        (0, n_batches, False),  # the last batch consumed, StopIteration not yet seen
        (0, n_batches, True),  # saved after the loop ended: the epoch boundary
        (1, 5, False),  # mid-epoch after a completed epoch
    ]:
        sampler, loader = make_loader(str(corpus), workers)
        for e in range(epoch):
            assert run_pass(sampler, loader, e) == reference[e]
        sampler.set_epoch(epoch)
        it = iter(loader)
        got = [i for _ in range(k) for i in next(it)["id"].tolist()]
        if finished:
            assert next(it, None) is None
        assert got == reference[epoch][: len(got)] and len(got) == min(31, k * BATCH)
        cases.append({"epoch": epoch, "k": k, "finished": finished, "state": loader.state_dict()})
        del it, loader

    out = run_child("resume-child", {"path": str(corpus), "workers": workers, "cases": cases}, tmp_path)
    for case, (rest, after) in zip(cases, out):
        e, k = case["epoch"], case["k"]
        if case["finished"]:
            assert rest == reference[e + 1] and after == reference[e + 2], case
        else:
            assert rest == reference[e][k * BATCH :], case
            assert after == reference[e + 1], case


# ----------------------------------------------------------------- collate
def test_collate_records_columns():
    batch = [
        {"id": 1, "text": "a", "score": 0.5, "ok": True, "tags": [1], "meta": {"k": 1}},
        {"id": 2, "text": "b", "score": 1, "ok": False, "tags": [2, 3], "meta": None, "extra": "x"},
    ]
    out = collate_records(batch)
    assert list(out) == ["id", "text", "score", "ok", "tags", "meta", "extra"]
    assert out["id"].dtype == torch.int64 and out["id"].tolist() == [1, 2]
    assert out["score"].dtype == torch.float64 and out["score"].tolist() == [0.5, 1.0]
    assert out["ok"].dtype == torch.bool and out["ok"].tolist() == [True, False]
    assert out["text"] == ["a", "b"] and out["tags"] == [[1], [2, 3]]
    assert out["meta"] == [{"k": 1}, None] and out["extra"] == [None, "x"]
    assert collate_records([{"n": 2**70}, {"n": 1}])["n"] == [2**70, 1]  # beyond int64: stays a list
    assert collate_records([{"b": True}, {"b": 1}])["b"] == [True, 1]  # mixed bool/int: no silent cast
    assert collate_records([3, 4]).tolist() == [3, 4]
    assert collate_records([[1], [2, 3]]) == [[1], [2, 3]]
    assert collate_records([]) == {}


def test_collate_records_on_a_real_corpus(corpus):
    ds = JSONLDataset(corpus)
    batch = collate_records(ds[np.arange(10)])
    assert batch["id"].tolist() == list(range(10))
    assert len(batch["messages"]) == 10 and len(batch["text"]) == 10  # ragged / partly missing: lists
    with pytest.raises((RuntimeError, TypeError, KeyError)):
        torch.utils.data.default_collate(ds[np.arange(10)])  # what collate_records is for


if __name__ == "__main__":
    if sys.argv[1] == "resume-child":
        resume_child(sys.argv[2], sys.argv[3])
