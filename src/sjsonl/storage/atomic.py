"""Atomic writes: a temp file beside the target, fsync, ``os.replace`` — so the target is always either the
old file or the whole new one — and the removal of temp files that killed writers of index files left behind.
:func:`atomic_output` is the general form (the command line writes its outputs with it); index files go
through :func:`_atomic_write`.

Index files written in a batch (:func:`write_batch`: the indexes one open of many files builds) are not
fsynced one by one — for files of a few records that fsync was about half the cost of a first open.
Readers still see the old file or the whole new one (``os.replace``), and so does the next process after
one is killed mid-write; only a crash of the whole system in the half minute or so before the kernel
writes them back can leave such an index empty or torn — and an index is a cache, checked before use
(size, trailer, CRC-32 of the offsets, bounds; :mod:`sjsonl.index.store`): it is then rebuilt, never
used. Every other write — an index written alone, the command line's outputs, which are data — is
fsynced before it is moved into place.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.index.npy")
    >>> _atomic_write(path, lambda f: f.write(b"x"))
    >>> open(path, "rb").read(), os.listdir(os.path.dirname(path))
    (b'x', ['d.index.npy'])
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from sjsonl.storage.trust import read_only_reason

_TEMP_MAX_AGE = 24 * 3600  # seconds after which anyone's leftover temp file is removed


def _temp_tag() -> str:
    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    return f"{host}-{os.getpid()}"


def _remove_stale_temps(path: str) -> None:
    """Remove temp files an earlier writer of ``path`` left when it was killed: this host's whose
    process is gone, and anyone's older than a day (another host's writer may still be running).
    Inside :func:`write_batch`, from the directory's temp files as listed at its first write there."""
    directory, name = os.path.split(path)
    temps = _directory_temps(directory or ".")
    mine = _temp_tag().split("-")[0]
    for entry in temps:
        if not entry.startswith(name + "."):
            continue
        full = os.path.join(directory, entry)
        tag = entry[len(name) + 1 :].split(".")[0]
        host, _, pid = tag.partition("-")
        try:
            old = time.time() - os.lstat(full).st_mtime > _TEMP_MAX_AGE
            if old or (host == mine and pid.isdigit() and not _alive(int(pid))):
                os.unlink(full)
        except OSError:
            continue


def _directory_temps(directory: str) -> list[str]:
    """The names in ``directory`` that end ``.tmp`` — listed now, or, inside :func:`write_batch`, once."""
    listed = _BATCH.get()
    if listed is not None and directory in listed:
        return listed[directory]
    try:
        temps = [entry for entry in os.listdir(directory) if entry.endswith(".tmp")]
    except OSError:
        temps = []
    if listed is not None:
        listed[directory] = temps
    return temps


#: Inside :func:`write_batch`: each directory's temp files, as listed at the first write there.
_BATCH: contextvars.ContextVar[dict[str, list[str]] | None] = contextvars.ContextVar(
    "sjsonl_write_batch", default=None
)


@contextlib.contextmanager
def write_batch(listed: dict[str, list[str]] | None = None) -> Iterator[None]:
    """Index files written inside (in this thread or task) sweep each directory's temp files once — at
    the first write there — not at every write: writing the indexes of N files in one directory lists it
    once, not N times (which made opening N new files cost O(N²)). A temp file a writer killed during
    the batch leaves is swept by the next write after it. They are not fsynced one by one (see the
    module's notes). Nested batches are one. ``listed``: a dict (empty at first) that several blocks
    share to be one batch — a generator's, which yields between its writes and so must not stay inside
    one block.

    Example:
        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> with write_batch():
        ...     for k in range(3):
        ...         _atomic_write(os.path.join(d, f"{k}.index.npy"), lambda f: f.write(b"x"))
        >>> sorted(os.listdir(d))
        ['0.index.npy', '1.index.npy', '2.index.npy']
    """
    if _BATCH.get() is not None:
        yield
        return
    token = _BATCH.set({} if listed is None else listed)
    try:
        yield
    finally:
        _BATCH.reset(token)


def syncing() -> bool:
    """Whether index writes here are fsynced: everywhere but inside :func:`write_batch` (whose writes a
    crash of the whole system may leave torn — refused by their checks and rebuilt, never used)."""
    return _BATCH.get() is None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def atomic_output(
    path: str, *, replace: bool = True, mode: int | None = None, sweep: bool = False, sync: bool = True
) -> Iterator[IO[bytes]]:
    """A new temp file beside ``path``, open for writing (``.name`` is its path); when the block ends it is
    fsynced and moved to ``path`` in one step. An exception (Ctrl-C included) inside the block removes it
    and leaves ``path`` as it was.

    Args:
        replace: whether an existing ``path`` is replaced; ``False`` raises :class:`FileExistsError` instead,
            even for a file that appeared while the block ran (the new file is hard-linked into place).
        mode: the new file's permission bits; ``None``: those of the file it replaces, else what a new file
            gets (``0o666`` less the umask), as a plain ``open(path, "w")`` would.
        sweep: first remove temp files of ``path`` that killed writers left — only for names sjsonl owns
            (index files): a user's ``out.jsonl.old.tmp`` is never touched.
        sync: fsync the file before it is moved into place (``False``: only for a file that is checked
            before every use and may be rebuilt, as an index is).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "out.txt")
        >>> with atomic_output(path) as f:
        ...     _ = f.write(b"new")
        >>> open(path).read(), os.listdir(os.path.dirname(path))
        ('new', ['out.txt'])
        >>> with atomic_output(path, replace=False) as f:
        ...     _ = f.write(b"newer")
        Traceback (most recent call last):
        ...
        FileExistsError: [Errno 17] File exists: '...out.txt'
    """
    if sweep:
        _remove_stale_temps(path)
    prefix = f"{os.path.basename(path)}.{_temp_tag()}."
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=os.path.dirname(path) or ".")
    try:
        with open(tmp, "wb", opener=lambda *_: fd) as f:  # mkstemp's descriptor, with the name as .name
            yield f
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.chmod(tmp, _new_mode(path) if mode is None else mode)
        if replace:
            os.replace(tmp, path)
        else:
            _link_new(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno is None:  # numpy's "N requested and M written"
            raise OSError(
                errno.ENOSPC, f"short write ({exc}): the disk is full or a size limit hit", path
            ) from exc
        raise


def _new_mode(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        umask = os.umask(0)  # the only way to read it; set straight back
        os.umask(umask)
        return 0o666 & ~umask


def _link_new(tmp: str, path: str) -> None:
    """Move ``tmp`` to ``path`` only if nothing is there: ``link`` never replaces (``rename`` would)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path) from None
    except OSError:  # a file system without hard links: check, then rename (a narrow race remains)
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path) from None
        os.rename(tmp, path)
        return
    os.unlink(tmp)


def _atomic_write(path: str, write: Callable[[IO[bytes]], Any]) -> None:
    """Write an index file (mode 0644) with :func:`atomic_output`, sweeping old temp files first — never
    into a place whose mode grants no write permission, even for root (:func:`.trust.read_only_reason`).
    Inside :func:`write_batch` it is not fsynced (see the module's notes)."""
    reason = read_only_reason(path)
    if reason is not None:  # the user made the place read-only
        raise PermissionError(errno.EACCES, f"not writing {path}: {reason}")
    with atomic_output(path, mode=0o644, sweep=True, sync=syncing()) as f:
        write(f)
