"""A real two-process torch.distributed run (gloo on 127.0.0.1, CPU) over a JSONL file: ranks read disjoint,
complete, equal shares; DDP-style lock-step never hangs; two runs with the same seed agree exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sjsonl.sample import write_corpus

WORLD = 2
N = 1000  # even: ranks are disjoint and complete; the odd view below checks the padding rule


def rank_main(rank: int, rendezvous: str, path: str, out: str) -> None:
    """One rank of the run (started as a subprocess by the test)."""
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    from sjsonl import JSONLDataset
    from sjsonl.torch import DistributedSampler, IterableDataset, collate_records

    # a file rendezvous: no TCP port to pick, so tests side by side never collide
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=WORLD)

    def ids(loader) -> list[int]:
        return [i for batch in loader for i in batch["id"].tolist()]

    ds = JSONLDataset(path)
    res: dict[str, list[int]] = {}
    sampler = DistributedSampler(ds, seed=7)  # rank and world size from the process group
    assert (sampler.rank, sampler.num_replicas) == (rank, WORLD)
    loader = DataLoader(ds, batch_size=16, sampler=sampler, num_workers=2, collate_fn=collate_records)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        res[f"sampler/{epoch}"] = ids(loader)

    odd = ds.take(N - 1)  # 999 records over 2 ranks: one padding record
    res["sampler/odd"] = ids(
        DataLoader(odd, batch_size=16, sampler=DistributedSampler(odd, seed=7), collate_fn=collate_records)
    )

    it_ds = IterableDataset(ds, seed=7)  # rank from the process group; pinned when pickled to spawned workers
    spawned = DataLoader(
        it_ds, batch_size=16, num_workers=1, multiprocessing_context="spawn", collate_fn=collate_records
    )
    res["iterable/0"] = ids(spawned)
    it_ds.set_epoch(1)
    res["iterable/1"] = ids(DataLoader(it_ds, batch_size=16, num_workers=2, collate_fn=collate_records))
    odd_it = IterableDataset(odd, seed=7, drop_last=True)
    res["iterable/odd-drop"] = ids(
        DataLoader(odd_it, batch_size=16, num_workers=2, collate_fn=collate_records)
    )

    # DDP-style lock-step: one collective per batch. Unequal batch counts would hang here (caught by timeout).
    steps = 0
    for batch in DataLoader(odd_it, batch_size=16, num_workers=2, collate_fn=collate_records):
        t = torch.tensor([len(batch["id"])])
        dist.all_reduce(t)
        steps += 1
    counts = [None] * WORLD
    dist.all_gather_object(counts, {k: len(v) for k, v in res.items()} | {"steps": steps})
    assert all(c == counts[0] for c in counts), counts
    dist.barrier()
    dist.destroy_process_group()
    Path(out).write_text(json.dumps(res))
    os._exit(0)  # past gloo's teardown abort at interpreter exit (see examples/torch_ddp_mixture.py)


def launch(path: Path, out_dir: Path) -> list[subprocess.Popen]:
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    out_dir.mkdir()
    rendezvous = str(out_dir / "rendezvous")  # one per run: the runs go side by side
    return [
        subprocess.Popen(
            [sys.executable, __file__, "rank", str(r), rendezvous, str(path), str(out_dir / f"{r}.json")],
            env=env,
        )
        for r in range(WORLD)
    ]


@pytest.mark.slow  # two processes, gloo and a DataLoader each
def test_two_process_gloo_run(tmp_path):
    path = tmp_path / "data.jsonl"
    write_corpus(path, n_records=N, kind="short", seed=5)
    from sjsonl import JSONLDataset

    JSONLDataset(path)  # build the index once; ranks then only map it
    runs = [tmp_path / "run1", tmp_path / "run2"]
    procs = [p for run in runs for p in launch(path, run)]
    try:
        for p in procs:
            assert p.wait(timeout=240) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    results = [[json.loads((run / f"{r}.json").read_text()) for r in range(WORLD)] for run in runs]
    assert results[0] == results[1]  # same seed: identical on every rank, run to run

    ranks = results[0]
    for key in ("sampler/0", "sampler/1", "iterable/0", "iterable/1"):
        a, b = ranks[0][key], ranks[1][key]
        assert len(a) == len(b) == N // WORLD  # equal counts
        assert not set(a) & set(b)  # disjoint
        assert sorted(a + b) == list(range(N))  # together complete
    assert ranks[0]["sampler/0"] != ranks[0]["sampler/1"]  # set_epoch reshuffles
    assert ranks[0]["iterable/0"] != ranks[0]["iterable/1"]

    a, b = ranks[0]["sampler/odd"], ranks[1]["sampler/odd"]
    assert len(a) == len(b) == 500
    assert set(a) | set(b) == set(range(N - 1)) and len(a + b) - len(set(a + b)) == 1  # one padding repeat
    assert b[-1] == a[0]  # the padding is the first index of the shuffled order

    a, b = ranks[0]["iterable/odd-drop"], ranks[1]["iterable/odd-drop"]
    assert len(a) == len(b) == 499 and not set(a) & set(b)  # drop_last: the tail record is dropped


if __name__ == "__main__":
    if sys.argv[1] == "rank":
        rank_main(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
