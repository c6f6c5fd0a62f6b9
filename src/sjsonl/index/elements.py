"""Where each element of a JSON *document*'s array starts: the index of ``[{"x": 1}, {"x": 2}]``, or of the
list under one key of a top-level object (🤗's ``field=``), so its rows are read at random like lines.

This is a boundary scan, not a parse — the index layer's job, like the newline scan, and kept here for the
same reason: it says where records start and builds no values. It lexes just enough JSON to know which
bytes are structure: quotes not escaped by an odd run of backslashes open and close strings; outside
strings, ``[``/``{`` and ``]``/``}`` move the nesting depth, and a ``,`` at the array's own depth ends an
element. Each chunk is lexed with numpy (a lookup table over the bytes, ``searchsorted`` for the string
state, a cumulative sum for the depth): Python work is per chunk and per top-level key, not per byte. The
one value it decodes is a top-level key, to compare it with ``field``.

A record's bytes run from its start to the next one's; the decode layer drops the ``,`` and whitespace
between them (:func:`element_bytes`). The last element ends at the array's closing bracket, found again
on reopening by a scan of the tail only (:func:`array_end`).

Example:
    >>> found = scan_elements([b'[{"x": 1},\\n {"x": "a,]"}', b"\\n]\\n"])
    >>> found.starts.tolist(), found.end, found.size
    ([1, 12], 25, 27)
    >>> scan_elements([b'{"v": 1, "data": [[1], [2, 3]]}'], field="data").starts.tolist()
    [18, 23]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from sjsonl.errors import DocumentError as DocumentError

_WS = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"
_STRUCT = np.zeros(256, bool)
_STRUCT[list(b"[]{},:")] = True
_DELTA = np.zeros(256, np.int64)
_DELTA[list(b"[{")] = 1
_DELTA[list(b"]}")] = -1
_IS_WS = np.zeros(256, bool)
_IS_WS[list(_WS)] = True
_COMMA, _COLON, _OPEN, _CLOSE = ord(","), ord(":"), ord("["), ord("]")
_NONE = np.zeros(0, np.int64)
_KEY_HISTORY = 1 << 16  # bytes kept from earlier chunks while looking for the field's key
#: layout tags stored in the index metadata ("" is JSON Lines)
ARRAY = "json-array"
# "json-field-last:": the list under the LAST occurrence of the key, as json.loads reads it (the tag of
# indexes built before, "json-field:", named the first: such an index is built again, never trusted)
FIELD = "json-field-last:"


class NotADocument(Exception):
    """The bytes are not one JSON array document (something follows the array): read them as lines."""


@dataclass
class Elements:
    """Element starts, the offset of the array's closing bracket, and the bytes scanned."""

    starts: np.ndarray
    end: int
    size: int


class _Lexer:
    """Structural bytes outside strings, chunk after chunk: (positions, bytes, depth after each)."""

    def __init__(self, depth: int = 0, base: int = 0) -> None:
        self.depth, self.base = depth, base
        self.in_string = False
        self.backslashes = 0  # length of the run of backslashes that ended the previous chunk
        self.quotes = np.zeros(0, np.int64)  # unescaped quotes of the last chunk (absolute offsets)

    def feed(self, chunk: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        b = np.frombuffer(chunk, np.uint8)
        quotes = np.flatnonzero(b == 0x22)
        slashes = np.flatnonzero(b == 0x5C)
        if len(quotes) and (len(slashes) or self.backslashes):
            quotes = quotes[~self._escaped(quotes, slashes)]
        self.backslashes = _trailing_run(slashes, len(b), self.backslashes)
        cand = np.flatnonzero(_STRUCT[b])
        outside = ((np.searchsorted(quotes, cand) + self.in_string) & 1) == 0
        pos = cand[outside]
        chars = b[pos]
        depth = self.depth + np.cumsum(_DELTA[chars])
        if len(depth):
            self.depth = int(depth[-1])
        self.in_string = bool((self.in_string + len(quotes)) & 1)
        self.quotes = np.concatenate([self.quotes[-2:], quotes + self.base])  # keys split across chunks
        pos = pos + self.base
        self.base += len(b)
        return pos, chars, depth

    def _escaped(self, quotes: np.ndarray, slashes: np.ndarray) -> np.ndarray:
        """Whether each quote follows an odd run of backslashes (the run may start in the last chunk)."""
        if len(slashes):
            breaks = np.flatnonzero(np.diff(slashes) != 1)
            run_end = np.append(slashes[breaks], slashes[-1])
            run_start = np.insert(slashes[breaks + 1], 0, slashes[0])
            length = run_end - run_start + 1
            if run_start[0] == 0:
                length[0] += self.backslashes
            else:  # the carried run ends just before this chunk
                run_end, length = np.insert(run_end, 0, -1), np.insert(length, 0, self.backslashes)
        else:
            run_end, length = np.array([-1]), np.array([self.backslashes])
        odd = run_end[(length & 1) == 1] + 1
        return np.isin(quotes, odd)


def _trailing_run(slashes: np.ndarray, n: int, carried: int) -> int:
    """Backslashes that end a chunk of ``n`` bytes (plus the carried run when the chunk is all of them)."""
    k = 0
    while k < len(slashes) and slashes[len(slashes) - 1 - k] == n - 1 - k:
        k += 1
    return k + carried if k == n else k


def _next_non_ws(b: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """For each position in ``xs``, the first non-whitespace position at or after it (``len(b)``: none in
    this chunk). A few vectorised steps cover usual indentation; longer runs are skipped one by one."""
    out = xs.astype(np.int64)
    todo = np.arange(len(out))
    for _ in range(24):
        todo = todo[out[todo] < len(b)]
        todo = todo[_IS_WS[b[out[todo]]]]
        if not len(todo):
            return out
        out[todo] += 1
    raw = b.tobytes()
    for k in todo.tolist():
        out[k] = len(raw) - len(raw[int(out[k]) :].lstrip(_WS))
    return out


def scan_elements(chunks: Iterable[bytes], field: str | None = None) -> Elements:
    """Index a JSON array document (or, with ``field``, the array under that top-level key — its last
    occurrence, the one ``json.loads`` keeps).

    Raises :class:`NotADocument` when non-whitespace follows a top-level array (JSON Lines whose records
    are arrays), and :class:`DocumentError` for a document that cannot give rows.

    Example:
        >>> scan_elements([b'{"data": [1, 2], "data": [[3], 4]}'], field="data").starts.tolist()
        [26, 31]
    """
    starts: list[np.ndarray] = []
    closing, size = 0, 0
    for chunk, _base, found, end, restarted in scan_chunks(chunks, field):
        if restarted:
            starts = []
        starts.append(found)
        size += len(chunk)
        closing = end
    return Elements(np.concatenate(starts) if starts else np.zeros(0, np.int64), closing, size)


def iter_elements(chunks: Iterable[bytes], field: str | None = None) -> Iterator[tuple[int, int, bytes]]:
    """``(offset, line number, bytes)`` of each element, front to back, holding only the bytes of the
    element being read (for streams: nothing is indexed).

    With ``field``, the rest of the document is read too: a later occurrence of the key (``json.loads``
    keeps the last) raises :class:`DocumentError` once rows of an earlier one were given — a single pass
    cannot take them back.

    Example:
        >>> list(iter_elements([b'[{"a": 1},\\n', b'2]']))
        [(1, 1, b'{"a": 1}'), (11, 2, b'2')]
    """
    held, held_at = b"", 0  # the bytes from the last element start on
    last: int | None = None
    line = 1  # of the last element start
    discard = False  # the element being read is of a list a later occurrence of the key replaced
    given = False
    for chunk, base, found, end, restarted in scan_chunks(chunks, field):
        if restarted:
            if given:
                raise DocumentError(
                    f"the JSON document holds the key {field!r} more than once: json.loads keeps the last "
                    "list, and rows of an earlier one were already streamed; read it with an index instead"
                )
            discard = last is not None
        if last is None and not len(found):
            line += chunk.count(b"\n")
            continue
        if last is None:
            held, held_at = chunk, base
        else:
            held += chunk
        for start in found.tolist():
            if last is None:
                line += held[: start - held_at].count(b"\n")
            elif start > last:
                body = held[last - held_at : start - held_at]
                if not discard:
                    given = True
                    yield last, line, element_bytes(body)
                discard = False
                line += body.count(b"\n")
            last = start
        if last is not None and end >= 0:
            if not discard:
                given = True
                yield last, line, held[last - held_at : end - held_at].rstrip(_WS)
            if field is None:
                return
            line += held[last - held_at :].count(b"\n")  # read on: the key may come again
            held, last, discard = b"", None, False
            continue
        assert last is not None  # set above: this chunk held an element start, or an earlier one did
        held, held_at = held[last - held_at :], last


def scan_chunks(
    chunks: Iterable[bytes], field: str | None = None
) -> Iterator[tuple[bytes, int, np.ndarray, int, bool]]:
    """``(chunk, its offset, element starts in it, offset of the array's "]" or -1 while unseen,
    restarted)`` for each chunk: the scan behind :func:`scan_elements` and :func:`iter_elements`.

    With ``field``, every occurrence of the top-level key is looked for, to the end of the document: the
    rows are the list under the last one, as ``json.loads`` (and 🤗) read it. ``restarted`` says that a
    later occurrence began in this chunk: the starts given before (earlier chunks, and this one's before
    it) were of a list it replaces."""
    lexer = _Lexer()
    depth = 1 if field is None else 2  # the array's own depth (inside its brackets)
    opened: int | None = None  # offset of the array's "["
    end: int | None = None  # offset of its "]"
    pending = False  # the next non-whitespace byte starts an element (or closes the array)
    after_comma = False  # that byte follows a "," (not the "["): it may not be the "]"
    trailing_comma = -1  # where a "]" followed a "," ("[1,]", which json.loads refuses)
    want_open = False  # field: a matching key was just seen; its value starts in the next chunk
    seen = False  # field: an occurrence of the key was found
    no_list = False  # field: the latest occurrence of the key holds no list
    prev = b""  # up to _KEY_HISTORY bytes before the chunk: a key may start in earlier chunks
    size = 0
    for chunk in chunks:
        base = size
        size += len(chunk)
        b = np.frombuffer(chunk, np.uint8)
        if end is not None and field is None:  # after the array: a bare array must end the document
            if not bool(_IS_WS[b].all()):
                raise NotADocument
            yield chunk, base, _NONE, end, False
            continue
        pos, chars, dep = lexer.feed(chunk)
        parts: list[np.ndarray] = []
        restarted = False
        while True:
            if opened is None or end is not None:  # looking for the rows' "[" (field: for the key, again)
                if field is None:
                    at = np.flatnonzero(chars == _OPEN)[:1]
                    if not len(at):
                        break
                    k = int(at[0])
                else:
                    found_at = _find_field(pos, chars, dep, want_open, field, lexer, prev, chunk, base)
                    want_open = found_at == len(pos)  # the value starts in the next chunk
                    if found_at is None or want_open:
                        break
                    k = found_at
                    restarted, parts = restarted or seen, []
                    seen = True
                    no_list = chars[k] != _OPEN or dep[k] != 2
                    if no_list:  # unless a later occurrence holds one, the document gives no rows
                        opened = end = None
                        pos, chars, dep = pos[k:], chars[k:], dep[k:]
                        continue
                opened, end, pending, after_comma = int(pos[k]), None, True, False
                pos, chars, dep = pos[k + 1 :], chars[k + 1 :], dep[k + 1 :]
            closes = np.flatnonzero(dep == depth - 1)
            inside = int(closes[0]) if len(closes) else len(pos)
            after = pos[:inside][(chars[:inside] == _COMMA) & (dep[:inside] == depth)] + 1
            commas = np.ones(len(after), bool)
            if pending:
                after = np.insert(after, 0, max(base, opened + 1))
                commas = np.insert(commas, 0, after_comma)
            local = _next_non_ws(b, after - base)
            found = local[local < len(b)] + base
            pending = bool(len(local)) and local[-1] >= len(b)
            after_comma = pending and bool(commas[-1])
            if not len(closes):
                parts.append(found)
                break
            end = int(pos[inside])
            if trailing_comma < 0 and bool(commas[local + base == end].any()):
                trailing_comma = end  # an error once the bytes are known to be one document
            parts.append(found[found < end])
            pending = False
            if field is None:
                if not bool(_IS_WS[b[end - base + 1 :]].all()):
                    raise NotADocument
                break
            pos, chars, dep = pos[inside + 1 :], chars[inside + 1 :], dep[inside + 1 :]
        if field is not None and (opened is None or end is not None):
            prev = (prev + chunk)[-_KEY_HISTORY:]
        found = np.concatenate(parts) if parts else _NONE
        yield chunk, base, found, -1 if end is None else end, restarted
    if trailing_comma >= 0:
        raise DocumentError(f"a trailing comma before the closing bracket at byte {trailing_comma}")
    if no_list:
        raise DocumentError(f"field {field!r} does not hold a list of rows")
    if end is None:
        if field is not None and opened is None:
            raise DocumentError(f"the JSON document has no top-level key {field!r} (field={field!r})")
        raise DocumentError("the JSON document ends inside its array (a partial file?)")


def _find_field(
    pos: np.ndarray,
    chars: np.ndarray,
    dep: np.ndarray,
    want_open: bool,
    field: str,
    lexer: _Lexer,
    prev: bytes,
    chunk: bytes,
    base: int,
) -> int | None:
    """Where the value of the next occurrence of the top-level key ``field`` starts, as an index into
    ``pos``: its first structural byte (``[`` when it holds a list); ``len(pos)`` when that is in the
    next chunk; ``None`` when the key is not among these bytes. Python work per top-level key only."""
    events = np.flatnonzero((chars == _COLON) & (dep == 1)).tolist()
    if want_open:
        events.insert(0, -1)
    for k in events:
        if k >= 0 and _key_before(int(pos[k]), lexer, prev, chunk, base) != field:
            continue
        return k + 1
    return None


def _key_before(colon: int, lexer: _Lexer, prev: bytes, chunk: bytes, base: int) -> str | None:
    """The top-level key a colon follows: the string between the last two unescaped quotes before it."""
    quotes = lexer.quotes[lexer.quotes < colon]
    if len(quotes) < 2:
        return None
    lo, hi = int(quotes[-2]), int(quotes[-1]) + 1
    if lo < base - len(prev):
        return None  # a key longer than _KEY_HISTORY: not worth a second pass
    data = (prev + chunk) if lo < base else chunk
    shift = base - len(prev) if lo < base else base
    try:
        key = json.loads(data[lo - shift : hi - shift])
    except ValueError:
        return None
    return key if isinstance(key, str) else None


def array_end(read: Callable[[int, int], bytes], start: int, depth: int, step: int = 1 << 20) -> int:
    """The offset of the ``]`` closing the array whose last element starts at ``start`` (``depth``: the
    array's own depth, 1 for a bare array, 2 under a field) — a scan of the tail only.

    Example:
        >>> data = b'{"data": [1, {"a": [2]}\\n]}'
        >>> array_end(lambda lo, hi: data[lo:hi], 13, depth=2)
        24
    """
    lexer = _Lexer(depth=depth, base=start)
    pos = start
    while chunk := read(pos, pos + step):
        where, _chars, dep = lexer.feed(chunk)
        closes = np.flatnonzero(dep == depth - 1)
        if len(closes):
            return int(where[closes[0]])
        pos += len(chunk)
    raise DocumentError("the JSON document ends inside its array (a partial file?)")


def records_end(read: Callable[[int, int], bytes], offsets: Any, layout: str, size: int) -> int:
    """Where the last record of an index ends: the data's ``size`` for lines; for a document's elements,
    the array's closing bracket (:func:`array_end`, a scan of the tail only).

    Example:
        >>> data = b'[{"a": 1},\\n {"a": 2}\\n]\\n'
        >>> records_end(lambda lo, hi: data[lo:hi], np.array([1, 12]), ARRAY, len(data))
        21
    """
    if not layout or not len(offsets):
        return size
    return array_end(read, int(offsets[-1]), array_depth(layout))


def element_bytes(raw: bytes) -> bytes:
    """An element's bytes from its index span: the ``,`` and whitespace after it dropped.

    Example:
        >>> element_bytes(b'{"x": 1} ,\\n  ')
        b'{"x": 1}'
    """
    raw = raw.rstrip(_WS)
    return raw[:-1].rstrip(_WS) if raw.endswith(b",") else raw


def first_byte(head: bytes) -> bytes:
    """The first byte of a document that is not whitespace or a BOM (``b""`` when there is none).

    Example:
        >>> first_byte(b"\\xef\\xbb\\xbf  [1]")
        b'['
    """
    rest = head.removeprefix(_BOM).lstrip(_WS)
    return rest[:1]


def layout_tag(field: str | None) -> str:
    """The tag an index of this document layout carries in its metadata.

    Example:
        >>> layout_tag(None), layout_tag("data")
        ('json-array', 'json-field-last:data')
    """
    return ARRAY if field is None else FIELD + field


def field_of(layout: str) -> str | None:
    """The ``field`` a layout tag names (``None`` for a bare array): :func:`layout_tag`'s inverse.

    Example:
        >>> field_of("json-array"), field_of("json-field-last:data")
        (None, 'data')
    """
    return layout[len(FIELD) :] if layout.startswith(FIELD) else None


def array_depth(layout: str) -> int:
    """The nesting depth of the rows' array: 1 inside a bare array, 2 under a field.

    Example:
        >>> array_depth("json-array"), array_depth("json-field-last:data")
        (1, 2)
    """
    return 1 if field_of(layout) is None else 2
