"""Background prefetch: read the next items on threads while the loop computes — ordered and resumable.

``Prefetcher(items, prefetch=N, threads=T)`` iterates ``items[0], items[1], …`` (any random-access
dataset: records, a :meth:`batch <sjsonl.JSONLDataset.batch>` view, a mixture) with up to ``N`` items
being read ahead on ``T`` threads. Items come out in index order whatever order the threads finish in,
so the sequence is exactly the one without prefetch; an error reading item ``i`` is raised when the loop
reaches item ``i``, after every item before it.

Threads overlap waiting — storage latency (remote objects, network disks, cold page cache) and anything
that releases the GIL — not Python decoding, which holds it. On a storage with 5 ms a read, 8 threads
deliver about 8× the items a second (see the README's prefetch table).

``state_dict()`` is how many items the current pass has yielded; ``load_state_dict()`` makes the next
``iter()`` continue after them (the :class:`~sjsonl.sampling.Cursor` rules). Items read ahead but not
yet yielded are not part of the state: a resume reads them again.

**Elastic.** Over a shard — ``ds.shard(R, r).prefetch()``, ``ds.shard(R, r).batch(b).prefetch()`` or
``ds.batch(b).shard(R, r).prefetch()`` — the state also records how the shard was cut (its ``layout``) and
which part of the parent's positions the pass covers (its ``segment``). Loaded into a prefetcher over a shard
cut another way (another world size, ``contiguous``, or batch size) from the same parent, it continues the
same pass: ranks move in lockstep, so every rank of the saved run had taken as many items as the one saved,
and the new ranks together deliver exactly the rest (:func:`~sjsonl.sampling.elastic.shard_rest`), each
once; the pass after it is an ordinary pass of the new layout. Resuming again composes (the segment
narrows). A pass saved complete leaves nothing, as at the same layout.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write("".join(f'{{"i": {i}}}\\n' for i in range(7)))
    >>> loader = JSONLDataset(path).batch(3).prefetch(4, threads=2)
    >>> it = iter(loader); next(it)
    {'i': [0, 1, 2]}
    >>> state = loader.state_dict()
    >>> resumed = JSONLDataset(path).batch(3).prefetch(4); resumed.load_state_dict(state)
    >>> [b["i"] for b in resumed]
    [[3, 4, 5], [6]]
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from sjsonl.errors import InvalidArgumentError
from sjsonl.sampling.distributed import Cursor, check_count, check_state, is_int, per_rank


class Prefetcher:
    """Ordered iteration over ``items`` with ``prefetch`` items read ahead on ``threads`` threads.

    Args:
        items: anything with ``len()`` and integer ``[i]``.
        prefetch: items in flight at most (≥ 1); also bounds the memory held ahead.
        threads: reader threads (default: ``min(prefetch, 2 × cores)``).
    """

    def __init__(self, items: Any, prefetch: int = 8, threads: int | None = None) -> None:
        if int(prefetch) < 1:
            raise InvalidArgumentError(f"prefetch must be at least 1, got {prefetch}")
        if threads is not None and int(threads) < 1:
            raise InvalidArgumentError(f"threads must be at least 1, got {threads}")
        self.items, self.prefetch = items, int(prefetch)
        self.threads = int(threads) if threads is not None else min(self.prefetch, 2 * (os.cpu_count() or 1))
        self._cursor = Cursor()
        # an elastic resume: (this shard's items of the rest of the saved pass, that rest as ranges of the
        # parent's positions, whether its pass has begun)
        self._segment: tuple[Any, list[tuple[int, int]], bool] | None = None

    def __len__(self) -> int:
        """Items of the pass ``iter()`` makes next (or is making): after an elastic resume, the rest's."""
        return len(self._current())

    def _current(self) -> Any:
        return self._segment[0] if self._segment is not None else self.items

    def __iter__(self) -> Iterator[Any]:
        if self._segment is not None:
            items, rest, begun = self._segment
            self._segment = None if begun else (items, rest, True)  # a resumed pass is used once
        items = self._current()
        n = len(items)
        start = self._cursor.begin(n)  # eager: a loaded state belongs to the first iter() after it
        return self._generate(items, start, n)

    def _generate(self, items: Any, start: int, n: int) -> Iterator[Any]:
        pool = ThreadPoolExecutor(self.threads, thread_name_prefix="sjsonl-prefetch")
        pending: deque[Future] = deque()
        nxt = start
        try:
            while nxt < n and len(pending) < self.prefetch:
                pending.append(pool.submit(items.__getitem__, nxt))
                nxt += 1
            while pending:
                item = pending.popleft().result()
                if nxt < n:
                    pending.append(pool.submit(items.__getitem__, nxt))
                    nxt += 1
                self._cursor.yielded += 1
                yield item
        finally:  # a loop that stops early leaves nothing running behind it
            pool.shutdown(wait=True, cancel_futures=True)

    def state_dict(self) -> dict[str, Any]:
        """``{"epoch", "yielded", "n"}``: how far the current pass got — plus, over a shard, its ``layout``
        and ``segment`` (see the module docstring)."""
        state = self._cursor.state_dict(n=len(self._current()))
        layout = _layout_of(self.items)
        if layout is not None:
            whole = [(0, layout["total"])] if layout["total"] else []
            rest = self._segment[1] if self._segment is not None else whole
            state.update(layout=layout, segment=[list(r) for r in rest])
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue the saved pass on the next ``iter()``: at the same layout, after the items yielded
        (raises if the item count differs); over a shard cut another way from the same parent, over the rest
        of the pass (see the module docstring)."""
        state = dict(state_dict) if isinstance(state_dict, dict) else state_dict  # (check_state refuses)
        saved = state.pop("layout", None) if isinstance(state, dict) else None
        segment = state.pop("segment", None) if isinstance(state, dict) else None
        mine = _layout_of(self.items)
        if saved is None:  # not over a shard: the same items, continued after those yielded
            self._segment = None
            self._cursor.load_state_dict(state, len(self.items), n=len(self.items))
            return
        if mine is None:
            raise InvalidArgumentError(
                f"cannot resume: the state was saved over a shard ({saved.get('num_shards')} shards); load "
                "it into a prefetcher over a .shard() of the same dataset"
            )
        rest_of = _checked_segment(saved, segment, mine)
        n_saved = check_count("n", state.get("n"))
        epoch, yielded = check_state(state, n_saved, {"n": n_saved})
        # the pass is over when every rank's is — the longest shard's (shards differ by at most one item);
        # then what drop_last_batch cut stays cut. Before that, whatever no rank had delivered is the rest
        if yielded >= _longest_share(saved, sum(b - a for a, b in rest_of)):
            items, rest = [], []
        else:
            consumed = yielded * saved["batch"][0] if saved["batch"] else yielded
            items, rest = self.items.elastic_rest(saved, rest_of, consumed)
        self._segment = (items, rest, False)
        self._cursor.epoch = epoch
        self._cursor.resume_at(epoch, 0)


def _longest_share(layout: dict[str, Any], total: int) -> int:
    """Items of the longest rank's pass over ``total`` positions cut as ``layout`` says."""
    size = per_rank(total, layout["num_shards"])
    if layout["batch"] is None:
        return size
    batch, drop = layout["batch"]
    return per_rank(size, batch, drop)  # batches of it: the same rounding (floor when the last is dropped)


def _layout_of(items: Any) -> dict[str, Any] | None:
    layout = getattr(items, "elastic_layout", None)
    return layout() if callable(layout) else None


def _checked_segment(saved: Any, segment: Any, mine: dict[str, Any]) -> list[tuple[int, int]]:
    """The saved segment as ranges, after checking that the saved layout is one this prefetcher can continue:
    the same parent (length and order), and a well-formed segment inside it."""
    if not isinstance(saved, dict) or set(saved) != set(mine):
        raise InvalidArgumentError(f"cannot resume: malformed layout in the saved state: {saved!r}")
    for key in ("total", "order"):
        if saved[key] != mine[key]:
            raise InvalidArgumentError(
                f"cannot resume: saved state has {key}={saved[key]!r} for the sharded dataset, this one has "
                f"{mine[key]!r} (another dataset, seed, epoch or batch size)"
            )
    check_count("num_shards", saved["num_shards"], lower=1)
    batch = saved["batch"]
    well_formed = isinstance(saved["contiguous"], bool) and (
        batch is None
        or (
            (isinstance(batch, list) and len(batch) == 2 and is_int(batch[0]) and batch[0] >= 1)
            and isinstance(batch[1], bool)
        )
    )
    if not well_formed:
        raise InvalidArgumentError(f"cannot resume: malformed layout in the saved state: {saved!r}")
    if not isinstance(segment, list) or not all(
        isinstance(r, list)
        and len(r) == 2
        and all(is_int(x) for x in r)
        and 0 <= r[0] < r[1] <= saved["total"]
        for r in segment
    ):
        raise InvalidArgumentError(f"cannot resume: malformed segment in the saved state: {segment!r}")
    return [(int(a), int(b)) for a, b in segment]
