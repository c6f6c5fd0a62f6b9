"""🤗 ``datasets`` interop: sjsonl data as 🤗 datasets (:func:`to_hf`), and 🤗 datasets recognised as sources.

:func:`to_hf` with ``streaming=True`` gives a lazy ``datasets.IterableDataset`` — nothing is read until it is
iterated, nothing is copied, and its shards (contiguous runs of a :class:`~sjsonl.data.dataset.JSONLDataset`,
or the files of a :class:`~sjsonl.data.streaming.JSONLStream`) let a DataLoader's workers split the work. With
``streaming=False`` it gives a ``datasets.Dataset``, which 🤗 builds by writing every record to an Arrow file
in its cache (``Dataset.from_generator``): a second copy of the data and, as 🤗's own JSON loader costs,
a full pass over it — two passes without ``features``, the first collecting the column names so that a
record without some key gets null there (as 🤗's JSON loader does). The Arrow copy is reused while the
data files are unchanged. Rows that are not JSON objects become
``{"value": row}``, as in :mod:`sjsonl.mindspore.columns`.

The other direction needs no conversion: :func:`sjsonl.mindspore.to_generator_dataset` takes a 🤗
``Dataset`` or ``IterableDataset`` directly (:func:`hf_kind` tells them apart without importing 🤗).

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"a": 1}\\n{"a": 2}\\n[3]\\n')
    >>> list(to_hf(JSONLDataset(path).take(2), streaming=True))
    [{'a': 1}, {'a': 2}]
    >>> list(to_hf(JSONLDataset(path).skip(2), streaming=True))
    [{'value': [3]}]
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Iterator, Sequence
from typing import Any

from sjsonl.data.dataset import JSONLDataset
from sjsonl.data.streaming import JSONLStream
from sjsonl.errors import ArgumentTypeError, require

#: Shards of a streamed JSONLDataset when ``num_shards`` is not given (capped at the record count).
DEFAULT_SHARDS = 8


def hf_kind(obj: Any) -> str | None:
    """``"map"`` for a 🤗 ``Dataset``, ``"iterable"`` for a 🤗 ``IterableDataset``, else None — without
    importing 🤗 (the object's classes are looked at by module and name).

    Example:
        >>> hf_kind([1, 2]) is None
        True
    """
    if isinstance(obj, JSONLDataset):  # sjsonl's own, even when also typed as 🤗's (sjsonl.hf.dataset)
        return None
    for cls in type(obj).__mro__:
        if cls.__module__.startswith("datasets."):
            if cls.__name__ == "Dataset":
                return "map"
            if cls.__name__ == "IterableDataset":
                return "iterable"
    return None


def _generate(shards: Sequence[Any], keys: Sequence[str] | None = None) -> Iterator[dict]:
    for shard in shards:
        for rec in shard:
            rec = rec if type(rec) is dict else {"value": rec}
            yield rec if keys is None else {k: rec.get(k) for k in keys}


def _all_keys(ds: JSONLDataset) -> list[str]:
    # 🤗's Arrow writer needs every row to have every column; as its JSON loader does, a missing key is null.
    keys: dict[str, None] = {}
    for rec in ds:
        keys.update(dict.fromkeys(rec if type(rec) is dict else ("value",)))
    return list(keys)


def _shards(ds: JSONLDataset | JSONLStream, num_shards: int | None) -> list[Any]:
    if isinstance(ds, JSONLStream):
        if num_shards is None:
            return [ds] if ds._ops else [JSONLStream(f) for f in ds.files]  # one shard per file
        return [ds.shard(num_shards, k) for k in range(num_shards)]
    n = max(1, min(len(ds), DEFAULT_SHARDS if num_shards is None else num_shards))
    return [ds.shard(n, k) for k in range(n)]  # contiguous runs: sequential reads within each shard


def _fingerprint(shards: list[Any], files: list[str]) -> str:
    # The views themselves (files, selection, order) plus each file's size and mtime: a changed file gives
    # a new fingerprint, so 🤗 never serves an Arrow cache of old data.
    h = hashlib.sha256(pickle.dumps(shards))
    for f in files:
        st = os.stat(f)
        h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def to_hf(
    ds: JSONLDataset | JSONLStream,
    streaming: bool = False,
    *,
    features: Any = None,
    num_shards: int | None = None,
    cache_dir: str | None = None,
    keep_in_memory: bool = False,
) -> Any:
    """The records of ``ds`` as a 🤗 ``IterableDataset`` (``streaming=True``: lazy, no copy) or ``Dataset``
    (an Arrow copy in 🤗's cache).

    Args:
        ds: a JSONLDataset (any view) or a JSONLStream (streaming only).
        streaming: return an ``IterableDataset`` instead of a ``Dataset``.
        features: 🤗 ``Features`` for the result (default: 🤗 infers them).
        num_shards: shards of the ``IterableDataset`` (default: one per file of a stream; up to 8 contiguous
            runs of a JSONLDataset); also the generator shards 🤗 may spread over processes when building a
            ``Dataset``.
        cache_dir, keep_in_memory: passed to ``Dataset.from_generator``.

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write('{"a": 1}\\n{"a": 2}\\n')
        >>> hf = to_hf(JSONLDataset(path), cache_dir=os.path.dirname(path))
        >>> hf.num_rows, hf[1]
        (2, {'a': 2})
    """
    datasets = require("datasets", "hf")
    shards = _shards(ds, num_shards)
    if streaming:
        return datasets.IterableDataset.from_generator(
            _generate, features=features, gen_kwargs={"shards": shards}
        )
    if isinstance(ds, JSONLStream):
        raise ArgumentTypeError(
            "a JSONLStream converts with streaming=True only; index it (JSONLDataset) for a Dataset"
        )
    return datasets.Dataset.from_generator(
        _generate,
        features=features,
        cache_dir=cache_dir,
        keep_in_memory=keep_in_memory,
        # keys is a tuple: 🤗 splits gen_kwargs *lists* between its worker processes
        gen_kwargs={"shards": shards, "keys": None if features is not None else tuple(_all_keys(ds))},
        fingerprint=_fingerprint(shards, ds.files),
    )
