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

import sys
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

import numpy as np

from sjsonl.data.dataset import JSONLDataset
from sjsonl.data.streaming import JSONLStream, buffer_shuffle
from sjsonl.errors import ArgumentTypeError, InvalidArgumentError, RecordIndexError, require
from sjsonl.hf.convert import hf_kind
from sjsonl.mindspore.batches import BatchSource
from sjsonl.mindspore.columns import Schema, SchemaMismatchError, infer_schema
from sjsonl.mindspore.early import EarlySource, EarlyStart, early_source
from sjsonl.records.schema import infer_schema as infer_record_schema

#: Rows the schema is inferred from by default: ``None``, every row (for a JSONLDataset computed once and
#: cached beside the index, see :mod:`sjsonl.records.schema`), so no later row can break an epoch — except for
#: a stream, which reads nothing ahead: its first :data:`STREAM_SAMPLE_ROWS` rows, as 🤗 streaming does. An
#: integer asks for a sample: evenly spaced rows of random-access data, the first rows of a stream.
DEFAULT_INFER_ROWS: int | None = None
#: Rows of a stream the column types come from when ``infer_rows`` is None (a later row that breaks them
#: raises a :class:`~sjsonl.mindspore.columns.SchemaMismatchError` naming it).
STREAM_SAMPLE_ROWS = 1000
#: Rows of a 🤗 dataset looked at for the columns its ``features`` leave open (or a stream without any).
HF_SAMPLE_ROWS = 2000
# What mindspore.dataset.config.get_seed() answers when set_seed was never called (std::mt19937's default).
_MT19937_DEFAULT_SEED = 5489


def configured_seed() -> int | None:
    """MindSpore's ``config.set_seed`` value, or None when it was never called."""
    from mindspore.dataset import config

    return None if config.get_seed() == _MT19937_DEFAULT_SEED else int(config.get_seed())


def _is_map_style(data: Any) -> bool:
    if isinstance(data, JSONLStream):
        return False
    kind = hf_kind(data)
    if kind is not None:
        return kind == "map"
    return hasattr(data, "__getitem__") and hasattr(data, "__len__") and not isinstance(data, Mapping)


def _sample_rows(data: Any, map_style: bool, infer_rows: int) -> list[Any]:
    if not map_style:
        return list(islice(iter(data), infer_rows))
    n = len(data)
    if n <= infer_rows:
        return list(data)
    positions = np.unique(np.linspace(0, n - 1, infer_rows).astype(np.int64))
    if isinstance(data, JSONLDataset):
        return data[positions]
    if hf_kind(data) == "map":
        return list(data.select(positions))
    return [data[int(i)] for i in positions]


def _reads_file_records(ds: JSONLDataset) -> bool:
    # The cached file schema describes the records as stored; a dataset with a transform (map, column
    # operations, features) or a projection yields other records, which are then typed by one pass over them.
    return getattr(ds, "_transform", None) is None and getattr(ds, "_decode", None) is None


def make_schema(
    data: Any, features: Mapping[str, Any] | None = None, infer_rows: int | None = DEFAULT_INFER_ROWS
) -> Schema:
    """The schema :func:`to_generator_dataset` uses for ``data``: 🤗 ``features`` when given (a 🤗 dataset's
    own when ``features`` is None) fix the columns they type; the rest is inferred from every row — for a
    :class:`~sjsonl.data.dataset.JSONLDataset` by :func:`sjsonl.records.schema.infer_schema` (computed once,
    cached with the index), for a list by one pass over it — or from ``infer_rows`` sampled rows when asked (a
    🤗 dataset: :data:`HF_SAMPLE_ROWS`, its Arrow types already hold for every row; a
    :class:`~sjsonl.data.streaming.JSONLStream`: its first :data:`STREAM_SAMPLE_ROWS`).

    Example:
        >>> make_schema([{"a": 1}, {"a": 2.5}])
        Schema(a: float64)
    """
    kind = hf_kind(data)
    if features is None and kind is not None:
        features = getattr(data, "features", None)
    if infer_rows is not None:
        rows: Any = _sample_rows(data, _is_map_style(data), infer_rows)
    elif isinstance(data, JSONLDataset) and _reads_file_records(data):
        rows = infer_record_schema(data)  # every row of its files, computed once and cached with the index
    elif isinstance(data, JSONLStream):
        rows = _sample_rows(data, False, STREAM_SAMPLE_ROWS)  # a stream's first row comes without a pass
    elif kind is not None:
        # 🤗 data: Arrow already gives every row the features' types, so a sample only fills in what the
        # features leave open; a Hub stream without features may be unbounded, so it is sampled too.
        rows = _sample_rows(data, kind == "map", HF_SAMPLE_ROWS)
    else:
        rows = iter(data)
    return infer_schema(rows, features)


def _check_shard(num_shards: int | None, shard_id: int | None) -> tuple[int, int]:
    if (num_shards is None) != (shard_id is None):
        raise InvalidArgumentError("give num_shards and shard_id together")
    if num_shards is None:
        return 1, 0
    if num_shards < 1 or not 0 <= shard_id < num_shards:  # type: ignore[operator]
        raise InvalidArgumentError(f"shard_id {shard_id} must lie in [0, {num_shards})")
    return num_shards, shard_id  # type: ignore[return-value]


class _Converted:
    """What a per-record source shares: its rows are converted by ``schema``."""

    schema: Schema

    @property
    def column_names(self) -> list[str]:
        """The columns of each row, in order (as MindNLP's sources carry them)."""
        return self.schema.column_names


class MapSource(_Converted):
    """A random-access MindSpore source: ``source[i]`` is record ``i`` (of this shard: record
    ``shard_id + i * num_shards`` of ``data``) converted by ``schema``.

    Example:
        >>> rows = [{"a": i} for i in range(5)]
        >>> src = MapSource(rows, make_schema(rows), num_shards=2, shard_id=1)
        >>> len(src), src[1]
        (2, (array(3),))
    """

    def __init__(
        self, data: Any, schema: Schema, *, num_shards: int | None = None, shard_id: int | None = None
    ) -> None:
        self.data, self.schema = data, schema
        self.step, self.first = _check_shard(num_shards, shard_id)
        self.n = len(range(self.first, len(data), self.step))

    @property
    def ds(self) -> Any:
        """The underlying dataset — MindNLP's ``gd.source.ds`` (e.g. the :class:`JSONLDataset`)."""
        return self.data

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[np.ndarray, ...]:
        i = int(i)
        if not 0 <= i < self.n:
            raise RecordIndexError(f"row {i} out of range for a source of {self.n} rows")
        j = self.first + i * self.step
        try:
            return self.schema.convert(self.data[j])
        except SchemaMismatchError as exc:
            if sys.version_info >= (3, 11):  # no add_note on 3.10: the error goes without the row there
                exc.add_note(f"at row {j} of {self.data!r}")
            raise


class IterSource(_Converted):
    """A streaming MindSpore source: converted records of ``data`` in order, with an optional buffered
    shuffle (seed + epoch, so each epoch differs yet runs repeat) and a round-robin shard.

    Example:
        >>> rows = [{"a": i} for i in range(6)]
        >>> [int(a) for (a,) in IterSource(rows, make_schema(rows), num_shards=3, shard_id=1)]
        [1, 4]
    """

    def __init__(
        self,
        data: Any,
        schema: Schema,
        *,
        shuffle: bool = False,
        seed: int | None = None,
        buffer_size: int = 1000,
        num_shards: int | None = None,
        shard_id: int | None = None,
    ) -> None:
        self.data, self.schema = data, schema
        self.shuffle, self.seed, self.buffer_size = shuffle, seed, buffer_size
        self.num_shards, self.shard_id = _check_shard(num_shards, shard_id)
        self.epoch = 0

    @property
    def ds(self) -> Any:
        """The underlying dataset or stream — MindNLP's ``gd.source.ds``."""
        return self.data.data if isinstance(self.data, _Empty) else self.data

    def _epoch_seed(self, epoch: int) -> int | None:
        """``seed=``, else MindSpore's ``config.set_seed`` (read when iterating), plus the epoch; None
        (a fresh order every run) when neither is set — as MindSpore's own shuffles."""
        base = self.seed if self.seed is not None else configured_seed()
        return None if base is None else base * 1_000_003 + epoch

    def _records(self, epoch: int) -> Iterator[Any]:
        data, n, k = self.data, self.num_shards, self.shard_id
        seed = self._epoch_seed(epoch) if self.shuffle else None
        hf = hf_kind(data) == "iterable"
        if n > 1:
            if isinstance(data, JSONLStream):
                data = data.shard(n, k)  # type: ignore[arg-type]
            elif hf:
                from datasets.distributed import split_dataset_by_node

                data = split_dataset_by_node(data, rank=k, world_size=n)
            else:
                data = _RoundRobin(data, n, k)
        if not self.shuffle:
            return iter(data)
        if isinstance(data, JSONLStream):
            return iter(data.shuffle(seed, self.buffer_size))
        if hf:
            return iter(data.shuffle(seed=seed, buffer_size=self.buffer_size))
        return buffer_shuffle(iter(data), seed, self.buffer_size)

    def __iter__(self) -> Iterator[tuple[np.ndarray, ...]]:
        self.epoch += 1
        convert = self.schema.convert
        for row in self._records(self.epoch - 1):
            yield convert(row)


class _Empty:
    """No records, keeping the dataset it stands for as ``.data`` (so ``gd.source.ds`` still names it)."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def __iter__(self) -> Iterator[Any]:
        return iter(())


class _RoundRobin:
    def __init__(self, data: Any, n: int, k: int) -> None:
        self.data, self.n, self.k = data, n, k

    def __iter__(self) -> Iterator[Any]:
        return islice(iter(self.data), self.k, None, self.n)


def _distributed_defaults(num_shards: int | None, shard_id: int | None) -> tuple[int | None, int | None]:
    """``(group size, rank)`` when ``mindspore.communication.init()`` has run and no shard was given."""
    if num_shards is not None or shard_id is not None:
        return num_shards, shard_id
    from mindspore.communication.management import GlobalComm, get_group_size, get_rank

    if GlobalComm.INITED and get_group_size() > 1:
        return get_group_size(), get_rank()
    return None, None


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
    **iter_options: Any,
) -> MapSource | IterSource | BatchSource | EarlySource:
    """The MindSpore source :func:`to_generator_dataset` builds: a :class:`MapSource` for random-access data,
    an :class:`IterSource` (also taking ``iter_options``: shuffle, seed, buffer_size) for streams, a
    :class:`~sjsonl.mindspore.batches.BatchSource` of whole batches with ``batch_size``.
    ``.schema`` tells how records are converted.

    Example:
        >>> make_source([{"a": 1, "b": "x"}], column_names=["b"]).schema
        Schema(b: str)
    """
    if isinstance(data, Mapping):
        raise ArgumentTypeError("pass one split (a dataset), not a mapping of splits")
    if isinstance(data, EarlyStart):
        return early_source(data, column_names, features, schema, infer_rows, num_shards, shard_id,
                            batch_size, drop_remainder)  # fmt: skip
    if schema is None:
        schema = make_schema(data, features, infer_rows)
    if column_names is not None:
        schema = schema.select([column_names] if isinstance(column_names, str) else list(column_names))
    if batch_size is not None:
        if not _is_map_style(data):
            raise InvalidArgumentError("batch_size= needs random-access data (a dataset, not a stream)")
        return BatchSource(
            data,
            schema,
            batch_size,
            drop_remainder=drop_remainder,
            shuffle=bool(iter_options.get("shuffle", False)),
            seed=iter_options.get("seed"),
            num_shards=num_shards,
            shard_id=shard_id,
        )
    if _is_map_style(data):
        source = MapSource(data, schema, num_shards=num_shards, shard_id=shard_id)
        # MindSpore refuses a random-access source of 0 rows ("data row of input source must not be 0"),
        # which an empty split or a shard of fewer rows than shards is: an iterable of nothing is fine.
        if len(source):
            return source
        return IterSource(_Empty(data), schema)
    return IterSource(data, schema, num_shards=num_shards, shard_id=shard_id, **iter_options)


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
    num_shards, shard_id = _distributed_defaults(num_shards, shard_id)
    if isinstance(ds, EarlyStart) and (shuffle or pad_shards):
        ds = ds.dataset()  # a shuffled (or MindSpore-sharded) epoch needs the index: wait for it
    ms_shards = pad_shards and batch_size is None and _is_map_style(ds) and len(ds) > 0
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
