"""Records → MindSpore rows: a tuple of numpy arrays, one per column, with stable column order and dtypes.

MindSpore 2.x with numpy 2 accepts only numpy arrays from a ``GeneratorDataset`` source (a plain ``str`` or
``int`` — even a numpy scalar — fails with "Unable to avoid copy"), and nothing of dtype ``object``, so
lists of objects, ragged lists and nulls cannot go through as they are (MindNLP issue #1795). A
:class:`Schema` fixes each column's name, order and representation once, from every row (the cached
:func:`sjsonl.records.schema.infer_schema` of a dataset; a sample only when asked) or from 🤗 ``features``,
and converts every row by it:

=====================================================  ====================================  ===============
JSON values of the column (over the rows looked at)      numpy value in each row               null / missing
=====================================================  ====================================  ===============
strings                                                0-d unicode array (``<U``)            ``""``
integers (all within int64)                            0-d ``int64``                         ``0``
numbers, some with a fraction (``1`` and ``1.5``)      0-d ``float64``                       ``NaN``
booleans                                               0-d ``bool``                          ``False``
rectangular lists of one of the four above, depth d    d-dim array of that dtype (shape      empty array,
(``[1, 2]``, ``[[0.5, 1], [2, 3]]``, ``["a", "b"]``)   may differ from row to row)           shape (0,)*d
anything else: objects, lists of objects (chat         0-d unicode array: the value's        ``"null"``
``messages``), ragged lists, lists with nulls, mixed   compact JSON text (``json.loads``
types, integers beyond int64, a column seen only as    gives the value back exactly)
null or ``[]``
=====================================================  ====================================  ===============

Rows that are not JSON objects (a JSON array per line, say) become one column, ``value``, converted by the
same table (an array of message objects → its JSON text); so does an empty dataset (no rows to name
columns). Columns appear in the order their keys first appear. With 🤗 ``features``, the
columns are exactly the features' keys in their order; ``Value`` and ``ClassLabel`` features fix the dtype
(string → ``<U``, any int → int64, any float → float64, bool → bool); other features are inferred from the
data as above.

Fine print: strings travel as numpy unicode, which cannot end in NUL (numpy drops trailing ``"\\0"``), and
MindSpore cannot carry lone surrogates (``"\\ud800"``, valid in JSON), which become U+FFFD. The JSON-text
representation has neither limit. Fills cannot be told apart from real ``0`` / ``""`` / ``False``. A value
that does not fit its column's inferred representation — possible only for rows outside a sample
(``infer_rows=N``) or against given ``features`` — raises :class:`SchemaMismatchError` naming the column; the
default, every row, rules that out.

Example:
    >>> schema = infer_schema([{"q": "a", "n": 1, "tags": ["x"]}, {"q": "b", "n": 2.5, "msgs": [{"r": 1}]}])
    >>> schema.column_names
    ['q', 'n', 'tags', 'msgs']
    >>> schema.convert({"q": "c", "n": 3, "tags": ["y", "z"], "msgs": [{"r": 2}]})
    (array('c', dtype='<U1'), array(3.), array(['y', 'z'], dtype='<U1'), array('[{"r":2}]', dtype='<U9'))
    >>> schema.to_python(schema.convert({"q": "d"}))
    {'q': 'd', 'n': nan, 'tags': [], 'msgs': None}
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from sjsonl.errors import InvalidArgumentError, SchemaMismatchError
from sjsonl.records.decode import loads
from sjsonl.records.schema import JSON_SIG, RecordSchema, schema_of_records

KINDS = ("str", "int64", "float64", "bool", "json")
_DTYPES = {"str": np.str_, "int64": np.int64, "float64": np.float64, "bool": np.bool_}
_FILL = {"str": "", "int64": 0, "float64": np.nan, "bool": False}
_LEAF_TYPES: dict[str, set[type]] = {"str": {str}, "int64": {int}, "float64": {int, float}, "bool": {bool}}
_SURROGATE = re.compile("[\ud800-\udfff]")
VALUE_COLUMN = "value"


@dataclass(frozen=True)
class Column:
    """One output column: ``key`` in the record (``None``: the whole record), a ``kind`` from :data:`KINDS`,
    and ``ndim`` (0 for scalars; d for depth-d lists of that kind)."""

    name: str
    kind: str
    ndim: int = 0
    key: str | None = None

    def describe(self) -> str:
        if self.kind == "json":
            return "JSON text"
        return self.kind if self.ndim == 0 else f"{self.ndim}-d {self.kind} array"


def _json_text(value: Any) -> str:
    try:
        text = orjson.dumps(value)
    except TypeError:  # lone surrogates, ints beyond 64 bits, non-JSON 🤗 values: escaped ASCII, still exact
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)
    if b"null" in text and _non_finite(value):  # orjson writes NaN and ±inf as null: json as loads reads them
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.decode()


def _non_finite(value: Any) -> bool:
    """Whether a JSON value holds a float NaN or ±inf (``json.loads`` reads them from NaN/Infinity)."""
    if type(value) is float:
        return not math.isfinite(value)
    if type(value) is list:
        return any(map(_non_finite, value))
    if type(value) is dict:
        return any(map(_non_finite, value.values()))
    return False


def _clean(s: str) -> str:
    return s if s.isascii() or not _SURROGATE.search(s) else _SURROGATE.sub("\ufffd", s)


def _leaf_types(value: list, ndim: int) -> set[type]:
    if ndim == 1:
        return set(map(type, value))
    out: set[type] = set()
    for sub in value:
        out |= _leaf_types(sub, ndim - 1) if type(sub) is list else {type(sub)}
    return out


# ------------------------------------------------------------------------------------------ inference
# Column types come from the schema layer (sjsonl.records.schema): signatures (kind, ndim) merged over the
# rows.
_JSON = JSON_SIG


def _feature_kind(feature: Any) -> str | None:
    """The kind a 🤗 ``Value``/``ClassLabel`` feature fixes, or None to infer from the data."""
    name = type(feature).__name__
    if name == "ClassLabel":
        return "int64"
    if name != "Value":
        return None
    dtype = str(feature.dtype)
    if dtype in ("string", "large_string"):
        return "str"
    if dtype == "bool":
        return "bool"
    if dtype.startswith(("int", "uint")):
        return "int64"
    if dtype.startswith(("float", "double", "half")):
        return "float64"
    return "json" if dtype == "null" else None


def infer_schema(rows: Iterable[Any] | RecordSchema, features: Mapping[str, Any] | None = None) -> Schema:
    """The :class:`Schema` for ``rows`` (all of them are looked at), or for a ready
    :class:`~sjsonl.records.schema.RecordSchema` (what :func:`sjsonl.records.schema.infer_schema` computes and
    caches for a dataset) — see the table in the module docstring.

    Example:
        >>> infer_schema([[1, 2], [3]]).columns
        (Column(name='value', kind='int64', ndim=1, key=None),)
        >>> infer_schema([{"a": None}, {"a": [[1, 2], [3]]}, {"b": True}]).columns[0].describe()
        'JSON text'
    """
    rs = rows if isinstance(rows, RecordSchema) else schema_of_records(rows)
    if rs.value is not None or (not rs.object_rows and features is None):
        # Non-object rows: the whole row is one column (JSON text when objects are mixed in). No rows at all
        # (an empty split): the same single JSON-text column, since MindSpore needs at least one.
        whole = _JSON if rs.object_rows else rs.whole_signature
        return Schema([_column(VALUE_COLUMN, whole, None)])
    sigs = {k: rs.signature_of(k) for k in rs.column_names}
    if features is not None:
        columns = []
        for name, feature in features.items():
            kind = _feature_kind(feature)
            columns.append(Column(name, kind, 0, name) if kind else _column(name, sigs.get(name), name))
        return Schema(columns)
    return Schema([_column(key, sig, key) for key, sig in sigs.items()])


def _column(name: str, sig: tuple | None, key: str | None) -> Column:
    if sig is None or sig[0] is None or sig[1] is None or sig == _JSON:
        return Column(name, "json", 0, key)  # only nulls / empty lists seen: JSON text can hold anything
    return Column(name, sig[0], sig[1], key)


# ------------------------------------------------------------------------------------------ conversion
class Schema:
    """Column names, order and representation; :meth:`convert` turns a record into MindSpore's row.

    Example:
        >>> s = Schema([Column("id", "int64", key="id"), Column("text", "str", key="text")])
        >>> s.convert({"text": "hi", "id": 7})
        (array(7), array('hi', dtype='<U2'))
        >>> s.select(["text"]).column_names
        ['text']
    """

    def __init__(self, columns: Sequence[Column]) -> None:
        self.columns = tuple(columns)
        for c in self.columns:
            if c.kind not in KINDS:
                raise InvalidArgumentError(f"column kind must be one of {KINDS}, not {c.kind!r}")
        self._whole = len(self.columns) == 1 and self.columns[0].key is None
        self._converters = [(c.key, self._converter(c)) for c in self.columns]

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def __repr__(self) -> str:
        return "Schema(" + ", ".join(f"{c.name}: {c.describe()}" for c in self.columns) + ")"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and other.columns == self.columns

    def __reduce__(self):  # converters are closures: rebuild them in the receiving process
        return (Schema, (self.columns,))

    def select(self, names: Sequence[str]) -> Schema:
        """The columns ``names``, in that order."""
        by_name = {c.name: c for c in self.columns}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise InvalidArgumentError(f"unknown column(s) {missing}; the columns are {self.column_names}")
        return Schema([by_name[n] for n in names])

    def convert(self, row: Any) -> tuple[np.ndarray, ...]:
        """One record → a tuple of numpy arrays in column order."""
        if self._whole:
            return (self._converters[0][1](row),)
        if type(row) is not dict:
            raise SchemaMismatchError(f"a row is not a JSON object but the schema has columns: {_short(row)}")
        return tuple([conv(row.get(key)) for key, conv in self._converters])

    def to_python(self, values: Sequence[Any]) -> dict[str, Any]:
        """The inverse of :meth:`convert` (fills stay fills; JSON text is parsed)."""
        out = {}
        for c, v in zip(self.columns, values):
            v = np.asarray(v)
            if c.kind == "json":  # sjsonl's own parser: it also reads escaped lone surrogates
                out[c.name] = loads(str(v).encode())
            else:
                out[c.name] = v.item() if c.ndim == 0 else v.tolist()
        return out

    @staticmethod
    def _converter(c: Column):
        kind, ndim = c.kind, c.ndim

        def mismatch(value: Any) -> SchemaMismatchError:
            return SchemaMismatchError(
                f"column {c.name!r} holds {c.describe()} (from the rows the schema saw), but a row has "
                f"{_short(value)}; infer the schema from every row (infer_rows=None) or pass features"
            )

        if kind == "json":
            return lambda v: np.array(_json_text(v))
        dtype, allowed = _DTYPES[kind], _LEAF_TYPES[kind]
        fill: np.ndarray = (
            np.array(_FILL[kind], dtype=dtype) if ndim == 0 else np.zeros((0,) * ndim, dtype=dtype)
        )

        if ndim == 0:

            def scalar(v: Any) -> np.ndarray:
                if v is None:
                    return fill.copy()
                if type(v) not in allowed:
                    raise mismatch(v)
                try:
                    return np.array(_clean(v) if kind == "str" else v, dtype=dtype)
                except OverflowError:
                    raise mismatch(v) from None

            return scalar

        def array(v: Any) -> np.ndarray:
            if v is None:
                return fill.copy()
            if type(v) is not list or not _leaf_types(v, ndim) <= allowed:
                raise mismatch(v)
            try:
                a: np.ndarray = np.array(v, dtype=dtype)
            except (ValueError, OverflowError):  # ragged, or an int beyond int64
                raise mismatch(v) from None
            if a.ndim != ndim:
                if a.size or a.ndim > ndim:
                    raise mismatch(v)
                a = a.reshape(a.shape + (0,) * (ndim - a.ndim))
            if kind == "str" and a.size and _has_surrogate(a):
                a = np.array(_clean_nested(v), dtype=dtype)
            return a

        return array


def _has_surrogate(a: np.ndarray) -> bool:
    codes = a.view(np.uint32)
    return bool(((codes >= 0xD800) & (codes <= 0xDFFF)).any())


def _clean_nested(v: Any) -> Any:
    return [_clean_nested(x) for x in v] if type(v) is list else _clean(v)


def _short(value: Any, limit: int = 80) -> str:
    text = _json_text(value)
    return f"{type(value).__name__} {text[:limit]}{'…' if len(text) > limit else ''}"
