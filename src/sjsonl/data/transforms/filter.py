"""🤗 ``Dataset.filter``: the positions that pass, computed once, kept as a sub-index (a ``select`` view).

The predicate gets a row (or, with ``batched=True``, a batch as a dict of lists, and returns a list of
bools), plus its position with ``with_indices`` and ``fn_kwargs``. Unlike ``map``, a filter cannot be lazy
and keep random access — position *i* of the result depends on every row before it — so it runs once over
the dataset, in ``num_proc`` processes when asked (:mod:`sjsonl.runtime.parallel`: they never re-run the
user's script; lambdas and closures travel by value; a predicate that cannot travel, such as an instance of a
class defined in the script, runs in this process with a warning), and the result is an int64 array of the
kept positions; the records themselves are never copied.

With ``cache_file_name=`` the kept positions are saved there (``.npy`` plus a ``.json`` key) and reused by
later runs while the data files, the view and the functions are unchanged (``load_from_cache_file=False``
forces a recomputation); a changed data file gives a new key, so a stale cache is never used.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> d = tempfile.mkdtemp()
    >>> path = os.path.join(d, "d.jsonl")
    >>> _ = open(path, "w").write("".join(f'{{"n": {i}}}\\n' for i in range(10)))
    >>> ds = JSONLDataset(path)
    >>> [r["n"] for r in ds.filter(lambda r: r["n"] % 3 == 0)]
    [0, 3, 6, 9]
    >>> cache = os.path.join(d, "odd.npy")
    >>> len(ds.filter(lambda b: [n % 2 == 1 for n in b["n"]], batched=True, cache_file_name=cache))
    5
    >>> os.path.exists(cache)
    True
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pickle
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from sjsonl.data.transforms.map import rows_to_batch
from sjsonl.data.transforms.protocol import D
from sjsonl.errors import ArgumentTypeError, InvalidArgumentError
from sjsonl.runtime.parallel import ShippingError, map_in_order

_BLOCK = 1000
_ACCEPTED = frozenset({"desc", "keep_in_memory", "writer_batch_size", "fn_kwargs_hash", "suffix_template"})


class _Predicate:
    def __init__(self, function, batched, fn_kwargs, input_columns, with_indices) -> None:
        self.function, self.batched, self.fn_kwargs = function, batched, dict(fn_kwargs or {})
        self.input_columns, self.with_indices = input_columns, with_indices

    def _call(self, value: Any, indices: Any) -> Any:
        args = [value] if self.input_columns is None else [value[c] for c in self.input_columns]
        if self.with_indices:
            args.append(indices)
        return self.function(*args, **self.fn_kwargs)

    def keep(self, rows: list[Any], lo: int) -> np.ndarray:
        if self.batched:
            mask = np.asarray(
                list(self._call(rows_to_batch(rows), list(range(lo, lo + len(rows))))), dtype=bool
            )
            if mask.shape != (len(rows),):
                raise InvalidArgumentError(
                    f"a batched filter function must return {len(rows)} booleans, got {mask.shape}"
                )
            return mask
        return np.fromiter((bool(self._call(r, lo + k)) for k, r in enumerate(rows)), bool, len(rows))


def _kept(ds: D, pred: _Predicate, lo: int, hi: int, batch_size: int) -> np.ndarray:
    out = []
    for a in range(lo, hi, batch_size):
        b = min(hi, a + batch_size)
        out.append(np.flatnonzero(pred.keep(ds[a:b], a)) + a)
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def _kept_job(job: tuple[D, _Predicate], lo: int, hi: int, batch_size: int) -> np.ndarray:
    return _kept(*job, lo, hi, batch_size)


def _fingerprint(obj: Any) -> Any:
    # What identifies a function across runs: its code and constants, its closure's values, its kwargs.
    code = getattr(obj, "__code__", None)
    if code is not None:
        cells = [c.cell_contents for c in (obj.__closure__ or ())]
        return [obj.__module__, obj.__qualname__, code.co_code.hex(), repr(code.co_consts), repr(cells)]
    fn = getattr(obj, "function", None) or getattr(obj, "fn", None)
    if fn is not None and fn is not obj:
        return [type(obj).__name__, _fingerprint(fn), repr(getattr(obj, "fn_kwargs", None))]
    return repr(obj)


def _cache_key(ds: D, pred: _Predicate, batch_size: int) -> str:
    from sjsonl.data.transforms.pipeline import Pipeline

    key = {
        "files": [[f.path, f.stamp.to_dict(), len(f)] for f in ds._files],
        "view": hashlib.sha256(pickle.dumps(ds._order)).hexdigest(),
        "decode": repr(ds._decode),
        "pipeline": [_fingerprint(s) for s in Pipeline.of(ds._transform).all_stages],
        "predicate": [_fingerprint(pred.function), repr(pred.fn_kwargs), pred.batched, batch_size],
        "columns": [pred.input_columns, pred.with_indices],
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=repr).encode()).hexdigest()


def _load(path: str, key: str) -> np.ndarray | None:
    try:
        with open(path + ".json") as fh:
            if json.load(fh).get("key") != key:
                return None
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None


def _save(path: str, key: str, kept: np.ndarray) -> None:
    for target, write in ((path, lambda f: np.save(f, kept)), (path + ".json", None)):
        tmp = f"{target}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            if write is not None:
                write(fh)
            else:
                fh.write(json.dumps({"key": key, "kept": len(kept)}).encode())
        os.replace(tmp, target)  # atomic: a killed run leaves the old cache or none


def filter_dataset(
    ds: D,
    function: Callable[..., Any] | None = None,
    with_indices: bool = False,
    input_columns: str | Sequence[str] | None = None,
    batched: bool = False,
    batch_size: int | None = 1000,
    fn_kwargs: Mapping[str, Any] | None = None,
    num_proc: int | None = None,
    cache_file_name: str | os.PathLike[str] | None = None,
    load_from_cache_file: bool | None = None,
    **kwargs: Any,
) -> D:
    """``ds.filter(...)``: see the module docstring. ``desc``, ``keep_in_memory`` are accepted (no bar is
    drawn; nothing is written unless ``cache_file_name`` is given).

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write("".join(f"{i}\\n" for i in range(100)))
        >>> ds = JSONLDataset(path)
        >>> len(filter_dataset(ds, lambda v, i: v == i and v < 40, with_indices=True, num_proc=2))
        40
    """
    unknown = set(kwargs) - _ACCEPTED
    if unknown:
        raise ArgumentTypeError(f"filter() got unexpected keyword argument(s) {', '.join(sorted(unknown))}")
    if function is None:
        return ds
    cols = [input_columns] if isinstance(input_columns, str) else input_columns
    pred = _Predicate(function, batched, fn_kwargs, cols, with_indices)
    size = batch_size if batched and batch_size and batch_size > 0 else _BLOCK
    path = os.fspath(cache_file_name) if cache_file_name is not None else None
    key = _cache_key(ds, pred, size) if path else ""
    kept = _load(path, key) if path and load_from_cache_file is not False else None
    if kept is None:
        n = len(ds)
        procs = max(1, min(int(num_proc or 1), n // size + 1))
        bounds = np.linspace(0, n, procs * 4 + 1).astype(np.int64)
        spans = [(int(a), int(b), size) for a, b in itertools.pairwise(bounds) if b > a]
        try:  # the dataset and the predicate go to each worker once, a lambda by value (runtime.parallel)
            parts = list(map_in_order(_kept_job, spans, procs, shared=(ds, pred)))
        except ShippingError as exc:
            warnings.warn(f"filter(num_proc={num_proc}) runs in this process: {exc}", stacklevel=3)
            parts = [_kept(ds, pred, 0, n, size)]
        kept = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        if path:
            _save(path, key, kept)
    return ds.select(kept.astype(np.int64, copy=False))
