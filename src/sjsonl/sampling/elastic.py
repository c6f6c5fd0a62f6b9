"""Elastic resume: an epoch saved part-way at one layout (world size, DataLoader workers), continued exactly
at another.

Ranks move in lockstep (DDP's collectives make them), so a state saved on *any* rank after it handed out
``k`` indices says the whole world took the first ``k * R`` positions of the pass's order — ``R``-strided
from the start, exactly as :func:`~sjsonl.sampling.shard_order` lays a pass out. What an epoch has left is
then its order without what earlier passes took: the first ``consumed`` positions and the positions in
``skipped`` past them (:func:`remaining`). A new layout splits exactly that as torch splits a whole epoch:
padded by repeating it from its start (``drop_last=False``) or cut to a multiple of the new world size
(``drop_last=True``). Resuming again composes: each pass records its own ``consumed``/``skipped``. The next
epoch is an ordinary one.

DataLoader workers each take every ``W``-th position of their rank's share and run ahead of one another by
up to a batch, so what a rank took is a prefix of its share plus a few positions past it:
:func:`merge_worker_states` turns the states of all ``W`` workers of one rank into one state (``skipped``
holds the few), which then resumes at any layout like a state saved without workers.

What "exactly" means: every record of the epoch that no rank had handed out is handed out after the resume;
the only duplicates are the usual end-of-pass padding (of the pass saved and of the pass resumed), and with
``drop_last=True`` the only records skipped are the fewer than ``R'`` it cuts from the remainder's end.

Example:
    >>> state = {"epoch": 0, "yielded": 2, "n": 10, "num_replicas": 4, "rank": 0, "shuffle": True,
    ...          "seed": 0, "drop_last": False, "consumed": 0}
    >>> carry_over(state, {"n": 10, "shuffle": True, "seed": 0}, num_replicas=2, drop_last=False,
    ...            current_epoch=0)   # 8 of 10 consumed: start the pass over the last 2 at position 0
    (0, 0, 8, ())
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np

from sjsonl.errors import InvalidArgumentError
from sjsonl.sampling.distributed import check_count, check_state, is_int, per_rank, shard_block
from sjsonl.sampling.maps import IdentityMap, IndexMap, RangeMap, SkipMap

LAYOUT_KEYS = ("num_replicas", "rank", "drop_last")
WORKER_KEYS = ("num_workers", "worker")  # an IterableDataset's state is one DataLoader worker's
Resume = tuple[int, int, int, tuple[int, ...]]  # (epoch, start, consumed, skipped) of the next pass


def remaining(n: int, consumed: int, skipped: tuple[int, ...] = ()) -> IndexMap:
    """Positions ``[consumed, n)`` of an epoch's order without ``skipped`` (all ``>= consumed``): what a
    pass resumed after earlier layouts covers.

    Example:
        >>> remaining(5, 2).take(np.arange(3)).tolist(), remaining(6, 1, (3,)).take(np.arange(4)).tolist()
        ([2, 3, 4], [1, 2, 4, 5])
    """
    if skipped:
        return RangeMap(SkipMap(n, skipped), consumed, n - len(skipped))
    whole = IdentityMap(n)
    return whole if consumed == 0 else RangeMap(whole, consumed, n)


def taken_after(
    n: int,
    consumed: int,
    skipped: tuple[int, ...],
    num_replicas: int,
    prefix: int,
    extras: tuple[int, ...] = (),
) -> tuple[int, tuple[int, ...]]:
    """``(consumed, skipped)`` once every rank of a pass over ``remaining(n, consumed, skipped)`` on
    ``num_replicas`` ranks took positions ``[0, prefix)`` of its share and the share positions ``extras``.

    Example:
        >>> taken_after(10, 0, (), 4, 2)            # 2 each on 4 ranks: the first 8
        (8, ())
        >>> taken_after(10, 0, (), 2, 1, (2,))      # 0 and 2 of each share: positions 0, 1, 4, 5
        (2, (4, 5))
    """
    order = remaining(n, consumed, skipped)
    m = len(order)
    through = min(prefix * num_replicas, m)
    if through >= m:
        return n, ()
    beyond = [r + i * num_replicas for i in extras for r in range(num_replicas)]
    picked = np.array(sorted(p for p in beyond if through <= p < m), dtype=np.int64)
    first = int(order[through])
    taken = sorted({x for x in skipped if x >= first} | set(order.take(picked).tolist()))
    k = 0
    while k < len(taken) and taken[k] == first:  # positions taken right after the prefix extend it
        first, k = first + 1, k + 1
    return (n, ()) if first >= n else (first, tuple(int(x) for x in taken[k:]))


def _saved_done(saved: dict[str, Any], n: int) -> tuple[int, tuple[int, ...]]:
    """The ``consumed`` and ``skipped`` a state holds (states from before elastic resume have neither)."""
    consumed = check_count("consumed", saved.pop("consumed", 0), upper=n)
    skipped = saved.pop("skipped", [])
    ok = isinstance(skipped, (list, tuple)) and all(is_int(x) and consumed < x < n for x in skipped)
    if not ok or any(b <= a for a, b in pairwise(skipped)):
        raise InvalidArgumentError(
            f"cannot resume: saved state has skipped={skipped!r}; expected increasing integers in "
            f"({consumed}, {n})"
        )
    return int(consumed), tuple(int(x) for x in skipped)


def _saved_layout(
    state: dict[str, Any], dataset: dict[str, Any], worker_keys: bool
) -> tuple[int, int, bool, int, int]:
    keys = LAYOUT_KEYS + (WORKER_KEYS if worker_keys else ())
    expected = ["epoch", "yielded", *dataset, *keys]
    missing = [k for k in expected if k not in state]
    if missing:
        raise InvalidArgumentError(
            f"cannot resume: saved state has no {missing[0]!r} (expected the keys {', '.join(expected)})"
        )
    replicas, rank, drop_last = (state[k] for k in LAYOUT_KEYS)
    replicas = check_count("num_replicas", replicas, lower=1)
    rank = check_count("rank", rank, upper=replicas - 1)
    if not isinstance(drop_last, (bool, np.bool_)):
        raise InvalidArgumentError(
            f"cannot resume: saved state has drop_last={drop_last!r} ({type(drop_last).__name__}); "
            "expected True or False"
        )
    workers, worker = (state[k] for k in WORKER_KEYS) if worker_keys else (1, 0)
    workers = check_count("num_workers", workers, lower=1)
    worker = check_count("worker", worker, upper=workers - 1)
    return replicas, rank, bool(drop_last), workers, worker


def _checked(
    state: Any, dataset: dict[str, Any], worker_keys: bool
) -> tuple[int, int, int, tuple[int, ...], tuple[int, int, bool, int, int], int]:
    """A saved state checked strictly: ``(epoch, yielded, consumed, skipped, layout, length)``."""
    if not isinstance(state, dict):
        raise InvalidArgumentError(f"cannot resume: a saved state is a dict, not {type(state).__name__}")
    saved = dict(state)
    n = check_count("n", dataset.get("n"))
    consumed, skipped = _saved_done(saved, n)
    layout = _saved_layout(saved, dataset, worker_keys)
    replicas, rank, drop_last, workers, worker = layout
    share = per_rank(n - consumed - len(skipped), replicas, drop_last)
    length = len(range(worker, share, workers))
    identity = {"num_replicas": replicas, "rank": rank, "drop_last": drop_last}
    if worker_keys:
        identity.update(num_workers=workers, worker=worker)
    epoch, yielded = check_state(saved, length, {**dataset, **identity})
    return epoch, yielded, consumed, skipped, layout, length


def carry_over(
    state: Any,
    dataset: dict[str, Any],
    num_replicas: int,
    drop_last: bool,
    current_epoch: int,
    workers: tuple[int, int] | None = None,
) -> Resume:
    """``(epoch, start, consumed, skipped)`` of the next pass at this layout, from a state saved at any.

    ``dataset`` holds what must match (``n``, ``shuffle``, ``seed``): another dataset or seed is refused,
    naming the key. A state saved at this very layout continues its pass at ``start`` (any rank's state
    will do: ranks are in lockstep); at another layout the pass over what remains starts at 0. A state
    saved at the end of its pass gives an empty pass at ``current_epoch`` (the epoch ``set_epoch`` chose).
    ``workers`` (``(num_workers, worker)``, for states that hold one DataLoader worker's pass) is part of
    the layout; one worker's state covers only its own share, so at another layout it is refused —
    :func:`merge_worker_states` makes one state of a rank's workers.
    """
    epoch, yielded, consumed, skipped, layout, length = _checked(state, dataset, workers is not None)
    replicas, _, saved_drop_last, saved_workers, worker = layout
    n = int(dataset["n"])
    if yielded >= length:
        return int(current_epoch), 0, n, ()
    if (replicas, saved_drop_last, saved_workers, worker) == (num_replicas, drop_last, *(workers or (1, 0))):
        return epoch, yielded, consumed, skipped
    if saved_workers > 1:
        raise InvalidArgumentError(
            f"cannot resume at another layout from the state of DataLoader worker {worker} of "
            f"{saved_workers}: it covers that worker's share only (merge the states of all the rank's "
            "workers with sjsonl.torch.iterable_state, or resume at the same layout)"
        )
    return (epoch, 0, *taken_after(n, consumed, skipped, replicas, yielded))


def merge_worker_states(states: list[Any], dataset: dict[str, Any]) -> dict[str, Any]:
    """One state for a rank, from the states of all its DataLoader workers (any order): what the rank took,
    as a pass about to start over the rest at the saved world size with one worker — which resumes at any
    world size and worker count.

    Example:
        >>> lay = {"n": 10, "shuffle": False, "seed": 0, "num_replicas": 1, "rank": 0, "drop_last": False}
        >>> two = [{"epoch": 0, "yielded": y, **lay, "num_workers": 2, "worker": w}
        ...        for w, y in [(0, 2), (1, 1)]]
        >>> merged = merge_worker_states(two, {"n": 10, "shuffle": False, "seed": 0})
        >>> merged["consumed"], merged["skipped"], merged["yielded"]   # worker 0 took 0, 2; 1 took 1
        (3, [], 0)
    """
    if not isinstance(states, (list, tuple)) or not states:
        raise InvalidArgumentError("cannot merge: expected the list of a rank's worker states")
    checked = [_checked(s, dataset, worker_keys=True) for s in states]
    first = checked[0]
    epoch, _, consumed, skipped, (replicas, rank, drop_last, workers, _), _ = first
    for e, _, c, sk, (r, rk, dl, w, _), _ in checked:
        if (e, c, sk, r, rk, dl, w) != (epoch, consumed, skipped, replicas, rank, drop_last, workers):
            raise InvalidArgumentError("cannot merge: the worker states are of different passes or ranks")
    if sorted(layout[4] for *_, layout, _ in checked) != list(range(workers)):
        raise InvalidArgumentError(f"cannot merge: expected one state from each of the {workers} workers")
    n = int(dataset["n"])
    share = per_rank(n - consumed - len(skipped), replicas, drop_last)
    # worker w took share positions w, w + W, … (its first ``yielded``): the rank took all of its share
    # before the first position some worker had not reached, and a few past it
    took = {c[4][4]: c[1] for c in checked}
    prefix = min(min(w + y * workers, share) for w, y in took.items())
    layout = {"num_replicas": replicas, "rank": rank, "drop_last": drop_last, "num_workers": 1, "worker": 0}
    if prefix >= share:  # the whole pass: a state saved at its end
        at_end = {"consumed": consumed, **({"skipped": list(skipped)} if skipped else {})}
        return {"epoch": epoch, "yielded": share, **dataset, **layout, **at_end}
    first_past = {w: max(0, -(-(prefix - w) // workers)) for w in took}  # first j with w + jW > prefix
    extras = tuple(sorted(w + j * workers for w, y in took.items() for j in range(first_past[w], y)))
    done, rest = taken_after(n, consumed, skipped, replicas, prefix, extras)
    return {"epoch": epoch, "yielded": 0, **dataset, **layout, "consumed": done, "skipped": list(rest)}


def shard_rest(
    segment: list[tuple[int, int]], num_shards: int, contiguous: bool, consumed: int
) -> list[tuple[int, int]]:
    """What a pass over ``segment`` (positions of a dataset, as ranges in order) has left when each of
    ``num_shards`` ranks in lockstep took ``consumed`` items of its shard — shards as
    :meth:`JSONLDataset.shard <sjsonl.JSONLDataset.shard>` cuts them: ``contiguous`` blocks whose sizes differ
    by at most one, or every ``num_shards``-th position. The rest comes back as ranges, in the pass's order,
    so that a new layout can shard it again (and a later resume cut it again).

    Example:
        >>> shard_rest([(0, 10)], 3, contiguous=True, consumed=2)   # blocks [0,4) [4,7) [7,10)
        [(2, 4), (6, 7), (9, 10)]
        >>> shard_rest([(0, 10)], 3, contiguous=False, consumed=2)  # rank r took r and r + 3
        [(6, 10)]
    """
    lengths = [b - a for a, b in segment]
    m = sum(lengths)
    if contiguous:
        blocks = (shard_block(m, num_shards, r) for r in range(num_shards))
        left = [(min(start + consumed, stop), stop) for start, stop in blocks]
    else:
        left = [(min(consumed * num_shards, m), m)]
    # positions in the concatenated segment -> ranges of the dataset's positions
    out: list[tuple[int, int]] = []
    offset = 0
    for (a, _end), length in zip(segment, lengths):
        for lo, hi in left:
            lo, hi = max(lo, offset), min(hi, offset + length)
            if hi > lo:
                out.append((a + lo - offset, a + hi - offset))
        offset += length
    return _merged(out)  # in the segment's order: its ranges in turn, each one's pieces in increasing order


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out
