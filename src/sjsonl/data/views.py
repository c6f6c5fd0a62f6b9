"""Views: the order-only operations every sjsonl dataset has — ``shuffle``, ``select``, ``skip``,
``take``, ``shard``, ``repeat`` — plus ``batch`` and ``prefetch``.

A view is the same dataset with an :mod:`index map <sjsonl.sampling.maps>` in front: no record is read
or copied, and a view of a view composes the maps. A class gets them by keeping ``_len`` and ``_order``
(``None`` or an index map) and reading through ``_order``; :func:`read_positions` reads any dataset's
records at some positions.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write("".join(f'{{"i": {i}}}\\n' for i in range(6)))
    >>> ds = JSONLDataset(path)
    >>> [r["i"] for r in ds.skip(1).take(3).repeat(2)]
    [1, 2, 3, 1, 2, 3]
    >>> ds.shard(2, 1)[:], ds.batch(4, drop_last_batch=True)[0]
    ([{'i': 3}, {'i': 4}, {'i': 5}], {'i': [0, 1, 2, 3]})
"""

from __future__ import annotations

import copy
import zlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from sjsonl.data.transforms.export import batch_of
from sjsonl.errors import ArgumentTypeError, InvalidArgumentError, RecordIndexError, out_of_range
from sjsonl.sampling.distributed import PaddedMap, shard_block
from sjsonl.sampling.elastic import shard_rest
from sjsonl.sampling.maps import ArrayMap, ComposedMap, IdentityMap, IndexMap, RangeMap, RangesMap

if TYPE_CHECKING:
    from sjsonl.data.prefetch import Prefetcher

V = TypeVar("V", bound="Views")


class Views:
    """Order-only views (mixed into :class:`~sjsonl.JSONLDataset` and the mixtures)."""

    _len: int
    _order: IndexMap | None
    #: ``(parent, num_shards, index, contiguous)`` on a view made by :meth:`shard`: what an elastic resume
    #: cuts again at another layout (see :meth:`elastic_layout`)
    _shard: tuple[Any, int, int, bool] | None = None

    def _view(self: V, order: IndexMap) -> V:
        """A copy reading through ``order`` (classes with more per-view state extend it)."""
        view = copy.copy(self)
        view._order, view._len = order, len(order)
        view._shard = None
        return view

    def __len__(self) -> int:
        return self._len

    def _base_map(self) -> IndexMap:
        return self._order if self._order is not None else IdentityMap(self._len)

    def shuffle(self: V, seed: int = 0, epoch: int = 0) -> V:
        """A view in an exact pseudo-random order keyed by ``(seed, epoch)``, in O(1) memory.

        The order is a bijection of ``[0, len)`` (see :class:`sjsonl.sampling.Permutation`); the same seed
        and epoch give the same order in any process.
        """
        from sjsonl.sampling.permutation import Permutation

        return self._view(ComposedMap(self._base_map(), Permutation(self._len, seed=seed, epoch=epoch)))

    def block_shuffle(
        self: V, seed: int = 0, epoch: int = 0, *, block_size: int = 256, window: int = 64
    ) -> V:
        """A view in a block-shuffled order for slow storage: blocks of ``block_size`` consecutive records
        in an exact random order, records exactly shuffled within each window of ``window`` blocks, so a
        pass reads sequential runs of ``block_size`` records. O(1) memory; keyed by ``(seed, epoch)``.

        Neighbours in the file stay near each other (within ``block_size·window`` positions, with
        probability ``(block_size-1)/block_size``): see :mod:`sjsonl.sampling.block` for the measured
        quality, and prefer :meth:`shuffle` when the data is on a local disk.

        Example:
            >>> import os, tempfile
            >>> from sjsonl import JSONLDataset
            >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
            >>> _ = open(path, "w").write("".join(f"{i}\\n" for i in range(12)))
            >>> view = JSONLDataset(path).block_shuffle(seed=1, block_size=4, window=2)
            >>> sorted(view) == list(range(12)), len(view)
            (True, 12)
        """
        from sjsonl.sampling.block import BlockShuffle

        order = BlockShuffle(self._len, block_size, window, seed=seed, epoch=epoch)
        return self._view(ComposedMap(self._base_map(), order))

    def readahead(self: V, records: int = 1024) -> V:
        """A copy that hints the kernel about the pages of the next ``records`` records while it iterates
        an order or reads a batch — for data that is not in the page cache (larger than RAM, or just
        cold). The records and their order are exactly those without it; ``records=0`` turns it off.
        Local files only (other storages read as before). See :mod:`sjsonl.data.readahead`.

        Example:
            >>> import os, tempfile
            >>> from sjsonl import JSONLDataset
            >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
            >>> _ = open(path, "w").write("".join(f"{i}\\n" for i in range(10)))
            >>> ds = JSONLDataset(path)
            >>> list(ds.readahead(4).shuffle(seed=2)) == list(ds.shuffle(seed=2))
            True
        """
        from sjsonl.data.readahead import with_readahead

        return with_readahead(self, records)

    def select(self: V, indices: Sequence[int] | np.ndarray) -> V:
        """A view of the records at ``indices`` (positions in this dataset), in that order."""
        sel = ArrayMap(indices)
        if len(sel) and (sel.indices.min() < 0 or sel.indices.max() >= self._len):
            raise RecordIndexError(f"select() indices must lie in [0, {self._len})")
        return self._view(ComposedMap(self._base_map(), sel))

    def skip(self: V, k: int) -> V:
        """A view without the first ``k`` records."""
        return self._view(RangeMap(self._base_map(), max(0, k), self._len))

    def take(self: V, k: int) -> V:
        """A view of the first ``k`` records."""
        return self._view(RangeMap(self._base_map(), 0, max(0, k)))

    def shard(self: V, num_shards: int, index: int, contiguous: bool = True) -> V:
        """Shard ``index`` of ``num_shards``, as 🤗 ``Dataset.shard``: contiguous blocks whose sizes differ
        by at most one (the first ``len % num_shards`` shards get one more), or every ``num_shards``-th
        record from ``index`` when ``contiguous=False`` (a :class:`~sjsonl.JSONLStream`'s only kind).
        """
        if num_shards < 1 or not 0 <= index < num_shards:
            raise InvalidArgumentError(f"shard index {index} must lie in [0, {num_shards})")
        view = self._view(_shard_map(self._base_map(), num_shards, index, contiguous))
        view._shard = (self, int(num_shards), int(index), bool(contiguous))
        return view

    def elastic_layout(self) -> dict[str, Any] | None:
        """How :meth:`shard` cut this view from its parent — what a :class:`~sjsonl.Prefetcher`'s state
        records so that a run at another world size can continue the pass (:meth:`elastic_rest`); ``None``
        for a view not made by ``shard``. ``order`` fingerprints the parent's order (its length, files and
        a sample of its positions), so a state is never carried into another dataset, seed or epoch."""
        if self._shard is None:
            return None
        parent, num_shards, _, contiguous = self._shard
        return {
            "num_shards": num_shards,
            "contiguous": contiguous,
            "total": len(parent),
            "order": parent._order_signature(),
            "batch": None,
        }

    def elastic_rest(
        self, layout: dict[str, Any], segment: list[tuple[int, int]], consumed: int
    ) -> tuple[Any, list]:
        """This shard's items of what a pass saved at ``layout`` has left, and that rest as ranges of the
        parent's positions: ``segment`` is what the saved pass covered and ``consumed`` how many items of
        its shard each rank had taken (ranks move in lockstep)."""
        assert self._shard is not None
        parent, num_shards, index, contiguous = self._shard
        rest = shard_rest(segment, layout["num_shards"], layout["contiguous"], consumed)
        whole = ComposedMap(parent._base_map(), RangesMap(rest))
        # a copy of this very view (its decoder, transforms, read-ahead) reading the rest's share
        return self._view(_shard_map(whole, num_shards, index, contiguous)), rest

    def _order_signature(self) -> int:
        """A fingerprint of this view's order: its length, its files and a sample of its positions."""
        n = self._len
        sample = np.unique(np.linspace(0, n - 1, 17).astype(np.int64)) if n else np.zeros(0, np.int64)
        positions = self._base_map().take(sample).tolist() if n else []
        return zlib.crc32(repr((type(self).__name__, n, positions, getattr(self, "files", None))).encode())

    def repeat(self: V, num_times: int) -> V:
        """🤗 ``Dataset.repeat``: the records ``num_times`` times over, in the same order each time (for a
        fresh order per pass, mix the source with ``interleave_datasets(..., reshuffle_each_pass=True)``)."""
        if isinstance(num_times, bool) or not isinstance(num_times, (int, np.integer)) or num_times < 0:
            raise InvalidArgumentError(f"num_times must be an integer >= 0, got {num_times!r}")
        if not self._len:
            return self._view(RangeMap(self._base_map(), 0, 0))
        return self._view(PaddedMap(self._base_map(), self._len * int(num_times)))

    def batch(self, batch_size: int, drop_last_batch: bool = False) -> BatchedDataset:
        """🤗 ``Dataset.batch``: a random-access dataset whose item ``b`` is records
        ``[b·batch_size, (b+1)·batch_size)`` as a dict of lists (:class:`BatchedDataset`)."""
        return BatchedDataset(self, batch_size, drop_last_batch)

    def prefetch(self, prefetch: int = 8, threads: int | None = None) -> Prefetcher:
        """An ordered, resumable iterator over the items that reads up to ``prefetch`` items ahead on
        ``threads`` background threads (see :mod:`sjsonl.data.prefetch`)."""
        from sjsonl.data.prefetch import Prefetcher

        return Prefetcher(self, prefetch=prefetch, threads=threads)


def _shard_map(base: IndexMap, num_shards: int, index: int, contiguous: bool) -> IndexMap:
    """Shard ``index`` of ``base``'s positions: a contiguous block, or every ``num_shards``-th."""
    if contiguous:
        return RangeMap(base, *shard_block(len(base), num_shards, index))
    return RangeMap(base, index, len(base), num_shards)


def positions_of(key: slice | Sequence[int] | np.ndarray, n: int) -> np.ndarray:
    """A slice or an integer list as non-negative positions in ``[0, n)`` (negatives count from the end).

    Example:
        >>> positions_of(slice(None, None, -2), 5).tolist(), positions_of([-1, 0], 5).tolist()
        ([4, 2, 0], [4, 0])
    """
    if isinstance(key, slice):
        return np.arange(*key.indices(n), dtype=np.int64)
    positions = np.asarray(key)
    if positions.ndim != 1 or (positions.size and positions.dtype.kind not in "iu"):
        raise ArgumentTypeError(f"indices must be integers, slices or integer lists, not {key!r}")
    positions = positions.astype(np.int64)
    bad = (positions < -n) | (positions >= n)
    if bad.any():
        raise out_of_range(int(positions[bad][0]), n, "the dataset")
    return np.where(positions < 0, positions + n, positions)


def read_positions(data: Any, positions: np.ndarray) -> list[Any]:
    """The records of ``data`` at ``positions`` (any order): one vectorised read for sjsonl datasets,
    views and mixtures, ``data[i]`` one by one for any other sized sequence."""
    if hasattr(data, "_records_at_positions"):
        return data._records_at_positions(positions)
    return [data[i] for i in positions.tolist()]


# ---------------------------------------------------------------------------------------- batches
class BatchedDataset(Views):
    """Batches as a dataset: ``ds.batch(n)`` — item ``b`` is records ``[b·n, (b+1)·n)`` as a dict of lists.
    Like 🤗 ``Dataset.batch``, the result is random-access and has the order-only views (``shuffle`` shuffles
    whole batches, ``shard`` splits them across ranks), so a framework-free loop can read, shuffle and resume
    batches exactly as it would records. Each batch is one vectorised read of its records.

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write("".join(f'{{"i": {i}}}\\n' for i in range(5)))
        >>> batches = JSONLDataset(path).batch(2)
        >>> len(batches), batches[-1], [b["i"] for b in batches.shuffle(seed=3)]
        (3, {'i': [4]}, [[4], [0, 1], [2, 3]])

    Consecutive records of ``dataset`` (any sjsonl dataset or view) grouped ``batch_size`` at a time.

    Args:
        dataset: the records.
        batch_size: records per batch (the last batch may be shorter).
        drop_last_batch: leave out a last batch shorter than ``batch_size``.
    """

    def __init__(self, dataset: Any, batch_size: int, drop_last_batch: bool = False) -> None:
        if int(batch_size) < 1:
            raise InvalidArgumentError(f"batch_size must be at least 1, got {batch_size}")
        self.dataset, self.batch_size, self.drop_last_batch = dataset, int(batch_size), bool(drop_last_batch)
        n = len(dataset)
        self._len = n // self.batch_size if drop_last_batch else -(-n // self.batch_size)
        self._order: IndexMap | None = None

    def __repr__(self) -> str:
        return f"BatchedDataset({self.dataset!r}, batch_size={self.batch_size}, batches={self._len})"

    def elastic_layout(self) -> dict[str, Any] | None:
        """As :meth:`Views.elastic_layout`, for batches of a shard (``ds.shard(R, r).batch(b)``: each rank
        batches its own records) as well as for a shard of batches (``ds.batch(b).shard(R, r)``). A view of
        the batches (shuffled, skipped, selected) takes them out of order: not elastic (``None``)."""
        if self._shard is not None:
            return super().elastic_layout()
        if self._order is not None:
            return None
        inner = getattr(self.dataset, "elastic_layout", None)
        layout = inner() if callable(inner) else None
        if layout is not None:
            layout["batch"] = [self.batch_size, self.drop_last_batch]
        return layout

    def elastic_rest(
        self, layout: dict[str, Any], segment: list[tuple[int, int]], consumed: int
    ) -> tuple[Any, list]:
        if self._shard is not None:
            return super().elastic_rest(layout, segment, consumed)
        shard, rest = self.dataset.elastic_rest(layout, segment, consumed)
        return BatchedDataset(shard, self.batch_size, self.drop_last_batch), rest

    def _order_signature(self) -> int:
        inner = getattr(self.dataset, "_order_signature", None)
        return zlib.crc32(
            repr((super()._order_signature(), self.batch_size, inner() if inner else None)).encode()
        )

    def __getitem__(self, b: int | np.integer | slice | Sequence[int] | np.ndarray) -> Any:
        """Batch ``b`` as a dict of lists; slices and integer lists give lists of batches."""
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)):
            return [self[int(i)] for i in positions_of(b, self._len)]  # type: ignore[arg-type]
        i = int(b) + (self._len if b < 0 else 0)
        if not 0 <= i < self._len:
            raise out_of_range(int(b), self._len, "this batched dataset", "batch")
        if self._order is not None:
            i = self._order[i]
        lo = i * self.batch_size
        return batch_of(self.dataset[lo : lo + self.batch_size])

    def __iter__(self) -> Iterator[dict[str, list]]:
        return (self[b] for b in range(self._len))
