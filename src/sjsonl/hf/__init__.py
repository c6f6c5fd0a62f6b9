"""🤗 layer: ``load_dataset`` with 🤗's parameters, the files a call names, and sjsonl data as 🤗 objects.

- :mod:`~sjsonl.hf.load` — :func:`sjsonl.load_dataset`: 🤗 ``load_dataset``'s parameters over JSON Lines in
  place;
- :mod:`~sjsonl.hf.data_files` — which files ``data_files``/``data_dir``/``split`` name, found as 🤗 finds
  them;
- :mod:`~sjsonl.hf.convert` — :func:`to_hf` (sjsonl data as a 🤗 ``Dataset``/``IterableDataset``) and
  :func:`hf_kind` (a 🤗 object recognised without importing 🤗);
- :mod:`~sjsonl.hf.dataset` — sjsonl data that *is* a 🤗 ``Dataset``, for code that checks types (the
  ``IterableDataset`` twin is ``JSONLDataset.to_iterable_dataset()``, :mod:`sjsonl.data.transforms.iterable`).
"""

from sjsonl.hf.convert import DEFAULT_SHARDS, hf_kind, to_hf

__all__ = ["DEFAULT_SHARDS", "hf_kind", "to_hf"]
