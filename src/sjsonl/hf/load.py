"""``sjsonl.load_dataset``: 🤗 ``datasets.load_dataset``'s parameters, for JSON Lines read in place.

Files are found as 🤗 finds them; each split becomes a :class:`~sjsonl.data.dataset.JSONLDataset` (several
files of a split are one multi-file dataset, in order) — no Arrow conversion, no second copy, no cache to
invalidate.

``path`` may be

- ``"json"`` with ``data_files`` (a path or glob, a list of them, or ``{split: files}``; relative to
  ``data_dir`` when given, else to the working directory) — or with ``data_dir`` alone;
- a directory: its ``.jsonl`` / ``.json`` / ``.ndjson`` files, split by name as 🤗 does — files named
  ``train*``, ``*-test.*``, ``dev*``, … or inside ``train/``, ``validation/`` … folders (keywords: train,
  training / validation, valid, dev, val / test, testing, eval, evaluation, followed by one of ``-._ 0-9``),
  or ``data/{split}-00000-of-00003.jsonl`` shards; otherwise every file is ``train``. Hidden files and
  ``__special__`` folders are ignored;
- one file, or a glob: the ``train`` split (an sjsonl convenience; 🤗 wants ``data_files`` for these).

Return value, as 🤗: ``split=None`` gives a ``dict`` ``{split: JSONLDataset}`` — **even when there is
one split** (🤗 returns a one-entry ``DatasetDict``); ``split="train"`` gives that split's dataset; a list of
splits gives a list. Splits take 🤗's slicing syntax, as views (no copy): ``"train[:10%]"``,
``"train[10:20]"``, ``"train[-5:]"``, ``"train[:33%](pct1_dropremainder)"``, ``"train+test"``.

``streaming=True`` returns :class:`~sjsonl.data.streaming.JSONLStream` iterables instead, which need no index
(slices other than whole splits are not available there, as in 🤗).

🤗's keywords ``cache_dir`` (where indexes go), ``num_proc`` (see :func:`index_workers`) and ``features``
(columns, order, types, missing keys ``None``) do what they say; ``fill_missing=True`` gives 🤗's row
shape without features. Keyword arguments 🤗 would take but this loader cannot honour raise ``TypeError``
(:class:`~sjsonl.errors.UnsupportedArgumentError`) naming them — nothing is silently
dropped. :func:`sjsonl.mindspore.load_dataset` is the variant with 🤗's full parameter list.

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for name, n in [("train.jsonl", 10), ("test.jsonl", 4)]:
    ...     _ = open(os.path.join(d, name), "w").write("".join(f'{{"i": {i}}}\\n' for i in range(n)))
    >>> dsd = load_dataset(d)
    >>> sorted(dsd), len(dsd["train"]), len(dsd["test"])
    (['test', 'train'], 10, 4)
    >>> [r["i"] for r in load_dataset("json", data_files=os.path.join(d, "train.jsonl"), split="train[:30%]")]
    [0, 1, 2]
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sjsonl.data.dataset import JSONLDataset
from sjsonl.data.streaming import JSONLStream
from sjsonl.data.transforms.splits import DatasetDict
from sjsonl.errors import (
    InvalidArgumentError,
    SplitError,
    UnsupportedArgumentError,
)
from sjsonl.hf.data_files import JSON_EXTENSIONS, DataFiles, PathLike, is_jsonl_source, resolve_data_files
from sjsonl.records.alongside import typing_alongside
from sjsonl.records.conform import conform_rows
from sjsonl.records.schema import infer_schema
from sjsonl.runtime.parallel import worker_count

# The files a call names and whether sjsonl reads them: sjsonl.hf.data_files (kept importable from here).
__all__ = ["JSON_EXTENSIONS", "is_jsonl_source", "load_dataset", "resolve_data_files"]

_SPLIT_SPEC = re.compile(
    r"^(?P<split>\w+(?:\.\w+)*)"
    r"(?:\[(?:(?P<from>-?[\d_]+)(?P<from_pct>%)?)?:(?:(?P<to>-?[\d_]+)(?P<to_pct>%)?)?\])?"
    r"(?:\((?P<rounding>[^)]*)\))?$"
)


# ----------------------------------------------------------------------------------------------- splits
def _split_ranges(spec: str, sizes: Mapping[str, int]) -> list[tuple[str, int, int]]:
    """🤗's split syntax → ``[(split, start, stop)]`` with 🤗's rounding rules."""
    out = []
    roundings: set[str] = set()
    for part in re.split(r"\s*\+\s*", spec.strip()):
        m = _SPLIT_SPEC.match(part)
        if not m:
            raise SplitError(f"Unrecognized instruction format: {part}")
        split = m.group("split")
        if split not in sizes:
            raise SplitError(f'Unknown split "{split}". Should be one of {list(sizes)}.')
        n = sizes[split]
        lo, hi = m.group("from"), m.group("to")
        lo, hi = (None if x is None else int(x) for x in (lo, hi))
        if m.group("from_pct") or m.group("to_pct"):
            rounding = m.group("rounding") or "closest"
            if any(b is not None and abs(b) > 100 for b in (lo, hi)):  # 🤗's check: "train[:101%]" is refused
                raise SplitError("Percent slice boundaries must be > -100 and < 100.")
            if roundings and rounding not in roundings:
                raise SplitError(
                    "It is forbidden to sum ReadInstruction instances with different rounding values."
                )
            roundings.add(rounding)
            lo = 0 if lo is None else _pct_to_abs(lo, n, rounding)
            hi = n if hi is None else _pct_to_abs(hi, n, rounding)
        elif m.group("rounding"):
            raise SplitError("It is forbidden to specify rounding if not using percent slicing.")
        lo = 0 if lo is None else (max(n + lo, 0) if lo < 0 else lo)
        hi = n if hi is None else (max(n + hi, 0) if hi < 0 else hi)
        lo, hi = min(lo, n), min(hi, n)
        if hi <= lo and (m.group("from") is not None or m.group("to") is not None):  # 🤗 refuses it too
            raise SplitError(f'Instruction "{part}" corresponds to no data!')
        out.append((split, lo, hi))
    return out


def _pct_to_abs(boundary: int, n: int, rounding: str) -> int:
    if rounding == "closest":
        return round(boundary * n / 100.0)  # Python's round, as 🤗 (halves to even)
    if rounding == "pct1_dropremainder":
        if n < 100:
            raise SplitError("pct1_dropremainder rounding needs a split of at least 100 records")
        return boundary * math.trunc(n / 100.0)
    raise SplitError("rounding must be either closest or pct1_dropremainder")


def _select_split(
    spec: str, files: Mapping[str, list[str]], make: Any, stream: Any
) -> JSONLDataset | JSONLStream:
    if stream is not None:  # streaming=True
        names = re.split(r"\s*\+\s*", spec.strip())
        bad = [p for p in names if p not in files]
        if bad:
            detail = "slices are not available with streaming=True" if any("[" in p for p in bad) else ""
            raise SplitError(f"Bad split: {spec}. Available splits: {list(files)}. {detail}".strip())
        return stream([f for p in names for f in files[p]])
    needed = {m.group("split") for p in re.split(r"\s*\+\s*", spec.strip()) if (m := _SPLIT_SPEC.match(p))}
    datasets = {s: make(files[s]) for s in files if s in needed}
    ranges = _split_ranges(spec, {s: len(datasets[s]) if s in datasets else 0 for s in files})
    if len(ranges) == 1:
        split, lo, hi = ranges[0]
        ds = datasets[split]
        return ds if (lo, hi) == (0, len(ds)) else ds.skip(lo).take(max(0, hi - lo))
    # Several parts: one multi-file dataset over every part's files, then a selection of positions.
    combined = make([f for split, _, _ in ranges for f in files[split]])
    starts, pos = [], 0
    for split, _, _ in ranges:
        starts.append(pos)
        pos += len(datasets[split])
    parts = [np.arange(lo, max(lo, hi), dtype=np.int64) + s for (_, lo, hi), s in zip(ranges, starts)]
    return combined.select(np.concatenate(parts))


def _typed(ds: JSONLDataset) -> JSONLDataset:
    from sjsonl.hf.dataset import as_hf

    return as_hf(ds)


def index_workers(workers: int | None, num_proc: int | None) -> int | None:
    """The workers that build a split's index and column types, given 🤗's ``num_proc``: ``workers`` when
    set; else at least ``num_proc``, and by default every core (up to 8; None: the default).

    🤗 counts processes with ``num_proc``, and each of them reads JSON with pyarrow's threads on every core:
    ``num_proc=1`` does not make 🤗's reader one thread, nor does it make sjsonl's index scan and type pass
    one thread (compiled code on threads; where the extension is not built, the Python type pass runs in
    processes). ``workers=1`` does: one thread, nothing started.

    Example:
        >>> index_workers(None, None), index_workers(1, 4), index_workers(None, 64)
        (None, 1, 64)
        >>> index_workers(None, 1) == max(1, worker_count())   # every core, as pyarrow's under num_proc=1
        True
    """
    if workers is not None or not num_proc:
        return workers
    return max(int(num_proc), worker_count())


def load_dataset(
    path: PathLike,
    name: str | None = None,
    data_dir: PathLike | None = None,
    data_files: DataFiles | None = None,
    split: str | Sequence[str] | None = None,
    streaming: bool = False,
    *,
    cache_dir: PathLike | None = None,
    features: Mapping[str, Any] | None = None,
    keep_in_memory: bool | None = None,
    num_proc: int | None = None,
    fill_missing: bool = False,
    index_dir: PathLike | None = None,
    workers: int | None = None,
    storage_options: dict | None = None,
    as_hf: bool | None = None,
    field: str | None = None,
    on_bad_lines: str = "error",
    fields: Sequence[str] | None = None,
    missing: str = "absent",
    schema: type | None = None,
    allow_nan: bool = True,
    **kwargs: Any,
) -> Any:
    """Load JSON Lines data with 🤗 ``datasets.load_dataset``'s parameters; see the module docstring.

    Args:
        path: ``"json"``, a directory, a file or a glob.
        name: 🤗's configuration name; the JSON builder has only ``"default"``.
        data_dir: where relative ``data_files`` live (``path="json"``), or a sub-folder of ``path``.
        data_files: a file or glob, a list of them, or ``{split: files}``. A file listed twice is read
            twice, as in 🤗.
        split: ``None`` (a dict of every split), a split spec such as ``"train[:10%]"``, or a list of specs.
        streaming: return :class:`~sjsonl.data.streaming.JSONLStream` objects (no index) instead of datasets.
        cache_dir: 🤗's cache directory; here, where the indexes (and schema caches) are kept — the same as
            ``index_dir``.
        features: 🤗 ``Features`` (or any mapping of column names): records come back with exactly those
            columns, in that order, missing ones ``None``, scalar ``Value`` types cast (``1`` → ``1.0`` for a
            float feature); a record with another key raises
            :class:`~sjsonl.records.conform.FeaturesMismatchError` (🤗 refuses such data too). See
            :mod:`sjsonl.records.conform`.
        keep_in_memory: ``None``/``False`` (the data stay on disk, read in place — what sjsonl always
            does); ``True`` is refused: copying records into memory is ``list(ds)``.
        num_proc: 🤗's count of processes; here, at least that many workers build the indexes and types
            (:func:`index_workers`: ``num_proc=1`` still uses every core, as 🤗's reader does).
        field: the rows are the list under this top-level key of each file, a JSON document (as 🤗's
            ``field=``), indexed by element and read in place. Without it, a ``.json`` file holding one
            JSON array has its elements as rows, as in 🤗 (see :mod:`sjsonl.data.document`).
        fill_missing: give every record every column of its split (``None`` where the key is missing), as
            🤗's Arrow tables do; the columns come from all rows (:func:`sjsonl.records.schema.infer_schema`,
            cached with the index). By default a record is exactly its line's JSON.
        on_bad_lines, fields, missing, schema, allow_nan: as :class:`~sjsonl.data.dataset.JSONLDataset` (skip
            bad lines; decode only some, possibly nested, fields; decode as a type; ``allow_nan=False``
            refuses ``NaN``/``Infinity``, also when streaming).
        index_dir: where to keep the indexes (as :class:`~sjsonl.data.dataset.JSONLDataset`).
        workers: the workers building indexes and types, exactly — threads (processes for the Python type
            pass where the compiled one is not built); ``workers=1``: none is started.
        storage_options: passed to fsspec for URLs in ``data_files`` (``s3://bucket/train.jsonl`` …), which
            are read in place by range requests; their indexes go to the cache directory.
        as_hf: type each dataset as a ``datasets.Dataset`` too (:class:`sjsonl.hf.dataset.HFDataset`:
            still read in place, no Arrow copy) so that code checking types (TRL's trainers) takes it.
            ``None`` (the default): when 🤗 ``datasets`` is installed — whoever has it may hand the result
            to code that checks, and must not need to know about such checks.

    Raises:
        UnsupportedArgumentError: (a ``TypeError``) for any other keyword argument,
            ``keep_in_memory=True``, or ``features``/``fill_missing`` with ``streaming=True``.
        DataFileNotFoundError: (a ``FileNotFoundError``) when no data files match; a Hub dataset name
            gets a hint.
        SplitError: (a ``ValueError``) for an unknown split or a split spec 🤗 refuses.

    Example:
        >>> import os, tempfile
        >>> f = os.path.join(tempfile.mkdtemp(), "data.jsonl")
        >>> _ = open(f, "w").write('{"a": 1}\\n{"a": 2, "b": true}\\n')
        >>> load_dataset(f, split="train")[-1], load_dataset(f)["train"][0]
        ({'a': 2, 'b': True}, {'a': 1})
        >>> load_dataset(f, split="train", fill_missing=True)[0]        # 🤗's shape: every column
        {'a': 1, 'b': None}
        >>> load_dataset(f, trust_remote_code=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        sjsonl.errors.UnsupportedArgumentError: sjsonl.load_dataset got unsupported keyword argument(s) ...
    """
    refused = sorted(kwargs)
    if keep_in_memory:
        refused.append("keep_in_memory=True (sjsonl reads in place; list(ds) copies the records)")
    if streaming and (features is not None or fill_missing):
        refused.append("features/fill_missing with streaming=True")
    if streaming and (fields is not None or schema is not None):
        refused.append("fields/schema with streaming=True (they need the index: drop streaming=True)")
    if refused:
        raise UnsupportedArgumentError(
            f"sjsonl.load_dataset got unsupported keyword argument(s) {', '.join(refused)}: it reads JSON "
            "Lines in place; use sjsonl.mindspore.load_dataset or datasets.load_dataset for 🤗's options"
        )
    if name not in (None, "default"):
        raise InvalidArgumentError(
            f"BuilderConfig {name!r} not found: the JSON Lines loader has only 'default'"
        )
    if cache_dir is not None and index_dir is not None and os.fspath(cache_dir) != os.fspath(index_dir):
        raise InvalidArgumentError("cache_dir and index_dir name the same thing here; give one")
    index_dir = index_dir if index_dir is not None else cache_dir
    workers = index_workers(workers, num_proc)
    files = resolve_data_files(path, data_dir, data_files)

    if as_hf is None:
        import importlib.util

        as_hf = importlib.util.find_spec("datasets") is not None

    def make(paths: list[str]) -> JSONLDataset:
        def open_(transform: Any = None) -> JSONLDataset:
            return JSONLDataset(
                paths,
                index_dir=index_dir,
                workers=workers,
                storage_options=storage_options,
                record_transform=transform,
                field=field,
                on_bad_lines=on_bad_lines,
                fields=fields,
                missing=missing,
                schema=schema,
                allow_nan=allow_nan,
            )

        with typing_alongside(on=fill_missing and features is None):
            ds = open_()  # (every row's types come next: an index built now types its records as it scans)
        # conform_rows is a function of one record: the per-record transform= (with_transform takes batches)
        if features is not None:
            ds = open_(conform_rows(features=features))
        elif fill_missing:
            ds = open_(conform_rows(schema=infer_schema(ds, workers=workers)))
        return _typed(ds) if as_hf else ds

    def stream(paths: list[str]) -> JSONLStream:
        return JSONLStream(
            paths,
            storage_options=storage_options,
            field=field,
            on_bad_lines=on_bad_lines,
            allow_nan=allow_nan,
        )

    if split is None:
        return DatasetDict({s: (stream(fs) if streaming else make(fs)) for s, fs in files.items()})
    if isinstance(split, str) or not isinstance(split, Sequence):
        return _select_split(str(split), files, make, stream if streaming else None)
    return [_select_split(str(s), files, make, stream if streaming else None) for s in split]
