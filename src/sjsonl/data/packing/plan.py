"""The plan of a packed dataset: which (document, token range) pieces make each pack — a pure function of
the documents' token lengths, ``seq_len``, the strategy and what happens to documents longer than a pack.

Strategies:

- ``"bfd"`` — best-fit decreasing (the default: least padding). Pieces are placed largest first (ties in
  source order), each into the open pack with the least room that still holds it, else into a new pack.
- ``"first_fit"`` — pieces in source order, each into the lowest-numbered pack that holds it: packs keep
  roughly the source order (use it over an already shuffled view), at a little more padding.
- ``"wrapped"`` — concatenate-then-split (TRL's name): documents laid end to end in source order and cut
  every ``seq_len`` tokens, so no padding at all and documents cut at row ends; the last row may be shorter.

A document longer than ``seq_len`` is cut into pieces of ``seq_len`` tokens and a remainder
(``overflow="split"``, the default: every token of every document is in exactly one pack) or keeps only its
first ``seq_len`` tokens (``overflow="truncate"``; :attr:`PackPlan.truncated` counts them). Documents with
no tokens are in no pack (:attr:`PackPlan.empty` counts them). Within a pack, pieces are in source order.

The bin strategies run in C (``_plan.c``: about 0.3 s for a million documents with best-fit decreasing) with
a Python twin giving the same packs where it is not built. A plan holds per piece a document number (int32
when it fits) and, only when some document is split, the piece's chunk number — about 4–8 bytes a document.

Example:
    >>> import numpy as np
    >>> plan = plan_packs(np.array([3, 5, 2, 6, 1]), seq_len=8)
    >>> len(plan), [plan.pieces(p) for p in range(len(plan))]
    (3, [[(2, 0, 2), (3, 0, 6)], [(0, 0, 3), (1, 0, 5)], [(4, 0, 1)]])
    >>> wrapped = plan_packs(np.array([3, 5, 2]), seq_len=4, strategy="wrapped")
    >>> [wrapped.pieces(p) for p in range(len(wrapped))]
    [[(0, 0, 3), (1, 0, 1)], [(1, 1, 5)], [(2, 0, 2)]]
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from sjsonl.errors import InvalidArgumentError

try:
    from sjsonl.data.packing import _plan as NATIVE
except ImportError:  # no C compiler at install time: the Python twin below gives the same packs
    NATIVE = None  # type: ignore[assignment]

STRATEGIES = ("bfd", "first_fit", "wrapped")
OVERFLOWS = ("split", "truncate")
_INT32_MAX = (1 << 31) - 1
_BLOCK = 1 << 20  # documents per step where a step makes temporaries


@dataclass(frozen=True)
class PackPlan:
    """Which pieces make each pack: ``pieces(p)`` is pack ``p`` as ``(document, start, stop)`` token ranges.

    ``lengths`` are the documents' token counts (the source's positions are the document numbers).
    Bin strategies keep ``piece_doc``/``piece_chunk`` (in pack order) and ``bounds`` (pack ``p`` is pieces
    ``bounds[p]:bounds[p+1]``); ``"wrapped"`` keeps only ``cumulative`` token counts.
    """

    seq_len: int
    strategy: str
    overflow: str
    lengths: np.ndarray
    bounds: np.ndarray | None = None
    piece_doc: np.ndarray | None = None
    piece_chunk: np.ndarray | None = None
    cumulative: np.ndarray | None = None

    def __len__(self) -> int:
        if self.cumulative is not None:
            return -(-int(self.cumulative[-1]) // self.seq_len)
        assert self.bounds is not None
        return len(self.bounds) - 1

    @property
    def tokens(self) -> int:
        """Tokens in all packs (documents' tokens, less what ``truncate`` cut)."""
        return int(np.minimum(self.lengths, self._cap).sum(dtype=np.int64))

    @property
    def truncated(self) -> int:
        """Documents longer than ``seq_len`` that ``overflow="truncate"`` cut (0 under ``"split"``)."""
        return int((self.lengths > self.seq_len).sum()) if self.overflow == "truncate" else 0

    @property
    def empty(self) -> int:
        """Documents with no tokens (in no pack)."""
        return int((self.lengths == 0).sum())

    @property
    def efficiency(self) -> float:
        """Tokens ÷ (packs × ``seq_len``): 1.0 is no padding at all."""
        return self.tokens / (len(self) * self.seq_len) if len(self) else 1.0

    @property
    def _cap(self) -> int:
        return self.seq_len if self.overflow == "truncate" else np.iinfo(np.int64).max

    def pieces(self, p: int) -> list[tuple[int, int, int]]:
        """Pack ``p``: its ``(document, start, stop)`` token ranges, in order."""
        s = self.seq_len
        if self.cumulative is not None:
            cum = self.cumulative
            lo, hi = p * s, min((p + 1) * s, int(cum[-1]))
            first = int(np.searchsorted(cum, lo, side="right")) - 1
            out = []
            for d in range(first, len(cum) - 1):
                start, stop = max(lo, int(cum[d])), min(hi, int(cum[d + 1]))
                if start >= hi:
                    break
                if stop > start:
                    out.append((d, start - int(cum[d]), stop - int(cum[d])))
            return out
        assert self.bounds is not None and self.piece_doc is not None
        lo, hi = int(self.bounds[p]), int(self.bounds[p + 1])
        docs = self.piece_doc[lo:hi].tolist()
        chunks = self.piece_chunk[lo:hi].tolist() if self.piece_chunk is not None else [0] * len(docs)
        lengths = self.lengths[self.piece_doc[lo:hi]].tolist()
        return [(d, c * s, min(length, (c + 1) * s)) for d, c, length in zip(docs, chunks, lengths)]


def plan_packs(lengths: np.ndarray, seq_len: int, strategy: str = "bfd", overflow: str = "split") -> PackPlan:
    """The packs of documents with these token ``lengths`` (see the module for the strategies).

    Example:
        >>> plan_packs(np.array([4, 9]), seq_len=4).pieces(1)
        [(1, 0, 4)]
        >>> plan_packs(np.array([9]), 4, overflow="truncate").tokens
        4
    """
    if strategy not in STRATEGIES:
        raise InvalidArgumentError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if overflow not in OVERFLOWS:
        raise InvalidArgumentError(f"overflow must be one of {', '.join(OVERFLOWS)}, not {overflow!r}")
    if (
        isinstance(seq_len, bool)
        or not isinstance(seq_len, (int, np.integer))
        or not 1 <= seq_len <= _INT32_MAX
    ):
        raise InvalidArgumentError(f"seq_len must be an integer in [1, 2**31), not {seq_len!r}")
    s = int(seq_len)
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or (lengths.size and (lengths.dtype.kind not in "iu" or lengths.min() < 0)):
        raise InvalidArgumentError("lengths must be a 1-D array of token counts >= 0")
    if strategy == "wrapped":
        kept = np.minimum(lengths, s) if overflow == "truncate" else lengths
        cumulative = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(kept, out=cumulative[1:])
        return PackPlan(s, strategy, overflow, lengths, cumulative=cumulative)
    doc_type = np.int32 if len(lengths) <= _INT32_MAX else np.int64
    if overflow == "split":
        total, piece_chunk, sizes = _split_pieces(lengths, s, doc_type)
    else:
        piece_chunk, sizes = None, np.minimum(lengths[lengths > 0], s).astype(np.int32)
    if len(sizes) > _INT32_MAX:
        raise InvalidArgumentError(f"{len(sizes)} pieces: at most 2**31 - 1 can be packed at once")
    bins, count = assign_packs(sizes, s, best=strategy == "bfd", decreasing=strategy == "bfd")
    del sizes  # (each step frees what the next does not need)
    if overflow == "split":
        piece_doc = _piece_documents(lengths, s, doc_type, total)
    else:
        piece_doc = np.flatnonzero(lengths).astype(doc_type)
    order, bounds = order_by_pack(bins, count)
    del bins
    piece_doc = piece_doc[order]
    if piece_chunk is not None:
        piece_chunk = piece_chunk[order]
    del order
    return PackPlan(
        s, strategy, overflow, lengths, bounds=bounds, piece_doc=piece_doc, piece_chunk=piece_chunk
    )


def _pieces_per_document(lengths: np.ndarray, s: int) -> np.ndarray:
    """How many pieces of at most ``s`` tokens each document makes (0 for an empty one)."""
    counts = lengths // s
    counts += lengths % s != 0
    return counts


def _piece_documents(lengths: np.ndarray, s: int, doc_type: type, total: int) -> np.ndarray:
    """The document of each piece, in document order: a block of documents at a time (``np.repeat`` makes
    int64 repeat counts), so the only large array is the result."""
    piece_doc: np.ndarray = np.empty(total, doc_type)
    filled = 0
    for lo in range(0, len(lengths), _BLOCK):
        hi = min(len(lengths), lo + _BLOCK)
        part: np.ndarray = np.repeat(
            np.arange(lo, hi, dtype=doc_type), _pieces_per_document(lengths[lo:hi], s)
        )
        piece_doc[filled : filled + len(part)] = part
        filled += len(part)
    return piece_doc


def _split_pieces(lengths: np.ndarray, s: int, doc_type: type) -> tuple[int, np.ndarray | None, np.ndarray]:
    """Each document's pieces of at most ``s`` tokens, in document order: ``(pieces, piece_chunk or None,
    sizes)`` — the pieces' documents are :func:`_piece_documents`, made again when the packs are known
    rather than held while they are planned. Only the (few) documents longer than ``s`` get per-piece work,
    and each array is freed as soon as the next step has what it needs (10M documents: int32 arrays, and
    chunk numbers a byte a piece)."""
    if len(lengths) and int(lengths.max()) < _INT32_MAX - s:  # half the bytes for the temporaries
        lengths = lengths.astype(np.int32)
    counts = _pieces_per_document(lengths, s)
    multi = np.flatnonzero(counts > 1)  # the documents split in several pieces
    many = counts[multi].astype(np.int64)
    empty_before = np.searchsorted(np.flatnonzero(counts == 0), multi)  # documents with no piece
    total = int(counts.sum(dtype=np.int64))
    del counts
    piece_doc = _piece_documents(lengths, s, doc_type, total)
    sizes = lengths[piece_doc].astype(np.int32, copy=False)
    del piece_doc
    np.minimum(sizes, s, out=sizes)
    split_lengths = lengths[multi].astype(np.int64)
    del lengths
    if not len(multi):
        return total, None, sizes
    extra = np.cumsum(many - 1)
    first = multi - empty_before + extra - (many - 1)  # where each split document's first piece is
    chunk = np.arange(int(many.sum()), dtype=np.int64) - np.repeat(np.cumsum(many) - many, many)
    at = np.repeat(first, many) + chunk
    # the narrowest integer holding every chunk number: a byte a piece unless a document has 128+ pieces
    piece_chunk = np.zeros(total, np.min_scalar_type(-int(many.max())))
    piece_chunk[at] = chunk
    sizes[at] = np.minimum(np.repeat(split_lengths, many) - chunk * s, s)
    return total, piece_chunk, sizes


def group_pieces(
    sizes: np.ndarray, capacity: int, *, best: bool, decreasing: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The pieces (of these ``sizes``, each 1..capacity) grouped by pack: ``(order, bounds)`` — pack ``p`` is
    pieces ``order[bounds[p]:bounds[p+1]]``, in source order — placed by best or first fit, largest first
    or in source order. Packs are numbered in the order they were opened."""
    return order_by_pack(*assign_packs(sizes, capacity, best=best, decreasing=decreasing))


def assign_packs(sizes: np.ndarray, capacity: int, *, best: bool, decreasing: bool) -> tuple[np.ndarray, int]:
    """Each piece's pack (int32) and the pack count."""
    sizes = np.ascontiguousarray(sizes, dtype=np.int32)
    if NATIVE is not None:
        raw, count = NATIVE.assign(sizes, capacity, best, decreasing)
        return np.frombuffer(raw, np.int32), count
    bins_list, count = assign_py(sizes.tolist(), capacity, best, decreasing)
    return np.array(bins_list, np.int32), count


def order_by_pack(bins: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``(order, bounds)``, both int32: the pieces sorted by pack, stable (within a pack, in source order),
    and where each pack's pieces start in that order."""
    if NATIVE is not None:  # a counting sort: int32, where numpy's argsort gives int64; no bincount
        order, bounds = NATIVE.group(bins, count)
        return np.frombuffer(order, np.int32), np.frombuffer(bounds, np.int32)
    bounds = np.zeros(count + 1, np.int32)
    np.cumsum(np.bincount(bins, minlength=count), out=bounds[1:])
    return np.argsort(bins, kind="stable").astype(np.int32), bounds


def assign_py(sizes: list[int], capacity: int, best: bool, decreasing: bool) -> tuple[list[int], int]:
    """The Python twin of ``_plan.assign``: the pack of each piece (in source order) and the pack count.

    Example:
        >>> assign_py([3, 5, 2, 6, 1], 8, best=True, decreasing=True), assign_py([3, 5, 2], 8, False, False)
        (([1, 1, 0, 0, 2], 3), ([0, 0, 1], 2))
    """
    n = len(sizes)
    order = sorted(range(n), key=lambda i: -sizes[i]) if decreasing else range(n)
    bins = [0] * n
    room: list[int] = []
    if best:
        stacks: dict[int, list[int]] = {}  # room -> the open packs with exactly that room (a stack)
        rooms: list[int] = []  # the rooms that have any, sorted
        for i in order:
            s = sizes[i]
            k = bisect.bisect_left(rooms, s)
            if k < len(rooms):
                r = rooms[k]
                pack = stacks[r].pop()
                if not stacks[r]:
                    del rooms[k]
            else:
                pack = len(room)
                room.append(capacity)
            bins[i] = pack
            room[pack] -= s
            left = room[pack]
            if left > 0:
                if not stacks.get(left):
                    stacks[left] = []
                    bisect.insort(rooms, left)
                stacks[left].append(pack)
        return bins, len(room)
    for i in order:
        s = sizes[i]
        pack = next((p for p, r in enumerate(room) if r >= s), len(room))
        if pack == len(room):
            room.append(capacity)
        bins[i] = pack
        room[pack] -= s
    return bins, len(room)
