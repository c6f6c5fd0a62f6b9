"""Documents' token lengths: computed once, kept beside the index, verified like every artifact.

:func:`token_lengths` gives the length (EOS included, :mod:`~sjsonl.data.packing.tokens`) of every
document of a source in the source's order. For a :class:`~sjsonl.JSONLDataset` (any view of it: shuffled,
sharded, selected, bad lines skipped) each file's lengths come from ``<stem>.index.tokens`` — a sidecar
(:mod:`sjsonl.storage.sidecar`: checksummed, owner and mode checked) keyed by the index (data version, record
count, index checksum, skipped bad lines) **and** the documents' identity (the tokenizer's whole
serialization digest, the column, the special-token and EOS rules). Another tokenizer, column or rule, or
changed data, is another key: the lengths are computed again and the file replaced — never a stale plan. One
set of lengths is kept per file (switching between two tokenizers recomputes each time).

Mixtures take their sources' lengths (each cached as above) through their routing; any other source (a
list, a dataset with ``map`` transforms or a field projection) is tokenized in memory, uncached.

The pass reads only the document's column (a projection skips the rest of each line) and tokenizes in blocks:
a 🤗 fast tokenizer's ``encode_batch`` runs on all cores in Rust; a Python function is spread over
sjsonl's own worker processes for large files (:mod:`sjsonl.runtime.parallel`: never a re-run of the user's
script), and a progress bar shows for long passes on a terminal.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> from sjsonl.data.packing.tokens import DocumentTokens
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"ids": [1, 2, 3]}\\n{"ids": [4]}\\n')
    >>> token_lengths(JSONLDataset(path), DocumentTokens(None, "ids")).tolist()
    [3, 1]
    >>> sorted(os.listdir(os.path.dirname(path)))
    ['d.index.npy', 'd.index.tokens', 'd.jsonl']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sjsonl.data.packing.tokens import DocumentTokens
from sjsonl.data.views import read_positions
from sjsonl.errors import ColumnNotFoundError, InvalidArgumentError
from sjsonl.index.layout import artifact_path
from sjsonl.records.fields import FieldProjection
from sjsonl.runtime.parallel import ShippingError, map_in_order, pool_allowed, worker_count
from sjsonl.runtime.progress import Progress
from sjsonl.storage.sidecar import index_key, read_sidecar, write_sidecar

#: The first bytes of a ``.tokens`` file (see :mod:`sjsonl.storage.sidecar`).
TOKENS_MAGIC = b"SJSONLtl"
CACHE_VERSION = 1
_BLOCK = 4096  # documents tokenized per batch
#: A Python tokenizer spreads a file over worker processes from this many records (a worker costs ~0.5 s).
POOL_MIN_RECORDS = 50_000


def tokens_path(index_path: str) -> str:
    """``/data/train.index.npy`` (or ``.packed``) → ``/data/train.index.tokens``."""
    return artifact_path(index_path, ".tokens")


def token_lengths(
    source: Any, tokens: DocumentTokens, *, workers: int | None = None, progress: bool | None = None
) -> np.ndarray:
    """The token length of each document of ``source``, in its order (int64). A record of the source that
    cannot be made a document (no such column, the column function raising, not text or token ids) raises,
    naming its file and line; records of the same files outside ``source`` (filtered out, another shard) may
    lack one: the cache marks them (``-1``) instead."""
    lengths = _lengths(source, tokens, workers, progress)
    missing = np.flatnonzero(lengths < 0)
    if len(missing):
        _raise_for(source, tokens, int(missing[0]))
    return lengths


def _lengths(source: Any, tokens: DocumentTokens, workers: int | None, progress: bool | None) -> np.ndarray:
    files = getattr(source, "_files", None)
    if files is not None and source._transform is None and source._decode is None:
        per_file = [file_lengths(f, tokens, workers, progress) for f in files]
        whole = np.concatenate(per_file) if per_file else np.zeros(0, np.int64)
        if source._order is None:
            return whole
        return whole[source._order.take(np.arange(len(source), dtype=np.int64))]
    if hasattr(source, "_route") and hasattr(source, "sources"):  # a mixture: its sources' lengths, routed
        k, j = source._route(np.arange(len(source), dtype=np.int64))
        out = np.zeros(len(k), np.int64)
        for src in np.unique(k).tolist():
            at = np.flatnonzero(k == src)
            out[at] = _lengths(source.sources[src], tokens, workers, progress)[j[at]]
        return out
    out = np.zeros(len(source), np.int64)
    for lo in range(0, len(source), _BLOCK):
        positions = np.arange(lo, min(len(source), lo + _BLOCK), dtype=np.int64)
        records = read_positions(source, positions)
        out[lo : lo + len(positions)] = _measured(tokens, records, records.__getitem__)
    return out


def _raise_for(source: Any, tokens: DocumentTokens, position: int) -> None:
    """Raise what making a document of ``source``'s item ``position`` raises, naming where it is."""
    locate = getattr(source, "locate", None)
    if locate is not None:
        path, line = locate(position)
        where = f"{path}, line {line}"
    else:
        where = f"item {position} of {type(source).__name__}"
    try:
        tokens.lengths(read_positions(source, np.array([position], np.int64)))
    except (ColumnNotFoundError, InvalidArgumentError) as err:
        raise type(err)(f"{where}: {err}") from None
    except Exception as err:  # the user's column function or tokenizer
        raise InvalidArgumentError(
            f"{where}: making its document raised {type(err).__name__}: {err}"
        ) from err
    raise InvalidArgumentError(f"{where}: its document could not be made when its length was measured")


def file_lengths(f: Any, tokens: DocumentTokens, workers: int | None, progress: bool | None) -> np.ndarray:
    """One file's document lengths (an :class:`~sjsonl.data.source.IndexedFile`): from its ``.tokens``
    sidecar when that holds this index's and these documents' lengths, else computed and saved there.
    Records left out as bad lines have length 0 (no view reaches them)."""
    identity = tokens.identity
    where = tokens_path(f.index_path) if f.index_path and identity is not None else None
    key = {**index_key(f, CACHE_VERSION), "documents": identity}
    if where:
        saved = read_sidecar(where, TOKENS_MAGIC, key, lambda body: _checked(f, body))
        if saved is not None:
            return saved  # type: ignore[no-any-return]
    lengths = _compute(f, tokens, workers, progress)
    if where:
        write_sidecar(where, TOKENS_MAGIC, key, lengths.astype("<i4"))
    return lengths


def _checked(f: Any, body: memoryview) -> np.ndarray:
    if len(body) != 4 * f.n:
        raise ValueError(f"it holds {len(body) // 4} lengths for {f.n} records")
    lengths = np.frombuffer(body, "<i4").astype(np.int64)
    if f.n and lengths.min() < -1:  # (-1: a record with no document)
        raise ValueError("it holds a negative length")
    if len(f.bad_records) and lengths[f.bad_records].any():
        raise ValueError("it gives a length to a record left out as a bad line")
    return lengths


def _compute(f: Any, tokens: DocumentTokens, workers: int | None, progress: bool | None) -> np.ndarray:
    n = int(f.n)
    chunks = [(lo, min(n, lo + _BLOCK * 16)) for lo in range(0, n, _BLOCK * 16)]
    count = worker_count(workers)
    use_pool = tokens._backend is None and tokens.tokenizer is not None and n >= POOL_MIN_RECORDS
    bar = Progress(int(f.end), f"token lengths of {f.path}", progress)
    out = np.zeros(n, np.int64)
    done = 0
    try:
        if use_pool and count > 1 and pool_allowed():
            try:
                results = map_in_order(
                    chunk_lengths, [(lo, hi) for lo, hi in chunks], count, shared=(f, tokens)
                )
                for (lo, hi), part in zip(chunks, results):
                    out[lo:hi] = part
                    done = _advance(bar, f, hi, done)
                return out
            except ShippingError:  # e.g. a tokenizer class defined in the user's script: work here
                pass
        for lo, hi in chunks:
            out[lo:hi] = chunk_lengths((f, tokens), lo, hi)
            done = _advance(bar, f, hi, done)
        return out
    finally:
        bar.close()


def _advance(bar: Progress, f: Any, hi: int, done: int) -> int:
    reached = int(f.end) if hi >= f.n else int(f.offsets[hi])
    if bar.update is not None:
        bar.update(reached - done)
    return reached


def chunk_lengths(shared: tuple[Any, DocumentTokens], lo: int, hi: int) -> np.ndarray:
    """Lengths of records ``lo..hi`` of a file (0 for bad lines left out); runs in a worker process too."""
    f, tokens = shared
    out = np.zeros(hi - lo, np.int64)
    bad = f.bad_records
    bad = bad[(bad >= lo) & (bad < hi)] - lo
    good = np.setdiff1d(np.arange(hi - lo, dtype=np.int64), bad, assume_unique=True) if len(bad) else None
    decode = FieldProjection([tokens.column]) if isinstance(tokens.column, str) else None
    records = f.iter_good_records(lo, hi) if decode is None else _projected(f, lo, hi, decode)
    at = np.arange(lo, hi, dtype=np.int64) if good is None else good + lo  # the records, in file order
    lengths: list[int] = []
    block: list[Any] = []
    for rec in records:
        block.append(rec)
        if len(block) == _BLOCK:
            lengths += _measured(tokens, block, _full(f, at[len(lengths) :]))
            block = []
    if block:
        lengths += _measured(tokens, block, _full(f, at[len(lengths) :]))
    if good is None:
        out[:] = lengths
    else:
        out[good] = lengths
    return out


def _measured(tokens: DocumentTokens, block: list[Any], whole: Callable[[int], Any]) -> list[int]:
    """``tokens.lengths(block)``, with ``-1`` for a record that cannot be made a document (measured one by
    one, ``whole(k)`` giving block record ``k`` in full: a projection holds only the column). Whether such a
    record matters is decided by the view that is packed (:func:`token_lengths`)."""
    try:
        return tokens.lengths(block)
    except Exception:  # (the user's column function may raise anything)
        out = []
        for k in range(len(block)):
            try:
                out += tokens.lengths([whole(k)])
            except Exception:
                out.append(-1)
        return out


def _full(f: Any, records: np.ndarray) -> Callable[[int], Any]:
    return lambda k: f.record(int(records[k]))


def _projected(f: Any, lo: int, hi: int, decode: FieldProjection) -> Any:
    """Records ``lo..hi`` without bad lines, only the document's column decoded."""
    bad = f.bad_records
    start = lo
    for b in bad[np.searchsorted(bad, lo) : np.searchsorted(bad, hi)].tolist():
        yield from f.iter_records(start, b, decode)
        start = b + 1
    yield from f.iter_records(start, hi, decode)
