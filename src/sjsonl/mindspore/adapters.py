"""Sources for ``mindspore.dataset.GeneratorDataset``, and :func:`to_generator_dataset`.

Two source shapes, as MindSpore knows them:

- :class:`MapSource` (``__getitem__`` + ``__len__``) for random-access data — a
  :class:`~sjsonl.data.dataset.JSONLDataset` (or any view of one), a 🤗 ``Dataset``, a list of records.
  MindSpore then shuffles (a fresh order each epoch, seeded by ``mindspore.dataset.config.set_seed``) and
  spreads ``source[i]`` calls over ``num_parallel_workers`` threads or processes itself. Shards are taken by
  the source — rows ``shard_id``, ``shard_id + num_shards``, … — so they are disjoint and together complete
  (sizes differ by at most one). MindSpore's own sharding pads shards to equal size by repeating rows; ask
  for that with ``pad_shards=True`` (equal step counts on every rank).
- :class:`IterSource` (``__iter__``) for streams — :class:`~sjsonl.data.streaming.JSONLStream`, a 🤗
  ``IterableDataset``, any iterable. MindSpore cannot shuffle or shard these (it ignores ``shuffle`` and
  refuses ``num_shards``), so the source does it: a buffered shuffle (``buffer_size`` records, reseeded
  every epoch) and a round-robin shard (record k goes to shard k mod ``num_shards``; a ``JSONLStream``
  never parses the other shards' records, a 🤗 ``IterableDataset`` is split by
  ``datasets.distributed.split_dataset_by_node``).

Both convert records by a :class:`~sjsonl.mindspore.columns.Schema` (see its table) and pickle small (a
``JSONLDataset`` pickles by path), so ``python_multiprocessing=True`` and ``False`` both work.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"text": "a", "label": 0}\\n{"text": "b", "label": 1}\\n')
    >>> gd = to_generator_dataset(JSONLDataset(path))
    >>> [(str(t), int(y)) for t, y in gd.create_tuple_iterator(output_numpy=True, num_epochs=1)]
    [('a', 0), ('b', 1)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sjsonl.errors import ArgumentTypeError, InvalidArgumentError, require
from sjsonl.mindspore.batches import BatchSource
from sjsonl.mindspore.columns import Schema
from sjsonl.mindspore.context import distributed_defaults
from sjsonl.mindspore.early import EarlySource, EarlyStart, early_source
from sjsonl.mindspore.sources import (
    DEFAULT_INFER_ROWS,
    IterSource,
    Kind,
    MapSource,
    _Empty,
    kind_of,
    make_schema,
    source_for,
)

__all__ = ["IterSource", "MapSource", "make_schema", "make_source", "to_generator_dataset"]


def make_source(
    data: Any,
    *,
    column_names: Sequence[str] | None = None,
    features: Mapping[str, Any] | None = None,
    schema: Schema | None = None,
    infer_rows: int | None = DEFAULT_INFER_ROWS,
    num_shards: int | None = None,
    shard_id: int | None = None,
    batch_size: int | None = None,
    drop_remainder: bool = False,
    kind: Kind | None = None,
    **iter_options: Any,
) -> MapSource | IterSource | BatchSource | EarlySource:
    """The MindSpore source :func:`to_generator_dataset` builds, decided once here: an early-started split
    (:mod:`sjsonl.mindspore.early`) gets an :class:`~sjsonl.mindspore.early.EarlySource`; anything else
    :func:`~sjsonl.mindspore.sources.source_for` — a :class:`MapSource` for random-access data, an
    :class:`IterSource` (also taking ``iter_options``: shuffle, seed, buffer_size) for streams, a
    :class:`~sjsonl.mindspore.batches.BatchSource` of whole batches with ``batch_size``. ``.schema`` tells how
    records are converted; ``kind``: what ``data`` is, when the caller decided it already
    (:func:`~sjsonl.mindspore.sources.kind_of`).

    Example:
        >>> make_source([{"a": 1, "b": "x"}], column_names=["b"]).schema
        Schema(b: str)
    """
    if isinstance(data, Mapping):
        raise ArgumentTypeError("pass one split (a dataset), not a mapping of splits")
    if isinstance(data, EarlyStart):
        return early_source(data, column_names, features, schema, infer_rows, num_shards, shard_id,
                            batch_size, drop_remainder)  # fmt: skip
    return source_for(data, column_names=column_names, features=features, schema=schema,
                      infer_rows=infer_rows, num_shards=num_shards, shard_id=shard_id, batch_size=batch_size,
                      drop_remainder=drop_remainder, kind=kind, **iter_options)  # fmt: skip


def to_generator_dataset(
    ds: Any,
    column_names: Sequence[str] | None = None,
    shuffle: bool = False,
    num_parallel_workers: int = 1,
    num_shards: int | None = None,
    shard_id: int | None = None,
    python_multiprocessing: bool = True,
    *,
    features: Mapping[str, Any] | None = None,
    schema: Schema | None = None,
    infer_rows: int | None = DEFAULT_INFER_ROWS,
    seed: int | None = None,
    buffer_size: int = 1000,
    pad_shards: bool = False,
    batch_size: int | None = None,
    drop_remainder: bool = False,
    resume_from: Mapping[str, Any] | None = None,
    **generator_kwargs: Any,
) -> Any:
    """A ``mindspore.dataset.GeneratorDataset`` over a JSONLDataset, a JSONLStream, a 🤗 ``Dataset`` or
    ``IterableDataset``, or any sequence/iterable of records.

    Args:
        ds: the data.
        column_names: columns to emit, in this order (default: every column of the schema).
        shuffle: shuffle the rows (default False: source order, as 🤗; MindSpore's own default for
            random-access sources is to shuffle). Streams get a ``buffer_size`` buffered shuffle.
        num_parallel_workers, python_multiprocessing: MindSpore's workers (threads when
            ``python_multiprocessing`` is False) calling ``source[i]``; random-access data only.
        num_shards, shard_id: this process's shard: rows ``shard_id``, ``shard_id + num_shards``, … —
            disjoint and complete. Default: from MindSpore's distributed context when
            ``mindspore.communication.init()`` has run (``get_group_size()``, ``get_rank()``), else none.
        features: 🤗 ``Features`` fixing column names and dtypes (a 🤗 dataset's own are used by default).
        schema: a ready :class:`~sjsonl.mindspore.columns.Schema` (skips inference).
        infer_rows: rows to infer the schema from (None: all).
        seed: seed of the buffered shuffle of streams (MindSpore's seed governs random-access shuffles).
        buffer_size: buffer of the shuffle of streams.
        pad_shards: let MindSpore shard random-access data instead: shards of equal size, padded by
            repeating rows, and with ``shuffle`` one global shuffle split between shards each epoch.
        batch_size, drop_remainder: deliver whole batches — each source item is ``batch_size`` records as
            columns (list columns padded, with ``<column>_lengths``), so MindSpore's per-row cost is paid
            once per batch; sjsonl shuffles (exactly, per epoch) and shards at record level
            (:mod:`sjsonl.mindspore.batches`). Random-access data only; do not ``.batch()`` again.
        resume_from: a :meth:`~sjsonl.mindspore.batches.BatchSource.resume_point` saved at any
            ``num_shards``/``shard_id``/``batch_size``: the dataset delivers the rest of that epoch (the
            records no shard had taken), split across this layout — iterate it for that one epoch, then
            make the next epochs' dataset as usual (MindSpore fixes a dataset's size when it is made).
            With ``batch_size`` only.
        generator_kwargs: passed on to ``GeneratorDataset`` (e.g. ``num_samples``, ``sampler``).

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write('{"q": "a", "n": 1}\\n{"q": "b", "n": 2}\\n{"q": "c", "n": 3}\\n')
        >>> gd = to_generator_dataset(JSONLDataset(path), num_shards=2, shard_id=1)
        >>> [(str(r["q"]), int(r["n"])) for r in gd.create_dict_iterator(output_numpy=True, num_epochs=1)]
        [('b', 2)]
    """
    msd = require("mindspore.dataset", "mindspore")
    num_shards, shard_id = distributed_defaults(num_shards, shard_id)
    if isinstance(ds, EarlyStart) and (shuffle or pad_shards):
        ds = ds.dataset()  # a shuffled (or MindSpore-sharded) epoch needs the index: wait for it
    kind = None if isinstance(ds, EarlyStart) else kind_of(ds)  # decided once, here, for the whole path
    ms_shards = pad_shards and batch_size is None and kind is not None and kind.map_style and len(ds) > 0
    source = make_source(
        ds,
        column_names=column_names,
        features=features,
        schema=schema,
        infer_rows=infer_rows,
        shuffle=shuffle,
        seed=seed,
        buffer_size=buffer_size,
        num_shards=None if ms_shards else num_shards,
        shard_id=None if ms_shards else shard_id,
        batch_size=batch_size,
        drop_remainder=drop_remainder,
        kind=kind,
    )
    if resume_from is not None:
        if not isinstance(source, BatchSource):
            raise InvalidArgumentError(
                "resume_from needs batch_size= (sjsonl draws the epoch's order itself only for batches)"
            )
        source.resume_from(dict(resume_from))  # before GeneratorDataset reads len(): the rest's size
    ms_shuffle: bool | None = shuffle
    if not ms_shards:  # the source took the shard
        num_shards = shard_id = None
    if isinstance(source, (IterSource, BatchSource, EarlySource)):  # iterable: the source shuffles
        ms_shuffle = None
    elif not shuffle and ("sampler" in generator_kwargs or "batch_sampler" in generator_kwargs):
        ms_shuffle = None  # MindSpore refuses shuffle=False next to a sampler: the sampler decides the order
    # MindSpore refuses a source whose len() is 0: an empty batched source goes without one
    empty = isinstance(source, BatchSource) and not len(source)
    return msd.GeneratorDataset(
        _Empty(source) if empty else source,
        column_names=source.column_names,
        shuffle=ms_shuffle,
        num_parallel_workers=num_parallel_workers,
        num_shards=num_shards,
        shard_id=shard_id,
        python_multiprocessing=python_multiprocessing,
        **generator_kwargs,
    )
