"""Elastic resume: an epoch saved part-way at one world size, continued exactly at another.

Ranks move in lockstep (DDP's collectives make them), so a state saved on *any* rank after it handed
out ``k`` indices says the whole world consumed the first ``k * R`` positions of the pass's order —
``R``-strided from the start, exactly as :func:`~sjsonl.sampling.shard_order` lays a pass out. The pass
itself covered the epoch's order after the ``consumed`` positions earlier layouts had taken (0 for an
ordinary pass). So after the save, the positions ``[consumed + min(k * R, n - consumed), n)`` of the
epoch's order remain, and a new layout splits exactly those as torch splits a whole epoch: padded by
repeating them from their start (``drop_last=False``) or cut to a multiple of the new world size
(``drop_last=True``). Resuming again composes: the new pass records its own ``consumed``. The next epoch
is an ordinary one.

What "exactly" means: every record of the epoch that no rank had handed out is handed out after the resume;
the only duplicates are the usual end-of-pass padding (of the pass saved and of the pass resumed), and with
``drop_last=True`` the only records skipped are the fewer than ``R'`` it cuts from the remainder's end.

Example:
    >>> state = {"epoch": 0, "yielded": 2, "n": 10, "num_replicas": 4, "rank": 0, "shuffle": True,
    ...          "seed": 0, "drop_last": False, "consumed": 0}
    >>> carry_over(state, {"n": 10, "shuffle": True, "seed": 0}, num_replicas=2, drop_last=False,
    ...            current_epoch=0)   # 8 of 10 consumed: start the pass over the last 2 at position 0
    (0, 0, 8)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from .distributed import _bad_value, _is_int, check_state, per_rank
from .maps import IdentityMap, IndexMap, RangeMap

LAYOUT_KEYS = ("num_replicas", "rank", "drop_last")
WORKER_KEYS = ("num_workers", "worker")  # an IterableDataset's state is one DataLoader worker's


def remaining(n: int, consumed: int) -> IndexMap:
    """Positions ``[consumed, n)`` of an epoch's order: what a pass resumed after ``consumed`` covers.

    Example:
        >>> remaining(5, 2).take(np.arange(3)).tolist()
        [2, 3, 4]
    """
    whole = IdentityMap(n)
    return whole if consumed == 0 else RangeMap(whole, consumed, n)


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
    if not _is_int(replicas) or replicas < 1:
        raise _bad_value("num_replicas", replicas, "a positive integer")
    if not _is_int(rank) or not 0 <= rank < replicas:
        raise _bad_value("rank", rank, f"an integer in [0, {replicas - 1}]")
    if not isinstance(drop_last, (bool, np.bool_)):
        raise InvalidArgumentError(
            f"cannot resume: saved state has drop_last={drop_last!r} ({type(drop_last).__name__}); "
            "expected True or False"
        )
    workers, worker = (state[k] for k in WORKER_KEYS) if worker_keys else (1, 0)
    if not _is_int(workers) or workers < 1:
        raise _bad_value("num_workers", workers, "a positive integer")
    if not _is_int(worker) or not 0 <= worker < workers:
        raise _bad_value("worker", worker, f"an integer in [0, {workers - 1}]")
    return int(replicas), int(rank), bool(drop_last), int(workers), int(worker)


def carry_over(
    state: Any,
    dataset: dict[str, Any],
    num_replicas: int,
    drop_last: bool,
    current_epoch: int,
    workers: tuple[int, int] | None = None,
) -> tuple[int, int, int]:
    """``(epoch, start, consumed)`` of the next pass at this layout, from a state saved at any layout.

    ``dataset`` holds what must match (``n``, ``shuffle``, ``seed``): another dataset or seed is refused,
    naming the key. A state saved at this very layout continues its pass at ``start`` (any rank's state
    will do: ranks are in lockstep); at another layout the pass over what remains starts at 0. A state
    saved at the end of its pass gives an empty pass at ``current_epoch`` (the epoch ``set_epoch`` chose).
    ``workers`` (``(num_workers, worker)``, for states that hold one DataLoader worker's pass) is part of
    the layout; a worker's state covers only its own share, so only a state saved without workers (one)
    carries over to another layout.
    """
    if not isinstance(state, dict):
        raise InvalidArgumentError(f"cannot resume: a saved state is a dict, not {type(state).__name__}")
    saved = dict(state)
    n = int(dataset["n"])
    consumed = saved.pop("consumed", 0)  # states saved before elastic resume existed have none
    if not _is_int(consumed) or not 0 <= consumed <= n:
        raise _bad_value("consumed", consumed, f"an integer in [0, {n}]")
    replicas, rank, saved_drop_last, saved_workers, worker = _saved_layout(
        saved, dataset, workers is not None
    )
    share = per_rank(n - consumed, replicas, saved_drop_last)
    length = len(range(worker, share, saved_workers))
    layout = {"num_replicas": replicas, "rank": rank, "drop_last": saved_drop_last}
    if workers is not None:
        layout.update(num_workers=saved_workers, worker=worker)
    epoch, yielded = check_state(saved, length, {**dataset, **layout})
    if yielded >= length:
        return int(current_epoch), 0, n
    if (replicas, saved_drop_last, saved_workers, worker) == (num_replicas, drop_last, *(workers or (1, 0))):
        return epoch, yielded, int(consumed)
    if saved_workers > 1:
        raise InvalidArgumentError(
            f"cannot resume at another layout from the state of DataLoader worker {worker} of "
            f"{saved_workers}: it covers that worker's share only (save without workers, or resume with "
            f"num_replicas={replicas}, drop_last={saved_drop_last} and {saved_workers} workers)"
        )
    return epoch, 0, int(consumed) + min(yielded * replicas, n - int(consumed))
