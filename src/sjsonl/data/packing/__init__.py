"""Sequence packing for language-model training: documents tokenized on the fly and laid end to end into
packs of at most ``seq_len`` tokens — a view (``ds.pack(...)``), so shuffles, shards, samplers, mixtures and
exact, elastic resume apply to packs as to records. One concept per module:

- :mod:`~sjsonl.data.packing.tokens` — how a record becomes a document's token ids (tokenizer, column, EOS);
- :mod:`~sjsonl.data.packing.lengths` — the documents' token lengths, cached and verified beside the index;
- :mod:`~sjsonl.data.packing.plan` — which pieces make each pack (best-fit decreasing, first fit, wrapped);
- :mod:`~sjsonl.data.packing.rows` — how a pack's pieces become its item (``input_ids``, ``labels``, …);
- :mod:`~sjsonl.data.packing.packed` — :class:`PackedDataset`, the view, and :func:`unpacked` for collators
  that flatten sequences themselves;
- :mod:`~sjsonl.data.packing.stream` — :class:`PackStream`, packing window by window with no pass first.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write("".join(f'{{"ids": {list(range(n))}}}\\n' for n in (5, 3, 2, 6)))
    >>> packed = JSONLDataset(path).pack(8, column="ids")
    >>> [p["seq_lengths"] for p in packed], [p["seq_lengths"] for p in packed.shuffle(seed=0)]
    ([[2, 6], [5, 3]], [[5, 3], [2, 6]])
"""

from sjsonl.data.packing.packed import PackedDataset, unpacked
from sjsonl.data.packing.stream import PackStream

__all__ = ["PackStream", "PackedDataset", "unpacked"]
