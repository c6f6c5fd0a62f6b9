"""Splitting one epoch's order across ranks and workers, and resuming mid-epoch — pure numpy, no torch.

The layout follows ``torch.utils.data.DistributedSampler`` exactly, so sjsonl's sampler is a drop-in:

1. the epoch's order over ``n`` records is the identity or ``Permutation(n, seed, epoch)``;
2. it is made a multiple of ``num_replicas`` long — padded by repeating it from its start
   (``drop_last=False``: every rank gets ``ceil(n / R)``) or cut at the end (``drop_last=True``: every
   rank gets ``floor(n / R)``). Every rank gets the same count, so DDP collectives never wait on a rank
   that ran out of data;
3. rank ``r`` takes every ``R``-th position from ``r``; DataLoader worker ``w`` of ``W`` takes every
   ``W``-th of its rank's positions from ``w`` (worker counts differ by at most one).

Each step is an O(1)-memory :mod:`index map <sjsonl.sampling.maps>`, so a shard of a 10⁹-record
dataset costs a few hundred bytes; :func:`iter_blocks` walks one in numpy blocks.

:class:`Cursor` is the resumable part: how far the current pass got, and what a saved state restores.

Example:
    >>> order = shard_order(10, num_replicas=3, rank=1)   # unshuffled: positions 1, 4, 7, then padding
    >>> len(order), order.take(np.arange(len(order))).tolist()
    (4, [1, 4, 7, 0])
    >>> [b.tolist() for b in iter_blocks(shard_order(10, 3, 1, drop_last=True), start=1, block=1)]
    [[4], [7]]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from sjsonl.errors import InvalidArgumentError
from sjsonl.sampling.maps import IdentityMap, IndexMap, RangeMap
from sjsonl.sampling.permutation import Permutation

BLOCK = 8192


def per_rank(n: int, num_replicas: int, drop_last: bool = False) -> int:
    """Records each rank gets: ``ceil(n / R)`` (padded), or ``floor(n / R)`` with ``drop_last``.

    Example:
        >>> per_rank(10, 3), per_rank(10, 3, drop_last=True), per_rank(0, 2)
        (4, 3, 0)
    """
    if num_replicas < 1:
        raise InvalidArgumentError(f"num_replicas must be >= 1, got {num_replicas}")
    return n // num_replicas if drop_last else -(-n // num_replicas)


def shard_block(n: int, num_shards: int, index: int) -> tuple[int, int]:
    """``[start, stop)`` of contiguous shard ``index`` of ``n`` positions, as 🤗 ``Dataset.shard`` cuts
    them: sizes differ by at most one, the first ``n % num_shards`` shards get one more.

    Example:
        >>> [shard_block(10, 3, k) for k in range(3)]
        [(0, 4), (4, 7), (7, 10)]
    """
    div, mod = divmod(n, num_shards)
    start = div * index + min(index, mod)
    return start, start + div + (index < mod)


class PaddedMap:
    """``base`` repeated from its start to ``size`` positions (or cut to ``size``): position ``p`` →
    ``base[p % len(base)]`` — torch's padding rule, without building the padded list.

    Example:
        >>> PaddedMap(IdentityMap(3), 7).take(np.arange(7)).tolist()
        [0, 1, 2, 0, 1, 2, 0]
    """

    def __init__(self, base: IndexMap, size: int) -> None:
        if size and not len(base):
            raise InvalidArgumentError("cannot pad an empty order")
        self.base, self.n, self._m = base, int(size), len(base)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return self.base[i % self._m]

    def take(self, positions: np.ndarray) -> np.ndarray:
        pos = np.asarray(positions, dtype=np.int64)
        return self.base.take(pos % self._m if self.n > self._m else pos)


def epoch_order(n: int, shuffle: bool = True, seed: int = 0, epoch: int = 0) -> IndexMap:
    """The order of one epoch over ``[0, n)``: a :class:`Permutation` or the identity.

    Example:
        >>> epoch_order(4, shuffle=False).take(np.arange(4)).tolist()
        [0, 1, 2, 3]
    """
    return Permutation(n, seed=seed, epoch=epoch) if shuffle else IdentityMap(n)


def shard_order(
    order: IndexMap | int,
    num_replicas: int = 1,
    rank: int = 0,
    drop_last: bool = False,
    num_workers: int = 1,
    worker: int = 0,
) -> IndexMap:
    """The part of ``order`` (an index map, or ``n`` for ``range(n)``) that ``rank``/``worker`` visits.

    Same layout as ``torch.utils.data.DistributedSampler`` (padding by wrapping, rank striding), then a
    round-robin split across ``num_workers``. O(1) memory.

    Example:
        >>> [shard_order(5, 2, r).take(np.arange(3)).tolist() for r in (0, 1)]
        [[0, 2, 4], [1, 3, 0]]
        >>> [shard_order(5, 2, 0, num_workers=2, worker=w).take(np.arange(2 - w)).tolist() for w in (0, 1)]
        [[0, 4], [2]]
    """
    if isinstance(order, (int, np.integer)):
        order = IdentityMap(int(order))
    if not 0 <= rank < num_replicas:
        raise InvalidArgumentError(
            f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
        )
    if not 0 <= worker < num_workers:
        raise InvalidArgumentError(
            f"Invalid worker {worker}, worker should be in the interval [0, {num_workers - 1}]"
        )
    total = per_rank(len(order), num_replicas, drop_last) * num_replicas
    padded: IndexMap = order if total == len(order) else PaddedMap(order, total)
    mine: IndexMap = padded if num_replicas == 1 else RangeMap(padded, rank, total, num_replicas)
    return mine if num_workers == 1 else RangeMap(mine, worker, len(mine), num_workers)


def iter_blocks(order: IndexMap, start: int = 0, block: int = BLOCK) -> Iterator[np.ndarray]:
    """``order``'s indices from position ``start`` on, as int64 arrays of up to ``block`` values.

    Example:
        >>> [b.tolist() for b in iter_blocks(IdentityMap(5), start=1, block=3)]
        [[1, 2, 3], [4]]
    """
    n = len(order)
    for lo in range(max(0, start), n, block):
        yield order.take(np.arange(lo, min(n, lo + block), dtype=np.int64))


class Cursor:
    """Where a resumable pass stands: its epoch, how many items it has yielded, and a pending resume.

    ``begin(length)`` starts a pass (called eagerly by ``__iter__``); the pass reports each item with
    ``yielded += 1``. ``state_dict()`` records ``(epoch, yielded)`` plus identity fields that must match on
    load. ``load_state_dict`` makes the *next* ``begin`` continue the saved pass:

    - a pass saved part-way restores its epoch and resumes after the last item yielded;
    - a pass saved complete resumes as an empty remainder and leaves the epoch as set, so the pass after it
      uses whatever ``set_epoch`` chose (this is what StatefulDataLoader needs both when it was saved just
      before and just after ``StopIteration``);
    - ``set_epoch`` to a different epoch than the saved one drops the pending resume;
    - a state that is not exactly what ``state_dict`` writes for this layout is refused
      (:func:`check_state`), and the cursor is left as it was.

    Example:
        >>> c = Cursor(); c.begin(5); c.yielded += 2
        0
        >>> s = c.state_dict(n=5); d = Cursor(); d.load_state_dict(s, length=5, n=5); d.begin(5)
        2
    """

    def __init__(self) -> None:
        self.epoch = 0  # the epoch the next pass uses
        self.pass_epoch = 0  # the epoch of the current (or last) pass
        self.yielded = 0
        # what earlier layouts took of this pass's epoch (an elastic resume): the first ``consumed``
        # positions of its order, and the positions in ``skipped`` past them
        self.consumed: int = 0
        self.skipped: tuple[int, ...] = ()
        self._resume: tuple[int, int] | None = None  # (epoch, start) for the next begin()
        self._resume_done: tuple[int, tuple[int, ...]] = (0, ())
        self._held: tuple[int, int] | None = None  # a resume kept for a re-made iterator (begin(hold=True))
        self._follows = False  # the pending resume goes to whatever epoch set_epoch chooses

    @property
    def pending(self) -> tuple[int, int] | None:
        """``(epoch, start)`` of a resume the next pass will make, if one is pending."""
        return self._resume

    @property
    def next_done(self) -> tuple[int, tuple[int, ...]]:
        """``(consumed, skipped)`` of the next pass: nonempty only when it continues an epoch begun in
        another layout."""
        return self._resume_done if self._resume is not None else (0, ())

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)
        if self._resume is not None and self._resume[0] != self.epoch:
            moved = (self.epoch, self._resume[1]) if self._follows else None
            if self._held is self._resume:
                self._held = moved
            self._resume = moved

    def resume_at(
        self, epoch: int, start: int, consumed: int = 0, skipped: tuple[int, ...] = (), follow: bool = False
    ) -> None:
        """Make the next pass the one of ``epoch`` that starts at ``start``, over its order after
        ``consumed`` positions and without ``skipped``. ``follow``: the resume names no epoch of its own
        (a torchdata ``StatefulDistributedSampler`` state), so ``set_epoch`` moves it to the epoch set
        instead of dropping it."""
        self._resume, self._resume_done = (int(epoch), int(start)), (int(consumed), tuple(skipped))
        self._follows = follow

    def begin(self, length: int, hold: bool = False) -> int:
        """Start a pass over ``length`` items; returns the position to start from.

        ``hold=True`` keeps a pending resume (of a pass not saved complete) for another ``begin`` until
        :meth:`release`: a loader that makes an iterator, drops it unstarted and makes another (torch's
        multi-worker DataLoader does) must get the resume in the one it uses."""
        self.consumed, self.skipped = self.next_done
        pending = self._resume
        self.epoch, self.yielded = self.next_pass(length)
        if pending is not None:
            # an empty remainder (a pass saved complete) is not held: torchdata drops the iterator it made
            # for one when its loader was saved finished, and the pass after it must be a fresh one
            hold = hold and pending[1] < length
            self._resume = pending if hold else None
        self._held = pending if hold else None
        self.pass_epoch = self.epoch
        return self.yielded

    def next_pass(self, length: int) -> tuple[int, int]:
        """``(epoch, start)`` of the pass over ``length`` items that :meth:`begin` would start."""
        epoch, start = self._resume if self._resume is not None else (self.epoch, 0)
        return epoch, min(start, length)

    def release(self) -> None:
        """The pass begun with ``hold=True`` has started: the resume it held is used up."""
        if self._held is not None and self._resume is self._held:
            self._resume = None
        self._held = None

    def state_dict(self, **identity: Any) -> dict[str, Any]:
        return {"epoch": self.pass_epoch, "yielded": self.yielded, **identity}

    def load_state_dict(self, state: dict[str, Any], length: int, **identity: Any) -> None:
        epoch, yielded = check_state(state, length, identity)
        if yielded < length:
            self.epoch = epoch
            self.resume_at(epoch, yielded)
        else:
            self.resume_at(self.epoch, length)


def is_int(value: Any) -> bool:
    """An integer as a saved state may hold one: ``bool`` is not (it is to Python), numpy integers (what
    arithmetic on numpy values gives) are.

    Example:
        >>> is_int(3), is_int(np.int64(3)), is_int(True), is_int(3.0)
        (True, True, False, False)
    """
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, np.integer)


def _bad_value(key: str, got: Any, expected: str) -> InvalidArgumentError:
    what = f"{got}, outside the range" if is_int(got) else f"{got!r} ({type(got).__name__})"
    return InvalidArgumentError(f"cannot resume: saved state has {key}={what}; expected {expected}")


def check_count(key: str, value: Any, upper: int | None = None, lower: int = 0) -> int:
    """``value`` of a saved state's ``key`` as an integer in ``[lower, upper]`` (no ``upper``: any from
    ``lower`` on), or a one-line :class:`~sjsonl.errors.InvalidArgumentError` naming the key.

    Example:
        >>> check_count("rank", 2, upper=3)
        2
        >>> check_count("num_replicas", 0, lower=1)
        Traceback (most recent call last):
        ...
        sjsonl.errors.InvalidArgumentError: cannot resume: saved state has num_replicas=0, outside ...
    """
    if not is_int(value) or value < lower or (upper is not None and value > upper):
        if upper is not None:
            expected = f"an integer in [{lower}, {upper}]"
        else:
            expected = "a positive integer" if lower == 1 else "a non-negative integer"
        raise _bad_value(key, value, expected)
    return int(value)


def check_state(state: Any, length: int, identity: dict[str, Any]) -> tuple[int, int]:
    """``(epoch, yielded)`` of a saved state, checked strictly — the one validator every resumable
    object's ``load_state_dict`` uses: a dict with exactly the keys ``epoch``, ``yielded`` and those of
    ``identity`` (the layout it must have been saved in, compared by value and type); ``epoch`` and
    ``yielded`` integers (``bool`` is not one; numpy integers are), ``epoch >= 0`` and ``yielded`` in
    ``[0, length]``. Anything else raises a one-line :class:`~sjsonl.errors.InvalidArgumentError` naming
    the key and what was expected.

    Example:
        >>> check_state({"epoch": 1, "yielded": 3, "n": 10}, 10, {"n": 10})
        (1, 3)
        >>> check_state({"epoch": 1, "yielded": "3", "n": 10}, 10, {"n": 10})
        Traceback (most recent call last):
        ...
        sjsonl.errors.InvalidArgumentError: cannot resume: saved state has yielded='3' (str); expected an ...
    """
    if not isinstance(state, dict):
        raise InvalidArgumentError(f"cannot resume: a saved state is a dict, not {type(state).__name__}")
    expected = ["epoch", "yielded", *identity]
    missing = [k for k in expected if k not in state]
    if missing:
        raise InvalidArgumentError(
            f"cannot resume: saved state has no {missing[0]!r} (expected the keys {', '.join(expected)})"
        )
    unknown = [k for k in state if k not in expected]
    if unknown:
        raise InvalidArgumentError(
            f"cannot resume: saved state has an unknown key {unknown[0]!r} "
            f"(expected only {', '.join(expected)})"
        )
    for key, want in identity.items():
        got = state[key]
        same_kind = (
            isinstance(got, (bool, np.bool_)) if isinstance(want, bool) else not is_int(want) or is_int(got)
        )
        if not same_kind or got != want:
            raise InvalidArgumentError(
                f"cannot resume: saved state has {key}={got!r} but this object has {key}={want!r}"
            )
    epoch, yielded = state["epoch"], state["yielded"]
    return check_count("epoch", epoch), check_count("yielded", yielded, upper=length)
