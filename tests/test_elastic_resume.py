"""Elastic resume of ``sjsonl.torch.DistributedSampler``: an epoch saved part-way at world size R continues at
world size R' (and another ``drop_last``), once or several times, and the epoch's multiset stays exact.

The oracle is independent of sjsonl's arithmetic: real ``torch.utils.data.DistributedSampler`` (shuffle off)
lays out whatever list of records is left, ranks step in lockstep, and a plain Python list tracks what the
world has consumed. Each rank's indices must be torch's layout of what is left, in order; across the whole
run every record appears, and the only repeats are torch's own padding."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data.distributed import DistributedSampler as TorchSampler  # noqa: E402

from sjsonl.sampling import Permutation  # noqa: E402
from sjsonl.torch import DistributedSampler  # noqa: E402

WORLDS = (1, 2, 3, 4, 8)
N, SEED, EPOCH = 37, 5, 3


def _torch_layout(left: list[int], replicas: int, rank: int, drop_last: bool) -> list[int]:
    """What real torch gives ``rank`` of ``replicas`` over the records in ``left`` (its padding rule)."""
    if not left:
        return []
    return [
        left[i] for i in TorchSampler(range(len(left)), replicas, rank, shuffle=False, drop_last=drop_last)
    ]


class World:
    """Ranks of one layout stepping in lockstep; ``left`` is the oracle's list of unconsumed records."""

    def __init__(
        self,
        replicas: int,
        drop_last: bool,
        left: list[int],
        state: dict | None = None,
        expected: list[list[int]] | None = None,
    ) -> None:
        self.samplers = [
            DistributedSampler(range(N), replicas, r, seed=SEED, drop_last=drop_last) for r in range(replicas)
        ]
        for s in self.samplers:
            s.set_epoch(EPOCH)
            if state is not None:
                s.load_state_dict(state)
        self.iters = [iter(s) for s in self.samplers]
        self.replicas, self.drop_last, self.left, self.done = replicas, drop_last, left, 0
        self.expected = expected or [_torch_layout(left, replicas, r, drop_last) for r in range(replicas)]

    def resume(self, replicas: int, drop_last: bool, saving_rank: int = 0) -> World:
        """The world that loads the state ``saving_rank`` saves now."""
        state = self.samplers[saving_rank].state_dict()
        if (replicas, drop_last) == (self.replicas, self.drop_last):
            # the same layout continues the very pass: torch's padding of the whole pass, not of what is left
            return World(replicas, drop_last, self.left, state, [e[self.done :] for e in self.expected])
        return World(replicas, drop_last, self.left, state)

    def step(self, k: int) -> list[int]:
        """``k`` indices from every rank (fewer at the pass's end); checks each against torch's layout."""
        taken = []
        for r, it in enumerate(self.iters):
            got = [i for _, i in zip(range(k), it)]
            assert got == self.expected[r][self.done : self.done + k], (r, self.replicas, self.drop_last)
            taken += got
        per_rank = len(self.expected[0])
        k = min(k, per_rank - self.done)
        self.done += k
        # the lockstep rule, on the oracle's own list; a pass run to its end is over (drop_last's cut stays)
        self.left = [] if self.done == per_rank else self.left[k * self.replicas :]
        return taken


def _epoch_order() -> list[int]:
    return Permutation(N, seed=SEED, epoch=EPOCH).take(np.arange(N)).tolist()


@pytest.mark.parametrize("drop_last", [False, True], ids=["padded", "drop_last"])
@pytest.mark.parametrize("new", WORLDS)
@pytest.mark.parametrize("old", WORLDS)
def test_any_world_size_to_any_other(old: int, new: int, drop_last: bool) -> None:
    order = _epoch_order()
    for steps in sorted({0, 1, 2, N // old // 2, -(-N // old) - 1}):
        first = World(old, drop_last, order)
        before = first.step(steps)
        second = first.resume(new, drop_last, random.Random(steps).randrange(old))  # any rank's state
        after = second.step(N)
        assert [list(it) for it in second.iters] == [[]] * new  # the remainder is all there was
        seen = Counter(before + after)
        pads = sum(c - 1 for c in seen.values())
        # the same layout continues its pass (torch's padding or cut of the whole pass); another layout
        # pads or cuts what was left
        same = old == new
        if drop_last:  # no repeats; the only records missing are the one cut (fewer than its world size)
            assert pads == 0
            assert len(set(range(N)) - set(seen)) < (
                old if same or first.done == len(first.expected[0]) else new
            )
        else:  # every record; the only repeats are torch's padding
            assert set(seen) == set(range(N))
            expected_pads = -N % old if same else -len(first.left) % new
            assert pads == expected_pads, (steps, pads)


@pytest.mark.parametrize(("a", "b", "c"), [(4, 2, 3), (8, 3, 1), (1, 4, 8), (3, 3, 2), (2, 8, 4)])
@pytest.mark.parametrize("drop_last", [False, True], ids=["padded", "drop_last"])
def test_resume_twice_on_yet_another_layout(a: int, b: int, c: int, drop_last: bool) -> None:
    order = _epoch_order()
    first = World(a, drop_last, order)
    seen = first.step(2)
    second = first.resume(b, drop_last, saving_rank=a - 1)
    seen += second.step(1)
    third = second.resume(c, drop_last)
    seen += third.step(N)
    counts = Counter(seen)
    if drop_last:
        assert max(counts.values()) == 1 and len(set(range(N)) - set(counts)) < c
    else:
        assert set(counts) == set(range(N))
        assert sum(v - 1 for v in counts.values()) == (-len(second.left) % c if second.left else 0)


def test_the_next_epoch_is_an_ordinary_epoch_of_the_new_layout() -> None:
    first = World(4, False, _epoch_order())
    first.step(3)
    resumed = DistributedSampler(range(N), 3, 1, seed=SEED)
    resumed.set_epoch(EPOCH)
    resumed.load_state_dict(first.samplers[2].state_dict())
    assert 0 < len(list(resumed)) < len(resumed)  # the rest of epoch 3
    resumed.set_epoch(EPOCH + 1)
    fresh = DistributedSampler(range(N), 3, 1, seed=SEED)
    fresh.set_epoch(EPOCH + 1)
    assert list(resumed) == list(fresh)


def test_a_state_saved_at_the_end_of_a_pass_leaves_the_next_epoch_to_set_epoch() -> None:
    s = DistributedSampler(range(N), 4, 0, seed=SEED)
    list(s)
    t = DistributedSampler(range(N), 2, 1, seed=SEED)
    t.set_epoch(1)
    t.load_state_dict(s.state_dict())
    assert list(t) == []
    fresh = DistributedSampler(range(N), 2, 1, seed=SEED)
    fresh.set_epoch(1)
    assert list(t) == list(fresh)


def test_another_drop_last_resumes_too() -> None:
    order = _epoch_order()
    first = World(3, True, order)
    before = first.step(4)
    second = first.resume(2, False)
    after = second.step(N)
    assert set(before + after) == set(range(N))  # drop_last's tail of the old layout is not lost


@pytest.mark.parametrize(("key", "value"), [("seed", 6), ("n", N + 1), ("shuffle", False)])
def test_another_dataset_or_seed_is_refused_naming_it(key: str, value: object) -> None:
    s = DistributedSampler(range(N), 4, 0, seed=SEED)
    next(iter(s))
    state = s.state_dict()
    other = {"seed": SEED, "n": N, "shuffle": True, key: value}
    t = DistributedSampler(range(other["n"]), 2, 0, seed=other["seed"], shuffle=other["shuffle"])
    with pytest.raises(
        ValueError, match=f"cannot resume: saved state has {key}=.* but this object has {key}="
    ):
        t.load_state_dict(state)


@pytest.mark.parametrize(("workers", "new_workers"), [(0, 3), (3, 1), (1, 0)])
@pytest.mark.parametrize("new", [2, 3])
def test_stateful_dataloaders_at_four_ranks_resume_at_another_world_and_worker_count(
    workers: int, new: int, new_workers: int
) -> None:
    """Four ranks' real StatefulDataLoaders take three batches each; the state of one of them, through
    ``sampler_state`` (torchdata refuses a loader state saved with another ``num_workers``), resumes the
    epoch on ``new`` ranks with ``new_workers`` workers: every record once, plus torch's padding."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    from sjsonl.torch import sampler_state

    data = list(range(N))

    def loader(replicas: int, rank: int, num_workers: int, state: dict | None) -> StatefulDataLoader:
        sampler = DistributedSampler(data, replicas, rank, seed=SEED)
        sampler.set_epoch(EPOCH)
        if state is not None:
            sampler.load_state_dict(state)
        return StatefulDataLoader(data, batch_size=2, sampler=sampler, num_workers=num_workers)

    old = [iter(loader(4, r, workers, None)) for r in range(4)]
    before = [int(x) for it in old for _ in range(3) for x in next(it)]
    state = sampler_state(old[2].state_dict())
    assert state["yielded"] == 6  # what the loader handed out, not what its workers read ahead
    after = [int(x) for r in range(new) for batch in loader(new, r, new_workers, state) for x in batch]
    counts = Counter(before + after)
    assert set(counts) == set(range(N))
    assert sum(c - 1 for c in counts.values()) == -(N - 24) % new  # 24 consumed, the rest padded for `new`
    order = _epoch_order()
    assert after == [x for r in range(new) for x in _torch_layout(order[24:], new, r, False)]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_complete_state_under_a_fresh_loader_is_what_the_readme_says(workers: int) -> None:
    """No workers: the rest of the saved epoch (nothing), then the next pass. Workers: torch makes an
    iterator, drops it and makes another, so the empty remainder goes to the dropped one and the loader
    starts the epoch ``set_epoch`` chose (the README says so and says to set the next epoch first)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    data = list(range(N))
    saved = DistributedSampler(data, 4, 1, seed=SEED)
    list(saved)
    sampler = DistributedSampler(data, 2, 0, seed=SEED)
    sampler.load_state_dict(saved.state_dict())
    loader = StatefulDataLoader(data, batch_size=2, sampler=sampler, num_workers=workers)
    first = [int(x) for batch in loader for x in batch]
    fresh = DistributedSampler(data, 2, 0, seed=SEED)
    assert first == ([] if workers == 0 else list(fresh))
    assert [int(x) for batch in loader for x in batch] == list(fresh)


# ----------------------------------------------------------------- sjsonl.torch.IterableDataset
def _iterable(replicas: int, rank: int, drop_last: bool = False):
    from sjsonl.torch import IterableDataset

    ds = IterableDataset(list(range(N)), seed=SEED, num_replicas=replicas, rank=rank, drop_last=drop_last)
    ds.set_epoch(EPOCH)
    return ds


@pytest.mark.parametrize("drop_last", [False, True], ids=["padded", "drop_last"])
@pytest.mark.parametrize(("old", "new"), [(4, 2), (2, 3), (1, 8), (8, 1), (3, 4)])
def test_iterable_dataset_any_world_size_to_any_other(old: int, new: int, drop_last: bool) -> None:
    order = _epoch_order()
    first = [_iterable(old, r, drop_last) for r in range(old)]
    iters = [iter(d) for d in first]
    steps = 2
    before = [next(it) for it in iters for _ in range(steps)]
    state = first[-1].state_dict()
    left = order[steps * old :]
    for r in range(new):
        resumed = _iterable(new, r, drop_last)
        resumed.load_state_dict(state)
        expected = _torch_layout(left, new, r, drop_last)
        assert len(resumed) == len(expected)  # len() counts the resumed pass, not a whole epoch
        assert list(resumed) == expected
        assert len(resumed) == len(_torch_layout(order, new, r, drop_last))  # then whole epochs again
    assert not set(before) & set(left)


@pytest.mark.parametrize("drop_last", [False, True], ids=["padded", "drop_last"])
@pytest.mark.parametrize(("old", "new"), [(4, 2), (2, 3), (1, 8), (8, 1), (3, 3)])
def test_len_of_a_resumed_sampler_is_what_its_pass_hands_out(old: int, new: int, drop_last: bool) -> None:
    """``len(sampler)`` (so ``len(loader)``) counts the resumed pass's indices, then whole epochs again."""
    first = [DistributedSampler(list(range(N)), old, r, seed=SEED, drop_last=drop_last) for r in range(old)]
    iters = []
    for sampler in first:
        sampler.set_epoch(EPOCH)
        iters.append(iter(sampler))
    for it in iters:
        [next(it) for _ in range(3)]
    state = first[0].state_dict()
    for r in range(new):
        resumed = DistributedSampler(list(range(N)), new, r, seed=SEED, drop_last=drop_last)
        resumed.set_epoch(EPOCH)
        resumed.load_state_dict(state)
        n = len(resumed)
        assert n == len(list(resumed))
        assert len(resumed) == resumed.num_samples  # the pass is over: an ordinary epoch's length


@pytest.mark.parametrize("new_workers", [0, 1, 3])
def test_iterable_state_saved_without_workers_resumes_under_any_worker_count(new_workers: int) -> None:
    """Four ranks iterate without workers and save; two ranks resume through DataLoaders with
    ``new_workers`` workers each: per rank the records are torch's layout of what was left (in the
    workers' interleaved order), across ranks every record once plus torch's padding."""
    order = _epoch_order()
    first = [_iterable(4, r) for r in range(4)]
    iters = [iter(d) for d in first]
    before = [next(it) for it in iters for _ in range(5)]
    state = first[0].state_dict()
    after = []
    for r in range(2):
        resumed = _iterable(2, r)
        resumed.load_state_dict(state)  # pickled to the workers with the resume pending
        loader = torch.utils.data.DataLoader(resumed, batch_size=3, num_workers=new_workers)
        mine = [int(x) for batch in loader for x in batch]
        assert sorted(mine) == sorted(_torch_layout(order[20:], 2, r, False))
        after += mine
    counts = Counter(before + after)
    assert set(counts) == set(range(N)) and sum(c - 1 for c in counts.values()) == -(N - 20) % 2


def test_a_workers_state_at_another_layout_is_refused_saying_why() -> None:
    from torchdata.stateful_dataloader import StatefulDataLoader

    ds = _iterable(2, 0)
    loader = StatefulDataLoader(ds, batch_size=2, num_workers=2)
    it = iter(loader)
    next(it), next(it)
    worker_state = loader.state_dict()["_snapshot"]["_worker_snapshots"]["worker_1"]["dataset_state"]
    assert worker_state["num_workers"] == 2 and worker_state["worker"] == 1
    with pytest.raises(ValueError, match="from the state of DataLoader worker 1 of 2: it covers that worker"):
        _iterable(3, 0).load_state_dict(worker_state)


# ----------------------------------------------------------------- mixtures
@pytest.fixture(scope="module")
def mixtures(tmp_path_factory) -> dict:
    from sjsonl import JSONLDataset, concatenate_datasets, interleave_datasets

    d = tmp_path_factory.mktemp("elastic_mix")
    sources = []
    for name, n in (("a", 23), ("b", 9), ("c", 14)):
        path = d / f"{name}.jsonl"
        path.write_text("".join(f'{{"src": "{name}", "i": {i}}}\n' for i in range(n)))
        sources.append(JSONLDataset(path))
    return {
        "interleave all_exhausted": interleave_datasets(
            sources, probabilities=[0.5, 0.2, 0.3], seed=4, stopping_strategy="all_exhausted"
        ),
        "interleave first_exhausted": interleave_datasets(sources, seed=4),
        "concatenate": concatenate_datasets(sources),
        "repeat": concatenate_datasets(sources[:2]).repeat(3),
    }


@pytest.mark.parametrize(
    "kind", ["interleave all_exhausted", "interleave first_exhausted", "concatenate", "repeat"]
)
@pytest.mark.parametrize(("old", "new"), [(4, 3), (2, 8)])
def test_mixtures_resume_elastically_in_their_second_epoch(mixtures, kind: str, old: int, new: int) -> None:
    """A DistributedSampler over a mixture: epoch 0 whole, epoch 1 stopped after 3 steps on ``old`` ranks,
    finished on ``new`` ranks — the mixture's own items of epoch 1, each once, plus torch's padding."""
    mix = mixtures[kind]
    n = len(mix)
    items = [(r["src"], r["i"]) for r in mix]
    samplers = [DistributedSampler(mix, old, r, seed=SEED) for r in range(old)]
    for s in samplers:
        s.set_epoch(0)
        list(s)  # epoch 0, whole
        s.set_epoch(1)
    iters = [iter(s) for s in samplers]
    before = [next(it) for it in iters for _ in range(3)]
    state = samplers[1].state_dict()
    after = []
    for r in range(new):
        s = DistributedSampler(mix, new, r, seed=SEED)
        s.set_epoch(1)
        s.load_state_dict(state)
        after += list(s)
    counts = Counter(before + after)  # positions of the mixture
    assert set(counts) == set(range(n))  # every item of epoch 1
    assert sum(counts.values()) == n + (-(n - 3 * old) % new)  # once each, plus the new layout's padding
    assert Counter(items[i] for i in set(counts)) == Counter(items)  # the mixture's items, repeats and all


# ----------------------------------------------------------------- IterableDataset under StatefulDataLoaders
def _loader_run(replicas: int, workers: int, batches: int, batch: int = 2) -> tuple[list[int], list[dict]]:
    """``replicas`` ranks' StatefulDataLoaders over the iterable, ``batches`` batches each (in lockstep);
    the records they took and each rank's loader state."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    taken, states = [], []
    for r in range(replicas):
        loader = StatefulDataLoader(_iterable(replicas, r), batch_size=batch, num_workers=workers)
        it = iter(loader)
        taken += [int(x) for _ in range(batches) for x in next(it)]
        states.append(loader.state_dict())
        del it, loader
    return taken, states


ITERABLE_LAYOUTS = [
    ((2, 3), (3, 0)),
    ((4, 1), (2, 3)),
    ((3, 3), (8, 1)),
    ((1, 3), (1, 0)),
    ((8, 0), (4, 3)),
    ((2, 0), (3, 1)),
]


@pytest.mark.parametrize(("old", "new"), ITERABLE_LAYOUTS, ids=[f"{a}->{b}" for a, b in ITERABLE_LAYOUTS])
def test_iterable_loaders_resume_at_another_world_and_worker_count(old, new) -> None:
    """R ranks with W workers take 2 batches each; one rank's loader state, merged over its workers
    (``iterable_state``), resumes R' ranks with W' workers: every record of the epoch once, plus only the
    new layout's padding; per rank, torch's layout of what was left."""
    from torch.utils.data import DataLoader

    from sjsonl.torch import iterable_state

    (replicas, workers), (new_replicas, new_workers) = old, new
    before, states = _loader_run(replicas, workers, batches=2)
    state = iterable_state(states[-1])
    assert state["num_workers"] == 1 and state["yielded"] == 0
    after = []
    for r in range(new_replicas):
        resumed = _iterable(new_replicas, r)
        resumed.load_state_dict(state)
        mine = [int(x) for b in DataLoader(resumed, batch_size=3, num_workers=new_workers) for x in b]
        after += mine
    counts = Counter(before + after)
    assert set(counts) == set(range(N))
    left = N - len(set(before))
    assert len(before) == len(set(before))  # nothing repeated before the stop (no padding reached)
    assert sum(c - 1 for c in counts.values()) == -left % new_replicas


def test_iterable_resume_twice_through_workers() -> None:
    """4 ranks × 3 workers stop; 3 ranks × 1 worker resume, stop again; 2 ranks × 0 workers finish:
    the epoch's records, each once, plus only the padding of the passes that reached it."""
    from sjsonl.torch import iterable_state

    seen, state = [], None
    for replicas, workers, batches in [(4, 3, 2), (3, 1, 1), (2, 0, None)]:
        states = []
        for r in range(replicas):
            from torchdata.stateful_dataloader import StatefulDataLoader

            ds = _iterable(replicas, r)
            if state is not None:
                ds.load_state_dict(state)
            loader = StatefulDataLoader(ds, batch_size=2, num_workers=workers)
            it = iter(loader)
            if batches is None:
                seen += [int(x) for b in it for x in b]
            else:
                seen += [int(x) for _ in range(batches) for x in next(it)]
                states.append(loader.state_dict())
            del it, loader
        if states:
            merged = [{k: v for k, v in iterable_state(s).items() if k != "rank"} for s in states]
            assert all(m == merged[0] for m in merged)  # every rank's state says the same (but its rank)
            state = iterable_state(states[-1])
    counts = Counter(seen)
    assert set(counts) == set(range(N)) and sum(c - 1 for c in counts.values()) <= 1  # 2 ranks' padding


def test_merging_needs_every_worker_of_one_rank() -> None:
    from sjsonl.sampling.elastic import merge_worker_states

    base = {"epoch": 0, "n": N, "shuffle": True, "seed": SEED, "num_replicas": 2, "drop_last": False}
    dataset = {"n": N, "shuffle": True, "seed": SEED}
    one = {**base, "rank": 0, "num_workers": 2, "worker": 0, "yielded": 2}
    two = {**base, "rank": 0, "num_workers": 2, "worker": 1, "yielded": 2}
    assert merge_worker_states([two, one], dataset)["consumed"] == 8  # 4 of each rank's share, 2 ranks
    with pytest.raises(ValueError, match="one state from each of the 2 workers"):
        merge_worker_states([one, one], dataset)
    with pytest.raises(ValueError, match="different passes or ranks"):
        merge_worker_states([one, {**two, "rank": 1}], dataset)
    with pytest.raises(ValueError, match="a rank's worker states"):
        merge_worker_states([], dataset)


# ----------------------------------------------------------------- found in review
def test_a_merged_state_at_the_end_of_a_resumed_pass_keeps_what_earlier_layouts_skipped() -> None:
    from sjsonl.torch import iterable_state

    data = list(range(10))
    lay = {"n": 10, "shuffle": False, "seed": 0, "num_replicas": 1, "rank": 0, "drop_last": False}
    workers = {
        w: {"dataset_state": {**lay, "epoch": 0, "yielded": y, "num_workers": 2, "worker": w}}
        for w, y in [(0, 3), (1, 1)]
    }
    merged = iterable_state({"_snapshot": {"_worker_snapshots": workers}})  # took 0, 2, 4 and 1
    assert (merged["consumed"], merged["skipped"]) == (3, [4])
    from sjsonl.torch import IterableDataset

    b = IterableDataset(data, shuffle=False)
    b.load_state_dict(merged)
    assert list(b) == [3, 5, 6, 7, 8, 9]  # the rest of the epoch
    c = IterableDataset(data, shuffle=False)
    c.load_state_dict(iterable_state({"dataset_state": b.state_dict()}))  # saved at the pass's end
    assert list(c) == []


@pytest.mark.parametrize("workers", [1, 2])
def test_a_state_without_workers_loaded_in_the_main_process_continues_under_workers(workers: int) -> None:
    """The same world size: the state's start counts in the share of one process; in DataLoader workers the
    rest is split anew, and the next epoch (set_epoch) is a whole one."""
    first = _iterable(2, 0)
    it = iter(first)
    head = [next(it) for _ in range(5)]
    full = list(_iterable(2, 0))
    resumed = _iterable(2, 0)
    resumed.load_state_dict(first.state_dict())
    loader = torch.utils.data.DataLoader(resumed, batch_size=2, num_workers=workers)
    rest = [int(x) for b in loader for x in b]
    assert sorted(head + rest) == sorted(full) and not set(head) & set(rest)
    resumed.set_epoch(EPOCH + 1)  # the pending resume in this process is for epoch EPOCH only
    nxt = [int(x) for b in loader for x in b]
    whole = _iterable(2, 0)
    whole.set_epoch(EPOCH + 1)
    assert sorted(nxt) == sorted(whole)


@pytest.mark.parametrize(
    "bad",
    [[1, 2], {"_snapshot": []}, {"_sampler_iter_state": 5}, {"_snapshot": {"_worker_snapshots": {0: None}}}],
)
def test_malformed_loader_states_are_refused_in_one_line(bad) -> None:
    from sjsonl.torch import iterable_state, sampler_state

    for take in (sampler_state, iterable_state):
        with pytest.raises(
            ValueError, match=r"no (sampler|IterableDataset) state in this StatefulDataLoader"
        ):
            take(bad)
    lay = {"shuffle": True, "seed": 0, "num_replicas": 1, "rank": 0, "drop_last": False, "epoch": 0}
    with pytest.raises(ValueError, match="cannot resume: saved state has n=None"):
        iterable_state({"dataset_state": {**lay, "n": None, "yielded": 0, "num_workers": 1, "worker": 0}})
