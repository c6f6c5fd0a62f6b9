"""``ds.pack(...)``: the method that makes a :class:`~sjsonl.data.packing.PackedDataset` of a dataset, view or
mixture — a mixin of :class:`~sjsonl.JSONLDataset` and :class:`~sjsonl.MixtureDataset` (here, not on
:class:`~sjsonl.data.views.Views`, because a packed dataset is itself a view)."""

from __future__ import annotations

from typing import Any

from sjsonl.data.packing.packed import PackedDataset
from sjsonl.data.packing.stream import PackStream


class Packable:
    """Gives a dataset its :meth:`pack` and :meth:`pack_stream` methods."""

    def pack(
        self, seq_len: int, tokenizer: Any = None, column: Any = "text", **options: Any
    ) -> PackedDataset:
        """Packed token sequences of these records' documents, for language-model training: a
        :class:`~sjsonl.data.packing.PackedDataset` whose item is a dict of ``input_ids``, ``labels``,
        ``position_ids`` and ``seq_lengths`` of at most ``seq_len`` tokens. ``tokenizer``: a 🤗 tokenizer or
        a function ``str -> list[int]`` (``None`` when ``column`` holds token ids); ``column``: the field
        with each document (or a function of the record). ``options``: ``strategy`` (``"bfd"``,
        ``"first_fit"``, ``"wrapped"``), ``overflow`` (``"split"``, ``"truncate"``), ``eos_token_id``,
        ``add_special_tokens``, ``padding``, … (see :mod:`sjsonl.data.packing.packed`).

        Example:
            >>> import os, tempfile
            >>> from sjsonl import JSONLDataset
            >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
            >>> _ = open(path, "w").write('{"text": "a b c"}\\n{"text": "d e"}\\n')
            >>> words = lambda text: [ord(w) for w in text.split()]
            >>> JSONLDataset(path).pack(7, tokenizer=words, eos_token_id=0)[0]["input_ids"]
            [97, 98, 99, 0, 100, 101, 0]
        """
        return PackedDataset(self, seq_len, tokenizer=tokenizer, column=column, **options)

    def pack_stream(
        self, seq_len: int, tokenizer: Any = None, column: Any = "text", **options: Any
    ) -> PackStream:
        """Packs made window by window as the records are read — no pass over the corpus first: a
        :class:`~sjsonl.data.packing.PackStream` (an iterable with an exact resume state) whose items are
        those of :meth:`pack`. ``options``: ``window`` (documents packed together, default 1,000),
        ``num_shards``/``shard_index`` (windows shared out), and :meth:`pack`'s.

        Example:
            >>> import os, tempfile
            >>> from sjsonl import JSONLDataset
            >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
            >>> _ = open(path, "w").write('{"text": "a b c"}\\n{"text": "d e"}\\n')
            >>> words = lambda text: [ord(w) for w in text.split()]
            >>> [p["input_ids"] for p in JSONLDataset(path).pack_stream(4, tokenizer=words, eos_token_id=0)]
            [[97, 98, 99, 0], [100, 101, 0]]
        """
        return PackStream(self, seq_len, tokenizer=tokenizer, column=column, **options)
