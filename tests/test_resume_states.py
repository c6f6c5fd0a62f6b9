"""Saved resume states are checked strictly by one validator (``sjsonl.sampling.check_state``) in every
resumable object: exact integer types (``bool`` is not one, numpy integers are), ranges, every layout key
present, unknown keys refused — a one-line error naming the key, never a silent wrong resume. Real torch
(CPU) for the torch objects; MindSpore's BatchSource is checked in test_mindspore_batches.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from sjsonl.data.prefetch import Prefetcher
from sjsonl.errors import InvalidArgumentError


def _prefetcher() -> Any:
    return Prefetcher(list(range(20)), prefetch=2)


def _sampler() -> Any:
    from sjsonl.torch import DistributedSampler

    return DistributedSampler(range(40), num_replicas=2, rank=1, seed=3)


def _iterable() -> Any:
    from sjsonl.torch import IterableDataset

    return IterableDataset(list(range(40)), seed=3, num_replicas=2, rank=0)


MAKERS: dict[str, Callable[[], Any]] = {"prefetcher": _prefetcher, "sampler": _sampler, "iterable": _iterable}


def _saved(make: Callable[[], Any], steps: int = 5) -> tuple[dict[str, Any], list[Any]]:
    """A state saved after ``steps`` items of epoch 2, and the items the pass had left."""
    obj = make()
    if hasattr(obj, "set_epoch"):
        obj.set_epoch(2)
    it = iter(obj)
    for _ in range(steps):
        next(it)
    return obj.state_dict(), list(it)


BAD = [
    ("yielded is a string", {"yielded": "5"}, r"yielded='5' \(str\); expected an integer in \[0, "),
    ("yielded is a float", {"yielded": 2.5}, r"yielded=2\.5 \(float\); expected an integer"),
    ("yielded is a bool", {"yielded": True}, r"yielded=True \(bool\); expected an integer"),
    ("yielded past the pass", {"yielded": 10**6}, r"yielded=1000000, outside the range"),
    ("yielded negative", {"yielded": -1}, r"yielded=-1, outside the range"),
    ("epoch negative", {"epoch": -1}, r"epoch=-1, outside the range; expected a non-negative integer"),
    ("epoch a float", {"epoch": 2.0}, r"epoch=2\.0 \(float\)"),
    ("epoch a numpy float", {"epoch": np.float64(2)}, r"epoch=.*\(float64\)"),
    ("an unknown key", {"extra": 1}, r"unknown key 'extra' \(expected only epoch, yielded, n"),
]


@pytest.mark.parametrize("kind", MAKERS)
@pytest.mark.parametrize(("what", "change", "says"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_value_is_refused_naming_the_key(kind: str, what: str, change: dict, says: str) -> None:
    state, _ = _saved(MAKERS[kind])
    fresh = MAKERS[kind]()
    with pytest.raises(InvalidArgumentError, match="^cannot resume: saved state has " + ".*" + says) as err:
        fresh.load_state_dict({**state, **change})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kind", MAKERS)
def test_every_layout_key_must_be_there(kind: str) -> None:
    state, rest = _saved(MAKERS[kind])
    if kind in ("sampler", "iterable"):  # a state saved before elastic resume has no "consumed": 0
        older = MAKERS[kind]()
        older.load_state_dict({k: v for k, v in state.items() if k != "consumed"})
        assert list(older) == rest
        state = {k: v for k, v in state.items() if k != "consumed"}
    for key in state:
        partial = {k: v for k, v in state.items() if k != key}
        with pytest.raises(
            InvalidArgumentError, match=f"saved state has no '{key}' \\(expected the keys epoch"
        ):
            MAKERS[kind]().load_state_dict(partial)


@pytest.mark.parametrize("kind", ["sampler", "iterable"])
def test_a_layout_value_of_another_type_is_refused(kind: str) -> None:
    state, _ = _saved(MAKERS[kind])
    for key, value in [("shuffle", 1), ("n", 40.0), ("seed", True), ("drop_last", 0)]:
        # the samplers resume at another drop_last (elastic), so the saved one is checked as a value
        says = "\\(int\\); expected True or False" if key == "drop_last" else "but this"
        with pytest.raises(InvalidArgumentError, match=f"saved state has {key}={value!r} {says}"):
            MAKERS[kind]().load_state_dict({**state, key: value})


@pytest.mark.parametrize("kind", MAKERS)
@pytest.mark.parametrize("not_a_state", [None, [("epoch", 0)], "epoch=0"])
def test_a_state_that_is_not_a_dict_is_refused(kind: str, not_a_state: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="a saved state is a dict"):
        MAKERS[kind]().load_state_dict(not_a_state)


@pytest.mark.parametrize("kind", MAKERS)
def test_numpy_integers_resume_exactly_like_ints(kind: str) -> None:
    state, rest = _saved(MAKERS[kind])
    as_numpy = {k: np.int64(v) if type(v) is int else v for k, v in state.items()}
    for loaded in (state, as_numpy):
        fresh = MAKERS[kind]()
        fresh.load_state_dict(loaded)
        assert list(fresh) == rest


@pytest.mark.parametrize("kind", MAKERS)
def test_a_refused_state_leaves_the_object_as_it_was(kind: str) -> None:
    state, _ = _saved(MAKERS[kind])
    fresh = MAKERS[kind]()
    untouched = list(MAKERS[kind]())
    with pytest.raises(InvalidArgumentError):
        fresh.load_state_dict({**state, "yielded": "5"})
    assert list(fresh) == untouched
