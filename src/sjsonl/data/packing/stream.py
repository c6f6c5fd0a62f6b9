"""Packing while streaming: windows of documents tokenized and packed as they come, with no pre-pass.

:class:`PackStream` (``ds.pack_stream(seq_len, ...)``, ``JSONLStream(...).pack_stream(...)``) cuts its source,
in the source's order, into windows of ``window`` documents; each window is tokenized in one batch and packed
on its own by the same plan as :class:`~sjsonl.data.packing.PackedDataset` (best-fit decreasing by default),
then its packs are yielded in plan order. The first pack comes after one window is tokenized — nothing waits
for a pass over the corpus — at the price of packing within windows (TRL packs per 1,000-row ``map`` batch
the same way): a little more padding than one plan over everything, and ``len()`` unknown.

Windows, not packs, are shared out: shard ``i`` of ``n`` takes windows ``i, i + n, i + 2n, …`` (a source
without random access is read whole by every shard; each tokenizes only its windows). The packs of a window
depend only on its documents, so every shard count gives the same packs.

The resume state is where the stream stands — the window being packed (its number names its documents: the
source's positions ``[k·window, (k+1)·window)``) and how many of its packs were yielded — plus the layout it
was saved in: ``{"epoch", "window", "yielded", "window_size", "seq_len", "num_shards", "shard_index"}``.
Loading re-reads and re-packs that one window; a state of another layout is refused. ``epoch`` is bookkeeping
(``set_epoch``) for trainers that keep one: the stream's order is its source's — pack a shuffled view
(``ds.shuffle(seed, epoch=e).pack_stream(...)``) for another order per epoch.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write("".join(f'{{"ids": {[i] * (i % 3 + 1)}}}\\n' for i in range(6)))
    >>> stream = JSONLDataset(path).pack_stream(4, column="ids", window=3)
    >>> it = iter(stream)
    >>> [p["input_ids"] for p in itertools.islice(it, 2)]
    [[0, 2, 2, 2], [1, 1]]
    >>> state = stream.state_dict()
    >>> state["window"], state["yielded"]
    (0, 2)
    >>> resumed = JSONLDataset(path).pack_stream(4, column="ids", window=3)
    >>> resumed.load_state_dict(state)
    >>> [p["input_ids"] for p in resumed]
    [[3, 5, 5, 5], [4, 4]]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from sjsonl.data.packing.packed import PackedDataset
from sjsonl.data.packing.plan import PackPlan, plan_packs
from sjsonl.data.packing.rows import PackRows
from sjsonl.data.packing.tokens import FROM_TOKENIZER, DocumentTokens, Encoded
from sjsonl.data.views import read_positions
from sjsonl.errors import InvalidArgumentError
from sjsonl.sampling.distributed import check_count, check_state

#: Documents per window by default: TRL's packing unit (one ``map`` batch), enough for best-fit decreasing to
#: leave little padding at SFT-like lengths.
WINDOW = 1000


class PackStream:
    """Packs of a source's documents, window by window (see the module).

    Args:
        source: any sjsonl dataset, view or mixture (windows are read by position), or any iterable of
            records such as a :class:`~sjsonl.JSONLStream` (read front to back; iterated again each pass).
        seq_len: tokens in a pack at most.
        window: documents packed together.
        num_shards, shard_index: which windows this stream packs (``i, i + n, …``).
        tokenizer, column, add_special_tokens, eos_token_id: how a record becomes tokens
            (:class:`~sjsonl.data.packing.tokens.DocumentTokens`).
        strategy, overflow: the plan of each window (:mod:`~sjsonl.data.packing.plan`).
        mask_piece_starts, padding, pad_token_id: the item format
            (:class:`~sjsonl.data.packing.rows.PackRows`).
    """

    def __init__(
        self,
        source: Any,
        seq_len: int,
        *,
        window: int = WINDOW,
        num_shards: int = 1,
        shard_index: int = 0,
        tokenizer: Any = None,
        column: str | Callable[[Any], Any] = "text",
        strategy: str = "bfd",
        overflow: str = "split",
        add_special_tokens: bool = True,
        eos_token_id: int | None = FROM_TOKENIZER,
        mask_piece_starts: bool = True,
        padding: bool | str = False,
        pad_token_id: int | None = None,
    ) -> None:
        if isinstance(source, (PackedDataset, PackStream)):
            raise InvalidArgumentError("packs are packed already: pack their source instead")
        for name, value, lower in (("window", window, 1), ("num_shards", num_shards, 1)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lower:
                raise InvalidArgumentError(f"{name} must be an integer >= {lower}, not {value!r}")
        if isinstance(shard_index, bool) or not isinstance(shard_index, (int, np.integer)):
            raise InvalidArgumentError(f"shard_index must be an integer, not {shard_index!r}")
        if not 0 <= shard_index < num_shards:
            raise InvalidArgumentError(f"shard_index must be in [0, {num_shards - 1}], not {shard_index}")
        plan_packs(np.zeros(0, np.int64), seq_len, strategy, overflow)  # the plan's arguments, checked now
        self.source, self.seq_len, self.strategy, self.overflow = source, int(seq_len), strategy, overflow
        self.window, self.num_shards, self.shard_index = int(window), int(num_shards), int(shard_index)
        self.tokens = DocumentTokens(
            tokenizer, column, add_special_tokens=add_special_tokens, eos_token_id=eos_token_id
        )
        self.rows = PackRows.of(seq_len, tokenizer, mask_piece_starts, padding, pad_token_id)
        self.epoch = 0
        self._at = (self.shard_index, 0)  # (window, its packs yielded): where the current pass stands
        self._resume: tuple[int, int] | None = None  # a loaded state, for the next pass

    def __repr__(self) -> str:
        return (
            f"PackStream(seq_len={self.seq_len}, window={self.window}, strategy={self.strategy!r}, "
            f"shard {self.shard_index} of {self.num_shards})"
        )

    @property
    def _positional(self) -> bool:
        return hasattr(self.source, "__len__") and hasattr(self.source, "__getitem__")

    def set_epoch(self, epoch: int) -> None:
        """Record the trainer's epoch (saved in the state; the order is the source's)."""
        self.epoch = check_count("epoch", epoch)

    # ----------------------------------------------------------------- reading
    def _windows(self, first: int) -> Iterator[tuple[int, list[Any]]]:
        """``(k, records)`` of this shard's windows from window ``first`` (one of its own) on."""
        size, step = self.window, self.num_shards
        if self._positional:
            n = len(self.source)
            for k in range(first, -(-n // size), step):
                yield k, read_positions(self.source, np.arange(k * size, min(n, (k + 1) * size)))
            return
        records = iter(self.source)
        next(itertools.islice(records, first * size, first * size), None)  # skipped, not tokenized
        k = first
        while chunk := list(itertools.islice(records, size)):
            if k % step == self.shard_index:
                yield k, chunk
            k += 1

    def _pack(self, records: list[Any]) -> tuple[PackPlan, list[Encoded]]:
        encoded = self.tokens.encode(records)
        lengths = np.fromiter((len(ids) for ids, _ in encoded), np.int64, len(encoded))
        return plan_packs(lengths, self.seq_len, self.strategy, self.overflow), encoded

    def __iter__(self) -> Iterator[dict[str, list[int]]]:
        first, skip = self._resume if self._resume is not None else (self.shard_index, 0)
        self._resume = None  # a loaded state serves one pass
        self._at = (first, skip)
        for k, records in self._windows(first):
            plan, encoded = self._pack(records)
            by_document = dict(enumerate(encoded))
            for p in range(skip if k == first else 0, len(plan)):
                self._at = (k, p + 1)
                yield self.rows.assemble(plan.pieces(p), by_document)
            self._at = (k + self.num_shards, 0)

    # ----------------------------------------------------------------- resume
    def _layout(self) -> dict[str, int]:
        return {
            "window_size": self.window,
            "seq_len": self.seq_len,
            "num_shards": self.num_shards,
            "shard_index": self.shard_index,
        }

    def state_dict(self) -> dict[str, Any]:
        """Where this pass stands: ``{"epoch", "window", "yielded", …layout}`` (see the module)."""
        window, yielded = self._resume if self._resume is not None else self._at
        return {"epoch": self.epoch, "window": window, "yielded": yielded, **self._layout()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue the saved pass on the next ``iter()``: window ``window`` is read and packed again and
        its first ``yielded`` packs skipped. Refuses (one-line
        :class:`~sjsonl.errors.InvalidArgumentError`, nothing changed) a state of another layout, a window
        not of this shard, or more packs than the window has."""
        state = dict(state_dict) if isinstance(state_dict, dict) else state_dict
        window = state.pop("window", None) if isinstance(state, dict) else None
        if isinstance(state, dict) and window is None:
            raise InvalidArgumentError("cannot resume: saved state has no 'window'")
        epoch, _ = check_state(state, 2**62, self._layout())  # (yielded: checked against the window below)
        upper = -(-len(self.source) // self.window) + self.num_shards if self._positional else None
        window = check_count("window", window, upper=upper)
        if window % self.num_shards != self.shard_index:
            raise InvalidArgumentError(
                f"cannot resume: saved state has window={window}, not a window of shard {self.shard_index} "
                f"of {self.num_shards}"
            )
        found = next(self._windows(window), None)
        packs = len(self._pack(found[1])[0]) if found is not None and found[0] == window else 0
        yielded = check_count("yielded", state["yielded"], upper=packs)
        self.epoch, self._resume = epoch, (window, yielded)
