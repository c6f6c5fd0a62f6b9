"""Packed token sequences as a view: ``ds.pack(seq_len, tokenizer=..., column="text")``.

Item ``p`` of a :class:`PackedDataset` is pack ``p`` of the plan (:mod:`~sjsonl.data.packing.plan`): its
documents' pieces read from the source by position, tokenized on the fly, laid end to end — a dict with

- ``input_ids``: the tokens, at most ``seq_len`` (exactly ``seq_len`` with ``padding="max_length"``);
- ``labels``: a copy of ``input_ids``, with ``-100`` where a document's own labels mask a token, at the first
  token of every piece (``mask_piece_starts=True``: what 🤗's ``DataCollatorWithFlattening`` and TRL's
  padding-free collator do, so no token is trained to predict another document's first token) and on padding;
- ``position_ids``: ``0, 1, …`` restarting at every piece (padding gets 0s);
- ``seq_lengths``: the pieces' lengths, summing to the unpadded length (TRL's packed column: FlashAttention's
  ``cu_seq_lens`` are its running sums);
- ``attention_mask`` with ``padding="max_length"`` only: 1 on tokens, 0 on padding.

A pack is a view like any other: ``shuffle``, ``shard``, ``select``, ``batch``, ``prefetch``,
:class:`sjsonl.torch.DistributedSampler`, the iterable, mixtures, 🤗 conversion — and so exact and elastic
resume, with an O(1) state. Only token *lengths* are kept (cached beside the index); tokens are made when a
pack is read, and a document whose token count is no longer what was planned raises instead of giving a
wrong pack. See the training guide (``docs/guides/packing.md``) for the exact semantics.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"ids": [1, 2, 3]}\\n{"ids": [4, 5]}\\n{"ids": [6, 7, 8, 9]}\\n')
    >>> packed = JSONLDataset(path).pack(5, column="ids")
    >>> len(packed), packed[1]["input_ids"], packed[1]["labels"]
    (2, [1, 2, 3, 4, 5], [-100, 2, 3, -100, 5])
    >>> packed[1]["position_ids"], packed[1]["seq_lengths"]
    ([0, 1, 2, 0, 1], [3, 2])
    >>> packed[0]["input_ids"], packed.efficiency
    ([6, 7, 8, 9], 0.9)
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from sjsonl.data.packing.lengths import token_lengths
from sjsonl.data.packing.plan import PackPlan, plan_packs
from sjsonl.data.packing.rows import PackRows
from sjsonl.data.packing.tokens import FROM_TOKENIZER, DocumentTokens, Encoded
from sjsonl.data.views import Views, positions_of, read_positions
from sjsonl.errors import ArgumentTypeError, InvalidArgumentError, StaleDataError, out_of_range

_BLOCK = 64  # packs read at a time when iterating


class PackedDataset(Views):
    """Packs of a source's documents (made by :meth:`Views.pack <sjsonl.data.views.Views.pack>`; see the
    module for the item keys).

    Args:
        source: any sjsonl dataset, view or mixture (or any sized sequence of records).
        seq_len: tokens in a pack at most.
        tokenizer, column, add_special_tokens, eos_token_id, cache_key: how a record becomes tokens
            (:class:`~sjsonl.data.packing.tokens.DocumentTokens`).
        strategy: ``"bfd"`` (default), ``"first_fit"`` or ``"wrapped"`` (:mod:`~sjsonl.data.packing.plan`).
        overflow: ``"split"`` (default: a long document spans packs) or ``"truncate"``.
        mask_piece_starts: ``-100`` in ``labels`` at the first token of every piece.
        padding: ``"max_length"`` pads every pack to ``seq_len`` (with ``pad_token_id``, default the 🤗
            tokenizer's, else 0) and adds ``attention_mask``.
        workers, progress: for the length pass.
    """

    def __init__(
        self,
        source: Any,
        seq_len: int,
        *,
        tokenizer: Any = None,
        column: str | Callable[[Any], Any] = "text",
        strategy: str = "bfd",
        overflow: str = "split",
        add_special_tokens: bool = True,
        eos_token_id: int | None = FROM_TOKENIZER,
        cache_key: str | None = None,
        mask_piece_starts: bool = True,
        padding: bool | str = False,
        pad_token_id: int | None = None,
        workers: int | None = None,
        progress: bool | None = None,
    ) -> None:
        self.rows = PackRows.of(seq_len, tokenizer, mask_piece_starts, padding, pad_token_id)
        if isinstance(source, PackedDataset):
            raise InvalidArgumentError("a packed dataset is packed already: pack its source instead")
        self.source = source
        self.tokens = DocumentTokens(
            tokenizer,
            column,
            add_special_tokens=add_special_tokens,
            eos_token_id=eos_token_id,
            cache_key=cache_key,
        )
        lengths = token_lengths(source, self.tokens, workers=workers, progress=progress)
        self.plan: PackPlan = plan_packs(lengths, seq_len, strategy, overflow)
        self._len, self._order = len(self.plan), None

    def __repr__(self) -> str:
        plan = self.plan
        return (
            f"PackedDataset(packs={self._len}, seq_len={plan.seq_len}, strategy={plan.strategy!r}, "
            f"documents={len(plan.lengths)}, efficiency={plan.efficiency:.4f})"
        )

    @property
    def seq_len(self) -> int:
        """Tokens in a pack at most."""
        return self.plan.seq_len

    @property
    def efficiency(self) -> float:
        """Tokens ÷ (packs × ``seq_len``) over the whole plan (1.0: no padding)."""
        return self.plan.efficiency

    @property
    def files(self) -> list[str] | None:
        """The source's data files (``None`` for a source that has none)."""
        return getattr(self.source, "files", None)

    def pieces(self, i: int) -> list[tuple[int, int, int]]:
        """Item ``i``'s ``(document, start, stop)`` token ranges: ``document`` is a position in the source."""
        return self.plan.pieces(self._pack_of(self._check(i)))

    def _check(self, i: Any) -> int:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise ArgumentTypeError(f"pack indices must be integers, slices or integer lists, not {i!r}")
        j = int(i) + (self._len if i < 0 else 0)
        if not 0 <= j < self._len:
            raise out_of_range(int(i), self._len, "this packed dataset", "pack")
        return j

    def _pack_of(self, i: int) -> int:
        return i if self._order is None else int(self._order[i])

    def _order_signature(self) -> int:
        inner = getattr(self.source, "_order_signature", None)
        plan = self.plan
        lengths = zlib.crc32(plan.lengths.astype("<i8").tobytes())
        described = (
            plan.seq_len,
            plan.strategy,
            plan.overflow,
            lengths,
            inner() if inner else len(self.source),
        )
        return zlib.crc32(repr((super()._order_signature(), described)).encode())

    # ----------------------------------------------------------------- access
    def __getitem__(self, key: int | np.integer | slice | Sequence[int] | np.ndarray) -> Any:
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            return self._records_at_positions(np.array([self._check(key)], np.int64))[0]
        return self._records_at_positions(positions_of(key, self._len))  # type: ignore[arg-type]

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, list[int]]]:
        """A batch of packs in one read of their documents; PyTorch's DataLoader calls this per batch."""
        return self[indices]

    def __iter__(self) -> Iterator[dict[str, list[int]]]:
        return self.iter_positions(np.arange(self._len, dtype=np.int64))

    def iter_positions(self, positions: np.ndarray) -> Iterator[dict[str, list[int]]]:
        """The packs at ``positions``, read ``64`` at a time (what the iterable and views use)."""
        for lo in range(0, len(positions), _BLOCK):
            yield from self._records_at_positions(np.asarray(positions[lo : lo + _BLOCK], np.int64))

    def _records_at_positions(self, positions: np.ndarray) -> list[dict[str, list[int]]]:
        packs = positions if self._order is None else self._order.take(positions)
        pieces = [self.plan.pieces(int(p)) for p in packs.tolist()]
        docs = sorted({d for pack in pieces for d, _, _ in pack})
        encoded = dict(zip(docs, self._encode(docs)))
        return [self.rows.assemble(pack, encoded) for pack in pieces]

    def _encode(self, docs: list[int]) -> list[Encoded]:
        """The documents at these source positions, tokenized — each checked against its planned length."""
        if not docs:
            return []
        positions = np.array(docs, np.int64)
        out = self.tokens.encode(read_positions(self.source, positions))
        lengths = self.plan.lengths[positions].tolist()
        for d, (ids, _), planned in zip(docs, out, lengths):
            if len(ids) != planned:
                raise StaleDataError(
                    f"document {d} of {self._source_name()} has {len(ids)} tokens where the pack plan has "
                    f"{planned}: its tokenizer changed since the lengths were computed (pack again)"
                )
        return out

    def _source_name(self) -> str:
        locate = getattr(self.source, "locate", None)
        files = self.files
        return (
            f"{files[0]}" + (f" and {len(files) - 1} more" if len(files) > 1 else "")
            if files
            else (type(self.source).__name__ if locate is None else "the source")
        )


def unpacked(collator: Callable[[list[dict[str, Any]]], Any]) -> Callable[[list[dict[str, Any]]], Any]:
    """A collator that hands ``collator`` the pieces of a batch of packs as separate sequences — for
    collators that flatten a batch of sequences themselves, such as 🤗's ``DataCollatorWithFlattening``
    (``Trainer(data_collator=unpacked(DataCollatorWithFlattening()))``): each piece becomes one feature
    with its ``input_ids`` and ``labels``, so the collator restarts ``position_ids`` at every document.

    Example:
        >>> pack = {"input_ids": [1, 2, 3], "labels": [-100, 2, -100], "seq_lengths": [2, 1]}
        >>> unpacked(lambda features: features)([pack])
        [{'input_ids': [1, 2], 'labels': [-100, 2]}, {'input_ids': [3], 'labels': [-100]}]
    """

    def collate(packs: list[dict[str, Any]]) -> Any:
        features = []
        for pack in packs:
            at = 0
            ids, labels = list(pack["input_ids"]), list(pack["labels"])
            for n in list(pack["seq_lengths"]):
                features.append({"input_ids": ids[at : at + n], "labels": labels[at : at + n]})
                at += n
        return collator(features)

    return collate
