"""Elastic resume of the views: a prefetcher over a shard (of records, of batches, or batching its shard)
saved mid-pass at one world size continues the same pass at another — the new ranks deliver exactly what the
old ones had not, each record once — and resuming twice composes (sjsonl.data.prefetch, shard_rest)."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from sjsonl import InvalidArgumentError, JSONLDataset

N = 50
SIZES = (1, 2, 3, 4, 8)


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    path = tmp_path_factory.mktemp("elastic") / "d.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(N)))
    return JSONLDataset(path).shuffle(seed=3, epoch=1)


def _loader(parent, world, rank, contiguous, form, batch=3, drop=False):
    if form == "records":
        items = parent.shard(world, rank, contiguous)
    elif form == "batches of a shard":
        items = parent.shard(world, rank, contiguous).batch(batch, drop_last_batch=drop)
    else:  # a shard of batches
        items = parent.batch(batch, drop_last_batch=drop).shard(world, rank, contiguous)
    return items.prefetch(4, threads=2)


def _ids(item):
    return item["i"] if isinstance(item["i"], list) else [item["i"]]


def _run_ranks(parent, world, contiguous, form, steps, state=None, **kw):
    """Every rank of one layout, in lockstep: ``steps`` items each (None: to the end); returns the ids
    each delivered and the state rank 0 saved."""
    delivered, saved = [], None
    for rank in range(world):
        loader = _loader(parent, world, rank, contiguous, form, **kw)
        if state is not None:
            loader.load_state_dict(state)
        it = iter(loader)
        for item in itertools.islice(it, steps):
            delivered.extend(_ids(item))
        if rank == 0:
            saved = loader.state_dict()
    return delivered, saved


@pytest.mark.parametrize("form", ["records", "batches of a shard", "a shard of batches"])
@pytest.mark.parametrize("contiguous", [(True, True), (False, False), (True, False)])
def test_any_world_size_to_any_other(parent, form, contiguous):
    for world, new_world in itertools.product(SIZES, SIZES):
        steps = 2 if form != "records" else 3
        before, state = _run_ranks(parent, world, contiguous[0], form, steps)
        after, _ = _run_ranks(parent, new_world, contiguous[1], form, None, state)
        together = Counter(before) + Counter(after)
        assert together == Counter(range(N)), (world, new_world, form, contiguous)


@pytest.mark.parametrize("form", ["records", "batches of a shard"])
def test_resume_twice_then_an_ordinary_pass(parent, form):
    first, state = _run_ranks(parent, 4, True, form, 2)
    second, state = _run_ranks(parent, 3, False, form, 1, state)
    third, _ = _run_ranks(parent, 2, True, form, None, state)
    assert Counter(first) + Counter(second) + Counter(third) == Counter(range(N))
    # the pass after the resumed one is an ordinary pass of the new layout
    loader = _loader(parent, 2, 1, True, form)
    loader.load_state_dict(state)
    assert len(loader) == len(list(loader)) < len(loader.items)  # the rest, and len() says so
    assert [i for item in loader for i in _ids(item)] == [
        i for item in _loader(parent, 2, 1, True, form) for i in _ids(item)
    ]


def test_drop_last_cuts_only_the_new_ranks_partial_batches(parent):
    before, state = _run_ranks(parent, 4, True, "batches of a shard", 2, drop=False)
    after, _ = _run_ranks(parent, 3, True, "batches of a shard", None, state, drop=True)
    left = N - len(before)
    assert len(after) == len(set(after)) and not set(after) & set(before)
    assert left - len(after) < 3 * 3  # at most batch - 1 records cut on each of the 3 new ranks


def test_a_pass_saved_complete_leaves_nothing_at_another_layout(parent):
    _, state = _run_ranks(parent, 4, True, "batches of a shard", None, drop=True)
    after, _ = _run_ranks(parent, 2, True, "batches of a shard", None, state, drop=True)
    assert after == []


def test_same_layout_continues_the_pass(parent):
    loader = _loader(parent, 3, 1, True, "records")
    first = [r["i"] for r in itertools.islice(iter(loader), 5)]
    again = _loader(parent, 3, 1, True, "records")
    again.load_state_dict(loader.state_dict())
    assert first + [r["i"] for r in again] == [r["i"] for r in parent.shard(3, 1)]


def test_refusals_say_what_differs(parent):
    _, state = _run_ranks(parent, 4, True, "records", 2)
    other_seed = parent.shuffle(seed=4, epoch=1)
    with pytest.raises(InvalidArgumentError, match="order"):
        _loader(other_seed, 2, 0, True, "records").load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match="over a shard"):
        parent.prefetch().load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match="segment"):
        _loader(parent, 2, 0, True, "records").load_state_dict({**state, "segment": [[5, 2]]})


def test_a_mixture_resumes_at_another_world_size(parent, tmp_path):
    from sjsonl import interleave_datasets

    other = tmp_path / "o.jsonl"
    other.write_text("".join(f'{{"i": {N + i}}}\n' for i in range(20)))
    mix = interleave_datasets([parent, JSONLDataset(other)], stopping_strategy="all_exhausted").shuffle(
        seed=1
    )
    everything = Counter(r["i"] for r in mix)
    for world, new_world in [(4, 3), (3, 8), (2, 1)]:
        before, state = _run_ranks(mix, world, True, "batches of a shard", 3)
        after, _ = _run_ranks(mix, new_world, False, "batches of a shard", None, state)
        assert Counter(before) + Counter(after) == everything


# ----------------------------------------------------------------- found by a review, kept fixed
@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize(("total", "world"), [(7, 2), (7, 3), (7, 8), (50, 4)])
def test_the_state_of_any_rank_even_a_shorter_or_empty_one_resumes_everything(
    tmp_path, total, world, contiguous
):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(total)))
    parent = JSONLDataset(path)
    steps = -(-total // world) - 1  # one short of the longest shard's end
    for saver in range(world):
        delivered, state = [], None
        for rank in range(world):
            loader = parent.shard(world, rank, contiguous).prefetch(2)
            delivered += [r["i"] for r in itertools.islice(iter(loader), steps)]
            if rank == saver:
                state = loader.state_dict()
        rest = []
        for rank in range(2):
            loader = parent.shard(2, rank, contiguous).prefetch(2)
            loader.load_state_dict(state)
            rest += [r["i"] for r in loader]
        assert Counter(delivered) + Counter(rest) == Counter(range(total)), (saver, delivered, rest)


def test_a_resumed_shard_keeps_what_was_done_to_it(parent):
    """select_columns, map and other copies of a shard keep their decoder and transforms on resume."""
    for make in (
        lambda v: v.select_columns(["i"]),
        lambda v: v.map(lambda r: {"i": r["i"] * 100}),
        lambda v: v.with_transform(lambda b: {"i": [x + 1 for x in b["i"]]}),
    ):
        loader = make(parent.shard(2, 0)).prefetch(2)
        first = list(itertools.islice(iter(loader), 3))
        whole = list(make(parent.shard(2, 0)))
        again = make(parent.shard(3, 0)).prefetch(2)  # another layout: the rest, transformed the same way
        again.load_state_dict(loader.state_dict())
        assert first == whole[:3] and all(set(rec) == set(whole[0]) for rec in again)


def test_a_reordered_view_of_batches_is_not_elastic_and_resumes_at_its_layout(parent):
    view = parent.shard(2, 1).batch(3).shuffle(seed=4)
    loader = view.prefetch(2)
    first = [i for b in itertools.islice(iter(loader), 2) for i in b["i"]]
    assert "layout" not in loader.state_dict()
    again = parent.shard(2, 1).batch(3).shuffle(seed=4).prefetch(2)
    again.load_state_dict(loader.state_dict())
    assert first + [i for b in again for i in b["i"]] == [i for b in view for i in b["i"]]


def test_empty_data_and_malformed_layouts(parent, tmp_path):
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    loader = JSONLDataset(empty).shard(2, 0).prefetch()
    again = JSONLDataset(empty).shard(3, 1).prefetch()
    again.load_state_dict(loader.state_dict())
    assert list(again) == []
    _, state = _run_ranks(parent, 2, True, "batches of a shard", 1)
    for bad in ({"batch": ["2", False]}, {"batch": [-2, False]}, {"contiguous": "no"}):
        with pytest.raises(InvalidArgumentError, match="malformed layout"):
            _loader(parent, 2, 0, True, "batches of a shard").load_state_dict(
                {**state, "layout": {**state["layout"], **bad}}
            )


def test_a_mixture_over_another_source_order_is_refused(parent, tmp_path):
    from sjsonl import interleave_datasets

    other = tmp_path / "o.jsonl"
    other.write_text("".join(f'{{"i": {N + i}}}\n' for i in range(20)))
    mix = lambda seed: interleave_datasets([parent.shuffle(seed=seed), JSONLDataset(other)])  # noqa: E731
    _, state = _run_ranks(mix(0), 2, True, "records", 2)
    with pytest.raises(InvalidArgumentError, match="order"):
        _loader(mix(1), 2, 0, True, "records").load_state_dict(state)
