"""Elastic resume for every layout change (R, W) → (R', W') with R, R' in {1, 2, 3, 4, 8} ranks and W, W'
in {0, 1, 3} DataLoader workers (real torch DataLoaders and torchdata StatefulDataLoaders, worker
processes included), for sjsonl.torch.IterableDataset (states merged over a rank's workers by
``iterable_state``) and the DistributedSampler (``sampler_state``): every record of the epoch exactly
once, plus only torch's padding (of the old layout, if its ranks reached it, and of what was left)."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchdata")

from torch.utils.data import DataLoader  # noqa: E402
from torchdata.stateful_dataloader import StatefulDataLoader  # noqa: E402

from sjsonl.torch import DistributedSampler, IterableDataset, iterable_state, sampler_state  # noqa: E402

pytestmark = pytest.mark.slow  # 675 layout changes, with worker processes

N, SEED, BATCH, STEPS = 37, 5, 2, 2
LAYOUTS = list(itertools.product((1, 2, 3, 4, 8), (0, 1, 3)))
PAIRS = list(itertools.product(LAYOUTS, LAYOUTS))
# the sampler runs in the main process whatever the worker count (workers matter only to what torchdata
# saves), yet it too gets every pair
SAMPLER_PAIRS = PAIRS


def _check(before: list[int], after: list[int], replicas: int, new_replicas: int) -> None:
    padded_before = len(before) - len(set(before))  # the old layout's padding, if its ranks reached it
    assert padded_before <= -N % replicas
    counts = Counter(before + after)
    assert set(counts) == set(range(N))  # every record of the epoch
    left = N - len(set(before))
    assert sum(c - 1 for c in counts.values()) == padded_before + -left % new_replicas  # once, plus padding


def _iterable_run(old: tuple[int, int], new: tuple[int, int], drop_last: bool) -> tuple[list[int], list[int]]:
    """R ranks with W workers take STEPS batches each (in lockstep) and one rank's loader state, merged over
    its workers, resumes R' ranks with W' workers: the records taken before the stop, and after."""
    (replicas, workers), (new_replicas, new_workers) = old, new

    def dataset(replicas: int, rank: int) -> IterableDataset:
        return IterableDataset(
            list(range(N)), seed=SEED, num_replicas=replicas, rank=rank, drop_last=drop_last
        )

    before, state = [], None
    for r in range(replicas):
        loader = StatefulDataLoader(dataset(replicas, r), batch_size=BATCH, num_workers=workers)
        it = iter(loader)
        before += [int(x) for _ in range(STEPS) for x in next(it)]
        state = iterable_state(loader.state_dict())  # any rank's: ranks move in lockstep
        del it, loader
    after = []
    for r in range(new_replicas):
        ds = dataset(new_replicas, r)
        ds.load_state_dict(state)
        after += [int(x) for b in DataLoader(ds, batch_size=3, num_workers=new_workers) for x in b]
    return before, after


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_iterable_dataset(old: tuple[int, int], new: tuple[int, int]) -> None:
    before, after = _iterable_run(old, new, drop_last=False)
    _check(before, after, old[0], new[0])


@pytest.mark.parametrize(("old", "new"), SAMPLER_PAIRS, ids=[f"{a}->{b}" for a, b in SAMPLER_PAIRS])
def test_distributed_sampler(old: tuple[int, int], new: tuple[int, int]) -> None:
    (replicas, workers), (new_replicas, new_workers) = old, new
    data = list(range(N))
    before, state = [], None
    for r in range(replicas):
        sampler = DistributedSampler(data, replicas, r, seed=SEED)
        loader = StatefulDataLoader(data, batch_size=BATCH, sampler=sampler, num_workers=workers)
        it = iter(loader)
        before += [int(x) for _ in range(STEPS) for x in next(it)]
        state = sampler_state(loader.state_dict())
        del it, loader
    after = []
    for r in range(new_replicas):
        sampler = DistributedSampler(data, new_replicas, r, seed=SEED)
        sampler.load_state_dict(state)
        loader = StatefulDataLoader(data, batch_size=3, sampler=sampler, num_workers=new_workers)
        after += [int(x) for b in loader for x in b]
    _check(before, after, replicas, new_replicas)


DROP_LAST_PAIRS = PAIRS


@pytest.mark.parametrize(("old", "new"), DROP_LAST_PAIRS, ids=[f"{a}->{b}" for a, b in DROP_LAST_PAIRS])
def test_iterable_dataset_with_drop_last(old: tuple[int, int], new: tuple[int, int]) -> None:
    """With ``drop_last=True`` nothing repeats, and the only records never handed out are the fewer than
    R' the new layout cuts from the end of what was left (or, when the old pass had run to its end, the
    old layout's cut: that epoch is over)."""
    (replicas, _), (new_replicas, _) = old, new
    before, after = _iterable_run(old, new, drop_last=True)
    seen = before + after
    assert len(seen) == len(set(seen))  # nothing twice
    left = N - len(before)
    if len(before) == N // replicas * replicas:  # the old pass ran to its end: that epoch is over, cut
        assert after == []
    else:  # only the new layout's cut is never handed out
        assert N - len(set(seen)) == left % new_replicas
