"""Mixtures: 🤗's ``interleave_datasets`` and ``concatenate_datasets`` over sjsonl datasets, as
random-access views — nothing is copied and nothing of the mixture's length is built.

``interleave_datasets([web, code, chat], probabilities=[0.7, 0.2, 0.1], seed=0)`` gives a dataset whose
record ``t`` is the next record of the source that draw ``t`` picks (:mod:`sjsonl.sampling.schedule`):
every prefix holds each source within about two records of its share, the same seed gives the same
sequence in any process, and ``ds[t]`` costs two array lookups plus the source's own read. The result
has the usual views (``shuffle``, ``shard``, ``select``, ``repeat``, ``batch``, ``prefetch``) and works
with :mod:`sjsonl.torch`'s sampler and iterable dataset, ``state_dict`` resume included.

Semantics, as 🤗's (``datasets.interleave_datasets``):

- ``probabilities=None``: a round robin, one record of each source in turn, in whole rounds —
  ``first_exhausted`` stops after ``K × (shortest length)`` records, ``all_exhausted`` after
  ``K × (longest length)``, shorter sources starting over. Record for record the same as 🤗.
- with ``probabilities``: ``first_exhausted`` ends with the draw that takes the last record of the first
  source to run out; ``all_exhausted`` ends with the draw that completes the last source's first pass
  (sources that ran out start over). Each source is read in its own order.

Differences from 🤗, on purpose: draws follow the stride schedule instead of independent random
choices (so proportions do not drift and any draw is computable without the ones before it), and
``seed=None`` is a fixed schedule rather than a fresh random one; ``all_exhausted_without_replacement``
(🤗 ≥ 4) is not offered. As in 🤗, a source with probability 0 is never drawn (and is refused under
``all_exhausted``), and an empty source with a probability > 0 is refused.
``reshuffle_each_pass=True`` gives each pass over a source (its own epoch) a fresh exact shuffle keyed
by ``(seed, source, pass)`` — upsampled sources then repeat in a new order.
Records stay as in their files unless ``fill_missing=True`` (🤗 aligns every source to the union of
columns, ``None`` where missing); ``concatenate_datasets`` does not compare features (records are
schema-free JSON) and supports ``axis=0`` only.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> d = tempfile.mkdtemp()
    >>> def jsonl(name, values):
    ...     path = os.path.join(d, name)
    ...     _ = open(path, "w").write("".join(f"{v}\\n" for v in values))
    ...     return JSONLDataset(path)
    >>> a, b = jsonl("a.jsonl", [0, 1, 2]), jsonl("b.jsonl", [10, 11, 12, 13, 14])
    >>> interleave_datasets([a, b])[:], concatenate_datasets([a, b])[2:5]
    ([0, 10, 1, 11, 2, 12], [2, 10, 11])
    >>> interleave_datasets([a, b], stopping_strategy="all_exhausted")[:]
    [0, 10, 1, 11, 2, 12, 0, 13, 1, 14]
    >>> m = interleave_datasets([a, b], probabilities=[0.25, 0.75], seed=1)
    >>> m[:], m.source_of(3), m.locate(3) == (b.locate(2)[0], 3)
    ([0, 10, 11, 12, 1, 13, 14], (1, 2), True)
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from sjsonl.data.packing.packable import Packable
from sjsonl.data.transforms.export import iter_batches
from sjsonl.data.views import Views, positions_of, read_positions
from sjsonl.errors import ArgumentTypeError, InvalidArgumentError, out_of_range
from sjsonl.sampling.maps import IndexMap
from sjsonl.sampling.permutation import Permutation
from sjsonl.sampling.schedule import InterleaveSchedule

STOPPING_STRATEGIES = ("first_exhausted", "all_exhausted")
_BLOCK = 8192


class _Concatenation:
    """Position → (source, index) for sources laid end to end."""

    def __init__(self, lengths: Sequence[int]) -> None:
        self.bounds = np.cumsum([0, *lengths], dtype=np.int64)

    def route(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = np.searchsorted(self.bounds, positions, side="right") - 1
        return k, positions - self.bounds[k]

    def route_one(self, position: int) -> tuple[int, int]:
        k = int(np.searchsorted(self.bounds, position, side="right")) - 1
        return k, position - int(self.bounds[k])


class MixtureDataset(Views, Packable):
    """Records drawn from several datasets: made by :func:`interleave_datasets` and
    :func:`concatenate_datasets` (see the module for the semantics).

    ``ds[t]``, slices and index lists read the sources' records in place; ``locate(t)`` says which
    source and which of its records draw ``t`` is. Sources may be any sjsonl dataset, view or mixture,
    or any sized sequence.
    """

    def __init__(
        self,
        sources: Sequence[Any],
        router: InterleaveSchedule | _Concatenation,
        length: int,
        *,
        reshuffle_seed: int | None = None,
        fill_missing: bool = False,
    ) -> None:
        self.sources = list(sources)
        self._columns = _all_columns(self.sources) if fill_missing else None
        self._sizes = np.array([len(s) for s in self.sources], dtype=np.int64)
        self._router, self._len, self._reshuffle_seed = router, int(length), reshuffle_seed
        self._order: IndexMap | None = None

    def __repr__(self) -> str:
        kind = "interleave" if isinstance(self._router, InterleaveSchedule) else "concatenation"
        return f"MixtureDataset({kind} of {len(self.sources)} sources, records={self._len})"

    @property
    def num_rows(self) -> int:
        """🤗 ``num_rows``: ``len(ds)``."""
        return self._len

    @property
    def column_names(self) -> list[str]:
        """The union of the sources' columns, in order of first appearance."""
        return list(self._columns if self._columns is not None else _all_columns(self.sources))

    # ----------------------------------------------------------------- routing
    def _route(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of this view → (source, record index in that source)."""
        base = positions if self._order is None else self._order.take(positions)
        k, j = self._router.route(np.asarray(base, dtype=np.int64))
        sizes = self._sizes[k]
        passes, j = np.divmod(j, np.maximum(sizes, 1))  # sources that ran out start over
        if self._reshuffle_seed is not None:  # each (source, pass) group through its own permutation
            groups, which = np.unique(np.stack([k, passes]), axis=1, return_inverse=True)
            order = np.argsort(which.ravel(), kind="stable")
            ends = np.cumsum(np.bincount(which.ravel(), minlength=groups.shape[1]))
            for g, (src, p) in enumerate(groups.T.tolist()):
                at = order[(ends[g - 1] if g else 0) : ends[g]]
                perm = Permutation(int(self._sizes[src]), seed=self._reshuffle_seed * 1009 + src, epoch=p)
                j[at] = perm.take(j[at])
        return k, j

    def _route_one(self, i: int) -> tuple[int, int]:
        k, j = self._router.route_one(i if self._order is None else self._order[i])
        p, j = divmod(j, max(1, int(self._sizes[k])))
        if self._reshuffle_seed is not None:
            j = Permutation(int(self._sizes[k]), seed=self._reshuffle_seed * 1009 + k, epoch=p)[j]
        return k, j

    def _order_signature(self) -> int:
        """As a view's, plus where sampled records come from and each source's own order (two mixtures of
        the same length over other sources, seeds or weights differ)."""
        n = self._len
        sample = np.unique(np.linspace(0, n - 1, 17).astype(np.int64)).tolist() if n else []
        routes = [self.source_of(i) for i in sample]
        sources = [getattr(s, "_order_signature", lambda s=s: len(s))() for s in self.sources]
        return zlib.crc32(repr((super()._order_signature(), routes, sources)).encode())

    def source_of(self, i: int) -> tuple[int, int]:
        """``(source, record)`` of record ``i``: which source it comes from and its index there.

        Example:
            >>> concatenate_datasets([[1, 2], [3]]).source_of(2)
            (1, 0)
        """
        return self._route_one(self._check(i))

    def locate(self, i: int) -> tuple[str, int]:
        """``(file, 1-based line)`` of record ``i``, as ``JSONLDataset.locate`` gives it — the same structure
        on every sjsonl dataset. A source that is not a file (a list) has no place to give:
        :meth:`source_of` says which source and index instead."""
        k, j = self.source_of(i)
        locate = getattr(self.sources[k], "locate", None)
        if locate is None:
            raise InvalidArgumentError(
                f"record {i} comes from source {k}, a {type(self.sources[k]).__name__} with no file: "
                "use source_of(i) for (source, index)"
            )
        return locate(j)  # type: ignore[no-any-return]

    def _check(self, i: int | np.integer) -> int:
        n = self._len
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise ArgumentTypeError(f"record indices must be integers, not {i!r}")
        j = int(i) + (n if i < 0 else 0)
        if not 0 <= j < n:
            raise out_of_range(int(i), n, "this mixture")
        return j

    # ----------------------------------------------------------------- access
    def _records_at_positions(self, positions: np.ndarray) -> list[Any]:
        k, j = self._route(positions)
        out: list[Any] = [None] * len(k)
        for src in np.unique(k).tolist():
            at = np.flatnonzero(k == src)
            for pos, rec in zip(at.tolist(), read_positions(self.sources[src], j[at])):
                out[pos] = rec
        if self._columns is not None:  # 🤗's row shape: every column of every source
            out = [{**self._columns, **r} if isinstance(r, dict) else r for r in out]
        return out

    def __getitem__(self, key: int | np.integer | slice | Sequence[int] | np.ndarray) -> Any:
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            k, j = self._route_one(self._check(key))
            rec = self.sources[k][j]
            return rec if self._columns is None or not isinstance(rec, dict) else {**self._columns, **rec}
        return self._records_at_positions(positions_of(key, self._len))  # type: ignore[arg-type]

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """A batch of records in one vectorised lookup (PyTorch's DataLoader calls this per batch)."""
        return self[indices]

    def iter_positions(self, positions: np.ndarray) -> Iterator[Any]:
        """The records at ``positions``, read a block at a time (used by :mod:`sjsonl.torch`)."""
        for lo in range(0, len(positions), _BLOCK):
            yield from self._records_at_positions(positions[lo : lo + _BLOCK])

    def __iter__(self) -> Iterator[Any]:
        sequential = all(hasattr(s, "_records_at_positions") for s in self.sources)  # sjsonl datasets
        if sequential and self._order is None and self._reshuffle_seed is None and self._columns is None:
            yield from self._iter_sources()
            return
        for lo in range(0, self._len, _BLOCK):
            yield from self._records_at_positions(np.arange(lo, min(self._len, lo + _BLOCK), dtype=np.int64))

    def _iter_sources(self) -> Iterator[Any]:
        """In draw order each source is read forward (starting over when it runs out), so one sequential
        iterator per source replaces a random read per record."""
        readers = [iter(s) for s in self.sources]
        for lo in range(0, self._len, _BLOCK):
            ks, _ = self._router.route(np.arange(lo, min(self._len, lo + _BLOCK), dtype=np.int64))
            for k in ks.tolist():
                try:
                    yield next(readers[k])
                except StopIteration:
                    readers[k] = iter(self.sources[k])
                    yield next(readers[k])

    def iter(self, batch_size: int, drop_last_batch: bool = False) -> Iterator[dict[str, list]]:
        """🤗 ``iter``: batches as dicts of lists."""
        return iter_batches(self, batch_size, drop_last_batch)


def _all_columns(sources: list[Any]) -> dict[str, None]:
    columns: dict[str, None] = {}
    for s in sources:
        names = getattr(s, "column_names", None)
        if names is None:  # a plain sequence: one pass over its records
            names = [k for r in s if isinstance(r, dict) for k in r]
        columns.update(dict.fromkeys(names))
    return columns


def interleave_datasets(
    datasets: Sequence[Any],
    probabilities: Sequence[float] | None = None,
    seed: int | None = None,
    info: Any = None,
    split: Any = None,
    stopping_strategy: str = "first_exhausted",
    *,
    reshuffle_each_pass: bool = False,
    fill_missing: bool = False,
) -> MixtureDataset:
    """🤗 ``interleave_datasets`` over sjsonl datasets (or any sized sequences), as a random-access view.

    Args:
        datasets: the sources, each read in its own order (shuffle a source first for a random order).
        probabilities: each source's share of the draws (normalised); ``None`` is a round robin.
        seed: sets the schedule's phases (which source leads); ``None`` is a fixed schedule.
        info, split: accepted for 🤗 compatibility; unused.
        stopping_strategy: ``"first_exhausted"`` or ``"all_exhausted"`` (see :mod:`sjsonl.data.mixture`).
        reshuffle_each_pass: read each pass over a source in a fresh exact shuffle (per-source epochs).
        fill_missing: give every record every source's columns (``None`` where missing) — 🤗's row
            shape, as ``load_dataset(fill_missing=True)``; by default records are as in their files.

    Example:
        >>> m = interleave_datasets([list(range(100)), list(range(100, 400))], probabilities=[0.25, 0.75])
        >>> len(m), sum(r < 100 for r in m[:40])
        (397, 10)
    """
    sources = _sources(datasets, "interleave_datasets")
    if stopping_strategy not in STOPPING_STRATEGIES:
        raise InvalidArgumentError(
            f"{stopping_strategy} is not supported. "
            f"Please enter a valid stopping_strategy: {', '.join(STOPPING_STRATEGIES)}"
        )
    sizes = [len(s) for s in sources]
    oversample = stopping_strategy == "all_exhausted"
    if probabilities is None:
        schedule = InterleaveSchedule([1] * len(sources))
        length = len(sources) * (max(sizes) if oversample else min(sizes))
        drawn = list(range(len(sources)))
    else:
        if len(probabilities) != len(sources):
            raise InvalidArgumentError(
                f"probabilities has {len(probabilities)} entries for {len(sources)} datasets"
            )
        schedule = InterleaveSchedule.from_probabilities(probabilities, seed)
        drawn = [k for k in range(len(sources)) if schedule.weights[k]]
        empty = [k for k in drawn if not sizes[k]]
        if empty:  # 🤗's rule: a source that can be drawn must have records
            raise InvalidArgumentError(f"datasets at indices {empty} are empty but have a probability > 0")
        if oversample and len(drawn) < len(sources):  # 🤗's rule: it could never be exhausted
            never = [k for k in range(len(sources)) if k not in drawn]
            raise InvalidArgumentError(
                f'stopping_strategy="all_exhausted" cannot exhaust datasets {never}: their probability is 0'
            )
        ends = [schedule.position_of(k, sizes[k] - 1) for k in drawn]
        length = (max(ends) if oversample else min(ends)) + 1
    if oversample and not min(sizes):
        raise InvalidArgumentError(
            "all_exhausted cannot start an empty dataset over; remove it from the mixture"
        )
    reshuffle = (0 if seed is None else int(seed)) if reshuffle_each_pass else None
    return MixtureDataset(sources, schedule, length, reshuffle_seed=reshuffle, fill_missing=fill_missing)


def concatenate_datasets(
    dsets: Sequence[Any], info: Any = None, split: Any = None, axis: int = 0, *, fill_missing: bool = False
) -> MixtureDataset:
    """🤗 ``concatenate_datasets``: the records of each dataset in turn, as one random-access view
    (``fill_missing`` as in :func:`interleave_datasets`).

    Example:
        >>> m = concatenate_datasets([["a", "b"], ["c"]])
        >>> len(m), m[-1], list(m.shuffle(seed=0).take(1)) in (["a"], ["b"], ["c"])
        (3, 'c', True)
    """
    if axis != 0:
        raise InvalidArgumentError(
            "sjsonl.concatenate_datasets supports axis=0 only (rows one after another)"
        )
    sources = _sources(dsets, "concatenate_datasets")
    sizes = [len(s) for s in sources]
    return MixtureDataset(sources, _Concatenation(sizes), sum(sizes), fill_missing=fill_missing)


def _sources(datasets: Sequence[Any], name: str) -> list[Any]:
    sources = list(datasets)
    if not sources:
        raise InvalidArgumentError(f"Unable to {name.split('_')[0]} an empty list of datasets.")
    for s in sources:
        if not (hasattr(s, "__len__") and hasattr(s, "__getitem__")) or isinstance(s, (str, bytes, dict)):
            raise ArgumentTypeError(f"{name} needs datasets (sized, indexable), got {type(s).__name__}")
    return sources
