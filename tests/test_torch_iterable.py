"""sjsonl.torch.IterableDataset: rank × worker split (no gaps, no duplicates beyond the documented padding,
equal counts per rank), epochs, and exact resume under StatefulDataLoader with workers, in a fresh process."""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch.distributed as dist
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

from sjsonl import JSONLDataset
from sjsonl.sample import write_corpus
from sjsonl.sampling import Permutation, per_rank, shard_order
from sjsonl.torch import IterableDataset, collate_records

N = 61


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "data.jsonl"
    write_corpus(path, n_records=N, kind="short", seed=2)
    JSONLDataset(path)  # index built once, before any worker starts
    return path


def ids(loader) -> list[int]:
    return [i for batch in loader for i in batch["id"].tolist()]


def evened(order: list[int], reps: int, drop_last: bool) -> list[int]:
    """torch's DistributedSampler rule: pad by repeating from the start, or drop the tail."""
    total = per_rank(len(order), reps, drop_last) * reps
    return [order[j % len(order)] for j in range(total)]


# ----------------------------------------------------------------- the pure layout
@pytest.mark.parametrize("n", [0, 1, 7, 30, 31])
@pytest.mark.parametrize("reps", [1, 2, 3])
@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_rank_worker_layout(n, reps, workers, drop_last):
    g = evened(list(range(n)), reps, drop_last)
    seen = []
    for rank in range(reps):
        shares = [shard_order(n, reps, rank, drop_last, workers, w) for w in range(workers)]
        lens = [len(s) for s in shares]
        assert sum(lens) == per_rank(n, reps, drop_last)  # equal per rank
        assert max(lens) - min(lens) <= 1  # workers differ by at most one
        rank_part = sorted(j for s in shares for j in s.take(np.arange(len(s))).tolist())
        assert rank_part == sorted(g[rank::reps])
        seen += rank_part
    assert sorted(seen) == sorted(g)  # together: exactly the evened order — no gaps, no extra repeats


# ----------------------------------------------------------------- real DataLoaders
@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")  # 2 cores here
@pytest.mark.parametrize("workers", [0, 2, 3])
@pytest.mark.parametrize("drop_last", [False, True])
def test_ranks_and_workers_cover_the_epoch(corpus, workers, drop_last):
    per = []
    for rank in (0, 1):
        ds = IterableDataset(JSONLDataset(corpus), seed=4, drop_last=drop_last, num_replicas=2, rank=rank)
        ds.set_epoch(1)
        got = ids(DataLoader(ds, batch_size=4, num_workers=workers, collate_fn=collate_records))
        assert len(got) == len(ds) == per_rank(N, 2, drop_last)
        per.append(got)
    p = Permutation(N, seed=4, epoch=1)
    expect = evened([p[i] for i in range(N)], 2, drop_last)
    assert Counter(per[0] + per[1]) == Counter(expect)
    if drop_last:
        assert len(set(per[0] + per[1])) == 2 * (N // 2)
    else:
        assert set(per[0] + per[1]) == set(range(N))
        assert [i for i, c in Counter(per[0] + per[1]).items() if c > 1] == [p[0]]  # the padding


def test_single_process_order_is_the_shuffle_view(corpus):
    base = JSONLDataset(corpus)
    ds = IterableDataset(base, seed=9, block_size=5)  # small blocks: exercise block seams
    for epoch in (0, 1, 2):
        ds.set_epoch(epoch)
        assert [r["id"] for r in ds] == [r["id"] for r in base.shuffle(seed=9, epoch=epoch)]
    assert [r["id"] for r in IterableDataset(base, shuffle=False)] == list(range(N))
    ids = JSONLDataset(corpus, record_transform=lambda r: r["id"])  # the per-record contract
    assert list(IterableDataset(ids, shuffle=False))[:3] == [0, 1, 2]


def test_epochs_differ_and_repeat_with_fresh_workers(corpus):
    ds = IterableDataset(JSONLDataset(corpus), seed=1, num_replicas=2, rank=1)
    loader = DataLoader(ds, batch_size=8, num_workers=2, collate_fn=collate_records)
    runs = {}
    for epoch in (0, 1, 0):
        ds.set_epoch(epoch)
        runs.setdefault(epoch, []).append(ids(loader))
    assert runs[0][0] == runs[0][1] != runs[1][0]


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
def test_any_sized_sequence_and_spawned_workers():
    ds = IterableDataset([{"id": i} for i in range(10)], shuffle=False, num_replicas=3, rank=2)
    assert [r["id"] for r in ds] == [2, 5, 8, 1]
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="spawn")
    assert sorted(r["id"] for r in loader) == [1, 2, 5, 8]


def test_rank_comes_from_torch_distributed(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        ds = IterableDataset(list(range(5)), shuffle=False)
        assert (len(ds), list(ds)) == (5, [0, 1, 2, 3, 4])
        assert pickle.loads(pickle.dumps(ds))._rank == 0  # pinned for spawned workers
    finally:
        dist.destroy_process_group()
    with pytest.raises(ValueError, match="Invalid rank"):
        IterableDataset(list(range(5)), num_replicas=2, rank=2)


# ----------------------------------------------------------------- state
def test_bare_state_dict_round_trip(corpus):
    ds = IterableDataset(JSONLDataset(corpus), seed=3, num_replicas=2, rank=0)
    ds.set_epoch(5)
    full = [r["id"] for r in ds]
    it = iter(ds)
    head = [next(it)["id"] for _ in range(7)]
    state = ds.state_dict()
    assert state["epoch"] == 5 and state["yielded"] == 7 and state["num_workers"] == 1
    fresh = IterableDataset(JSONLDataset(corpus), seed=3, num_replicas=2, rank=0)
    fresh.load_state_dict(pickle.loads(pickle.dumps(state)))
    assert head + [r["id"] for r in fresh] == full and fresh.epoch == 5
    # ranks move in lockstep, so rank 0's state resumes rank 1 after its first 7 too
    other = IterableDataset(JSONLDataset(corpus), seed=3, num_replicas=2, rank=1)
    other.set_epoch(5)
    rank1 = [r["id"] for r in other]
    other.load_state_dict(state)
    assert [r["id"] for r in other] == rank1[7:]
    reseeded = IterableDataset(JSONLDataset(corpus), seed=4, num_replicas=2, rank=0)
    with pytest.raises(ValueError, match="cannot resume: saved state has seed=3 but this object has seed=4"):
        reseeded.load_state_dict(state)


BATCH, SEED = 4, 13  # rank 0 of 2 gets 31 records: 8 batches with 0 workers, 8 with 2 (16 + 15 records)


def make_loader(path: str, workers: int):
    ds = IterableDataset(JSONLDataset(path), seed=SEED, num_replicas=2, rank=0)
    return ds, StatefulDataLoader(ds, batch_size=BATCH, num_workers=workers, collate_fn=collate_records)


def run_pass(ds, loader, epoch: int) -> list[list[int]]:
    ds.set_epoch(epoch)
    return [b["id"].tolist() for b in loader]


def resume_child(job_file: str, out_file: str) -> None:
    with open(job_file, "rb") as f:
        job = pickle.load(f)
    out = []
    for case in job["cases"]:
        ds, loader = make_loader(job["path"], job["workers"])
        loader.load_state_dict(case["state"])
        first = case["epoch"] + (1 if case["finished"] else 0)
        out.append([run_pass(ds, loader, first), run_pass(ds, loader, first + 1)])
    with open(out_file, "wb") as f:
        pickle.dump(out, f)


def run_child(job: dict, tmp: Path) -> list:
    job_file, out_file = tmp / "iter-job.pkl", tmp / "iter-out.pkl"
    job_file.write_bytes(pickle.dumps(job))
    subprocess.run(
        [sys.executable, __file__, "resume-child", str(job_file), str(out_file)], check=True, timeout=300
    )
    return pickle.loads(out_file.read_bytes())


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resumes_exactly_in_a_fresh_process(corpus, tmp_path, workers):
    ds, loader = make_loader(str(corpus), workers)
    reference = {e: run_pass(ds, loader, e) for e in range(4)}
    n_batches = len(reference[0])
    assert all(sum(map(len, reference[e])) == 31 for e in reference) and reference[0] != reference[1]

    cases = []
    for epoch, k, finished in [
        (0, 0, False),
        (0, 1, False),
        (0, 3, False),
        (0, n_batches - 1, False),
        (0, n_batches, False),  # last batch consumed, StopIteration not yet seen
        (0, n_batches, True),  # saved after the loop ended
        (1, 5, False),
    ]:
        ds, loader = make_loader(str(corpus), workers)
        for e in range(epoch):
            assert run_pass(ds, loader, e) == reference[e]
        ds.set_epoch(epoch)
        it = iter(loader)
        got = [next(it)["id"].tolist() for _ in range(k)]
        if finished:
            assert next(it, None) is None
        assert got == reference[epoch][:k]
        cases.append({"epoch": epoch, "k": k, "finished": finished, "state": loader.state_dict()})
        del it, loader

    out = run_child({"path": str(corpus), "workers": workers, "cases": cases}, tmp_path)
    for case, (rest, after) in zip(cases, out):
        e, k = case["epoch"], case["k"]
        if case["finished"]:
            assert rest == reference[e + 1] and after == reference[e + 2], case
        else:
            assert rest == reference[e][k:], case  # exactly the remaining batches, same composition
            assert after == reference[e + 1], case


if __name__ == "__main__":
    if sys.argv[1] == "resume-child":
        resume_child(sys.argv[2], sys.argv[3])
