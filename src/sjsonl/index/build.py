"""Build, find and validate the index of one data file, whatever its storage.

Example:
    >>> import os, tempfile
    >>> from sjsonl.storage import LocalFile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "wb").write(b'{"a": 1}\\n\\n{"a": 2}\\n')
    >>> offsets, stamp = build_offsets(LocalFile(path))
    >>> offsets.tolist(), stamp.size
    ([0, 10], 19)
"""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import replace
from typing import Any

import numpy as np

from sjsonl.errors import IndexFileError, SJSONLError, StaleDataError, StaleIndexError
from sjsonl.index.alongside import ChunkObserver, new_observer, scan_in_place
from sjsonl.index.append import complete_lines, extend_grown_index
from sjsonl.index.elements import NotADocument, field_of, scan_elements
from sjsonl.index.layout import (
    LEGACY_META_SUFFIX,
    IndexFile,
    LoadedIndex,
    default_cache_dir,
    index_dir_from_env,
    seek_state_path,
)
from sjsonl.index.leaves import save_leaves
from sjsonl.index.packed import (
    PACKED_SUFFIX,
    explicit_is_compact,
    format_on_disk,
    iter_index_names,
    wants_compact,
)
from sjsonl.index.scan import CHUNK_BYTES, DataChangedWhileScanning, offset_dtype, scan_file, scan_stream
from sjsonl.index.store import (
    meta_of,
    read_index,
    warn_not_saved,
    write_index,
    write_index_somewhere,
    write_seek_state,
)
from sjsonl.runtime.progress import Progress
from sjsonl.storage import DataStamp, LocalFile, Storage, count_newlines, is_url
from sjsonl.storage.base import split_member
from sjsonl.storage.content import content_of, leaf_digests
from sjsonl.storage.sidecar import ArtifactWarning
from sjsonl.storage.trust import untrusted_reason, warn_untrusted


def _scan(
    storage: Storage,
    before: DataStamp,
    workers: int | None,
    progress: bool | None,
    layout: str = "",
    digests: dict[int, int] | None = None,
    observer: ChunkObserver | None = None,
):
    """(offsets, bytes scanned, layout): threads reading a local file, or one pass over the storage's
    chunks; for a JSON document (``layout``), its elements — or its lines, when it turns out to be none.
    ``digests`` (local files) gets the content hash's leaf digests of the bytes scanned; ``observer``, each
    chunk of a local file's lines (:mod:`sjsonl.index.alongside`), where it can."""
    desc = f"indexing {os.path.basename(storage.path)}"
    if layout:
        reads = storage.chunks(CHUNK_BYTES)  # type: ignore[attr-defined]
        bar = Progress(before.size if before.size >= 0 else None, desc, progress, size_hint=before.stored)
        try:
            update = bar.update
            found = scan_elements(reads if update is None else _counted(reads, update), field_of(layout))
            if digests is not None:
                digests.update(enumerate(leaf_digests(storage.read, 0, found.size)))
            return found.starts.astype(offset_dtype(found.size)), found.size, layout
        except NotADocument:  # a .json file of lines whose records are arrays
            pass
        finally:
            bar.close()
    return (*_scan_lines(storage, before, workers, progress, desc, digests, observer), "")


def _counted(chunks, update):
    for chunk in chunks:
        update(len(chunk))
        yield chunk


def _scan_lines(
    storage: Storage,
    before: DataStamp,
    workers: int | None,
    progress: bool | None,
    desc: str,
    digests: dict[int, int] | None,
    observer: ChunkObserver | None = None,
):
    if isinstance(storage, LocalFile):  # read, or mapped under a guard: a truncation mid-scan cannot crash us
        bar = Progress(before.size, desc, progress)
        try:
            found = None
            if observer is not None and digests is not None:
                found = scan_in_place(storage, before.size, workers, bar.update, digests, observer)
            if found is None:
                with storage.holding() as fd:
                    found = scan_file(
                        fd, before.size, workers=workers, on_progress=bar.update, digests=digests
                    )
            return found, before.size
        finally:
            bar.close()
    # a compressed file's logical size is unknown until it has been read: the bar then only counts
    bar = Progress(before.size if before.size >= 0 else None, desc, progress, size_hint=before.stored)
    try:
        return scan_stream(storage.chunks(CHUNK_BYTES), on_progress=bar.update)  # type: ignore[attr-defined]
    finally:
        bar.close()


def build_offsets(
    storage: Storage, *, workers: int | None = None, progress: bool | None = None
) -> tuple[np.ndarray, DataStamp]:
    """Scan ``storage`` and return (record start offsets, stamp of the bytes that were scanned).

    Lines; :func:`build_layout` also reads JSON documents."""
    offsets, stamp, _layout = build_layout(storage, workers=workers, progress=progress)
    return offsets, stamp


def build_layout(
    storage: Storage,
    *,
    workers: int | None = None,
    progress: bool | None = None,
    layout: str = "",
    leaves: list[int] | None = None,
    observer: ChunkObserver | None = None,
) -> tuple[np.ndarray, DataStamp, str]:
    """Scan ``storage`` and return (record start offsets, stamp of the bytes that were scanned, layout).

    ``layout`` asks for the elements of a JSON document (:mod:`.elements`); the layout returned is
    ``""`` (lines) when the data turn out to be lines.

    A local file is scanned as the storage opened it (its pinned version: a file replaced under the
    name meanwhile does not matter), and its stamp carries the content hash of the bytes scanned. Data
    that changes while it is being scanned is scanned again (twice at most), so the stamp always describes
    the bytes the offsets came from — except a local file that only grows (a writer appending): its index
    then holds the complete lines the scan saw (:func:`~sjsonl.index.append.complete_lines`), and later
    appends show on a reopen or ``refresh()``.

    ``leaves``, when given, gets the content hash's leaf digests of the bytes indexed (the lines of a local
    file; it stays empty for anything else). ``observer`` sees each chunk of a local file's lines, where
    the scan can run in place (:mod:`sjsonl.index.alongside`).
    """
    for _attempt in range(3):
        before = storage.stamp(fingerprint=False)
        storage.pin(before)  # reads during the scan fail if the bytes change (no fingerprint: any change)
        digests: dict[int, int] | None = {} if isinstance(storage, LocalFile) else None
        try:
            offsets, size, found_layout = _scan(storage, before, workers, progress, layout, digests, observer)
        except MemoryError:
            raise MemoryError(
                f"out of memory indexing {storage.path}: its offsets (4 or 8 bytes a record) did not fit"
            ) from None
        except (DataChangedWhileScanning, StaleDataError):
            reset = getattr(storage, "reset_handles", None)
            if reset is not None:  # a decompressor's seek points describe the bytes it saw: start over
                reset()
            continue
        after = storage.stamp(fingerprint=False)
        unchanged = before.describe_change(after, content=False) is None
        if digests is not None and found_layout == "" and (unchanged or after.size > before.size):
            assert isinstance(storage, LocalFile)
            settled = complete_lines(storage, offsets, size, digests, grew=not unchanged)
            if settled is not None:
                if leaves is not None:
                    leaves[:] = settled.leaves
                storage.pin(settled.stamp)
                return settled.offsets, settled.stamp, found_layout
            continue
        if unchanged and (before.stored_size is not None or size == before.size):
            if digests is not None:
                content = content_of([digests[k] for k in sorted(digests)], size)
            else:  # a local file under a decompressor: the hash of its stored bytes
                source = getattr(storage, "source", None)
                content = source.content_hash(before.stored) if isinstance(source, LocalFile) else ""
            final = replace(storage.stamp(), size=size, content=content)
            storage.pin(final)
            return offsets, final, found_layout
    raise SJSONLError(f"data file keeps changing while it is indexed: {storage.path}")


def refuse_data_file_as_index(data_path: str, index_path: str | None, index_dir: str | None) -> None:
    """An ``index_path`` or ``index_dir`` that is the data file itself (a member's: its archive) would
    overwrite the data."""
    if is_url(data_path):
        return
    real = os.path.realpath(split_member(data_path)[0])
    for name, given in (("index_path", index_path), ("index_dir", index_dir)):
        if given is not None and os.path.realpath(os.path.expanduser(given)) == real:
            raise IndexFileError(f"{name} {given} is the data file itself; sjsonl never writes to data")


def _explicit(index_path: str) -> str:
    return os.path.abspath(os.path.expanduser(index_path))


def find_index(
    storage: Storage,
    *,
    index_dir: str | None = None,
    index_path: str | None = None,
    layouts: tuple[str, ...] = ("",),
    defer_verify: bool = False,
    compact: bool | None = None,
) -> tuple[LoadedIndex | None, list[str]]:
    """An index on disk that matches the data as it is now, or ``None`` and why each candidate failed.

    ``layouts``: what its offsets may start (an index of a JSON document's elements is no index of its
    lines, nor of the list under another field). ``defer_verify``: leave the O(records) checks of the
    offsets to the caller (see :func:`~sjsonl.index.store.read_index`). In each place the plain
    ``.index.npy`` is tried before the compact ``.index.packed`` (the reverse with ``compact=True``);
    only one of them is normally there, as writing one removes the other."""
    # one by one: the private cache's path is made only if the index is not found before it
    paths = [_explicit(index_path)] if index_path else iter_index_names(storage.path, index_dir, compact)
    quick = storage.stamp(fingerprint=False)  # a stat, or one HEAD request for a remote object
    full: DataStamp | None = None  # with the fingerprint: computed only when everything else matches
    problems: list[str] = []
    for path in paths:
        try:
            found = read_index(path, verify=not defer_verify)
        except FileNotFoundError:
            legacy = (path[:-4] if path.endswith(".npy") else path) + LEGACY_META_SUFFIX
            if path.endswith(".npy") and os.path.exists(legacy):
                problems.append(f"index {path} is in an older format")
            continue
        except IndexFileError as exc:  # untrusted, malformed, corrupt: rebuilt by the caller
            problems.append(str(exc))
            continue
        meta = found.meta
        if os.path.basename(meta.data_path) != os.path.basename(storage.path):
            # e.g. data.json and data.jsonl side by side share the name data.index.npy
            problems.append(f"index {path} belongs to {meta.data_path}")
            continue
        if meta.layout not in layouts:
            problems.append(f"index {path} indexes {meta.layout or 'lines'}, not {layouts[0] or 'lines'}")
            continue
        stamp = meta.stamp
        if stamp.status_only(quick) and _same_content(storage, stamp):
            # chmod, a link, a rename, a copy that kept the times: the bytes are the ones indexed
            stamp = replace(stamp, ctime_ns=quick.ctime_ns, file_id=quick.file_id)
            _restamp(found, stamp)
        now = quick
        if stamp.describe_change(quick, content=False) is None:
            now = full = full or storage.stamp()
        change = stamp.describe_change(now)
        if change is not None:
            problems.append(f"index {path} is stale: {change}")
            continue
        attach = getattr(storage, "attach_seek_state", None)
        if attach is not None:  # gzip: seek points saved beside the index spare a full decompression
            starts = None if meta.layout else found.offsets  # (the points are checked against lines)
            attach(seek_state_path(path), meta.stamp, meta.checksum, line_starts=starts)
        loaded = LoadedIndex(found.offsets, stamp, path, meta.checksum, meta.layout, verified=found.verified)
        return loaded, problems
    return None, problems


def _same_content(storage: Storage, stamp: DataStamp) -> bool:
    """Whether the local file behind ``storage`` (or under its decompressor) still holds the bytes whose
    content hash ``stamp`` records — read whole, at memory speed (only after a change of status)."""
    source = storage if isinstance(storage, LocalFile) else getattr(storage, "source", None)
    return (
        bool(stamp.content)
        and isinstance(source, LocalFile)
        and source.content_hash(stamp.stored) == stamp.content
    )


def _restamp(found: IndexFile, stamp: DataStamp) -> None:
    """Write the index of a plain file again with ``stamp`` (its new ctime and inode), so the next open
    need not hash the data again; best effort (a read-only place keeps the old one)."""
    if stamp.stored_size is not None:
        return  # a compressed file: its seek points are bound to the stamp indexed; hashed at each open
    meta = replace(found.meta, stamp=stamp)
    with contextlib.suppress(OSError):
        write_index(
            found.path,
            np.asarray(found.offsets),
            meta,
            compact=bool(getattr(found.offsets, "is_compact", False)),
        )


def save_index(
    storage: Storage,
    offsets: np.ndarray,
    stamp: DataStamp,
    *,
    index_dir: str | None = None,
    index_path: str | None = None,
    layout: str = "",
    compact: bool | None = None,
) -> str:
    """Write the index (``index_path``, else beside the data or in the cache directory); return where.

    ``compact``: write a compact ``.index.packed`` (:mod:`sjsonl.index.packed`) instead of the plain
    ``.index.npy``; ``None`` chooses compact only when the plain index would be at least
    :data:`~sjsonl.index.packed.AUTO_COMPACT_BYTES`. ``index_path``'s name decides its format.
    The file written counts as verified in this process (its metadata is made from ``offsets`` here:
    :func:`~sjsonl.index.store.remember_verified`).

    A place other users can write is not used (the private cache is, with a warning). A storage with
    seek state worth keeping (gzip seek points) gets it written beside the index; that file only speeds
    up reopening, so failing to write it is not an error.

    Example:
        >>> import gzip, os, tempfile
        >>> from sjsonl.storage import open_storage
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl.gz")
        >>> _ = open(path, "wb").write(gzip.compress(b'{"a": 1}\\n'))
        >>> storage = open_storage(path)
        >>> offsets, stamp = build_offsets(storage)
        >>> written = save_index(storage, offsets, stamp, index_dir=os.path.dirname(path))
        >>> written.endswith(".index.npy"), os.path.exists(seek_state_path(written))
        (True, True)
    """
    refuse_data_file_as_index(storage.path, index_path, index_dir)
    meta = meta_of(offsets, stamp, storage.path, layout)
    if index_path:
        packed = explicit_is_compact(index_path, compact)
    else:
        packed = wants_compact(compact, len(offsets), offsets.dtype)
    written = None
    if index_path:
        target = _explicit(index_path)
        reason = untrusted_reason(os.path.dirname(target))
        if reason is None:
            written = write_index(target, offsets, meta, compact=packed, known=True)
        else:
            warn_untrusted(os.path.dirname(target), reason, default_cache_dir())
    if written is None:
        where = None if index_path else index_dir
        written = write_index_somewhere(storage.path, offsets, meta, where, compact=packed, known=True)
    export = getattr(storage, "export_seek_state", None)
    blob = export(stamp, meta.checksum) if export is not None else None
    if blob:
        try:
            write_seek_state(seek_state_path(written), blob)
        except OSError:
            pass
        else:
            starts = None if layout else offsets
            storage.attach_seek_state(seek_state_path(written), stamp, meta.checksum, line_starts=starts)  # type: ignore[attr-defined]
    return written


def load_or_build_index(
    storage: Storage,
    *,
    build: bool = True,
    index_dir: str | None = None,
    index_path: str | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    layouts: tuple[str, ...] = ("",),
    defer_verify: bool = False,
    compact: bool | None = None,
    appends: str = "verify",
) -> LoadedIndex:
    """Use a matching index from disk; else build one (and save it) or, with ``build=False``, raise.
    ``defer_verify`` as for :func:`find_index` (an index built or extended here is checked already).

    ``compact`` as for :func:`save_index`; True or False also converts an index found in the other
    format (from its offsets: no scan), None takes either. An extended index keeps its format, and so
    does one rebuilt because it was stale or corrupt.

    ``layouts`` are what the offsets may start: the first is built (``""``: lines; see
    :func:`build_layout`), any is accepted from disk. Either way the storage is then pinned to the
    version the index describes (``storage.pin``).

    ``appends="trust"``: a local file that grew is checked as :mod:`sjsonl.index.leaves` says, not every
    byte hashed, and the leaf digests that takes are kept beside an index built or extended here."""
    index_dir = index_dir_from_env(index_dir)
    refuse_data_file_as_index(storage.path, index_path, index_dir)
    if index_path:
        explicit_is_compact(index_path, compact)  # a contradicting compact= is refused up front
    found, problems = find_index(
        storage, index_dir=index_dir, index_path=index_path, layouts=layouts, defer_verify=defer_verify,
        compact=compact,
    )  # fmt: skip
    if found is None and build and layouts[0] == "" and any("appended to" in p for p in problems):
        found = extend_grown_index(  # only the appended bytes are scanned
            storage, index_dir=index_dir, index_path=index_path, workers=workers, progress=progress,
            appends=appends,
        )  # fmt: skip
    if found is not None and compact is not None and found.compact != compact and not index_path and build:
        found = _convert(storage, found, compact, index_dir)
    if found is None and compact is None and not index_path and problems:  # (none: no file in any place)
        compact = format_on_disk(storage.path, index_dir)
    if found is None:
        found = _build(
            storage, problems, build, index_dir, index_path, workers, progress, layouts[0], compact, appends
        )
    storage.pin(found.stamp)
    return found


def _convert(storage: Storage, found: LoadedIndex, compact: bool, index_dir: str | None) -> LoadedIndex:
    """``found`` rewritten in the other format (its offsets decoded, verified first: no scan)."""
    assert found.path is not None
    offsets = read_index(found.path).offsets  # the checks a deferred read left out, before copying
    plain = np.asarray(offsets)
    try:
        written = save_index(
            storage, plain, found.stamp, index_dir=index_dir, layout=found.layout, compact=compact
        )
    except OSError as exc:  # the index found serves as well in its own format
        warn_not_saved(storage.path, exc)
        return replace(found, offsets=offsets, verified=True)
    return replace(found, offsets=_mapped(written, plain), path=written, verified=True)


def _mapped(written: str, offsets: np.ndarray) -> Any:
    """The offsets to serve after writing ``written``: a compact index is mapped from its file (O(1)
    memory, which is what it is for), a plain one is the array just written."""
    if not written.endswith(PACKED_SUFFIX):
        return offsets
    return read_index(written).offsets


def _build(
    storage,
    problems,
    build,
    index_dir,
    index_path,
    workers,
    progress,
    layout="",
    compact=None,
    appends="verify",
) -> LoadedIndex:
    if not build:
        hint = f"build it with `sjsonl index {storage.path}` or pass build_index_on_load=True"
        untrusted_only = problems and all("is not trusted" in p for p in problems)
        if problems and not untrusted_only:
            kind = StaleIndexError if any("is stale" in p for p in problems) else IndexFileError
            raise kind(f"{problems[-1]}; {hint}")
        raise IndexFileError(f"no index for {storage.path}; {hint}")
    # a corrupt or untrusted index file: say so, once (not a stale or missing one, nor an untrusted place,
    # which warns itself)
    ignored = [p for p in problems if "it will be rebuilt" in p or "not trusted: the index file" in p]
    if ignored:
        warnings.warn(ignored[-1], ArtifactWarning, stacklevel=4)
    leaves: list[int] = []
    observer = new_observer()  # (where asked for: sjsonl.index.alongside)
    offsets, stamp, layout = build_layout(
        storage, workers=workers, progress=progress, layout=layout, leaves=leaves, observer=observer
    )
    try:
        written: str | None = save_index(
            storage, offsets, stamp, index_dir=index_dir, index_path=index_path, layout=layout,
            compact=compact,
        )  # fmt: skip
    except OSError as exc:  # an index we cannot save still serves this process
        warn_not_saved(storage.path, exc)
        written = None
    if appends == "trust" and written and leaves:  # (an empty file has no leaves: nothing to keep)
        save_leaves(written, stamp, leaves)
    checksum = meta_of(offsets, stamp, storage.path, layout).checksum
    served = offsets if written is None else _mapped(written, offsets)
    return LoadedIndex(served, stamp, written, checksum, layout, origin="built", alongside=observer)


def line_number_at(source: Storage, offset: int) -> int:
    """1-based line number of the line starting at byte ``offset`` of ``source`` (counts ``\\n`` before
    it): in place for a memory-mapped file; read in pieces from the start for compressed or remote data
    (a pass over everything before ``offset``, paid only when reporting an error or a location).

    Example:
        >>> from sjsonl.storage import MemoryFile
        >>> line_number_at(MemoryFile(b"1\\n\\n2\\n"), 3)
        3
    """
    return count_newlines(source, 0, offset) + 1
