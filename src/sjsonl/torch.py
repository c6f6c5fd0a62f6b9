"""PyTorch adapter: a drop-in ``DistributedSampler``, a rank- and worker-sharded ``IterableDataset``, and a
collate function for JSON records. Both samplers resume exactly under torchdata's ``StatefulDataLoader``.

A :class:`~sjsonl.JSONLDataset` is already a map-style dataset: hand it to ``torch.utils.data.DataLoader``
directly (any worker count, ``fork`` or ``spawn``; it pickles by path). Use :class:`DistributedSampler` for
DDP, or :class:`IterableDataset` when you want each rank and worker to read its own share in order.

Orders are exact shuffles in O(1) memory (:class:`~sjsonl.sampling.Permutation`): for ``shuffle=True``,
``seed``/``epoch`` give the same order as ``JSONLDataset.shuffle(seed, epoch)``, split across ranks
exactly as ``torch.utils.data.DistributedSampler`` splits its order (see :mod:`sjsonl.sampling.distributed`).

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> from sjsonl.sample import write_corpus
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> write_corpus(path, n_records=10)
    10
    >>> ds = JSONLDataset(path)
    >>> loader = torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=collate_records,
    ...                                      sampler=DistributedSampler(ds, num_replicas=2, rank=0))
    >>> [len(b["id"]) for b in loader]
    [4, 1]
"""

from __future__ import annotations

import itertools
import numbers
import os
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from sjsonl.errors import InvalidArgumentError, UncheckedStateWarning, require

require("torch", "torch")  # raises MissingDependencyError naming the extra when torch is absent

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.utils.data  # noqa: E402
from torch.utils.data.distributed import DistributedSampler as _TorchDistributedSampler  # noqa: E402

from sjsonl.data.batches_ahead import BatchesAhead  # noqa: E402
from sjsonl.data.dataset import JSONLDataset  # noqa: E402
from sjsonl.sampling.distributed import (  # noqa: E402
    BLOCK,
    Cursor,
    check_count,
    iter_blocks,
    per_rank,
    shard_order,
)
from sjsonl.sampling.elastic import carry_over, merge_worker_states, remaining, taken_after  # noqa: E402
from sjsonl.sampling.permutation import Permutation  # noqa: E402

__all__ = ["DistributedSampler", "IterableDataset", "collate_records", "iterable_state", "sampler_state"]


def _worker_layout() -> tuple[int, int]:
    """(DataLoader workers, this worker); (1, 0) outside a worker."""
    info = torch.utils.data.get_worker_info()
    return (1, 0) if info is None else (int(info.num_workers), int(info.id))


def _epoch_perm(n: int, shuffle: bool, seed: int, epoch: int) -> Permutation | None:
    return Permutation(n, seed=seed, epoch=epoch) if shuffle else None


def _index_blocks(
    positions: Any, start: int, perm: Permutation | None, block: int = BLOCK
) -> Iterator[np.ndarray]:
    """A pass's indices from position ``start`` on, in blocks of ``block``: ``positions`` through ``perm``."""
    blocks = iter_blocks(positions, start, block)
    return blocks if perm is None else map(perm.take, blocks)


class DistributedSampler(_TorchDistributedSampler):
    """``torch.utils.data.DistributedSampler`` in O(1) memory, resumable mid-epoch.

    Same arguments, attributes (``num_samples``, ``total_size``, ``epoch`` …), errors and layout as torch's:
    without ``drop_last`` the order is padded by repeating it from its start until it divides evenly,
    with ``drop_last`` its tail is dropped; rank ``r`` takes ``order[r:total_size:num_replicas]``;
    ``num_replicas``/``rank`` default to the initialised ``torch.distributed`` group. With
    ``shuffle=False`` the indices are identical to torch's; with ``shuffle=True`` the order is
    ``Permutation(len(dataset), seed, epoch)`` (the order of ``JSONLDataset.shuffle(seed, epoch)``)
    instead of ``torch.randperm`` — same structure, different (and never materialised) shuffle.

    ``state_dict()``/``load_state_dict()`` make ``torchdata``'s ``StatefulDataLoader`` resume exactly:
    the state is the current pass's epoch and the number of indices handed out. Loading it makes the next
    ``iter()`` continue that pass (restoring its epoch); a state saved at the end of a pass restores
    nothing but an empty remainder, so the following pass uses the epoch you ``set_epoch``. Calling
    ``set_epoch`` with another epoch after loading discards the pending resume. The resume is elastic: a
    state saved on any rank at world size ``R`` loads at world size ``R'`` (or another ``drop_last``), and
    the new ranks together hand out exactly the records of that epoch the old ones had not
    (:mod:`sjsonl.sampling.elastic` says precisely what that means with padding).

    Example:
        >>> s = DistributedSampler(range(10), num_replicas=3, rank=2, shuffle=False)
        >>> list(s), len(s), s.total_size
        ([2, 5, 8, 1], 4, 12)
        >>> s = DistributedSampler(range(10), num_replicas=3, rank=2, seed=7)
        >>> it = iter(s); first = [next(it), next(it)]; state = s.state_dict()
        >>> s2 = DistributedSampler(range(10), num_replicas=3, rank=2, seed=7); s2.load_state_dict(state)
        >>> first + list(s2) == list(s)
        True
        >>> s4 = DistributedSampler(range(10), num_replicas=4, rank=0, seed=7)   # four ranks, two steps
        >>> it = iter(s4); _ = [next(it), next(it)]; s4.state_dict()["yielded"]
        2
        >>> halves = [DistributedSampler(range(10), num_replicas=2, rank=r, seed=7) for r in (0, 1)]
        >>> for h in halves: h.load_state_dict(s4.state_dict())
        >>> [len(list(h)) for h in halves]   # the 2 of 10 records the 4 ranks had not reached, one each
        [1, 1]
    """

    def __init__(
        self,
        dataset: Any,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        self._cursor = Cursor()  # before super().__init__, which assigns self.epoch
        super().__init__(dataset, num_replicas, rank, shuffle, seed, drop_last)
        self._n = len(dataset)
        if isinstance(dataset, JSONLDataset) and os.environ.get("SJSONL_BATCHES_AHEAD", "1") != "0":
            dataset.batches_ahead = BatchesAhead(self._pass_blocks, _worker_layout)

    def _pass_blocks(self) -> Iterator[np.ndarray]:
        """The next pass's indices in blocks, as :meth:`__iter__` will hand them out (the sampler unchanged:
        a DataLoader worker's copy predicts the batches it will be dealt)."""
        positions = self._pass_positions()
        epoch, start = self._cursor.next_pass(len(positions))
        return _index_blocks(positions, start, _epoch_perm(self._n, self.shuffle, self.seed, epoch))

    @property
    def epoch(self) -> int:
        return self._cursor.epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        self._cursor.set_epoch(value)

    def __len__(self) -> int:
        """Indices the next pass hands out: ``num_samples`` (torch's), or with a resume pending, what is
        left of the resumed pass — so ``len(loader)`` counts the steps the resumed pass will take."""
        pending = self._cursor.pending
        if pending is None:
            return int(self.num_samples)
        return max(0, len(self._pass_positions()) - pending[1])

    def _pass_positions(self) -> Any:
        """This rank's positions in the next pass's order: a whole epoch's, or what a resume left of one."""
        order = remaining(self._n, *self._cursor.next_done)
        return shard_order(order, self.num_replicas, self.rank, self.drop_last)

    def __iter__(self) -> Iterator[int]:
        # Eager on purpose: a resume loaded by load_state_dict belongs to the first iter() after it.
        positions = self._pass_positions()
        start = self._cursor.begin(len(positions), hold=True)
        perm = _epoch_perm(self._n, self.shuffle, self.seed, self._cursor.pass_epoch)
        return self._generate(positions, start, perm)

    def _generate(self, positions: Any, start: int, perm: Permutation | None) -> Iterator[int]:
        cursor = self._cursor
        cursor.release()  # runs at the first next(): this iterator is the one in use
        for block in _index_blocks(positions, start, perm):
            for i in block.tolist():
                cursor.yielded += 1
                yield i

    def _dataset_identity(self) -> dict[str, Any]:
        return {"n": self._n, "shuffle": bool(self.shuffle), "seed": int(self.seed)}

    def state_dict(self) -> dict[str, Any]:
        """``{"epoch", "yielded", "consumed"}`` of the current pass, the dataset and the layout."""
        layout = {"num_replicas": self.num_replicas, "rank": self.rank, "drop_last": bool(self.drop_last)}
        state = self._cursor.state_dict(**self._dataset_identity(), **layout)
        return {**state, **_done(self._cursor)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Make the next ``iter()`` continue the saved epoch — at this layout or another (any world size,
        any rank's state: see :mod:`sjsonl.sampling.elastic`). Another dataset, seed or ``shuffle`` raises
        :class:`~sjsonl.InvalidArgumentError` (a ``ValueError``) naming what differs.

        A torchdata ``StatefulDistributedSampler`` state — ``{"yielded": n}``, or ``{"yielded": n,
        "epoch": e}`` — is taken as this sampler's own configuration, ``n`` indices into its pass (so a
        checkpoint from torchdata's sampler resumes here), with one :class:`~sjsonl.UncheckedStateWarning`:
        such a state records no dataset, seed or layout, so nothing can be checked. Without ``epoch`` the
        resume goes to the next pass whatever epoch ``set_epoch`` gives it, as torchdata's does; with it,
        to epoch ``e`` as a state of this sampler's own. ``n`` past this rank's pass is refused.

        Example:
            >>> import warnings
            >>> s = DistributedSampler(range(10), num_replicas=2, rank=0, shuffle=False)
            >>> with warnings.catch_warnings():
            ...     warnings.simplefilter("ignore")
            ...     s.load_state_dict({"yielded": 3})
            >>> list(s)   # positions 0, 2, 4, 6, 8 of the pass; 3 were handed out
            [6, 8]
        """
        if isinstance(state_dict, dict) and set(state_dict) in ({"yielded"}, {"yielded", "epoch"}):
            self._load_torchdata(state_dict)
            return
        resume = carry_over(
            state_dict, self._dataset_identity(), self.num_replicas, bool(self.drop_last), self._cursor.epoch
        )
        self._cursor.resume_at(*resume)

    def _load_torchdata(self, state: dict[str, Any]) -> None:
        """A state with no identity (torchdata's ``StatefulDistributedSampler``'s): this rank's pass at this
        layout, ``yielded`` in — checked only for its range."""
        length = int(self.num_samples)
        yielded = check_count("yielded", state["yielded"], upper=length)
        epoch = check_count("epoch", state["epoch"]) if "epoch" in state else None
        cursor = self._cursor
        if epoch is None:  # torchdata's: the next pass, at whatever epoch it is given
            cursor.resume_at(cursor.epoch, yielded, follow=True)
        elif yielded < length:  # as a state of this sampler's own
            cursor.resume_at(epoch, yielded)
        else:  # an empty remainder keeps the epoch as set
            cursor.resume_at(cursor.epoch, length)
        into = (
            "the next pass, at the epoch set_epoch gives it"
            if epoch is None
            else f"the pass of epoch {epoch}"
        )
        identity = {**self._dataset_identity(), "num_replicas": self.num_replicas, "rank": self.rank}
        described = ", ".join(f"{k}={v}" for k, v in {**identity, "drop_last": bool(self.drop_last)}.items())
        warnings.warn(
            f"loaded a state with no identity to check ({state!r}, as torchdata's StatefulDistributedSampler "
            f"saves): it is taken as this sampler's own ({described}), {yielded} indices into {into}; "
            "a state from DistributedSampler.state_dict() is checked against the dataset and layout",
            UncheckedStateWarning,
            stacklevel=2,
        )


def _done(cursor: Cursor) -> dict[str, Any]:
    """What earlier layouts took of the current pass's epoch, as a state holds it."""
    return {"consumed": cursor.consumed, **({"skipped": list(cursor.skipped)} if cursor.skipped else {})}


def sampler_state(loader_state: dict[str, Any]) -> dict[str, Any]:
    """The :class:`DistributedSampler` state inside a torchdata ``StatefulDataLoader.state_dict()``.

    ``StatefulDataLoader.load_state_dict`` refuses a state saved with another ``num_workers``; the
    sampler's state does not depend on it (it counts the samples the loader handed out, whatever its
    workers read ahead). For a resume at another world size *and* worker count, load this into the new
    sampler and give the new loader no state::

        sampler = DistributedSampler(ds, num_replicas=new_world, rank=new_rank)
        sampler.load_state_dict(sampler_state(saved_loader_state))
        loader = StatefulDataLoader(ds, sampler=sampler, num_workers=new_workers, ...)

    Example:
        >>> state = {"_sampler_iter_state": {"samples_yielded": 6, "sampler_state": {"epoch": 0}}}
        >>> sampler_state(state)
        {'epoch': 0}
    """
    snapshot = loader_state.get("_snapshot") if isinstance(loader_state, dict) else None
    main = snapshot.get("_main_snapshot") if isinstance(snapshot, dict) else loader_state  # workers, or none
    outer = main.get("_sampler_iter_state") if isinstance(main, dict) else None
    inner = outer.get("sampler_state") if isinstance(outer, dict) else None
    if not isinstance(inner, dict):
        raise InvalidArgumentError(
            "no sampler state in this StatefulDataLoader state: "
            "was its sampler an sjsonl.torch.DistributedSampler?"
        )
    return inner


def iterable_state(loader_state: dict[str, Any]) -> dict[str, Any]:
    """One :class:`IterableDataset` state for a rank, from its torchdata ``StatefulDataLoader.state_dict()``
    (with or without workers), that resumes at any world size and worker count.

    Each DataLoader worker saves only its own share, and workers run ahead of one another by up to a
    batch; this merges them (:func:`~sjsonl.sampling.elastic.merge_worker_states`). Load the result into
    the new layout's dataset and give its new loader no state::

        ds = IterableDataset(data, num_replicas=new_world, rank=new_rank, seed=...)
        ds.load_state_dict(iterable_state(saved_loader_state))
        loader = StatefulDataLoader(ds, num_workers=new_workers, ...)
    """
    snapshot = loader_state.get("_snapshot") if isinstance(loader_state, dict) else None
    if isinstance(snapshot, dict):  # workers: each one's dataset state
        workers = snapshot.get("_worker_snapshots")
        found = workers.values() if isinstance(workers, dict) else []
        states = [w.get("dataset_state") if isinstance(w, dict) else None for w in found]
    else:
        states = [loader_state.get("dataset_state") if isinstance(loader_state, dict) else None]
    if not states or not all(isinstance(s, dict) and "num_workers" in s for s in states):
        raise InvalidArgumentError(
            "no IterableDataset state in this StatefulDataLoader state: was its dataset an "
            "sjsonl.torch.IterableDataset?"
        )
    first: dict[str, Any] = states[0]  # type: ignore[assignment]  # checked just above
    dataset = {k: first.get(k) for k in ("n", "shuffle", "seed")}
    return merge_worker_states(states, dataset)


class IterableDataset(torch.utils.data.IterableDataset):
    """Records of a dataset in a (shuffled) order, split across ranks and DataLoader workers, resumable.

    Args:
        dataset: a :class:`~sjsonl.JSONLDataset` (or view), or any sized sequence.
        shuffle, seed: the order of epoch ``e`` is ``Permutation(len(dataset), seed, e)``, as
            ``dataset.shuffle(seed, e)``; with ``shuffle=False`` the file order.
        drop_last: how a length that does not divide across ranks is evened out — as
            ``DistributedSampler``: ``False`` pads by repeating the order from its start (each rank gets
            ``ceil(n / R)`` records), ``True`` drops the tail (``floor(n / R)``). Either way every rank
            yields the same number of records, so DDP never hangs on a rank that ran out.
        num_replicas, rank: default to the initialised ``torch.distributed`` group, else 1 and 0 (read
            when needed, and fixed when the dataset is pickled to spawned workers).
        block_size: positions mapped through the permutation per step.

    Rank ``r`` takes every ``R``-th record of the evened order from ``r``; DataLoader worker ``w`` of
    ``W`` takes every ``W``-th of those from ``w`` (worker shares differ by at most one; ranks run the
    same worker count, so every rank still yields the same batches). Within a rank nothing repeats except
    the documented padding and nothing is skipped except the dropped tail. ``len()`` is the rank's count.

    ``set_epoch(e)`` selects the next pass's order (with ``persistent_workers=True`` the workers keep the
    epoch they were started with — use non-persistent workers or a fresh loader per epoch).
    ``state_dict()``/``load_state_dict()`` hold the pass's epoch and the records this worker yielded;
    ``StatefulDataLoader`` saves them per worker and restores each worker exactly (same rules as
    :class:`DistributedSampler`).

    Example:
        >>> ds = IterableDataset(list("abcde"), shuffle=False, num_replicas=2, rank=1)
        >>> list(ds), len(ds)
        (['b', 'd', 'a'], 3)
    """

    def __init__(
        self,
        dataset: JSONLDataset | Sequence[Any],
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        num_replicas: int | None = None,
        rank: int | None = None,
        block_size: int = BLOCK,
    ) -> None:
        self.dataset, self.shuffle, self.seed, self.drop_last = dataset, bool(shuffle), int(seed), drop_last
        self.block_size = int(block_size)
        self._n = len(dataset)
        self._replicas, self._rank = num_replicas, rank
        self._cursor = Cursor()
        self._resume_layout: tuple[int, int] | None = None
        if dist.is_available() and dist.is_initialized():
            self._replicas, self._rank = self._world()
        self._world()  # validate early

    # ----------------------------------------------------------------- layout
    def _world(self) -> tuple[int, int]:
        replicas, rank = self._replicas, self._rank
        initialised = dist.is_available() and dist.is_initialized()
        if replicas is None:
            replicas = dist.get_world_size() if initialised else 1
        if rank is None:
            rank = dist.get_rank() if initialised else 0
        if not 0 <= rank < replicas:
            raise InvalidArgumentError(
                f"Invalid rank {rank}, rank should be in the interval [0, {replicas - 1}]"
            )
        return replicas, rank

    def _positions(self, done: tuple[int, tuple[int, ...]] = (0, ())) -> Any:
        replicas, rank = self._world()
        workers, worker = _worker_layout()
        return shard_order(remaining(self._n, *done), replicas, rank, self.drop_last, workers, worker)

    @property
    def epoch(self) -> int:
        return self._cursor.epoch

    def set_epoch(self, epoch: int) -> None:
        """Use epoch ``epoch``'s order from the next pass on (call it on every rank, before iterating)."""
        self._cursor.set_epoch(epoch)

    def __len__(self) -> int:
        """Records this rank's next pass yields (over all its workers): its share of an epoch, or with a
        resume pending, its share of what the epoch has left."""
        replicas, _ = self._world()
        pending = self._cursor.pending
        if pending is None:
            return per_rank(self._n, replicas, self.drop_last)
        done = self._cursor.next_done
        if pending[1]:  # a start inside this rank's share, as a state saved without workers has it
            done = taken_after(self._n, *done, replicas, pending[1])
        return per_rank(len(remaining(self._n, *done)), replicas, self.drop_last)

    # ----------------------------------------------------------------- iteration
    def __iter__(self) -> Iterator[Any]:
        self._rebase_resume()
        positions = self._positions(self._cursor.next_done)
        # Eager on purpose: a resume loaded by load_state_dict belongs to the first iter() after it.
        start = self._cursor.begin(len(positions))
        perm = _epoch_perm(self._n, self.shuffle, self.seed, self._cursor.pass_epoch)
        return self._generate(positions, start, perm)

    def _rebase_resume(self) -> None:
        """A resume loaded in one worker layout (a start inside that share — e.g. loaded in the main
        process, without workers) that runs in another (in a DataLoader worker) continues as the rest
        of the epoch: what the saved start leaves, split anew."""
        cursor, here = self._cursor, _worker_layout()
        pending = cursor.pending
        if pending is None or self._resume_layout in (None, here) or pending[1] == 0:
            return
        epoch, start = pending
        replicas, _ = self._world()
        cursor.resume_at(epoch, 0, *taken_after(self._n, *cursor.next_done, replicas, start))
        self._resume_layout = here

    def _generate(self, positions: Any, start: int, perm: Permutation | None) -> Iterator[Any]:
        cursor = self._cursor
        for rec in self._fetch(_index_blocks(positions, start, perm, self.block_size)):
            cursor.yielded += 1
            yield rec

    def _fetch(self, blocks: Iterator[np.ndarray]) -> Iterator[Any]:
        if hasattr(self.dataset, "iter_position_blocks"):  # sjsonl datasets and views: one vectorised offset
            # lookup per block, records decoded one at a time; a remote object's windows run on across blocks
            return self.dataset.iter_position_blocks(blocks)
        if hasattr(self.dataset, "iter_positions"):  # mixtures, packed sequences
            return itertools.chain.from_iterable(map(self.dataset.iter_positions, blocks))
        return (self.dataset[i] for block in blocks for i in block.tolist())

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """This worker's (or process's) pass: ``{"epoch", "yielded", "consumed"}``, the dataset and the
        layout."""
        replicas, rank = self._world()
        workers, worker = _worker_layout()
        layout = {"num_replicas": replicas, "rank": rank, "num_workers": workers, "worker": worker}
        state = self._cursor.state_dict(
            n=self._n, **layout, shuffle=self.shuffle, seed=self.seed, drop_last=bool(self.drop_last)
        )
        return {**state, **_done(self._cursor)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Make the next ``iter()`` continue the saved pass — at its own layout, or (from a state saved
        without DataLoader workers, or merged by :func:`iterable_state`) at any world size and worker
        count, as :class:`DistributedSampler` does. Loaded here and iterated by DataLoader workers, the
        resume goes to every loader's workers until ``set_epoch`` moves to another epoch: call
        ``set_epoch`` every epoch, as with a sampler. Another dataset or seed, or a worker's state at
        another layout, raises :class:`~sjsonl.InvalidArgumentError` (a ``ValueError``) saying why."""
        dataset = {"n": self._n, "shuffle": self.shuffle, "seed": self.seed}
        replicas, _ = self._world()
        workers = _worker_layout()
        resume = carry_over(state_dict, dataset, replicas, bool(self.drop_last), self._cursor.epoch, workers)
        self._cursor.resume_at(*resume)
        self._resume_layout = workers  # the worker layout the resume's start counts in

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if dist.is_available() and dist.is_initialized():
            # Spawned workers have no process group: pin the rank the parent sees.
            state["_replicas"], state["_rank"] = self._world()
        return state


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _column(values: list[Any]) -> Any:
    if not values:
        return values
    if all(isinstance(v, bool) for v in values):
        return torch.tensor(values, dtype=torch.bool)
    if all(_is_number(v) for v in values):
        if all(isinstance(v, numbers.Integral) for v in values):
            if all(-(1 << 63) <= v < (1 << 63) for v in values):
                return torch.tensor(values, dtype=torch.int64)
            return values  # beyond int64: keep Python ints rather than overflow
        return torch.tensor([float(v) for v in values], dtype=torch.float64)
    return values


def collate_records(batch: Sequence[Any]) -> Any:
    """Collate JSON records into ``{column: values}`` — a ``collate_fn`` that copes with ragged data.

    ``torch.utils.data.default_collate`` fails on JSON records (lists of different lengths, missing keys,
    ``None``). This keeps every column as a list in batch order, except that a column whose values are
    all numbers becomes a tensor: all ``bool`` → ``torch.bool``; all integers → ``int64``; any float
    → ``float64`` (as ``default_collate``). Strings, ``None``, lists and nested objects stay Python
    objects. Columns are the union of the records' keys in first-seen order; a record without a key
    contributes ``None`` (so that column stays a list). A batch of non-dict values (e.g. records that
    are JSON arrays or numbers) is collated as one column: a tensor when all are numbers, else the list.

    Example:
        >>> b = collate_records([{"id": 1, "text": "a", "tags": [1]}, {"id": 2, "text": "b", "tags": [2, 3]}])
        >>> b["id"], b["text"], b["tags"]
        (tensor([1, 2]), ['a', 'b'], [[1], [2, 3]])
        >>> collate_records([{"x": 0.5}, {"x": 1, "y": True}])
        {'x': tensor([0.5000, 1.0000], dtype=torch.float64), 'y': [None, True]}
    """
    batch = list(batch)
    if not all(isinstance(r, dict) for r in batch):
        return _column(batch)
    keys: dict[str, None] = {}
    for rec in batch:
        keys.update(dict.fromkeys(rec))
    return {k: _column([rec.get(k) for rec in batch]) for k in keys}
