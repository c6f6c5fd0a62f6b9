"""How a pack's pieces become its item: the dict of ``input_ids``, ``labels``, ``position_ids`` and
``seq_lengths`` (plus ``attention_mask`` when padded) — one rule for the planned view
(:class:`~sjsonl.data.packing.PackedDataset`) and the windowed stream
(:class:`~sjsonl.data.packing.PackStream`).

Example:
    >>> rows = PackRows(seq_len=6, padding="max_length", pad_token_id=0)
    >>> item = rows.assemble([(7, 0, 2), (9, 1, 3)], {7: ([5, 6, 2], None), 9: ([8, 4, 3], None)})
    >>> item["input_ids"], item["labels"], item["position_ids"], item["seq_lengths"]
    ([5, 6, 4, 3, 0, 0], [-100, 6, -100, 3, -100, -100], [0, 1, 0, 1, 0, 0], [2, 2])
    >>> item["attention_mask"]
    [1, 1, 1, 1, 0, 0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sjsonl.data.packing.tokens import Encoded
from sjsonl.errors import InvalidArgumentError

PADDINGS = (False, "max_length")


@dataclass(frozen=True)
class PackRows:
    """The item format of packs of at most ``seq_len`` tokens.

    Args:
        seq_len: tokens in a pack at most.
        mask_piece_starts: ``-100`` in ``labels`` at the first token of every piece (what 🤗's
            ``DataCollatorWithFlattening`` and TRL's padding-free collator do).
        padding: ``"max_length"`` pads every pack to ``seq_len`` with ``pad_token_id`` and adds
            ``attention_mask``; ``False`` leaves packs at their length.
        pad_token_id: the padding token.
    """

    seq_len: int
    mask_piece_starts: bool = True
    padding: bool | str = False
    pad_token_id: int = 0

    def __post_init__(self) -> None:
        if self.padding not in PADDINGS:
            raise InvalidArgumentError(f"padding must be False or 'max_length', not {self.padding!r}")

    @classmethod
    def of(
        cls,
        seq_len: int,
        tokenizer: Any,
        mask_piece_starts: bool,
        padding: bool | str,
        pad_token_id: int | None,
    ) -> PackRows:
        """The format with ``pad_token_id`` defaulting to the 🤗 tokenizer's, else 0."""
        if pad_token_id is None:
            pad_token_id = getattr(tokenizer, "pad_token_id", None)
        return cls(
            seq_len, bool(mask_piece_starts), padding, 0 if pad_token_id is None else int(pad_token_id)
        )

    def assemble(
        self, pieces: list[tuple[int, int, int]], encoded: dict[int, Encoded]
    ) -> dict[str, list[int]]:
        """The item of a pack of ``pieces`` (``(document, start, stop)``), ``encoded`` holding each
        document's ``(ids, labels)``."""
        input_ids: list[int] = []
        labels: list[int] = []
        position_ids: list[int] = []
        seq_lengths: list[int] = []
        for d, start, stop in pieces:
            ids, doc_labels = encoded[d]
            input_ids += ids[start:stop]
            piece_labels = (ids if doc_labels is None else doc_labels)[start:stop]
            if self.mask_piece_starts:
                piece_labels[0] = -100
            labels += piece_labels
            position_ids += range(stop - start)
            seq_lengths.append(stop - start)
        item = {
            "input_ids": input_ids,
            "labels": labels,
            "position_ids": position_ids,
            "seq_lengths": seq_lengths,
        }
        if self.padding == "max_length":
            pad = self.seq_len - len(input_ids)
            item["attention_mask"] = [1] * len(input_ids) + [0] * pad
            input_ids += [self.pad_token_id] * pad
            labels += [-100] * pad
            position_ids += [0] * pad
        return item
