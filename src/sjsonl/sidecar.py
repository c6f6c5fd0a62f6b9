"""Small JSON files kept beside an index (the schema, the bad lines), valid only with that index.

Each holds ``{"key": ..., "value": ...}``; the key is the index's identity (the data version it describes
and its record count), so a rebuilt index leaves its sidecars stale and they are recomputed, never
trusted. Writes are atomic; a sidecar that cannot be written (a read-only place) is only recomputed
next time.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.index.thing")
    >>> write_sidecar(path, {"v": 1}, [1, 2]); read_sidecar(path, {"v": 1}), read_sidecar(path, {"v": 2})
    ([1, 2], None)
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import orjson


def index_key(f: Any, version: int) -> dict[str, Any]:
    """The identity of ``f``'s index (an :class:`~sjsonl.source.IndexedFile`): the data version, what the
    offsets start (lines, or a JSON document's elements under one field), their count and checksum, and
    the records left out as bad lines."""
    return {
        "version": version,
        "stamp": f.stamp.to_dict(),
        "records": int(f.n),
        "checksum": f.checksum,
        "layout": f.layout,
        "skipped": len(f.bad_records),
    }


def read_sidecar(path: str, key: Any) -> Any:
    """The value saved at ``path`` under ``key``, or ``None`` (missing, torn, or another key)."""
    try:
        with open(path, "rb") as fh:
            saved = orjson.loads(fh.read())
        return saved["value"] if saved.get("key") == key else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_sidecar(path: str, key: Any, value: Any) -> None:
    """Save ``value`` under ``key`` atomically; silently skipped where the place is not writable."""
    data = orjson.dumps({"key": key, "value": value})
    try:
        where, name = os.path.split(path)
        fd, tmp = tempfile.mkstemp(dir=where, prefix=name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass
