"""Partial and typed decoding: only some (nested) fields of each record, or records of a declared type.

:class:`FieldProjection` decodes the fields at some paths — ``"id"``, ``"meta.lang"`` — and skips the
rest without building it (msgspec), which pays on records with many or long fields. The result is the
record's subset, nested as in the record: ``{"meta": {"lang": "en"}}``. A missing path follows
``missing``: ``"absent"`` (left out: exactly the subset), ``"none"`` (``None`` at that path) or
``"error"`` (the record raises, naming the field). Asking for ``meta`` and ``meta.lang`` gives ``meta``
whole. The record is still checked whole: one that ``json.loads`` refuses raises, skipped parts included.
Values are ``json.loads``'s: a key an object holds twice gives its last value; ``NaN``/``Infinity`` are
floats unless ``allow_nan=False``.

:class:`TypedDecoder` decodes each record as a type — a ``msgspec.Struct``, a dataclass or a
``TypedDict`` — validating while decoding; a mismatch raises with the field's path (``$.meta.lang``),
and the dataset adds the file, line and offset.

Both are decoders for :class:`~sjsonl.JSONLDataset` (``fields=``, ``schema=``): callables from a
record's bytes to its value that raise ``ValueError`` with a reason.

Example:
    >>> p = FieldProjection(["id", "meta.lang"])
    >>> p(b'{"id": 7, "text": "long ...", "meta": {"lang": "en", "url": "x"}}')
    {'id': 7, 'meta': {'lang': 'en'}}
    >>> p(b'{"id": 8}'), FieldProjection(["meta.lang"], missing="none")(b'{"id": 8}')
    ({'id': 8}, {'meta': {'lang': None}})
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Row:
    ...     id: int
    ...     text: str = ""
    >>> TypedDecoder(Row)(b'{"id": 1, "extra": [1]}')
    Row(id=1, text='')
    >>> TypedDecoder(Row)(b'{"id": "1"}')
    Traceback (most recent call last):
    ...
    sjsonl.records.decode.FieldMismatch: Expected `int`, got `str` - at `$.id`
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from sjsonl.errors import ArgumentTypeError, InvalidArgumentError
from sjsonl.records.decode import NATIVE_UTF8, FieldMismatch, loads, valid_utf8

MISSING_POLICIES = ("absent", "none", "error")
#: The UTF-8 check of a record whose skipped fields msgspec did not check: the compiled one, called
#: directly on the hot path, where it is built.
_valid_utf8 = valid_utf8 if NATIVE_UTF8 is None else NATIVE_UTF8.valid
_astuple, _UNSET = msgspec.structs.astuple, msgspec.UNSET
Path = tuple[str, ...]


def parse_paths(fields: str | Sequence[str]) -> list[Path]:
    """Dotted field names as paths: ``"meta.lang"`` → ``("meta", "lang")``.

    Example:
        >>> parse_paths(["id", "meta.lang"])
        [('id',), ('meta', 'lang')]
    """
    if isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
        raise ArgumentTypeError("fields must be a list of field names (dotted for nested fields)")
    return [tuple(f.split(".")) for f in dict.fromkeys(fields)]


#: Records each :class:`FieldProjection` decodes both ways before it keeps the faster (see its ``__init__``).
PROBE_RECORDS = 64


def _tree(paths: Sequence[Path]) -> dict[str, Any]:
    """Paths as a tree ``{key: None (whole value) | subtree}``; a whole value absorbs deeper paths."""
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for i, key in enumerate(path):
            last = i == len(path) - 1
            if key in node and node[key] is None:
                break  # the whole value is asked for already
            if last:
                node[key] = None
            else:
                node = node.setdefault(key, {})
    return tree


def _struct(tree: dict[str, Any], name: str, default: Any = msgspec.UNSET) -> type:
    """A msgspec Struct with one optional field per key of ``tree`` (nested Structs for subtrees), each
    ``default`` when absent (UNSET: left out of ``to_builtins``)."""
    fields, rename = [], {}
    for i, (key, sub) in enumerate(tree.items()):
        # a nested field that is not an object (null included) fails the fast decode: the full parse
        # then applies the missing policy to it
        kind: Any = Any if sub is None else _struct(sub, f"{name}_{i}")
        fields.append((f"f{i}", kind, default))
        rename[f"f{i}"] = key
    return msgspec.defstruct(name, fields, rename=rename)


#: (parse, check, convert): see :meth:`FieldProjection.steps`.
Steps = tuple[Callable[[Any], Any], Callable[[Any], object] | None, Callable[[Any], Any] | None]


def _literal_picker(columns: Sequence[str], from_struct: bool = False) -> Callable[[Any], dict]:
    """``lambda v: {"a": v.get("a"), …}`` for these columns — or, ``from_struct``, ``{"a": v.f0, …}`` from
    the decoded :func:`_struct` — : a dict display is about 6× faster than a loop over them, which matters
    where the pick is most of a record's cost. The source holds only ``repr()`` of each name — a string
    literal, whatever the name — and the struct's own ``f0``, ``f1``…, so nothing from the data is ever
    evaluated as code."""
    values = [f"v.f{i}" if from_struct else f"v.get({name!r})" for i, name in enumerate(columns)]
    body = ", ".join(f"{name!r}: {value}" for name, value in zip(columns, values))
    return eval(f"lambda v: {{{body}}}", {"__builtins__": {}})  # type: ignore[no-any-return]


class FieldProjection:
    """Decode only the fields at ``paths`` of object records (see the module)."""

    def __init__(
        self, fields: str | Sequence[str] | Sequence[Path], missing: str = "absent", allow_nan: bool = True
    ) -> None:
        if missing not in MISSING_POLICIES:
            raise InvalidArgumentError(
                f"missing must be one of {', '.join(MISSING_POLICIES)}, not {missing!r}"
            )
        dotted = isinstance(fields, str) or all(isinstance(f, str) for f in fields)
        self.paths: list[Path] = parse_paths(fields) if dotted else [tuple(p) for p in fields]  # type: ignore[arg-type]
        self.missing = missing
        self.allow_nan = allow_nan
        self._tree = _tree(self.paths)
        self.columns = tuple(self._tree)  # the top-level fields of every record
        # missing fields left out (or None, for flat paths): the decoded struct is the answer as it is
        flat = all(sub is None for sub in self._tree.values())
        self._simple = missing == "absent" or (flat and missing == "none")
        self._flat = flat and missing in ("absent", "none")  # a tuple of top-level values is enough
        default = None if flat and missing == "none" else msgspec.UNSET
        try:
            self._decoder: msgspec.json.Decoder | None = msgspec.json.Decoder(
                _struct(self._tree, "Fields", default)
            )
        except ValueError:  # a key msgspec cannot name (a quote, a backslash, a control character)
            self._decoder = None  # every record takes the full parse, then the subset
        # Which way pays on these records is measured, not assumed: skipping fields costs nearly what
        # building them does on narrow records (and the skipped bytes' UTF-8 must still be checked), so the
        # first PROBE_RECORDS records are decoded both ways and the faster way decodes the rest. Both give
        # the same subset (the full parse is the projection's own reference); a copy in another process
        # (a pickle) measures again there.
        self._probe: list[int] | None = [0, 0, 0]  # records timed, ns projecting, ns parsing in full
        self._pick_none = _literal_picker(self.columns) if self._flat and missing == "none" else None
        # top-level columns, None when missing (select_columns): the struct's fields are the answer
        self._from_struct = _literal_picker(self.columns, True) if self._pick_none is not None else None
        self._full = self._decoder is None

    def __call__(self, raw: bytes | memoryview) -> dict[str, Any]:
        if self._full:
            return self._from_full(raw)
        if self._probe is not None:
            return self._probed(raw)
        return self.project(raw)

    @property
    def way(self) -> str | None:
        """``"projected"`` or ``"full"``: how records are decoded now the choice is made (None: not yet)."""
        if self._full:
            return "full"
        return None if self._probe is not None else "projected"

    def _probed(self, raw: bytes | memoryview) -> dict[str, Any]:
        probe = self._probe
        if probe is None:  # (another thread finished the probe)
            return self(raw)
        # the way that goes second finds the record's bytes in the cache: take turns going first
        first, second = (self.project, self._from_full) if probe[0] % 2 else (self._from_full, self.project)
        try:
            t0 = time.perf_counter_ns()
            one = first(raw)
            t1 = time.perf_counter_ns()
            two = second(raw)
            t2 = time.perf_counter_ns()
        except Exception:  # a record one way refuses: decide on what was timed, and let this one raise
            self._probe = None
            return self.project(raw)
        projected, full = (t1 - t0, t2 - t1) if first == self.project else (t2 - t1, t1 - t0)
        probe[0] += 1
        probe[1] += projected
        probe[2] += full
        if probe[0] >= PROBE_RECORDS:
            self._full, self._probe = probe[2] < probe[1], None
        return one if first == self.project else two

    def _from_full(self, raw: bytes | memoryview) -> dict[str, Any]:
        return self.pick(loads(raw, self.allow_nan))

    def pick(self, value: Any) -> dict[str, Any]:
        """The subset of a record parsed in full — the second half of the full way, for a reader that parses
        blocks of records itself (``IndexedFile.iter_records``) once :attr:`way` is ``"full"``."""
        if type(value) is dict and self._flat:  # top-level fields, the common case
            if self._pick_none is not None:
                return self._pick_none(value)  # type: ignore[no-any-return]
            return {k: value[k] for k in self.columns if k in value}
        if not isinstance(value, dict):
            raise FieldMismatch(f"cannot select fields from a JSON {type(value).__name__}, not an object")
        return self._from_value(value, self._tree, ())

    def project(self, raw: bytes | memoryview) -> dict[str, Any]:
        """The projected way: msgspec skips the other fields, the skipped bytes checked as UTF-8; anything
        unusual (not an object, NaN, invalid JSON) goes the full way, whose errors are ``ValueError``s — for a
        reader that decodes blocks of records itself once :attr:`way` is ``"projected"``."""
        try:
            if self._decoder is None:
                raise msgspec.DecodeError
            decoded = self._decoder.decode(raw)
            if _valid_utf8(raw):  # msgspec does not check the strings it skips
                if self._from_struct is not None:
                    return self._from_struct(decoded)  # type: ignore[no-any-return]
                if self._flat:  # top-level fields only: zip the decoded values (UNSET: absent)
                    values = _astuple(decoded)
                    return {k: v for k, v in zip(self.columns, values) if v is not _UNSET}
                # one C call builds the subset (UNSET fields are left out); only nested paths or another
                # missing policy need the small walk over it
                row = msgspec.to_builtins(decoded)
                return row if self._simple else self._from_value(row, self._tree, ())
        except (msgspec.DecodeError, RecursionError):
            # not an object, a nested field that is not one (perhaps only a key's earlier value), or JSON
            # msgspec declines (NaN, "\ud800", invalid): the full parse decides
            pass
        return self._from_full(raw)

    def steps(self) -> Steps:
        """:meth:`project` as (parse, check, convert): calls a compiled reader makes itself, no Python frame
        between them — for top-level columns the struct decode, the UTF-8 check of the bytes it skipped
        (false, or any error: the record goes through :meth:`project`, which decides) and the struct's
        fields as a dict; else ``(project, None, None)`` (nested paths, another missing policy, no
        compiled check)."""
        if self._decoder is None or self._from_struct is None or NATIVE_UTF8 is None:
            return self.project, None, None
        return self._decoder.decode, _valid_utf8, self._from_struct

    def _from_value(self, obj: dict, tree: dict[str, Any], where: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, sub in tree.items():
            if key not in obj:
                self._missing(out, key, sub, where)
            elif sub is None:
                out[key] = obj[key]
            elif isinstance(obj[key], dict):
                out[key] = self._from_value(obj[key], sub, (*where, key))
            else:
                self._missing_inside(out, key, sub, where, obj[key])
        return out

    def _missing(self, out: dict, key: str, sub: dict | None, where: Path) -> None:
        if self.missing == "error":
            raise FieldMismatch(f"field {'.'.join((*where, key))!r} is missing")
        if self.missing == "none":
            out[key] = None if sub is None else self._nones(sub)

    def _missing_inside(self, out: dict, key: str, sub: dict, where: Path, value: Any) -> None:
        if self.missing == "error":
            inner = ".".join((*where, key))
            raise FieldMismatch(
                f"field {inner!r} is a JSON {type(value).__name__}, not an object with the fields asked for"
            )
        if self.missing == "none":
            out[key] = self._nones(sub)

    def _nones(self, tree: dict[str, Any]) -> dict[str, Any]:
        return {k: None if sub is None else self._nones(sub) for k, sub in tree.items()}

    def __repr__(self) -> str:  # stable across runs: caches key on it (sjsonl.data.transforms.filter)
        paths = [".".join(p) for p in self.paths]
        strict = "" if self.allow_nan else ", allow_nan=False"
        return f"{type(self).__name__}({paths!r}, missing={self.missing!r}{strict})"

    def __reduce__(self):  # msgspec decoders do not pickle; rebuild from the paths (and keep the choice)
        return (FieldProjection, (self.paths, self.missing, self.allow_nan), self._choice())

    def _choice(self) -> dict[str, Any]:
        return {"_full": self._full, "_probe": self._probe}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._full, self._probe = state["_full"], state["_probe"]

    def choose(self, samples: Sequence[bytes], rounds: int = 3) -> None:
        """Decide the way now, on ``samples`` (records of the data, as bytes): each way decodes them all
        ``rounds`` times, and the faster best round wins. A dataset calls this once, with a few hundred
        records from across its files; a record neither way decodes leaves the choice to the first records
        read (the per-record probe)."""
        if self._decoder is None or not samples:
            return
        best = []
        for way in (self.project, self._from_full):
            times = []
            for _ in range(rounds):
                t0 = time.perf_counter_ns()
                try:
                    for raw in samples:
                        way(raw)
                except Exception:  # a record one way refuses: it is the reads' to report
                    return
                times.append(time.perf_counter_ns() - t0)
            best.append(min(times))
        self._full, self._probe = best[1] < best[0], None


class Projection(FieldProjection):
    """``select_columns``: top-level columns — names taken literally, dots included — ``None`` when
    missing, in the order asked for.

    Example:
        >>> Projection(["id", "lang"])(b'{"id": 7, "text": "a long text", "tags": [1, 2]}')
        {'id': 7, 'lang': None}
    """

    def __init__(self, columns: Sequence[str], allow_nan: bool = True) -> None:
        if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
            raise ArgumentTypeError("columns must be a list of field names")
        super().__init__([(c,) for c in dict.fromkeys(columns)], missing="none", allow_nan=allow_nan)

    def __reduce__(self):
        return (Projection, (list(self.columns), self.allow_nan), self._choice())


class TypedDecoder:
    """Decode each record as ``schema`` (a ``msgspec.Struct``, dataclass or ``TypedDict``): the value is
    ``json.loads``'s record converted to it (a key held twice gives its last value; ``NaN`` is a float)."""

    def __init__(self, schema: type, allow_nan: bool = True) -> None:
        try:
            self._decoder: msgspec.json.Decoder = msgspec.json.Decoder(schema)
        except TypeError as exc:
            raise ArgumentTypeError(
                f"schema must be a msgspec Struct, a dataclass or a TypedDict: {exc}"
            ) from None
        self.schema = schema
        self.allow_nan = allow_nan

    def __call__(self, raw: bytes | memoryview) -> Any:
        try:
            value = self._decoder.decode(raw)
            if _valid_utf8(raw):
                return value
        except (msgspec.DecodeError, RecursionError):  # ValidationError included
            # msgspec validates every value of a key held twice, and takes a union's tag from its first
            # one; it declines NaN, "\ud800" and 1e400: json.loads's value, converted, decides
            pass
        obj = loads(raw, self.allow_nan)  # invalid JSON raises here, with the parser's reason
        try:
            return msgspec.convert(obj, self.schema, str_keys=True)
        except msgspec.ValidationError as exc:
            raise FieldMismatch(str(exc)) from None

    def __repr__(self) -> str:
        strict = "" if self.allow_nan else ", allow_nan=False"
        return f"TypedDecoder({self.schema.__module__}.{self.schema.__qualname__}{strict})"

    def __reduce__(self):
        return (TypedDecoder, (self.schema, self.allow_nan))
