"""Decode layer: record bytes → Python objects.

orjson parses every record. When orjson declines a document that is still valid JSON — escaped lone
surrogates such as ``"\\ud800"``, numbers too large for a double — the standard library's parser gets a
second look, so sjsonl accepts what RFC 8259 accepts. Known difference from the ``json`` module: orjson
reads integers outside ``[-2**63, 2**64)`` as floats. ``NaN``, ``Infinity`` and ``-Infinity`` are *rejected*:
they are not JSON (the stdlib accepts them by default; we do not). Input must be valid UTF-8.

This layer never opens files: callers hand it bytes and turn failures into located errors.

Example:
    >>> loads(rb'["\\ud800"]') == [chr(0xD800)]
    True
    >>> loads(b'NaN')
    Traceback (most recent call last):
    ...
    ValueError: NaN is not valid JSON
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from .errors import ArgumentTypeError

#: The fast parser, called directly on hot paths; on ``ValueError`` callers go through :func:`loads`.
fast_loads = orjson.loads
JSONDecodeError = orjson.JSONDecodeError


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def fallback_loads(raw: bytes | memoryview) -> Any:
    """Strict stdlib parse (UTF-8 checked, NaN/Infinity rejected) of what orjson declined."""
    try:
        text = bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"invalid UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(exc.msg + f" (column {exc.colno})") from None
    except RecursionError:
        raise ValueError("nesting too deep") from None


def loads(raw: bytes | memoryview) -> Any:
    """Parse one record; ``ValueError`` (with a short reason) if it is not valid JSON."""
    try:
        return fast_loads(raw)
    except JSONDecodeError as exc:
        first_reason = str(exc)
    try:
        return fallback_loads(raw)
    except ValueError as exc:
        reason = str(exc)
        if "NaN" in reason or "Infinity" in reason or "UTF-8" in reason:
            raise ValueError(reason) from None
        raise ValueError(first_reason) from None


def excerpt(raw: bytes | memoryview, limit: int = 60) -> str:
    """A short, printable quote of a record's start for error messages."""
    head = bytes(raw[: limit + 1]).rstrip(b"\r\n")
    text = head[:limit].decode("utf-8", errors="backslashreplace")
    return repr(text + ("…" if len(head) > limit else ""))


class Projection:
    """Decode only some top-level fields of object records: ``{column: value}`` in ``columns`` order.

    With msgspec installed (``pip install 'sjsonl[fast]'``) the other fields are skipped without being
    built — several times faster than a full parse on long records; without it, a full orjson parse is
    projected. A missing field gives ``None``. A record that is not a JSON object raises ``ValueError``.

    Example:
        >>> Projection(["id", "lang"])(b'{"id": 7, "text": "a long text", "tags": [1, 2]}')
        {'id': 7, 'lang': None}
    """

    def __init__(self, columns: list[str] | tuple[str, ...]) -> None:
        if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
            raise ArgumentTypeError("columns must be a list of field names")
        self.columns = tuple(dict.fromkeys(columns))
        self._decoder = None
        try:
            import msgspec
        except ImportError:
            return
        fields = [(f"f{i}", Any, None) for i in range(len(self.columns))]
        rename = {f"f{i}": c for i, c in enumerate(self.columns)}
        struct = msgspec.defstruct("Projection", fields, rename=rename)
        self._decoder = msgspec.json.Decoder(struct)
        self._astuple = msgspec.structs.astuple
        self._errors = (msgspec.DecodeError,)

    def __call__(self, raw: bytes | memoryview) -> dict[str, Any]:
        if self._decoder is not None:
            try:
                return dict(zip(self.columns, self._astuple(self._decoder.decode(raw))))
            except self._errors:
                pass  # not an object, or not valid JSON: the full parse says which, precisely
        value = loads(raw)
        if not isinstance(value, dict):
            raise ValueError(f"cannot select columns from a JSON {type(value).__name__}, not an object")
        return {c: value.get(c) for c in self.columns}

    def __reduce__(self):  # msgspec decoders do not pickle; rebuild from the column names
        return (Projection, (list(self.columns),))
