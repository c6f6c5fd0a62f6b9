"""Decode layer: record bytes → Python objects, exactly as the standard ``json`` module returns them.

msgspec parses every record: it keeps integers of any size exact (orjson turns ``18446744073709551616``
into a float), and is faster than orjson on ASCII records here (0.61 µs vs 0.77 µs), 5–16% slower on
text-heavy non-ASCII ones (see the README). Like ``json.loads`` (and orjson), it keeps the *last* value of
a key an object holds twice.
When msgspec declines a document that is still valid JSON — escaped lone surrogates such as
``"\\ud800"``, numbers too large for a double (``1e400`` is ``inf``, as ``json`` reads it), and
``NaN``/``Infinity``/``-Infinity`` (what ``json.dumps`` writes for float nan and inf; not RFC 8259 JSON,
but ``json.loads`` reads them as floats) — the standard library's parser gets a second look. So every
record equals ``json.loads`` of it, or raises; the common record never leaves msgspec.
``allow_nan=False`` refuses the three constants, as the strict reading of the RFC does (``1e400`` stays
``inf``: it is a valid JSON number). Input must be valid UTF-8.

This layer never opens files: callers hand it bytes and turn failures into located errors.

Example:
    >>> loads(rb'["\\ud800"]') == [chr(0xD800)]
    True
    >>> loads(b'{"x": NaN, "y": -Infinity, "x": 1}')
    {'x': 1, 'y': -inf}
    >>> loads(b'NaN', allow_nan=False)
    Traceback (most recent call last):
    ...
    ValueError: NaN is not valid JSON (allow_nan=False)
"""

from __future__ import annotations

import json
import re
from types import ModuleType
from typing import Any

import msgspec


def _native_utf8() -> ModuleType | None:
    try:
        from sjsonl.records import _utf8
    except ImportError:  # built without a C compiler: bytes.decode checks it
        return None
    return _utf8


#: The compiled UTF-8 check (``sjsonl/records/_utf8.c``), or None where it was not built.
NATIVE_UTF8 = _native_utf8()

#: The fast parser, called directly on hot paths; on :data:`DECODE_ERRORS` callers go through
#: :func:`loads`, which gives the strict second look and the reason.
fast_loads = msgspec.json.Decoder().decode
#: What :data:`fast_loads` raises on a record it declines (a number out of range is a ValidationError,
#: a DecodeError too; nesting deeper than its limit, RecursionError).
DECODE_ERRORS = (msgspec.DecodeError, RecursionError)
_BYTE_POSITION = re.compile(r"\s*\(byte (\d+)\)")
_TRUNCATED = "Input data was truncated"


class FieldMismatch(ValueError):
    """Raised by a decoder (:mod:`sjsonl.records.fields`) for valid JSON that is not what was asked for."""


class _Refused(ValueError):
    """The stdlib parser refused a record: its reason, and the byte of the record where it stopped."""

    def __init__(self, reason: str, byte: int) -> None:
        super().__init__(reason)
        self.byte = byte


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (allow_nan=False)")


def fallback_loads(raw: bytes | memoryview, allow_nan: bool = True) -> Any:
    """The stdlib parse (UTF-8 checked) of what msgspec declined: exactly ``json.loads`` of the text —
    ``NaN``/``Infinity``/``-Infinity`` are floats unless ``allow_nan`` is false."""
    try:
        text = bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refused(f"invalid UTF-8: {exc.reason} at byte {exc.start}", -1) from None
    try:
        if allow_nan:
            return json.loads(text)
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        byte = len(text[: exc.pos].encode("utf-8", "surrogatepass"))
        raise _Refused(f"{exc.msg} at byte {byte} of the record", byte) from None
    except RecursionError:
        raise _Refused("nesting too deep", -1) from None
    except ValueError as exc:  # a constant refused, or an integer of more than 4300 digits
        raise _Refused(str(exc), -1) from None


def _reason(exc: Exception) -> str:
    # "JSON is malformed: invalid character (byte 7)" → "…: invalid character at byte 7 of the record":
    # a position inside the record, never to be read as a line of the file.
    text = str(exc)
    if text == _TRUNCATED:
        return "the record ends too early (an unclosed string, array or object)"
    return _BYTE_POSITION.sub(lambda m: f" at byte {m.group(1)} of the record", text)


def loads(raw: bytes | memoryview, allow_nan: bool = True) -> Any:
    """Parse one record as ``json.loads`` does; ``ValueError`` (with a short reason) if it refuses it —
    or, with ``allow_nan=False``, if it holds ``NaN``, ``Infinity`` or ``-Infinity``."""
    try:
        return fast_loads(raw)
    except DECODE_ERRORS:
        return second_look(raw, allow_nan)


def second_look(raw: bytes | memoryview, allow_nan: bool = True) -> Any:
    """:func:`loads` for a record :data:`fast_loads` has just declined: the stdlib's value at once (a
    record with NaN costs one parse more, not two), msgspec asked again only for the reason of a refusal.

    Example:
        >>> second_look(b'[NaN, 1]')
        [nan, 1]
    """
    try:
        return fallback_loads(raw, allow_nan)
    except _Refused as exc:
        refused = exc
    try:
        fast_loads(raw)
    except DECODE_ERRORS as first:
        raise ValueError(_sharper(first, refused, len(raw))) from None
    raise ValueError(str(refused))  # msgspec took it after all (not for a record it declined)


def _sharper(first: Exception, second: _Refused, size: int) -> str:
    """The reason to give: msgspec's, worded sharper — unless json's fault lies further on (msgspec
    stopped at something json reads: NaN, a lone surrogate escape, ``1e400``) or is no syntax error
    (invalid UTF-8, a refused constant, nesting too deep)."""
    at = _BYTE_POSITION.search(str(first))
    truncated = str(first) == _TRUNCATED
    first_byte = int(at.group(1)) if at is not None else size if truncated else -1
    return str(second) if second.byte < 0 or second.byte > first_byte else _reason(first)


def excerpt(raw: bytes | memoryview, limit: int = 60) -> str:
    """A short, printable quote of a record's start for error messages."""
    head = bytes(raw[: limit + 1]).rstrip(b"\r\n")
    text = head[:limit].decode("utf-8", errors="backslashreplace")
    return repr(text + ("…" if len(head) > limit else ""))


def valid_utf8(raw: bytes | memoryview) -> bool:
    """Whether ``raw`` is valid UTF-8 (parsers that skip values do not check their strings): one pass in C
    that builds no text (:data:`NATIVE_UTF8`), else ASCII answered at once and anything else decoded.

    Example:
        >>> valid_utf8("café".encode()), valid_utf8(b"caf\\xe9"), valid_utf8(b"\\xed\\xa0\\x80")  # surrogate
        (True, False, False)
    """
    if NATIVE_UTF8 is not None:
        return NATIVE_UTF8.valid(raw)  # type: ignore[no-any-return]
    return _decodes(raw)


def _decodes(raw: bytes | memoryview) -> bool:
    data = raw if isinstance(raw, bytes) else bytes(raw)
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
