"""Data layer: files plus their index become datasets.

- :mod:`~sjsonl.data.source` — one data file plus its index (records by number, raw bytes, located errors);
- :mod:`~sjsonl.data.dataset` — :class:`~sjsonl.JSONLDataset`, the lazy random-access sequence;
- :mod:`~sjsonl.data.indexer` — :class:`~sjsonl.JSONLIndexer`, the seed's explicit index builder;
- :mod:`~sjsonl.data.corpus` — :func:`~sjsonl.build_indexes`, many files on any executor;
- :mod:`~sjsonl.data.document` — ``.json`` files holding one array, as rows;
- :mod:`~sjsonl.data.views` — order-only views (``shuffle``, ``select``, ``shard`` …) and batches;
- :mod:`~sjsonl.data.transforms` — the 🤗-style transformations (``map``, ``filter``, columns, formats,
  splits);
- :mod:`~sjsonl.data.mixture`, :mod:`~sjsonl.data.prefetch`, :mod:`~sjsonl.data.readahead` — mixtures,
  background prefetch, kernel read-ahead;
- :mod:`~sjsonl.data.streaming` — :class:`~sjsonl.JSONLStream`, front to back with no index.
"""
