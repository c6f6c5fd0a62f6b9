"""``sjsonl.mindspore.load_dataset``: MindNLP's ``load_dataset`` (🤗's parameters, MindSpore datasets out),
with JSON Lines read in place.

Where the data go:

- **JSON Lines** — ``path="json"``, a ``.jsonl``/``.json``/``.ndjson`` file, a glob of them, or a directory
  (or ``data_files``) mostly of them (🤗's rule, see :func:`sjsonl.loading.is_jsonl_source`) — are read by
  :func:`sjsonl.load_dataset` through a line index: no Arrow conversion, no second copy. 🤗's parameters mean
  what they can mean here: ``num_proc`` → threads building the index, ``cache_dir`` → where indexes are kept,
  ``features`` → the MindSpore columns and dtypes, ``streaming`` → an index-free stream,
  ``storage_options`` → fsspec options for URLs in ``data_files`` (read in place). ``download_config``,
  ``download_mode``, ``verification_mode``, ``keep_in_memory``, ``save_infos`` and ``revision`` concern
  downloading and preparing Arrow files, of which there are none: they are accepted and have no effect.
  Any other keyword (🤗 JSON builder options such as ``field``, or ``token``) raises — read such data with
  ``datasets.load_dataset`` and pass it to
  :func:`~sjsonl.mindspore.to_generator_dataset`.
- **Anything else** (CSV, Parquet, Hub names, scripts…) goes to ``datasets.load_dataset`` with every 🤗
  argument the caller set and every further keyword (``**config_kwargs``) — nothing is dropped, so a wrong
  keyword fails in 🤗 — and the result is wrapped.

``num_proc`` is 🤗's (preparation) only. MindSpore's side has its own keywords: ``shuffle`` (default
False: file order, as MindNLP and 🤗), ``num_parallel_workers`` (default 1), ``python_multiprocessing``
(default True), ``num_shards``/``shard_id`` (default: MindSpore's distributed context if initialised) and
``column_names`` (which columns, in which order), plus ``pad_shards`` (see
:func:`~sjsonl.mindspore.to_generator_dataset`). 🤗 builder options whose names collide with these (the
CSV builder's ``column_names``) go in ``hf_kwargs={...}``.

Return value, as 🤗 (**not** as MindNLP, which unwrapped a single split): ``split=None`` gives
``{split: GeneratorDataset}`` even when there is one split; ``split="train"`` (or ``"train[:10%]"``) gives
one ``GeneratorDataset``; a list of splits gives a list.

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "train.jsonl"), "w").write('{"text": "hi", "label": 1}\\n')
    >>> dsd = load_dataset("json", data_files={"train": os.path.join(d, "train.jsonl")})
    >>> gd = dsd["train"]
    >>> rows = list(gd.create_dict_iterator(output_numpy=True, num_epochs=1))
    >>> gd.get_col_names(), [(str(r["text"]), int(r["label"])) for r in rows]
    (['text', 'label'], [('hi', 1)])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import require
from ..loading import is_jsonl_source
from ..loading import load_dataset as load_jsonl
from .adapters import DEFAULT_INFER_ROWS, to_generator_dataset


def _wrap(result: Any, convert) -> Any:
    if isinstance(result, Mapping):
        return {str(k): convert(v) for k, v in result.items()}
    if isinstance(result, list):
        return [convert(v) for v in result]
    return convert(result)


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
    num_parallel_workers: int = 1,
    python_multiprocessing: bool = True,
    num_shards: int | None = None,
    shard_id: int | None = None,
    column_names: Sequence[str] | None = None,
    pad_shards: bool = False,
    infer_rows: int | None = DEFAULT_INFER_ROWS,
    hf_kwargs: Mapping[str, Any] | None = None,
    **config_kwargs: Any,
) -> Any:
    """Load a dataset as MindSpore ``GeneratorDataset`` (s); see the module docstring for the routing rules.

    The first sixteen parameters are 🤗 ``datasets.load_dataset``'s (MindNLP's list); the keyword-only
    ones after ``storage_options`` are MindSpore's and go to :func:`~sjsonl.mindspore.to_generator_dataset`
    (``infer_rows``: rows the column schema is inferred from). ``**config_kwargs`` and ``hf_kwargs`` go
    to 🤗.

    Raises:
        TypeError: for keywords the JSON Lines path cannot honour (they are named).

    Example:
        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> for split in ("train", "test"):
        ...     _ = open(os.path.join(d, f"{split}.jsonl"), "w").write('{"text": "hi", "label": 1}\\n')
        >>> files = {s: os.path.join(d, f"{s}.jsonl") for s in ("train", "test")}
        >>> splits = load_dataset("json", data_files=files)
        >>> sorted(splits), splits["train"].get_col_names()
        (['test', 'train'], ['text', 'label'])
        >>> load_dataset(d, split="test").get_dataset_size()     # a directory: 🤗's split inference
        1
    """
    to_ms = dict(
        column_names=column_names,
        shuffle=shuffle,
        num_parallel_workers=num_parallel_workers,
        num_shards=num_shards,
        shard_id=shard_id,
        python_multiprocessing=python_multiprocessing,
        pad_shards=pad_shards,
        features=features,
        infer_rows=infer_rows,
    )
    hf_extra = {**config_kwargs, **(hf_kwargs or {})}
    if is_jsonl_source(path, data_dir, data_files):
        if hf_extra:
            raise TypeError(
                f"unsupported keyword argument(s) for JSON Lines data: {', '.join(sorted(hf_extra))}. sjsonl "
                "reads JSON Lines in place; for 🤗 JSON builder options call datasets.load_dataset(...) and "
                "pass the result to sjsonl.mindspore.to_generator_dataset"
            )
        result = load_jsonl(
            path,
            name,
            data_dir,
            data_files,
            split,
            streaming,
            index_dir=cache_dir,
            workers=num_proc,
            storage_options=storage_options,
        )
        return _wrap(result, lambda ds: to_generator_dataset(ds, **to_ms))

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
    result = datasets.load_dataset(path, **forwarded, **hf_extra)
    return _wrap(result, lambda ds: to_generator_dataset(ds, **to_ms))
