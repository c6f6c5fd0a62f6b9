"""Which places may hold an index we read: never one that another user can plant or swap.

An index decides which bytes are returned as record ``i``, so it is trusted the way ssh (``StrictModes``)
and git (``safe.directory``) trust their files: the index file must belong to this user (or root) and be
writable by no one else, and the directory holding it must belong to this user (or root) and be writable
by no one else — not a group-writable project folder, not ``/tmp`` (sticky or not). An untrusted place is
neither read nor written; the index goes to the private cache directory instead, and sjsonl says so once
per directory (a :class:`UntrustedIndexPlaceWarning`).

Example:
    >>> import os, tempfile
    >>> untrusted_reason(tempfile.mkdtemp()) is None          # a private temp dir (mode 0700)
    True
    >>> untrusted_reason("/tmp")                               # where anyone can write
    '/tmp is writable by other users (mode 1777)'
    >>> untrusted_reason("/tmp/no-such-dir-yet") is None      # ours once we create it (sticky parent)
    True
"""

from __future__ import annotations

import os
import stat
import warnings

from sjsonl.errors import UntrustedIndexPlaceWarning as UntrustedIndexPlaceWarning

_WARNED: set[str] = set()


def private_cache_root() -> str:
    """sjsonl's private cache: ``$XDG_CACHE_HOME/sjsonl`` (or ``~/.cache/sjsonl``) — indexes under
    ``index/``, remote objects' chunks under ``remote/``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "sjsonl")


def _owner_ok(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def untrusted_reason(directory: str, file_stat: os.stat_result | None = None) -> str | None:
    """Why an index in ``directory`` (with ``file_stat``, the index file's stat) must not be trusted,
    or ``None`` when it may be. A directory that does not exist yet will be ours when sjsonl creates it:
    it is judged by its nearest existing parent, where a sticky one (``/tmp``) is fine — others cannot
    rename or remove what we create there."""
    if file_stat is not None:
        if not _owner_ok(file_stat.st_uid):
            return f"the index file belongs to another user (uid {file_stat.st_uid})"
        if file_stat.st_mode & 0o022:
            return f"the index file is writable by other users (mode {stat.S_IMODE(file_stat.st_mode):o})"
    path = os.path.abspath(directory)
    exists = True
    while True:
        try:
            st = os.stat(path)
            break
        except FileNotFoundError:
            exists = False
            parent = os.path.dirname(path)
            if parent == path:
                return None
            path = parent
    if not _owner_ok(st.st_uid):
        return f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022 and (exists or not st.st_mode & stat.S_ISVTX):
        return f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def read_only_reason(path: str) -> str | None:
    """Why sjsonl must not write ``path`` (an index or a file beside it), or ``None`` when it may try.

    A place whose mode grants no write permission is read-only *even for root*, who could write it
    anyway (most training containers and CI run as root): the user made it read-only, so the data's
    directory gets no new file and an index file without write bits is not replaced. An existing file
    without write bits is left alone the same way. Other refusals (a directory owned by another user
    without write permission for us) are the operating system's, found when writing.

    Example:
        >>> import os, tempfile
        >>> place = tempfile.mkdtemp()
        >>> read_only_reason(os.path.join(place, "d.index.npy")) is None
        True
        >>> os.chmod(place, 0o555)
        >>> read_only_reason(os.path.join(place, "d.index.npy"))
        '... is read-only (mode 555)'
    """
    try:
        st = os.stat(path)
        if not st.st_mode & 0o222:
            return f"{path} is read-only (mode {stat.S_IMODE(st.st_mode):o})"
    except OSError:
        pass
    directory = os.path.dirname(os.path.abspath(path))
    while True:  # the nearest existing directory: where a new one would be made
        try:
            st = os.stat(directory)
            break
        except FileNotFoundError:
            parent = os.path.dirname(directory)
            if parent == directory:
                return None
            directory = parent
        except OSError:
            return None
    if not st.st_mode & 0o222:
        return f"{directory} is read-only (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def warn_untrusted(directory: str, reason: str, instead: str) -> None:
    """Say once per directory that an index place was skipped, and where the index goes instead."""
    if directory in _WARNED:
        return
    _WARNED.add(directory)
    warnings.warn(
        f"not using indexes in {directory}: {reason}; other users could decide what is read. "
        f"Using the private cache {instead} instead.",
        UntrustedIndexPlaceWarning,
        stacklevel=4,
    )
