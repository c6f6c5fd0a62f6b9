"""Atomic writes of index files: a temp file beside the target, fsync, ``os.replace`` — and the removal of
temp files that killed writers left behind.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.index.npy")
    >>> _atomic_write(path, lambda f: f.write(b"x"))
    >>> open(path, "rb").read(), os.listdir(os.path.dirname(path))
    (b'x', ['d.index.npy'])
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import socket
import tempfile
import time
from collections.abc import Callable
from typing import IO, Any

from .trust import read_only_reason

_TEMP_MAX_AGE = 24 * 3600  # seconds after which anyone's leftover temp file is removed


def _temp_tag() -> str:
    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    return f"{host}-{os.getpid()}"


def _remove_stale_temps(path: str) -> None:
    """Remove temp files an earlier writer of ``path`` left when it was killed: this host's whose
    process is gone, and anyone's older than a day (another host's writer may still be running)."""
    directory, name = os.path.split(path)
    mine = _temp_tag().split("-")[0]
    try:
        entries = os.listdir(directory or ".")
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(name + ".") and entry.endswith(".tmp")):
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _atomic_write(path: str, write: Callable[[IO[bytes]], Any]) -> None:
    reason = read_only_reason(path)
    if reason is not None:  # even for root: the user made the place read-only
        raise PermissionError(errno.EACCES, f"not writing {path}: {reason}")
    directory = os.path.dirname(path) or "."
    _remove_stale_temps(path)
    prefix = f"{os.path.basename(path)}.{_temp_tag()}."
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno is None:  # numpy's "N requested and M written"
            raise OSError(
                errno.ENOSPC, f"short write ({exc}): the disk is full or a size limit hit", path
            ) from exc
        raise
