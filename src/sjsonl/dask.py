"""Dask adapter: JSON Lines as a Dask DataFrame or Bag with one partition per balanced record range, cut from
sjsonl's indexes (``pip install 'sjsonl[cluster]'``).

Dask's ``read_json(lines=True, blocksize=...)`` splits plain local files by bytes but cannot split a
compressed file ("Cannot do chunked reads on compressed files": one partition per ``.gz``), and its
partitions carry no row counts. Here every partition is a record range of the same size (±1 record;
:func:`sjsonl.sampling.ranges.record_ranges`), plain, compressed (``.gz``, ``.zst`` …), local or remote alike,
and the DataFrame's index is the global record number: its divisions are known
(``df.known_divisions``), so ``df.loc[i]`` reads one partition, and each partition's length is exact before
it is read (:func:`partition_rows`).

Rows are the records as sjsonl reads them (``fields=``, ``columns``, ``on_bad_lines``, ``schema=`` as for
:class:`~sjsonl.JSONLDataset`), made columns as :func:`sjsonl.hf.convert.to_hf` makes them: a key a row lacks
is null there (``NaN``/``None`` in pandas), a row that is not a JSON object is ``{"value": row}``. Integers
beyond int64 stay exact: pandas keeps such a column as Python ints (``object`` dtype), as it keeps lists and
objects; a column of strings becomes Arrow strings when Dask's ``dataframe.convert-string`` is on (its
default), but never a column holding anything else (Dask's own conversion would make those values text). The
Bag form (:func:`read_jsonl_bag`) holds the records themselves, unchanged.

Missing indexes are built first, all files at once, on ``executor`` — by default on the running
``dask.distributed`` client's workers when there is one (:func:`sjsonl.build_indexes`), else here.

Example:
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
    >>> path = os.path.join(tmp.name, "d.jsonl")
    >>> _ = open(path, "w").write("".join(f'{{"id": {i}, "text": "t{i}"}}\\n' for i in range(10)))
    >>> df = read_jsonl(path, npartitions=3)
    >>> df.npartitions, df.divisions, partition_rows(df)
    (3, (0, 4, 7, 9), [4, 3, 3])
    >>> df.loc[5].compute()["text"].tolist()
    ['t5']
    >>> tmp.cleanup()
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any

from sjsonl.errors import InvalidArgumentError, SchemaMismatchError, require

require("dask.dataframe", "cluster")  # raises MissingDependencyError naming the extra when Dask is absent

import dask  # noqa: E402
import dask.bag as db  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import pandas as pd  # noqa: E402
from dask.dataframe.utils import pyarrow_strings_enabled  # noqa: E402

from sjsonl.data.parts import Corpus, Part, as_columns, open_corpus  # noqa: E402

__all__ = ["partition_rows", "read_jsonl", "read_jsonl_bag"]

PathLike = str | os.PathLike[str]
#: Bytes of records per partition when ``npartitions`` is not given (Dask's ``read_csv`` default).
DEFAULT_BLOCKSIZE = 64 * 1024 * 1024
_SAMPLE_ROWS = 32  # rows read from the start of each partition to make ``meta`` (up to 1,000 in all)


def _default_executor() -> Executor | None:
    """The running ``dask.distributed`` client's executor, or None (build here) when there is none."""
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client().get_executor(pure=False)
    except ValueError:  # no client
        return None


def _open(paths: Any, executor: Executor | None, options: dict[str, Any]) -> Corpus:
    return open_corpus(paths, executor=executor if executor is not None else _default_executor(), **options)


def _parts(corpus: Corpus, npartitions: int | None, blocksize: int) -> list[Part]:
    if npartitions is None:
        npartitions = max(1, math.ceil(corpus.nbytes / max(1, blocksize)))
    if npartitions < 1:
        raise InvalidArgumentError(f"npartitions must be >= 1, got {npartitions}")
    parts = corpus.parts(npartitions)
    if not parts:
        raise InvalidArgumentError(f"no records in {corpus.paths[:3]}: a Dask DataFrame needs one partition")
    return parts


def _strings(df: pd.DataFrame, arrow_strings: bool) -> pd.DataFrame:
    """``df`` with each ``object`` column that holds only strings (and nulls) as Arrow strings, as Dask makes
    them (``dataframe.convert-string``) — never a column holding other values, which Dask's own conversion
    would turn into their text (an integer beyond int64, a list, an object)."""
    if not arrow_strings:
        return df
    for c in df.columns:
        if df[c].dtype == object and pd.api.types.infer_dtype(df[c], skipna=True) == "string":
            df[c] = df[c].astype("string[pyarrow]")
    return df


def _frame(
    rows: list[Any], start: int, meta: pd.DataFrame | None, arrow_strings: bool = False
) -> pd.DataFrame:
    columns = as_columns(rows)
    index = pd.RangeIndex(start, start + len(rows))
    if meta is None:
        df = pd.DataFrame(columns, index=index) if columns else pd.DataFrame(index=index)
        return _strings(df, arrow_strings)
    extra = [c for c in columns if c not in meta.columns]
    if extra:
        raise SchemaMismatchError(
            f"records {start}-{start + len(rows) - 1} have columns {extra} that the DataFrame's meta "
            f"(made from a sample of rows) lacks; pass meta= or columns= naming every column"
        )
    none = [None] * len(rows)
    df = pd.DataFrame({c: columns.get(c, none) for c in meta.columns}, index=index)
    return _strings(df, arrow_strings)


def _read_partition(part: Part, meta: pd.DataFrame, arrow_strings: bool) -> pd.DataFrame:
    return _frame(part.read(), part.start, meta, arrow_strings)


def _sample_meta(parts: list[Part], arrow_strings: bool) -> pd.DataFrame:
    per = max(1, min(_SAMPLE_ROWS, 1000 // len(parts)))
    rows: list[Any] = []
    for p in parts:
        rows += next(iter(p.batches(per)), [])
    return _frame(rows, 0, None, arrow_strings).iloc[:0]


def read_jsonl(
    paths: PathLike | Sequence[PathLike],
    *,
    npartitions: int | None = None,
    blocksize: int = DEFAULT_BLOCKSIZE,
    meta: pd.DataFrame | None = None,
    executor: Executor | None = None,
    columns: Sequence[str] | None = None,
    **options: Any,
) -> dd.DataFrame:
    """JSON Lines files as a Dask DataFrame: one partition per balanced record range, indexed by global
    record number (known divisions).

    Args:
        paths: files, globs, directories or URLs, as for :func:`sjsonl.ray.read_jsonl`; compressed files too.
        npartitions: how many partitions (default: one per ``blocksize`` bytes of records, at least one;
            never more than there are records).
        blocksize: bytes of records per partition when ``npartitions`` is not given.
        meta: an empty ``pandas.DataFrame`` with the columns and dtypes (default: made from the first rows
            of every partition; a partition with a column the sample missed raises, naming it).
        executor: where missing indexes are built (default: the running ``dask.distributed`` client's
            workers if there is one, else here).
        columns: keep only these top-level fields (missing ones are null).
        options: as for :class:`~sjsonl.JSONLDataset` (``fields=``, ``on_bad_lines=``, ``schema=``,
            ``index_dir=``, ``storage_options=``, ``field=``, ``compact=``, ``allow_nan=`` …).

    Example:
        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
        >>> path = os.path.join(tmp.name, "d.jsonl")
        >>> _ = open(path, "w").write('{"n": 1}\\n{"n": 18446744073709551616}\\n{"m": "x"}\\n')
        >>> df = read_jsonl(path, npartitions=3)
        >>> df["n"].compute().tolist()
        [1, 18446744073709551616, None]
        >>> tmp.cleanup()
    """
    corpus = _open(paths, executor, {"columns": columns, **options})
    parts = _parts(corpus, npartitions, blocksize)
    arrow_strings = pyarrow_strings_enabled()
    if meta is None:
        meta = _sample_meta(parts, arrow_strings)
    divisions = (*(p.start for p in parts), parts[-1].start + parts[-1].rows - 1)
    with dask.config.set({"dataframe.convert-string": False}):  # the string columns are converted above
        return dd.from_map(
            _read_partition, parts, args=[meta, arrow_strings], meta=meta, divisions=divisions,
            label="read-jsonl", enforce_metadata=False,
        )  # fmt: skip


def _records(part: Part) -> list[Any]:
    return part.read()


def read_jsonl_bag(
    paths: PathLike | Sequence[PathLike],
    *,
    npartitions: int | None = None,
    blocksize: int = DEFAULT_BLOCKSIZE,
    executor: Executor | None = None,
    columns: Sequence[str] | None = None,
    **options: Any,
) -> db.Bag:
    """JSON Lines files as a Dask Bag of their records (exactly as sjsonl reads them), one partition per
    balanced record range; arguments as for :func:`read_jsonl`. (Dask computes a Bag in worker processes
    by default, which re-run a script without a main guard: pass ``scheduler="threads"`` there, or use a
    ``dask.distributed`` client.)

    Example:
        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
        >>> path = os.path.join(tmp.name, "d.jsonl")
        >>> _ = open(path, "w").write('{"n": 1}\\n[2]\\n"three"\\n')
        >>> bag = read_jsonl_bag(path, npartitions=2)
        >>> bag.npartitions, bag.compute()
        (2, [{'n': 1}, [2], 'three'])
        >>> tmp.cleanup()
    """
    corpus = _open(paths, executor, {"columns": columns, **options})
    parts = _parts(corpus, npartitions, blocksize)
    return db.from_delayed([dask.delayed(_records, pure=False)(p) for p in parts])


def partition_rows(df: dd.DataFrame) -> list[int]:
    """The exact row count of each partition of a DataFrame from :func:`read_jsonl`, from its divisions
    (nothing is read).

    Example:
        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()  # (removed at the end)
        >>> path = os.path.join(tmp.name, "d.jsonl")
        >>> _ = open(path, "w").write("{}\\n" * 5)
        >>> partition_rows(read_jsonl(path, npartitions=2))
        [3, 2]
        >>> tmp.cleanup()
    """
    if not df.known_divisions:
        raise InvalidArgumentError("the DataFrame's divisions are not known: it is not read_jsonl's")
    d = list(df.divisions)
    return [b - a for a, b in itertools.pairwise(d[:-1])] + [d[-1] - d[-2] + 1]
