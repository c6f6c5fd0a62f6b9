"""``sjsonl.mindspore.load_dataset``: MindNLP's ``load_dataset`` (🤗's parameters, MindSpore datasets out),
with JSON Lines read in place.

Return value — **MindNLP's rule** (``mindnlp/dataset/load.py``, 0.4 and 0.5), not 🤗's: every split that
results is a ``GeneratorDataset``; when exactly one results it is returned bare — for ``split="train"``, for
``split=["train"]`` or ``("train",)``, and for ``split=None`` on data with one split — otherwise a ``dict``:
``{split: GeneratorDataset}`` for ``split=None``, keyed by the specs given for a list of splits. (For 🤗's
rule use :func:`sjsonl.load_dataset` and :func:`~sjsonl.mindspore.to_generator_dataset`.) Each dataset's
``gd.source.ds`` is the underlying dataset (a :class:`~sjsonl.data.dataset.JSONLDataset`, a stream, or the 🤗
dataset), as MindNLP code expects; ``gd.source.column_names`` its columns.

Where the data go:

- **JSON Lines** — ``path="json"``, a ``.jsonl``/``.json``/``.ndjson`` file, a glob of them, or a directory
  (or ``data_files``) mostly of them (🤗's rule, see :func:`sjsonl.hf.data_files.is_jsonl_source`) — are read
  by :func:`sjsonl.load_dataset` through a line index: no Arrow conversion, no second copy. 🤗's parameters
  mean what they can mean here: ``num_proc`` → at least that many workers building the index and the schema
  (:func:`sjsonl.hf.load.index_workers`: ``num_proc=1`` still uses every core, as 🤗's pyarrow reader
  does) **and** (MindNLP's rule) MindSpore's ``num_parallel_workers``; ``cache_dir`` → where indexes are kept;
  ``features`` → the MindSpore columns and dtypes; ``streaming`` → an index-free stream;
  ``storage_options`` → fsspec options for URLs in ``data_files`` (read in place). ``download_config``,
  ``download_mode``, ``verification_mode``, ``keep_in_memory``, ``save_infos`` and ``revision`` concern
  downloading and preparing Arrow files, of which there are none: they are accepted and have no effect.
  ``field=`` (rows under a key of a JSON *document*) is not JSON Lines: such a call goes to 🤗. Any other
  keyword raises ``TypeError`` (MindNLP silently drops keywords it does not know; sjsonl never does).
- **Anything else** (CSV, Parquet, Hub names, scripts…) goes to ``datasets.load_dataset`` with every 🤗
  argument the caller set and every further keyword (``**config_kwargs``) — nothing is dropped, so a wrong
  keyword fails in 🤗 — and the result is wrapped.

MindSpore's side has its own keywords: ``shuffle`` (default False: file order, as MindNLP), ``seed`` (of a
stream's buffered shuffle; default MindSpore's ``config.set_seed``), ``num_parallel_workers`` (default
``num_proc``, else 1, as MindNLP), ``python_multiprocessing`` (default True), ``num_shards``/``shard_id``
(default: MindSpore's distributed context if initialised) and ``column_names`` (which columns, in which
order), plus ``pad_shards`` (see :func:`~sjsonl.mindspore.to_generator_dataset`). Column types come from
every row (cached with the index, :mod:`sjsonl.records.schema`), or ``features``; ``infer_rows=N`` samples
instead. 🤗 builder options whose names collide with these (the CSV builder's ``column_names``) go in
``hf_kwargs={...}``.

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "train.jsonl"), "w").write('{"text": "hi", "label": 1}\\n')
    >>> gd = load_dataset("json", data_files={"train": os.path.join(d, "train.jsonl")})  # one split: bare
    >>> rows = list(gd.create_dict_iterator(output_numpy=True, num_epochs=1))
    >>> gd.get_col_names(), [(str(r["text"]), int(r["label"])) for r in rows], len(gd.source.ds)
    (['text', 'label'], [('hi', 1)], 1)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from sjsonl.errors import UnsupportedArgumentError, require
from sjsonl.hf.data_files import is_jsonl_source
from sjsonl.hf.load import index_workers
from sjsonl.hf.load import load_dataset as load_jsonl
from sjsonl.mindspore.adapters import to_generator_dataset
from sjsonl.mindspore.early import early_splits
from sjsonl.mindspore.sources import DEFAULT_INFER_ROWS
from sjsonl.records.alongside import typing_alongside


def _mindnlp_structure(result: Any, split: Any, convert) -> Any:
    """MindNLP's return rule (``mindnlp/dataset/load.py``, 0.4/0.5): every split that results goes into a
    dict — a list (or tuple) of splits keyed by the specs given, one split by its spec, ``split=None`` by
    name — and a dict of exactly one entry is unwrapped to its bare ``GeneratorDataset``."""
    if isinstance(result, Mapping):
        named = {str(k): v for k, v in result.items()}
    elif isinstance(result, (list, tuple)):
        named = dict(zip([str(s) for s in split], result))
    else:
        named = {str(split): result}
    out = {k: convert(v) for k, v in named.items()}
    return next(iter(out.values())) if len(out) == 1 else out


def load_dataset(
    path: str,
    name: str | None = None,
    data_dir: str | None = None,
    data_files: str | Sequence[str] | Mapping[str, str | Sequence[str]] | None = None,
    split: str | Sequence[str] | None = None,
    cache_dir: str | None = None,
    features: Any = None,
    download_config: Any = None,
    download_mode: Any = None,
    verification_mode: Any = None,
    keep_in_memory: bool | None = None,
    save_infos: bool = False,
    revision: str | None = None,
    streaming: bool = False,
    num_proc: int | None = None,
    storage_options: dict | None = None,
    *,
    shuffle: bool = False,
    seed: int | None = None,
    num_parallel_workers: int | None = None,
    python_multiprocessing: bool = True,
    num_shards: int | None = None,
    shard_id: int | None = None,
    column_names: Sequence[str] | None = None,
    pad_shards: bool = False,
    infer_rows: int | None = DEFAULT_INFER_ROWS,
    batch_size: int | None = None,
    drop_remainder: bool = False,
    early_start: bool = False,
    workers: int | None = None,
    hf_kwargs: Mapping[str, Any] | None = None,
    **config_kwargs: Any,
) -> Any:
    """Load a dataset as MindSpore ``GeneratorDataset`` (s), MindNLP's way; see the module docstring.

    The first sixteen parameters are MindNLP's (🤗 ``datasets.load_dataset``'s); the keyword-only ones after
    ``storage_options`` are MindSpore's and go to :func:`~sjsonl.mindspore.to_generator_dataset`
    (``infer_rows``: sample that many rows for the column types instead of every row). ``**config_kwargs``
    and ``hf_kwargs`` go to 🤗. ``early_start=True``: a JSON Lines split without an index yet starts
    delivering rows at once, in file order, while its index is built in the background
    (:mod:`sjsonl.mindspore.early`: the dataset is then iterable; ``shuffle=True`` waits for the index).
    ``workers``: how many build the index and types of JSON Lines, exactly (``workers=1``: one thread,
    nothing started); by default at least ``num_proc`` and every core (:func:`~sjsonl.hf.load.index_workers`).

    Raises:
        TypeError: for keywords the JSON Lines path cannot honour (they are named).

    Example:
        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> for split in ("train", "test"):
        ...     _ = open(os.path.join(d, f"{split}.jsonl"), "w").write('{"text": "hi", "label": 1}\\n')
        >>> files = {s: os.path.join(d, f"{s}.jsonl") for s in ("train", "test")}
        >>> splits = load_dataset("json", data_files=files)           # two splits: a dict
        >>> sorted(splits), splits["train"].get_col_names()
        (['test', 'train'], ['text', 'label'])
        >>> load_dataset(d, split=["test"]).get_dataset_size()       # one split (even in a list): bare
        1
        >>> sorted(load_dataset(d, split=["train", "test[:1]"]))
        ['test[:1]', 'train']
    """
    if num_parallel_workers is None:  # MindNLP: num_parallel_workers=num_proc if num_proc else 1
        num_parallel_workers = num_proc if num_proc else 1
    to_ms = dict(
        column_names=column_names,
        shuffle=shuffle,
        seed=seed,
        num_parallel_workers=num_parallel_workers,
        num_shards=num_shards,
        shard_id=shard_id,
        python_multiprocessing=python_multiprocessing,
        pad_shards=pad_shards,
        features=features,
        infer_rows=infer_rows,
        batch_size=batch_size,
        drop_remainder=drop_remainder,
    )
    hf_extra = {**config_kwargs, **(hf_kwargs or {})}
    document = "field" in hf_extra  # rows under a key of a JSON document: 🤗's JSON builder reads those
    if is_jsonl_source(path, data_dir, data_files) and not document:
        if hf_extra:
            raise UnsupportedArgumentError(
                f"unsupported keyword argument(s) for JSON Lines data: {', '.join(sorted(hf_extra))}. sjsonl "
                "reads JSON Lines in place; for 🤗 JSON builder options call datasets.load_dataset(...) and "
                "pass the result to sjsonl.mindspore.to_generator_dataset"
            )
        load_args: dict[str, Any] = dict(
            path=path, name=name, data_dir=data_dir, data_files=data_files,
            workers=index_workers(workers, num_proc),
            storage_options=storage_options,
        )  # fmt: skip
        result = early_splits(load_args, split, cache_dir) if early_start and not streaming else None
        if result is None:
            # every row's types come next: an index built now types its records as it scans them
            with typing_alongside(on=infer_rows is None):
                result = load_jsonl(**load_args, split=split, streaming=streaming, index_dir=cache_dir)
        return _mindnlp_structure(result, split, lambda ds: to_generator_dataset(ds, **to_ms))

    if workers is not None:
        raise UnsupportedArgumentError(
            "workers= sets who builds sjsonl's JSON Lines indexes; this data goes to datasets.load_dataset "
            "(give num_proc=)"
        )
    datasets = require("datasets", "hf")
    given = dict(
        name=name,
        data_dir=data_dir,
        data_files=data_files,
        split=split,
        cache_dir=cache_dir,
        features=features,
        download_config=download_config,
        download_mode=download_mode,
        verification_mode=verification_mode,
        keep_in_memory=keep_in_memory,
        save_infos=save_infos,
        revision=revision,
        streaming=streaming,
        num_proc=num_proc,
        storage_options=storage_options,
    )
    # Forward what the caller set (values other than 🤗's defaults None/False), plus every extra keyword.
    forwarded = {k: v for k, v in given.items() if v is not None and v is not False}
    if document and data_files is None and os.path.isfile(path):  # sjsonl's one-file form, in 🤗's words
        path, forwarded["data_files"] = "json", path
    result = datasets.load_dataset(path, **forwarded, **hf_extra)
    return _mindnlp_structure(result, split, lambda ds: to_generator_dataset(ds, **to_ms))
