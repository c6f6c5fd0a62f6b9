"""One resume contract for every object in sjsonl that saves a resume state (issue #34).

Each object enters by one small *maker* in ``MAKERS`` (a function of the corpus and a :class:`Params` that
returns the object plus how to read, save and load it); ``test_every_resumable_class_is_in_the_contract``
scans the package for classes with ``state_dict`` and ``load_state_dict`` and fails for one no maker covers.
For every maker, with hypothesis over corpus size, seed, epoch, rank split and k (where the state is taken:
0, inside, the last item and the end):

- the resumed tail is the uninterrupted tail, element for element; a state saved at the end resumes as the
  maker says (an empty remainder, or the next epoch);
- the state is JSON, survives a round trip, and saving twice without reading gives equal states;
- loading into an object of another epoch or world size does what the docs say (``EPOCH_RULES``,
  ``WORLD_RULES``; elastic: every record of the epoch exactly once, plus only torch's padding);
- a bad state (wrong types, out of range, unknown or missing keys, not a dict) is refused with a one-line
  ``InvalidArgumentError`` naming the key, and leaves the object as it was; numpy integers resume as ints.

Plus a sharding contract: n shards (n not dividing the length, n > length, n = 1), contiguous and
interleaved, every record exactly once — the views, the samplers, MindSpore's batches and the 🤗 iterable
(its own ``shard``, 🤗's ``IterableDataset.shard`` and ``split_dataset_by_node`` read through
``DataLoader(num_workers=2)``).

To add an object: write a maker and append a :class:`Maker` to ``MAKERS`` (see ``_sampler`` — a maker for a
sampler over another view is a few lines).
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import json
import pkgutil
from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sjsonl
from sjsonl import JSONLDataset
from sjsonl.errors import InvalidArgumentError

torch = pytest.importorskip("torch")
datasets = pytest.importorskip("datasets")
pytest.importorskip("torchdata")

from datasets.distributed import split_dataset_by_node  # noqa: E402
from torchdata.stateful_dataloader import StatefulDataLoader  # type: ignore[import-untyped]  # noqa: E402

from sjsonl.data.mixture import interleave_datasets  # noqa: E402
from sjsonl.data.packing import PackStream  # noqa: E402
from sjsonl.data.transforms.iterable import JSONLIterableDataset  # noqa: E402
from sjsonl.mindspore import make_schema  # noqa: E402
from sjsonl.mindspore.batches import BatchSource  # noqa: E402
from sjsonl.torch import DistributedSampler, IterableDataset, collate_records  # noqa: E402

MAX_N = 40

# ---------------------------------------------------------------------------------------------- the makers


@dataclass(frozen=True)
class Params:
    """Where a maker's object stands: its order (seed, epoch) and its place in the world (rank of world)."""

    seed: int = 0
    epoch: int = 0
    world: int = 1
    rank: int = 0
    workers: int = 0  # DataLoader workers (makers that read through a loader)


@dataclass
class Made:
    """A resumable object and how to use it: ``read()`` starts a pass and yields hashable items (record ids,
    or tuples of them for batches); ``save()``/``load(state)`` default to its state_dict/load_state_dict."""

    obj: Any
    read: Callable[[], Iterator[Hashable]]
    save: Callable[[], Any] | None = None
    load: Callable[[Any], None] | None = None

    def state(self) -> Any:
        return self.save() if self.save is not None else self.obj.state_dict()

    def resume(self, state: Any) -> None:
        (self.load or self.obj.load_state_dict)(state)


@dataclass(frozen=True)
class Validation:
    """Where a state keeps its counter and its epoch (key paths), for the checks of a bad state."""

    counter: tuple[str, ...]
    epoch: tuple[str, ...] | None = ("epoch",)


@dataclass(frozen=True)
class Maker:
    name: str
    make: Callable[[JSONLDataset, Params], Made]
    covers: tuple[type, ...]  # the package's resumable classes this maker puts under the contract
    at_end: str = "empty"  # a state saved at a pass's end resumes: "empty" | "next epoch"
    epoch_rule: str = "restores"  # loaded at another epoch: "restores" the saved one | "refused" | "ignored"
    world_rule: str = "elastic"  # loaded at another world size: "elastic" | "refused" | "ignored" | "n/a"
    sharded: bool = True  # takes a rank of a world
    unique: bool = True  # every record of the corpus once per epoch (elastic counts are exact)
    validation: Validation | None = Validation(("yielded",))
    whole_pass_after: bool = True  # after the resumed pass, a whole pass of the epoch
    # a state saved at the end resumes empty at any epoch: torchdata's rule for a loader without workers
    # (with workers each worker's dataset state decides, and 🤗 does not apply one of another epoch)
    end_at_any_epoch: bool = False


def _ids(records: Iterator[Any]) -> Iterator[int]:
    return (r["i"] for r in records)


def _sampler(ds: JSONLDataset, p: Params) -> Made:
    s = DistributedSampler(ds, num_replicas=p.world, rank=p.rank, seed=p.seed)
    s.set_epoch(p.epoch)
    return Made(s, lambda: iter(s))


def _torch_iterable(view: Callable[[JSONLDataset, Params], Any], shuffle: bool = True) -> Callable:
    def make(ds: JSONLDataset, p: Params) -> Made:
        it = IterableDataset(view(ds, p), shuffle=shuffle, seed=p.seed, num_replicas=p.world, rank=p.rank)
        it.set_epoch(p.epoch)
        return Made(it, lambda: _ids(iter(it)))

    return make


def _mixture(ds: JSONLDataset, p: Params) -> Any:
    return interleave_datasets([ds, ds.shuffle(seed=p.seed + 1)], probabilities=[0.3, 0.7], seed=p.seed)


def _prefetcher(view: Callable[[JSONLDataset, Params], Any]) -> Callable:
    def make(ds: JSONLDataset, p: Params) -> Made:
        pf = view(ds, p).shard(p.world, p.rank).prefetch(3, threads=2)
        return Made(pf, lambda: _ids(iter(pf)))

    return make


def _batch_source(ds: JSONLDataset, p: Params) -> Made:
    schema = make_schema(ds)
    at = schema.column_names.index("i")
    src = BatchSource(ds, schema, 3, shuffle=True, seed=p.seed, num_shards=p.world, shard_id=p.rank)
    src.set_epoch(p.epoch)
    return Made(src, lambda: (tuple(b[at].tolist()) for b in src))


def _hf_iterable(ds: JSONLDataset, p: Params) -> Made:
    it = ds.to_iterable_dataset(num_shards=4).shuffle(seed=p.seed)
    if p.world > 1:
        it = it.shard(p.world, p.rank)
    it.set_epoch(p.epoch)
    return Made(it, lambda: _ids(iter(it)))


def _loader(make_dataset: Callable[[JSONLDataset, Params], Any], sampler: bool = False) -> Callable:
    """torchdata's StatefulDataLoader (batches of 2, ``p.workers`` workers) over what ``make_dataset`` gives:
    the loader's state is what is saved and loaded."""

    def make(ds: JSONLDataset, p: Params) -> Made:
        made = make_dataset(ds, p)
        kw: dict[str, Any] = {"batch_size": 2, "num_workers": p.workers, "collate_fn": collate_records}
        if sampler:
            loader = StatefulDataLoader(ds, sampler=made.obj, **kw)
        else:
            loader = StatefulDataLoader(made.obj, **kw)

        def read() -> Iterator[Hashable]:
            for batch in loader:
                yield tuple((batch["i"] if isinstance(batch, dict) else batch).tolist())

        return Made(loader, read)

    return make


def _odd_reversed(ds: JSONLDataset, p: Params) -> Any:
    return ds.select(list(range(len(ds) - 1, -1, -2)) or [0])


def _filtered(ds: JSONLDataset, p: Params) -> Any:
    kept = ds.filter(lambda r: r["i"] % 3 != 1)
    return kept if len(kept) else ds


def _packed(ds: JSONLDataset) -> Any:
    """Packs of 5 token ids from documents of 1-3 ids each (``[i] * (i % 3 + 1)``): every pack distinct."""
    return ds.pack(5, column=lambda r: [r["i"]] * (r["i"] % 3 + 1))


def _packed_sampler(ds: JSONLDataset, p: Params) -> Made:
    return _sampler(_packed(ds), p)  # type: ignore[arg-type]


def _packed_iterable(ds: JSONLDataset, p: Params) -> Made:
    it = IterableDataset(_packed(ds), seed=p.seed, num_replicas=p.world, rank=p.rank)
    it.set_epoch(p.epoch)
    return Made(it, lambda: (tuple(pack["input_ids"]) for pack in it))


def _packed_loader(ds: JSONLDataset, p: Params) -> Made:
    """torchdata's StatefulDataLoader (batches of 2, ``p.workers`` workers) over the packed iterable."""
    it = _packed_iterable(ds, p).obj
    loader = StatefulDataLoader(it, batch_size=2, num_workers=p.workers, collate_fn=_pack_ids)
    return Made(loader, lambda: iter(loader))


def _pack_stream(over_stream: bool) -> Callable:
    """Packs made window by window (4 documents a window), over the dataset or a JSONLStream of its file."""

    def make(ds: JSONLDataset, p: Params) -> Made:
        source = sjsonl.JSONLStream(ds.files[0]) if over_stream else ds
        column = lambda r: [r["i"]] * (r["i"] % 3 + 1)  # noqa: E731
        s = source.pack_stream(5, column=column, window=4, num_shards=p.world, shard_index=p.rank)
        s.set_epoch(p.epoch)
        return Made(s, lambda: (tuple(pack["input_ids"]) for pack in s))

    return make


def _pack_ids(batch: list[dict]) -> tuple:
    return tuple(tuple(pack["input_ids"]) for pack in batch)


MAKERS: list[Maker] = [
    Maker("sampler", _sampler, (DistributedSampler,)),
    Maker("sampler/packed", _packed_sampler, (DistributedSampler,)),
    Maker("torch-iterable/packed", _packed_iterable, (IterableDataset,)),
    Maker("torch-iterable", _torch_iterable(lambda ds, p: ds), (IterableDataset,)),
    Maker(
        "torch-iterable/block_shuffle",
        _torch_iterable(lambda ds, p: ds.block_shuffle(p.seed, block_size=4, window=2), shuffle=False),
        (IterableDataset,),
    ),
    Maker("torch-iterable/select", _torch_iterable(_odd_reversed), (IterableDataset,)),
    Maker("torch-iterable/filter", _torch_iterable(_filtered), (IterableDataset,)),
    Maker("torch-iterable/mixture", _torch_iterable(_mixture), (IterableDataset,), unique=False),
    # a stream's state names its window and shard layout: loaded at another world size it is refused
    Maker("pack-stream", _pack_stream(False), (PackStream,), world_rule="refused"),
    Maker("pack-stream/JSONLStream", _pack_stream(True), (PackStream,), world_rule="refused"),
    Maker(
        "prefetcher",
        _prefetcher(lambda ds, p: ds.shuffle(p.seed, epoch=p.epoch)),
        (sjsonl.Prefetcher,),
        epoch_rule="refused",
    ),
    Maker(
        "prefetcher/mixture",
        _prefetcher(lambda ds, p: _mixture(ds, p).shuffle(p.seed, epoch=p.epoch)),
        (sjsonl.Prefetcher,),
        epoch_rule="refused",
        unique=False,
    ),
    Maker(
        "mindspore-batch-source",
        _batch_source,
        (BatchSource,),
        at_end="next epoch",
        world_rule="refused",  # state_dict is for the same layout; resume_point/resume_from is elastic
    ),
    Maker(
        "hf-iterable",
        _hf_iterable,
        (JSONLIterableDataset,),
        epoch_rule="ignored",  # 🤗's rule: a state of another epoch is not applied
        world_rule="refused",
        validation=Validation(("examples_iterable", "position")),
        whole_pass_after=False,  # 🤗 applies a loaded state to every pass of its epoch
    ),
]

#: Makers read through torchdata's StatefulDataLoader, with 0 and 2 worker processes (few examples each).
LOADER_MAKERS: list[Maker] = [
    Maker("StatefulDataLoader/sampler", _loader(_sampler, sampler=True), (), world_rule="n/a"),
    Maker(
        "StatefulDataLoader/torch-iterable", _loader(_torch_iterable(lambda ds, p: ds)), (), world_rule="n/a"
    ),
    Maker("StatefulDataLoader/packed", _packed_loader, (), world_rule="n/a"),
    Maker(
        "StatefulDataLoader/hf-iterable",
        _loader(_hf_iterable),
        (),
        epoch_rule="ignored",
        world_rule="n/a",
        validation=None,
        whole_pass_after=False,
        end_at_any_epoch=True,
    ),
]
_BY_NAME = {m.name: m for m in MAKERS + LOADER_MAKERS}

# ---------------------------------------------------------------------------------------------- corpora


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Callable[[int], JSONLDataset]:
    """``corpus(n)``: a JSONLDataset of ``n`` records ``{"i": i, "t": ...}`` (a file per size, made once)."""
    root = tmp_path_factory.mktemp("contract")
    made: dict[int, JSONLDataset] = {}

    def get(n: int) -> JSONLDataset:
        if n not in made:
            path = root / f"n{n}.jsonl"
            path.write_text("".join(json.dumps({"i": i, "t": "é" * (i % 4)}) + "\n" for i in range(n)))
            made[n] = JSONLDataset(path)
        return made[n]

    return get


def _examples(n: int) -> settings:
    """``n`` examples in the fast profile (the README's test command), scaled up in the ci profile."""
    return settings(
        max_examples=max(1, n * settings().max_examples // 40),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@st.composite
def cases(draw: st.DrawFn, maker: Maker, max_n: int = MAX_N) -> tuple[int, Params]:
    n = draw(st.integers(1, max_n))
    world = draw(st.integers(1, 4)) if maker.sharded else 1
    return n, Params(
        seed=draw(st.integers(0, 2**31)), epoch=draw(st.integers(0, 3)), world=world,
        rank=draw(st.integers(0, world - 1)),
    )  # fmt: skip


def _k(draw: Callable[..., Any], length: int) -> int:
    """Where a state is taken: 0, the last item, the end, or anywhere between."""
    return draw(st.sampled_from([0, max(0, length - 1), length]) | st.integers(0, length))


def _take(made: Made, k: int, drain: bool) -> tuple[list[Hashable], Iterator[Hashable]]:
    it = made.read()
    head = list(itertools.islice(it, k))
    if drain:  # run the pass to its StopIteration (a state saved after it)
        assert list(it) == []
    return head, it


# ---------------------------------------------------------------------------------------------- the contract


def check_resume(corpus: Callable, maker: Maker, n: int, p: Params, k_of: Callable[[int], int], drain: bool):
    ds = corpus(n)
    full = list(maker.make(ds, p).read())
    k = k_of(len(full))
    saving = maker.make(ds, p)
    head, _ = _take(saving, k, drain and k == len(full))
    assert head == full[:k]
    state = saving.state()
    assert saving.state() == state  # saving twice without reading gives equal states
    as_json = json.loads(json.dumps(state))  # JSON, and it round-trips
    assert as_json == state

    resumed = maker.make(ds, p)
    resumed.resume(as_json)
    rest = list(resumed.read())
    if k < len(full):
        assert head + rest == full, f"k={k}: resumed {rest} after {head}, uninterrupted {full}"
    elif maker.at_end == "empty":
        assert rest == []
    else:  # "next epoch"
        assert rest == list(maker.make(ds, replace(p, epoch=p.epoch + 1)).read())
    if maker.whole_pass_after and maker.at_end == "empty":
        assert list(resumed.read()) == full  # the resume is used once

    # loaded into an object of another epoch
    other = maker.make(ds, replace(p, epoch=p.epoch + 1))
    whole = [list(maker.make(ds, Params(p.seed, e)).read()) for e in (p.epoch, p.epoch + 1)]
    same_order = whole[0] == whole[1]  # (tiny corpora)
    if maker.epoch_rule == "refused" and not same_order:  # the state is for another order
        with pytest.raises(InvalidArgumentError, match=r"^cannot resume"):
            other.resume(as_json)
        return
    try:
        other.resume(as_json)
    except InvalidArgumentError as exc:  # two epochs of a tiny corpus gave the same items by chance: an
        # object that knows its order by seed and epoch may still refuse a state saved for another one
        assert maker.epoch_rule == "refused" and str(exc).startswith("cannot resume"), exc
        return
    got = list(other.read())
    if maker.end_at_any_epoch and k == len(full) and p.workers == 0:
        assert got == []
    elif maker.epoch_rule in ("restores", "refused"):
        assert got == (full[k:] if k < len(full) or maker.at_end == "empty" else rest)
    else:  # "ignored": a whole pass of the object's own epoch
        assert got == list(maker.make(ds, replace(p, epoch=p.epoch + 1)).read())


@pytest.mark.parametrize("maker", MAKERS, ids=lambda m: m.name)
@given(data=st.data())
@_examples(20)
def test_resumed_tail_is_the_uninterrupted_tail(corpus, maker: Maker, data: st.DataObject) -> None:
    n, p = data.draw(cases(maker))
    check_resume(corpus, maker, n, p, lambda length: _k(data.draw, length), data.draw(st.booleans()))


@pytest.mark.parametrize("maker", LOADER_MAKERS, ids=lambda m: m.name)
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize(("n", "where"), [(9, "inside"), (7, "end")])
def test_resume_through_a_stateful_dataloader(corpus, maker: Maker, workers: int, n: int, where: str) -> None:
    """Few fixed cases: worker processes are the expensive part. Batches of 2 over 9 records stopped inside
    (after 2 batches, workers reading ahead), over 7 stopped after the last batch."""
    p = Params(seed=11, epoch=2, workers=workers)
    check_resume(corpus, maker, n, p, lambda length: 2 if where == "inside" else length, False)


# ---------------------------------------------------------------------------------------------- elastic


def _padding(n: int, world: int) -> int:
    return -n % world


@pytest.mark.parametrize("maker", [m for m in MAKERS if m.world_rule != "n/a"], ids=lambda m: m.name)
@given(data=st.data())
@_examples(10)
def test_another_world_size_does_what_the_docs_say(corpus, maker: Maker, data: st.DataObject) -> None:
    n, p = data.draw(cases(maker))
    ds = corpus(n)
    new_world = data.draw(st.integers(1, 4).filter(lambda w: w != p.world))
    ranks = [maker.make(ds, replace(p, rank=r)) for r in range(p.world)]
    length = len(list(maker.make(ds, p).read()))
    k = _k(data.draw, length)
    before: list[Hashable] = []
    for made in ranks:  # ranks move in lockstep: k items each
        before += _take(made, k, False)[0]
    state = json.loads(json.dumps(ranks[p.rank].state()))
    fresh = [maker.make(ds, replace(p, world=new_world, rank=r)) for r in range(new_world)]
    if maker.world_rule == "refused":
        with pytest.raises(InvalidArgumentError, match=r"^cannot resume"):
            fresh[0].resume(state)
        return
    after: list[Hashable] = []
    for made in fresh:
        made.resume(state)
        after += list(made.read())
    epoch = Counter(maker.make(ds, replace(p, world=1, rank=0)).read())
    got = Counter(before + after)
    assert not epoch - got, f"records lost: {epoch - got}"  # every record of the epoch
    extra = sum((got - epoch).values())
    if maker.unique:  # once, plus only torch's padding: the old layout's, if reached, and the rest's
        padded_before = len(before) - len(set(before))
        left = len(epoch) - len(set(before))
        pad_after = _padding(left, new_world) if maker.name.startswith(("sampler", "torch")) else 0
        assert extra == padded_before + pad_after
    else:
        assert extra <= (p.world - 1) + (new_world - 1)  # at most the two layouts' padding


# ---------------------------------------------------------------------------------------------- bad states


def _get(state: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        state = state[key]
    return state


def _with(state: Any, path: tuple[str, ...], value: Any, delete: bool = False) -> Any:
    state = json.loads(json.dumps(state))
    inner = _get(state, path[:-1])
    if delete:
        del inner[path[-1]]
    else:
        inner[path[-1]] = value
    return state


def _bad_states(v: Validation, state: Any) -> Iterator[tuple[str, Any, str]]:
    key = v.counter[-1]
    for what, value, says in [
        ("a string", "1", rf"{key}='1' \(str\)"),
        ("a float", 1.5, rf"{key}=1\.5 \(float\)"),
        ("a bool", True, rf"{key}=True \(bool\)"),
        ("past the pass", 10**6, rf"{key}=1000000, outside the range"),
        ("negative", -1, rf"{key}=-1, outside the range"),
    ]:
        yield f"{key} {what}", _with(state, v.counter, value), says
    if v.epoch is not None:
        yield "epoch negative", _with(state, v.epoch, -1), r"epoch=-1, outside the range"
        yield "epoch a float", _with(state, v.epoch, 2.0), r"epoch=2\.0 \(float\)"
    for path in {v.counter[:-1], (v.epoch or v.counter)[:-1]}:
        yield "an unknown key", _with(state, (*path, "extra"), 1), r"unknown key 'extra'"
    for path in {v.counter, v.epoch or v.counter}:
        yield f"no {path[-1]}", _with(state, path, None, delete=True), rf"has no '{path[-1]}'"
    yield "not a dict", [("epoch", 0)], "a saved state is a dict"


VALIDATED = [m for m in MAKERS if m.validation is not None]


@pytest.mark.parametrize("maker", VALIDATED, ids=lambda m: m.name)
def test_a_bad_state_is_refused_naming_the_key_and_changes_nothing(corpus, maker: Maker) -> None:
    assert maker.validation is not None
    ds, p = corpus(23), Params(seed=3, epoch=2, world=2, rank=1)
    saving = maker.make(ds, p)
    _take(saving, 2, False)
    state = saving.state()
    untouched = list(maker.make(ds, p).read())
    for what, bad, says in _bad_states(maker.validation, state):
        fresh = maker.make(ds, p)
        with pytest.raises(InvalidArgumentError, match=f"^cannot resume: .*{says}") as err:
            fresh.resume(bad)
        assert "\n" not in str(err.value), what
        assert list(fresh.read()) == untouched, f"{what}: a refused state changed the object"


@pytest.mark.parametrize("maker", VALIDATED, ids=lambda m: m.name)
def test_numpy_integers_resume_exactly_like_ints(corpus, maker: Maker) -> None:
    assert maker.validation is not None
    ds, p = corpus(23), Params(seed=3, epoch=2, world=2, rank=1)
    saving = maker.make(ds, p)
    _, rest = _take(saving, 3, False)
    state = saving.state()
    tail = list(rest)
    as_numpy = _with(state, maker.validation.counter, None)
    _get(as_numpy, maker.validation.counter[:-1])[maker.validation.counter[-1]] = np.int64(
        _get(state, maker.validation.counter)
    )
    if maker.validation.epoch is not None:
        _get(as_numpy, maker.validation.epoch[:-1])[maker.validation.epoch[-1]] = np.int64(
            _get(state, maker.validation.epoch)
        )
    fresh = maker.make(ds, p)
    fresh.resume(as_numpy)
    assert list(fresh.read()) == tail


# ---------------------------------------------------------------------------------------------- discovery


def _package_classes() -> set[type]:
    found: set[type] = set()
    for info in pkgutil.walk_packages(sjsonl.__path__, "sjsonl."):
        if info.name.endswith("__main__"):  # (running it is the CLI)
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            saves = callable(getattr(cls, "state_dict", None))
            if cls.__module__ == info.name and saves and callable(getattr(cls, "load_state_dict", None)):
                found.add(cls)
    return found


#: Classes with state_dict/load_state_dict that are parts of a member, not members: each one's state is
#: saved and loaded only through the member named.
PARTS: dict[str, str] = {
    "sjsonl.sampling.distributed.Cursor": "the position inside every member above",
    "sjsonl.data.transforms.iterable.SJSONLExamplesIterable": "🤗's example source of hf-iterable",
}


def test_every_resumable_class_is_in_the_contract() -> None:
    covered = {c for m in MAKERS for c in m.covers}
    names = {f"{c.__module__}.{c.__qualname__}" for c in covered}
    missing = sorted(
        f"{c.__module__}.{c.__qualname__}"
        for c in _package_classes()
        if c not in covered and f"{c.__module__}.{c.__qualname__}" not in PARTS
    )
    assert not missing, f"resumable classes without a maker in tests/test_resume_contract.py: {missing}"
    assert {"sjsonl.torch.DistributedSampler", "sjsonl.torch.IterableDataset"} <= names


# ---------------------------------------------------------------------------------------------- sharding


def _sizes(draw: Callable[..., Any]) -> tuple[int, int]:
    n = draw(st.integers(1, MAX_N))
    shards = draw(st.sampled_from([1, n + draw(st.integers(1, 3))]) | st.integers(2, 7))
    return n, shards


def _views(ds: JSONLDataset, shards: int, contiguous: bool, seed: int) -> list[list[int]]:
    return [list(_ids(iter(ds.shuffle(seed).shard(shards, i, contiguous)))) for i in range(shards)]


def _hf_own_shard(ds: JSONLDataset, shards: int, contiguous: bool, seed: int) -> list[list[int]]:
    it = ds.to_iterable_dataset(num_shards=shards * 2 + 1).shuffle(seed=seed)
    return [list(_ids(it.shard(shards, i, contiguous))) for i in range(shards)]


def _hf_shard_of_sources(ds: JSONLDataset, shards: int, contiguous: bool, seed: int) -> list[list[int]]:
    """🤗's own ``IterableDataset.shard``: it splits the adapter's virtual shards (slices of the order)."""
    it = ds.to_iterable_dataset(num_shards=shards + seed % 5).shuffle(seed=seed)
    if shards > it.n_shards:
        return [list(_ids(it))]  # 🤗 needs n <= num_shards: the one-shard case of the same order
    return [list(_ids(datasets.IterableDataset.shard(it, shards, i, contiguous))) for i in range(shards)]


def _batch_source_shards(ds: JSONLDataset, shards: int, contiguous: bool, seed: int) -> list[list[int]]:
    schema = make_schema(ds)
    at = schema.column_names.index("i")
    out = []
    for i in range(shards):
        src = BatchSource(ds, schema, 4, shuffle=True, seed=seed, num_shards=shards, shard_id=i)
        out.append([x for b in src for x in b[at].tolist()])
    return out


SHARDINGS: dict[str, Callable[[JSONLDataset, int, bool, int], list[list[int]]]] = {
    "views": _views,
    "hf-iterable.shard": _hf_own_shard,
    "datasets.IterableDataset.shard": _hf_shard_of_sources,
    "mindspore-batch-source": _batch_source_shards,
}


@pytest.mark.parametrize("how", SHARDINGS)
@given(data=st.data())
@_examples(15)
def test_every_record_exactly_once_across_shards(corpus, how: str, data: st.DataObject) -> None:
    n, shards = _sizes(data.draw)
    contiguous = data.draw(st.booleans())
    seed = data.draw(st.integers(0, 2**31))
    parts = SHARDINGS[how](corpus(n), shards, contiguous, seed)
    assert sorted(x for part in parts for x in part) == list(range(n))
    if how in ("views", "hf-iterable.shard"):  # record-level shards differ by at most one record
        assert max(map(len, parts)) - min(map(len, parts)) <= 1 or len(parts) == 1


@given(data=st.data())
@_examples(15)
def test_samplers_cover_every_record_once_plus_padding(corpus, data: st.DataObject) -> None:
    n, shards = _sizes(data.draw)
    p = Params(seed=data.draw(st.integers(0, 2**31)), epoch=data.draw(st.integers(0, 3)), world=shards)
    ds = corpus(n)
    for maker in (_BY_NAME["sampler"], _BY_NAME["torch-iterable"]):
        parts = [list(maker.make(ds, replace(p, rank=r)).read()) for r in range(shards)]
        got = Counter(x for part in parts for x in part)
        assert set(got) == set(range(n)) and sum(got.values()) == n + _padding(n, shards)
        assert {len(part) for part in parts} == {-(-n // shards)}


@pytest.mark.parametrize(("n", "shards", "world"), [(23, 4, 2), (23, 6, 4), (5, 8, 2), (7, 1, 1)])
def test_split_dataset_by_node_read_by_dataloader_workers(corpus, n: int, shards: int, world: int) -> None:
    """``split_dataset_by_node`` over ``to_iterable_dataset(num_shards=…)`` (shards split by node when
    they divide, else every world-th example), each node read through ``DataLoader(num_workers=2)``."""
    it = corpus(n).to_iterable_dataset(num_shards=shards).shuffle(seed=n)
    got: list[int] = []
    for rank in range(world):
        node = split_dataset_by_node(it, rank=rank, world_size=world)
        loader = torch.utils.data.DataLoader(node, batch_size=3, num_workers=2, collate_fn=collate_records)
        got += [x for batch in loader for x in batch["i"].tolist()]
    assert sorted(got) == list(range(n))
