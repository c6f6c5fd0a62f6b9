"""The per-record MindSpore sources — :class:`MapSource` (random access) and :class:`IterSource` (streams) —
the schema they convert rows by (:func:`make_schema`), and :func:`source_for`, which picks one of them (or a
:class:`~sjsonl.mindspore.batches.BatchSource`) for data of a known kind. See :mod:`sjsonl.mindspore.adapters`
for how MindSpore uses each shape.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np

from sjsonl.data.dataset import JSONLDataset
from sjsonl.data.streaming import JSONLStream, buffer_shuffle
from sjsonl.errors import InvalidArgumentError, RecordIndexError
from sjsonl.hf.convert import hf_kind
from sjsonl.mindspore.batches import BatchSource
from sjsonl.mindspore.columns import Schema, SchemaMismatchError, infer_schema
from sjsonl.mindspore.context import check_shard, configured_seed
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


@dataclass(frozen=True)
class Kind:
    """What a source's data is, decided once at the entrance (:func:`kind_of`) and handed down: how its
    rows are sampled for a schema, and how a stream of it is sharded and shuffled."""

    jsonl: bool  #: a JSONLDataset (or a view of one): read through its index
    stream: bool  #: a JSONLStream
    hf: str | None  #: "map" or "iterable" for a 🤗 dataset (hf_kind), else None
    map_style: bool  #: random access (__getitem__ + __len__): a MapSource; else an IterSource


def kind_of(data: Any) -> Kind:
    """The :class:`Kind` of ``data``.

    Example:
        >>> kind_of([{"a": 1}]).map_style, kind_of(iter([{"a": 1}])).map_style
        (True, False)
    """
    stream, hf = isinstance(data, JSONLStream), hf_kind(data)
    if stream:
        map_style = False
    elif hf is not None:
        map_style = hf == "map"
    else:
        map_style = (
            hasattr(data, "__getitem__") and hasattr(data, "__len__") and not isinstance(data, Mapping)
        )
    return Kind(isinstance(data, JSONLDataset), stream, hf, map_style)


def _sample_rows(data: Any, kind: Kind, infer_rows: int) -> list[Any]:
    if not kind.map_style:
        return list(islice(iter(data), infer_rows))
    n = len(data)
    if n <= infer_rows:
        return list(data)
    positions = np.unique(np.linspace(0, n - 1, infer_rows).astype(np.int64))
    if kind.jsonl:
        return data[positions]  # type: ignore[no-any-return]
    if kind.hf == "map":
        return list(data.select(positions))
    return [data[int(i)] for i in positions]


def _reads_file_records(ds: JSONLDataset) -> bool:
    # The cached file schema describes the records as stored; a dataset with a transform (map, column
    # operations, features) or a projection yields other records, which are then typed by one pass over them.
    return getattr(ds, "_transform", None) is None and getattr(ds, "_decode", None) is None


def make_schema(
    data: Any,
    features: Mapping[str, Any] | None = None,
    infer_rows: int | None = DEFAULT_INFER_ROWS,
    *,
    kind: Kind | None = None,
) -> Schema:
    """The schema :func:`to_generator_dataset` uses for ``data``: 🤗 ``features`` when given (a 🤗 dataset's
    own when ``features`` is None) fix the columns they type; the rest is inferred from every row — for a
    :class:`~sjsonl.data.dataset.JSONLDataset` by :func:`sjsonl.records.schema.infer_schema` (computed once,
    cached with the index), for a list by one pass over it — or from ``infer_rows`` sampled rows when asked (a
    🤗 dataset: :data:`HF_SAMPLE_ROWS`, its Arrow types already hold for every row; a
    :class:`~sjsonl.data.streaming.JSONLStream`: its first :data:`STREAM_SAMPLE_ROWS`). ``kind``: what
    ``data`` is, when the caller has decided it already (:func:`kind_of`).

    Example:
        >>> make_schema([{"a": 1}, {"a": 2.5}])
        Schema(a: float64)
    """
    kind = kind_of(data) if kind is None else kind
    if features is None and kind.hf is not None:
        features = getattr(data, "features", None)
    if infer_rows is not None:
        rows: Any = _sample_rows(data, kind, infer_rows)
    elif kind.jsonl and _reads_file_records(data):
        rows = infer_record_schema(data)  # every row of its files, computed once and cached with the index
    elif kind.stream:
        rows = _sample_rows(data, kind, STREAM_SAMPLE_ROWS)  # a stream's first row comes without a pass
    elif kind.hf is not None:
        # 🤗 data: Arrow already gives every row the features' types, so a sample only fills in what the
        # features leave open; a Hub stream without features may be unbounded, so it is sampled too.
        rows = _sample_rows(data, kind, HF_SAMPLE_ROWS)
    else:
        rows = iter(data)
    return infer_schema(rows, features)


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
        self.step, self.first = check_shard(num_shards, shard_id)
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
        kind: Kind | None = None,
    ) -> None:
        self.data, self.schema = data, schema
        self.kind = kind_of(data) if kind is None else kind
        self.shuffle, self.seed, self.buffer_size = shuffle, seed, buffer_size
        self.num_shards, self.shard_id = check_shard(num_shards, shard_id)
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
        stream, hf = self.kind.stream, self.kind.hf == "iterable"
        if n > 1:
            if stream:
                data = data.shard(n, k)  # type: ignore[arg-type]
            elif hf:
                from datasets.distributed import split_dataset_by_node

                data = split_dataset_by_node(data, rank=k, world_size=n)
            else:
                data = _RoundRobin(data, n, k)
        if not self.shuffle:
            return iter(data)
        if stream:
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


def source_for(
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
) -> MapSource | IterSource | BatchSource:
    """The source for ``data`` that is not an early-started split (see :func:`sjsonl.mindspore.make_source`,
    which decides that once): a :class:`MapSource` for random-access data, an :class:`IterSource` (also taking
    ``iter_options``: shuffle, seed, buffer_size) for streams, a
    :class:`~sjsonl.mindspore.batches.BatchSource` of whole batches with ``batch_size``.

    Example:
        >>> source_for([{"a": 1, "b": "x"}], column_names=["b"]).schema
        Schema(b: str)
    """
    kind = kind_of(data) if kind is None else kind  # decided here once, then handed down
    if schema is None:
        schema = make_schema(data, features, infer_rows, kind=kind)
    if column_names is not None:
        schema = schema.select([column_names] if isinstance(column_names, str) else list(column_names))
    if batch_size is not None:
        if not kind.map_style:
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
    if kind.map_style:
        source = MapSource(data, schema, num_shards=num_shards, shard_id=shard_id)
        # MindSpore refuses a random-access source of 0 rows ("data row of input source must not be 0"),
        # which an empty split or a shard of fewer rows than shards is: an iterable of nothing is fine.
        if len(source):
            return source
        return IterSource(_Empty(data), schema)
    return IterSource(data, schema, num_shards=num_shards, shard_id=shard_id, kind=kind, **iter_options)
