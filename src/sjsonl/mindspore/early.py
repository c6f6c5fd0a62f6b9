"""Early start: the first in-order epoch of a split that was never indexed reads while its index is built.

``sjsonl.mindspore.load_dataset(..., early_start=True)`` with ``shuffle=False`` and no index on disk yet
returns a ``GeneratorDataset`` whose rows flow at once: an :class:`EarlySource` reads the split's files front
to back (a :class:`~sjsonl.data.streaming.JSONLStream`, no index needed) while a background thread opens the
indexed dataset exactly as ``early_start=False`` would (building and saving the index). Every pass that
starts once that dataset is ready reads through the index instead; both give the same records in the same
order, and at the end of a streamed pass the count is checked against the index (a file that changed
meanwhile raises :class:`~sjsonl.errors.StaleDataError`). So time to first batch no longer grows with the
file's size. A shuffled epoch needs the index for its order, so ``shuffle=True`` waits for it as usual.

Column types: ``features=`` when given, else the first rows (``infer_rows``, or
:data:`~sjsonl.mindspore.sources.STREAM_SAMPLE_ROWS`)
give *provisional* types. With ``infer_rows=None`` (the default: every row) the background thread then
infers them from every row, as a normal open does (and caches them with the index); if they differ from the
provisional ones the pass stops with a :class:`~sjsonl.mindspore.columns.SchemaMismatchError` saying so —
at the next row read, usually seconds in, not at the row that breaks them hours later. A rerun then starts
from the index and the exact types.

What an early-started dataset does not know up front is its length: the source is iterable (MindSpore
takes ``len()`` when the dataset is built), so ``get_dataset_size()`` counts by reading, and MindSpore
cannot shard it — the source shards itself (``num_shards``/``shard_id``: records ``shard_id``,
``shard_id + num_shards``, …, as the random-access source). ``gd.source.ds`` waits for the indexed
dataset; ``gd.source.wait()`` also waits for the check of the column types. A forked child (which has no
copy of the background thread) streams, and opens the indexed dataset itself when it needs it.

Example:
    >>> import os, tempfile
    >>> from sjsonl.mindspore import load_dataset
    >>> d = tempfile.mkdtemp()
    >>> path = os.path.join(d, "train.jsonl")
    >>> _ = open(path, "w").write("".join(f'{{"q": "r{i}", "n": {i}}}\\n' for i in range(5)))
    >>> gd = load_dataset("json", data_files=path, split="train", cache_dir=d, early_start=True)
    >>> type(gd.source).__name__
    'EarlySource'
    >>> [int(n) for _, n in gd.create_tuple_iterator(output_numpy=True, num_epochs=1)]
    [0, 1, 2, 3, 4]
    >>> len(gd.source.wait())                               # the index was built meanwhile
    5
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice
from typing import Any

import numpy as np

from sjsonl.data.dataset import JSONLDataset
from sjsonl.errors import IndexFileError, StaleDataError, StaleIndexError
from sjsonl.hf.data_files import resolve_data_files
from sjsonl.hf.load import load_dataset as load_jsonl
from sjsonl.mindspore.batches import BatchSource, batch_column_names, batch_columns
from sjsonl.mindspore.columns import Schema, SchemaMismatchError
from sjsonl.mindspore.context import check_shard
from sjsonl.mindspore.sources import make_schema, source_for

_PLAIN_SPLIT = re.compile(r"[\w.-]+")


class EarlyStart:
    """One split to read early: its stream now, its indexed dataset opened on a background thread.

    ``open_dataset`` returns what ``early_start=False`` would have returned for the split.

    Example:
        >>> import os, tempfile
        >>> from sjsonl.data.streaming import JSONLStream
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write('{"a": 1}\\n{"a": 2}\\n')
        >>> early = EarlyStart(JSONLStream(path), lambda: JSONLDataset(path))
        >>> [r["a"] for r in early.stream], len(early.dataset())
        ([1, 2], 2)
    """

    def __init__(self, stream: Any, open_dataset: Callable[[], Any]) -> None:
        self.stream, self._open_dataset = stream, open_dataset
        # one worker: the schema check (submitted later) runs after the open, on the same thread
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="sjsonl-early-index")
        self._opened: Future[Any] = self._worker.submit(open_dataset)
        self._checked: Future[None] | None = None
        self.problem: BaseException | None = None  # the column types the check found, once it has
        self._pid, self._forked = os.getpid(), None  # a forked child has no background thread

    def ready(self) -> bool:
        """Whether the indexed dataset is open (it then serves every pass that starts)."""
        if os.getpid() != self._pid:
            return self._forked is not None
        return self._opened.done() and self._opened.exception() is None

    def dataset(self) -> Any:
        """The indexed dataset, waiting for it (and raising what opening it raised). In a forked child,
        where the parent's thread does not run, it is opened there, once."""
        if os.getpid() != self._pid:
            if self._forked is None:
                self._forked = self._open_dataset()
            return self._forked
        return self._opened.result()

    def check_schema(self, provisional: Schema, full_schema: Callable[[Any], Schema]) -> None:
        """After the open, compare ``full_schema(dataset)`` with ``provisional``; a difference (or an
        error computing it) becomes :attr:`problem`, which the source raises at its next row."""

        def check() -> None:
            try:
                ds = self._opened.result()
            except BaseException:
                return  # dataset() raises the open's own error
            try:
                full = full_schema(ds)
            except BaseException as exc:
                self.problem = exc
                return
            if full != provisional:
                self.problem = SchemaMismatchError(
                    f"the column types read from the first rows, {provisional!r}, do not hold for every "
                    f"row: {full!r}. This early-started pass stops here; run again (the index and every "
                    "row's types are now cached), or pass features= or a larger infer_rows"
                )

        self._checked = self._worker.submit(check)

    def wait(self) -> Any:
        """The indexed dataset once the background work (the open, then any check) has finished."""
        ds = self.dataset()
        if self._checked is not None and os.getpid() == self._pid:
            self._checked.result()
        return ds


class EarlySource:
    """The MindSpore source of an :class:`EarlyStart`: converted rows (or whole batches) of the split in
    file order — streamed until the indexed dataset is ready, through it afterwards.

    Example:
        >>> import os, tempfile
        >>> from sjsonl.data.streaming import JSONLStream
        >>> from sjsonl.mindspore import make_schema
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write("".join(f'{{"a": {i}}}\\n' for i in range(5)))
        >>> early = EarlyStart(JSONLStream(path), lambda: JSONLDataset(path))
        >>> src = EarlySource(early, make_schema([{"a": 0}]), num_shards=2, shard_id=1)
        >>> [int(a) for (a,) in src]
        [1, 3]
    """

    def __init__(
        self,
        early: EarlyStart,
        schema: Schema,
        *,
        num_shards: int | None = None,
        shard_id: int | None = None,
        batch_size: int | None = None,
        drop_remainder: bool = False,
    ) -> None:
        self.early, self.schema = early, schema
        self.step, self.first = check_shard(num_shards, shard_id)
        self.batch_size, self.drop_remainder = batch_size, drop_remainder
        if batch_size is not None:
            BatchSource([], schema, batch_size)  # the same argument checks as the indexed passes get
        self.column_names = schema.column_names if batch_size is None else batch_column_names(schema)
        self._indexed: Any = None

    @property
    def ds(self) -> Any:
        """The indexed dataset — MindNLP's ``gd.source.ds`` (waits for the background open)."""
        return self.early.dataset()

    def wait(self) -> Any:
        """The indexed dataset, once it is open and the column types are checked (see the module doc)."""
        ds = self.early.wait()
        self._raise_problem()
        return ds

    def __iter__(self) -> Iterator[tuple[np.ndarray, ...]]:
        self._raise_problem()
        return self._through_index() if self.early.ready() else self._streamed()

    def _raise_problem(self) -> None:
        if self.early.problem is not None:
            raise self.early.problem

    def _through_index(self) -> Iterator[tuple[np.ndarray, ...]]:
        if self._indexed is None:
            self._indexed = source_for(
                self.early.dataset(),
                schema=self.schema,
                num_shards=self.step,
                shard_id=self.first,
                batch_size=self.batch_size,
                drop_remainder=self.drop_remainder,
            )
        source = self._indexed
        if isinstance(source, BatchSource) or not hasattr(source, "__getitem__"):
            yield from source
            return
        for i in range(len(source)):
            self._raise_problem()
            yield source[i]

    def _streamed(self) -> Iterator[tuple[np.ndarray, ...]]:
        stream = self.early.stream
        if self.step > 1:
            stream = stream.shard(self.step, self.first)
        convert, early, rows = self.schema.convert, self.early, 0
        if self.batch_size is None:
            for record in stream:
                if early.problem is not None:
                    raise early.problem
                rows += 1
                yield convert(record)
        else:
            records = iter(stream)
            while batch := [convert(r) for r in islice(records, self.batch_size)]:
                self._raise_problem()
                rows += len(batch)
                if len(batch) == self.batch_size or not self.drop_remainder:
                    yield batch_columns(self.schema, batch)
        self._check_count(rows)

    def _check_count(self, rows: int) -> None:
        """A streamed pass read as many records as the index holds for this shard (else the file changed)."""
        ds = self.early.dataset()
        expected = len(range(self.first, len(ds), self.step))
        if rows != expected:
            raise StaleDataError(
                f"{ds!r} changed while it was read: the pass read {rows} records of this shard, the index "
                f"built meanwhile holds {expected}; open it again"
            )


def _has_index(files: Sequence[str], index_dir: Any, storage_options: dict | None) -> bool:
    try:
        JSONLDataset(
            list(files), index_dir=index_dir, storage_options=storage_options, build_index_on_load=False
        )
    except (IndexFileError, StaleIndexError):
        return False
    return True


def early_splits(
    load_args: Mapping[str, Any], split: str | Sequence[str] | None, index_dir: Any
) -> Any | None:
    """What :func:`sjsonl.load_dataset` returns for ``split`` (``load_args``: its other arguments, which
    must include ``path``, ``data_dir``, ``data_files`` and ``storage_options``), with each split that has
    no index yet as an :class:`EarlyStart`; None when a split spec is not a plain name (a slice needs the
    length: that load goes the usual way)."""
    names = [split] if isinstance(split, str) else None if split is None else list(split)
    if names is not None and not all(isinstance(s, str) and _PLAIN_SPLIT.fullmatch(s) for s in names):
        return None
    files = resolve_data_files(load_args["path"], load_args["data_dir"], load_args["data_files"])
    if names is not None and any(s not in files for s in names):
        return None  # the usual path names the unknown split

    def one(name: str) -> Any:
        def open_dataset() -> Any:
            return load_jsonl(**load_args, split=name, index_dir=index_dir)

        if _has_index(files[name], index_dir, load_args["storage_options"]):
            return open_dataset()
        return EarlyStart(load_jsonl(**load_args, split=name, streaming=True), open_dataset)

    if names is None:
        return {name: one(name) for name in files}
    return one(split) if isinstance(split, str) else [one(s) for s in names]


def early_source(
    early: EarlyStart,
    column_names: Sequence[str] | None,
    features: Mapping[str, Any] | None,
    schema: Schema | None,
    infer_rows: int | None,
    num_shards: int | None,
    shard_id: int | None,
    batch_size: int | None,
    drop_remainder: bool,
) -> EarlySource:
    """An early-started split's source (what :func:`~sjsonl.mindspore.make_source` gives for an
    :class:`EarlyStart`): provisional column types now and, when every row's types were asked for
    (``infer_rows=None``, no ``features``), their check on the background thread."""
    names = [column_names] if isinstance(column_names, str) else column_names

    def chosen(s: Schema) -> Schema:
        return s.select(list(names)) if names is not None else s

    # the stream's first rows (make_schema samples a stream: infer_rows, else STREAM_SAMPLE_ROWS)
    provisional = chosen(schema if schema is not None else make_schema(early.stream, features, infer_rows))
    if schema is None and features is None and infer_rows is None:
        early.check_schema(provisional, lambda ds: chosen(make_schema(ds)))
    return EarlySource(early, provisional, num_shards=num_shards, shard_id=shard_id, batch_size=batch_size,
                       drop_remainder=drop_remainder)  # fmt: skip
