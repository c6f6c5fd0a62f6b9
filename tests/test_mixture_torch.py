"""Mixtures with torch: a DistributedSampler over a mixture, and exact resume of a mixture under
torchdata's StatefulDataLoader in a fresh process (0 and 2 workers, 2 ranks)."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torch.utils.data import DataLoader  # noqa: E402
from torchdata.stateful_dataloader import StatefulDataLoader  # noqa: E402

from sjsonl import JSONLDataset, interleave_datasets  # noqa: E402
from sjsonl.torch import DistributedSampler, IterableDataset, collate_records  # noqa: E402

if __name__ == "__main__":  # the fresh process of the resume test: run as a script, not a package module
    from test_mixture import PROBS, SIZES, keys, write_source
else:
    from .test_mixture import PROBS, SIZES, keys, write_source


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("mixture")
    return {name: write_source(d / f"{name}.jsonl", name, n) for name, n in SIZES.items()}


MIX_TAKE, BATCH = 2_000, 16


def make_mixture(paths: list[str]):
    return interleave_datasets([JSONLDataset(p) for p in paths], probabilities=PROBS, seed=21).take(MIX_TAKE)


def test_distributed_sampler_over_a_mixture(sources):
    mixture = make_mixture(list(sources.values()))
    seen = []
    for rank in range(2):
        sampler = DistributedSampler(mixture, num_replicas=2, rank=rank, shuffle=True, seed=3)
        loader = DataLoader(mixture, batch_size=BATCH, sampler=sampler, collate_fn=collate_records)
        seen += [(s, i) for b in loader for s, i in zip(b["src"], b["i"].tolist())]
    assert sorted(seen) == sorted(keys(mixture))


def mixture_loader(paths: list[str], workers: int, rank: int):
    ds = IterableDataset(make_mixture(paths), seed=5, num_replicas=2, rank=rank)
    return StatefulDataLoader(ds, batch_size=BATCH, num_workers=workers, collate_fn=collate_records)


def batches(loader, k: int | None = None) -> list[list[tuple[str, int]]]:
    out = []
    for b in loader:
        out.append(list(zip(b["src"], b["i"].tolist())))
        if k is not None and len(out) == k:
            break
    return out


def resume_child(job_file: str, out_file: str) -> None:
    job = pickle.loads(Path(job_file).read_bytes())
    out = []
    for case in job["cases"]:
        loader = mixture_loader(job["paths"], job["workers"], case["rank"])
        loader.load_state_dict(case["state"])
        out.append(batches(loader))
    Path(out_file).write_bytes(pickle.dumps(out))


@pytest.mark.parametrize("workers", [0, pytest.param(2, marks=pytest.mark.slow)])
def test_mixture_resumes_exactly_in_a_fresh_process(sources, tmp_path, workers):
    paths = list(sources.values())
    reference = {rank: batches(mixture_loader(paths, workers, rank)) for rank in range(2)}
    union = sorted(x for rank in range(2) for b in reference[rank] for x in b)
    assert union == sorted(keys(make_mixture(paths)))  # 2 ranks: disjoint and complete (2000 = 2 × 1000)
    n_batches = len(reference[0])
    cases = []
    for rank, k in [(0, 0), (0, 1), (1, 7), (0, n_batches // 2), (1, n_batches - 1), (0, n_batches)]:
        it = iter(loader := mixture_loader(paths, workers, rank))
        got = [list(zip(b["src"], b["i"].tolist())) for b in (next(it) for _ in range(k))]
        assert got == reference[rank][:k]
        cases.append({"rank": rank, "k": k, "state": loader.state_dict()})
        del it, loader
    job_file, out_file = tmp_path / "job.pkl", tmp_path / "out.pkl"
    job_file.write_bytes(pickle.dumps({"paths": paths, "workers": workers, "cases": cases}))
    subprocess.run(
        [sys.executable, __file__, "resume-child", str(job_file), str(out_file)], check=True, timeout=300
    )
    for case, rest in zip(cases, pickle.loads(out_file.read_bytes())):
        assert rest == reference[case["rank"]][case["k"] :], case


if __name__ == "__main__":
    resume_child(sys.argv[2], sys.argv[3])
