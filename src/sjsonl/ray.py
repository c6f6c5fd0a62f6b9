"""Ray Data adapter: JSON Lines read through sjsonl's indexes as a ``ray.data.Dataset``, and a Dataset written
back as JSONL shards with their indexes (``pip install 'sjsonl[ray]'``).

Ray's own ``read_json`` gives each file to one read task: a single large file is read by one task, whole,
and a compressed file cannot be split at all. :func:`read_jsonl` cuts the corpus into balanced record ranges
from the indexes instead (:func:`sjsonl.sampling.ranges.record_ranges`: every read task gets the same number
of records, ±1, whatever the files, compressed and remote ones included), so each read task knows its exact
row count and the exact bytes of its records before anything is read (its ``BlockMetadata``), and
``Dataset.count()`` needs no read at all. Missing indexes are built first, one Ray task per file, in parallel
(:func:`sjsonl.build_indexes` on a :class:`RayExecutor`).

Rows are the records as sjsonl reads them (``fields=``, ``columns``, ``on_bad_lines``, ``schema=`` as for
:class:`~sjsonl.JSONLDataset`), made columns as :func:`sjsonl.hf.convert.to_hf` makes them: a key a row lacks
is null there, a row that is not a JSON object is ``{"value": row}``. Each block is typed by Arrow from its
rows, as ``ray.data.from_items`` types them. **Big integers stay exact**: a column holding an integer beyond
int64 (or values no single Arrow type holds, such as ``1`` and ``"a"``) is not cast or cut — Ray keeps that
column of that block as Python objects (its pickled-object extension type), so the rows read back equal
``json.loads`` exactly; pass ``arrow_schema=`` to fix every block's types instead (a value that does not fit
then raises, naming nothing wrong in silence).

Importing this module needs no Ray (its names are there for the docs); using them without Ray raises
:class:`~sjsonl.errors.MissingDependencyError` naming the extra. The workers must see the data and the
indexes at the same paths as the driver (one machine, a shared file system, or URLs with an ``index_dir``
they share), as for :func:`sjsonl.build_indexes`.

Example:
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
    >>> path = os.path.join(tmp.name, "d.jsonl")
    >>> _ = open(path, "w").write("".join(f'{{"id": {i}}}\\n' for i in range(10)))
    >>> source = JSONLDatasource(path)
    >>> tasks = source.get_read_tasks(3)
    >>> [t.metadata.num_rows for t in tasks], [t.metadata.size_bytes for t in tasks]
    ([4, 3, 3], [40, 30, 30])
    >>> [block.to_pylist() for block in tasks[1]()]
    [[{'id': 4}, {'id': 5}, {'id': 6}]]
    >>> tmp.cleanup()
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future
from dataclasses import fields as dataclass_fields
from typing import TYPE_CHECKING, Any

import orjson

from sjsonl.data.corpus import index_file
from sjsonl.data.parts import Corpus, Part, as_columns, open_corpus
from sjsonl.errors import InvalidArgumentError, require
from sjsonl.storage import is_url

try:
    import pyarrow as pa
    import pyarrow.compute as pc
    import ray
    import ray.data
    from ray.data.block import BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasink, Datasource, ReadTask
except ImportError:  # the names still exist (the docs name them); using them raises, naming the extra
    if TYPE_CHECKING:
        raise

    class _NeedsRay:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            require("ray", "ray")

    Datasource = Datasink = _NeedsRay  # type: ignore[misc,assignment]

__all__ = ["JSONLDatasink", "JSONLDatasource", "RayExecutor", "read_jsonl", "write_jsonl"]

PathLike = str | os.PathLike[str]
_DEFAULT_BLOCK_BYTES = 128 * 1024 * 1024


class RayExecutor(Executor):
    """A :class:`concurrent.futures.Executor` whose tasks are Ray tasks (``ray_remote_args`` for each,
    ``num_cpus=1`` by default): what :func:`sjsonl.build_indexes` (or ``JSONLDataset(executor=)``) needs to
    index many files at once on a Ray cluster. Ray is started here (``ray.init()``) if it is not running.

    Example:
        >>> RayExecutor(num_cpus=2).remote_args
        {'num_cpus': 2}
    """

    def __init__(self, **ray_remote_args: Any) -> None:
        self.remote_args = ray_remote_args or {"num_cpus": 1}
        self._remotes: dict[Callable[..., Any], Any] = {}

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:  # type: ignore[override]
        require("ray", "ray")
        remote = self._remotes.get(fn)
        if remote is None:
            remote = self._remotes[fn] = ray.remote(fn).options(**self.remote_args)
        return remote.remote(*args, **kwargs).future()


def _metadata(part: Part) -> BlockMetadata:
    known: dict[str, Any] = {
        "num_rows": part.rows, "size_bytes": part.nbytes, "input_files": list(part.paths), "exec_stats": None,
    }  # fmt: skip
    if "schema" in {f.name for f in dataclass_fields(BlockMetadata)}:  # (older Ray: a block's schema too)
        known["schema"] = None
    return BlockMetadata(**known)


def _block(rows: list[Any], arrow_schema: pa.Schema | None) -> Any:
    columns = as_columns(rows)
    if arrow_schema is not None:
        return pa.Table.from_pydict({f.name: columns.get(f.name, [None] * len(rows)) for f in arrow_schema},
                                    schema=arrow_schema)  # fmt: skip
    if not columns:  # rows that are all {}: no column, but the rows still count
        return pa.table({"_": [None] * len(rows)}).drop_columns(["_"])
    return BlockAccessor.batch_to_block(columns)


def _read_part(part: Part, block_rows: int, arrow_schema: pa.Schema | None) -> Iterator[Any]:
    for rows in part.batches(block_rows):
        yield _block(rows, arrow_schema)


class JSONLDatasource(Datasource):
    """A ``ray.data.Datasource`` over JSON Lines files read through their indexes: its read tasks are balanced
    record ranges (:meth:`get_read_tasks`), each with its exact ``num_rows``, ``size_bytes`` (the bytes of its
    records in the files, decompressed) and ``input_files``. Arguments as for :func:`read_jsonl`; the corpus
    is opened (and missing indexes built, as Ray tasks) when it is made.

    Example:
        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
        >>> path = os.path.join(tmp.name, "d.jsonl")
        >>> _ = open(path, "w").write('{"a": 1, "b": "x"}\\n{"a": 2}\\n')
        >>> source = JSONLDatasource(path, columns=["a"])
        >>> source.num_rows, source.estimate_inmemory_data_size()
        (2, 28)
        >>> tmp.cleanup()
    """

    def __init__(
        self,
        paths: PathLike | Sequence[PathLike],
        *,
        arrow_schema: pa.Schema | None = None,
        executor: Executor | None = None,
        corpus: Corpus | None = None,
        **options: Any,
    ) -> None:
        super().__init__()
        self.arrow_schema = arrow_schema
        self.corpus = corpus if corpus is not None else open_corpus(
            paths, executor=executor if executor is not None else RayExecutor(), **options
        )  # fmt: skip
        self.num_rows = len(self.corpus)

    def estimate_inmemory_data_size(self) -> int:
        return self.corpus.nbytes

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
    ) -> list[ReadTask]:
        """``parallelism`` read tasks (fewer when there are fewer records), one balanced record range each."""
        try:
            target = int(ray.data.DataContext.get_current().target_max_block_size or _DEFAULT_BLOCK_BYTES)
        except Exception:  # (a context that cannot be read here: Ray's default)
            target = _DEFAULT_BLOCK_BYTES
        tasks = []
        for part in self.corpus.parts(max(1, parallelism)):
            block_rows = max(1, part.rows * target // max(1, part.nbytes))
            extra = {} if per_task_row_limit is None else {"per_task_row_limit": per_task_row_limit}
            read = _Reader(part, block_rows, self.arrow_schema)
            tasks.append(ReadTask(read, _metadata(part), **extra))
        return tasks

    def get_name(self) -> str:
        return "ReadJSONL"


class _Reader:
    """One read task's function (a class, not a closure: it pickles only its part)."""

    def __init__(self, part: Part, block_rows: int, arrow_schema: pa.Schema | None) -> None:
        self.part, self.block_rows, self.arrow_schema = part, block_rows, arrow_schema

    def __call__(self) -> Iterator[Any]:
        return _read_part(self.part, self.block_rows, self.arrow_schema)


def read_jsonl(
    paths: PathLike | Sequence[PathLike],
    *,
    columns: Sequence[str] | None = None,
    fields: Sequence[str | tuple[str, ...]] | None = None,
    missing: str = "absent",
    on_bad_lines: str = "error",
    schema: type | None = None,
    arrow_schema: pa.Schema | None = None,
    field: str | None = None,
    index_dir: PathLike | None = None,
    storage_options: dict[str, Any] | None = None,
    compact: bool | None = None,
    allow_nan: bool = True,
    executor: Executor | None = None,
    override_num_blocks: int | None = None,
    ray_remote_args: dict[str, Any] | None = None,
) -> ray.data.Dataset:
    """JSON Lines files as a ``ray.data.Dataset`` whose read tasks are balanced record ranges cut from the
    indexes (missing ones built first, one Ray task per file).

    Args:
        paths: files, globs (``data/*.jsonl.gz``), directories (their ``.jsonl``/``.json``/``.ndjson`` files,
            compressed ones too) or URLs (``s3://bucket/train.jsonl``, ``s3://bucket/prefix/``).
        columns: keep only these top-level fields (missing ones are null).
        fields, missing, on_bad_lines, schema, field, index_dir, storage_options, compact, allow_nan:
            as for :class:`~sjsonl.JSONLDataset`.
        arrow_schema: a ``pyarrow.Schema`` every block is made with (default: each block typed from its rows;
            see the module's notes on big integers).
        executor: where missing indexes are built (default: a :class:`RayExecutor`, one task per file).
        override_num_blocks: the number of read tasks (default: Ray chooses from the data size and CPUs).
        ray_remote_args: passed to Ray for the read tasks.

    Example:
        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
        >>> path = os.path.join(tmp.name, "d.jsonl")
        >>> _ = open(path, "w").write('{"id": 1, "big": 18446744073709551616}\\n{"id": 2, "big": 1}\\n')
        >>> ds = read_jsonl(path, override_num_blocks=2)
        >>> ds.count(), sorted(ds.take_all(), key=lambda r: r["id"])  # (Ray keeps no order unless asked)
        (2, [{'id': 1, 'big': 18446744073709551616}, {'id': 2, 'big': 1}])
        >>> tmp.cleanup()
    """
    require("ray", "ray")
    options: dict[str, Any] = dict(
        columns=columns, missing=missing, on_bad_lines=on_bad_lines, field=field, index_dir=index_dir,
        storage_options=storage_options, compact=compact, allow_nan=allow_nan,
    )  # fmt: skip
    if fields is not None:
        options["fields"] = fields
    if schema is not None:
        options["schema"] = schema
    source = JSONLDatasource(paths, arrow_schema=arrow_schema, executor=executor, **options)
    kwargs: dict[str, Any] = {}
    if override_num_blocks is not None:
        kwargs["override_num_blocks"] = override_num_blocks
    if ray_remote_args is not None:
        kwargs["ray_remote_args"] = ray_remote_args
    return ray.data.read_datasource(source, **kwargs)


# ----------------------------------------------------------------------------------------------- writing
def _non_finite(table: pa.Table) -> bool:
    """Whether a float column of ``table`` holds NaN or ±Infinity (which orjson would write as null)."""
    for col in table.columns:
        floats = pa.types.is_floating(col.type) and col.null_count < len(col)
        if floats and not pc.all(pc.is_finite(col.fill_null(0.0))).as_py():
            return True
    return False


def _dumps_exact(row: Any) -> bytes:
    """A row as one line of JSON that reads back equal: orjson, or ``json.dumps`` for what orjson cannot
    write exactly (integers beyond 64 bits, NaN and infinities)."""
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode()


def _rows_as_lines(table: Any) -> Iterator[bytes]:
    acc = BlockAccessor.for_block(table)
    arrow = acc.to_arrow()
    stdlib = _non_finite(arrow)
    for row in arrow.to_pylist():
        if stdlib:
            yield _dumps_exact(row)
            continue
        try:
            yield orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY)
        except TypeError:  # an integer beyond 64 bits, or a type orjson does not know
            yield _dumps_exact(row)


class JSONLDatasink(Datasink):
    """A ``ray.data.Datasink`` writing each write task's rows as one JSONL shard in ``path`` (a local or
    shared directory), named ``<write id>-<task>.jsonl``, and its index beside it (or in ``index_dir``) as
    soon as the shard is complete — so the shards open at once with :class:`~sjsonl.JSONLDataset` or
    :func:`read_jsonl`. A shard is written to a temp name and renamed when whole; tasks with no rows
    write nothing. Integers beyond 64 bits, NaN and infinities are written exactly (as ``json.dumps`` writes
    them).

    Example:
        >>> import os, tempfile
        >>> from types import SimpleNamespace
        >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
        >>> sink = JSONLDatasink(tmp.name)
        >>> sink.on_write_start()
        >>> block = pa.table({"id": [1, 2], "x": [0.5, None]})
        >>> written = sink.write([block], SimpleNamespace(task_idx=0))
        >>> written["rows"], open(written["path"]).read()
        (2, '{"id":1,"x":0.5}\\n{"id":2,"x":null}\\n')
        >>> os.path.basename(written["index_path"]).endswith(".index.npy")
        True
        >>> tmp.cleanup()
    """

    def __init__(
        self, path: PathLike, *, index_dir: PathLike | None = None, compact: bool | None = None
    ) -> None:
        super().__init__()
        if is_url(os.fspath(path)):
            raise InvalidArgumentError(f"write_jsonl writes to a local or shared directory, not {path!r}")
        self.path = os.path.abspath(os.fspath(path))
        self.index_dir = None if index_dir is None else os.fspath(index_dir)
        self.compact = compact
        self.write_id = uuid.uuid4().hex[:12]
        self.written: list[str] = []

    def on_write_start(self, schema: Any = None) -> None:
        os.makedirs(self.path, exist_ok=True)

    def write(self, blocks: Iterable[Any], ctx: Any) -> dict[str, Any]:
        final = os.path.join(self.path, f"{self.write_id}-{ctx.task_idx:05d}.jsonl")
        tmp = f"{final}.{os.getpid()}.tmp"
        rows = 0
        try:
            with open(tmp, "wb") as out:
                for block in blocks:
                    for line in _rows_as_lines(block):
                        out.write(line + b"\n")
                        rows += 1
            if not rows:
                os.unlink(tmp)
                return {"path": None, "rows": 0, "index_path": None}
            os.replace(tmp, final)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        report = index_file(final, index_dir=self.index_dir, compact=self.compact, workers=1)
        return {"path": final, "rows": rows, "index_path": report.index_path}

    def on_write_complete(self, write_result: Any) -> None:
        returns = getattr(write_result, "write_returns", write_result)
        self.written = sorted(r["path"] for r in returns if r and r.get("path"))

    def get_name(self) -> str:
        return "WriteJSONL"


def write_jsonl(
    ds: ray.data.Dataset,
    path: PathLike,
    *,
    index_dir: PathLike | None = None,
    compact: bool | None = None,
    min_rows_per_file: int | None = None,
) -> list[str]:
    """Write ``ds`` as JSONL shards in the directory ``path``, one per write task, each indexed as it is
    finished (:class:`JSONLDatasink`); return the shards' paths, sorted.

    ``min_rows_per_file``: gather at least this many rows into each shard (Ray's ``min_rows_per_write``).

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
        >>> out = tmp.name
        >>> shards = write_jsonl(ray.data.from_items([{"id": i} for i in range(5)]), out)
        >>> sorted(r["id"] for r in JSONLDataset(shards, build_index_on_load=False))
        [0, 1, 2, 3, 4]
        >>> tmp.cleanup()
    """
    require("ray", "ray")
    sink = JSONLDatasink(path, index_dir=index_dir, compact=compact)
    kwargs = {} if min_rows_per_file is None else {"min_rows_per_write": min_rows_per_file}
    ds.write_datasink(sink, **kwargs)
    return sink.written
