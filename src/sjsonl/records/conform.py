"""Rows as 🤗 ``datasets`` gives them: every column in every row (``None`` where a key is missing), in a fixed
order, with 🤗 ``features`` types applied — a transform for :meth:`JSONLDataset.with_transform`.

🤗 stores a JSON Lines file as an Arrow table, so each row has every column of the file. sjsonl returns by
default exactly what ``json.loads`` gives for the line (a missing key stays missing); :func:`conform_rows`
makes the 🤗 shape on request: with ``features`` (🤗's contract: those columns, in that order, cast) or with a
:class:`~sjsonl.records.schema.RecordSchema` (the columns of every row, as
:func:`sjsonl.records.schema.infer_schema` finds them in all rows).

Example:
    >>> from sjsonl.records.schema import schema_of_records
    >>> rows = [{"a": 1}, {"b": "x", "a": 2}]
    >>> fill = conform_rows(schema=schema_of_records(rows))
    >>> [fill(r) for r in rows]
    [{'a': 1, 'b': None}, {'a': 2, 'b': 'x'}]
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from sjsonl.errors import FeaturesMismatchError as FeaturesMismatchError

_INTEGER = re.compile(r"[+-]?[0-9]+")
_ARROW_NAMES = {"float64": "double", "float32": "float", "float16": "halffloat"}


def _unparsable(value: Any, dtype: str) -> FeaturesMismatchError:
    # 🤗's error (Arrow's), with the value named; raised when the record is read (sjsonl reads lazily)
    what = f"string: {value!r}" if isinstance(value, str) else f"{type(value).__name__}: {value!r}"
    return FeaturesMismatchError(
        f"Failed to parse {what} as a scalar of type {_ARROW_NAMES.get(dtype, dtype)}"
    )


def _to_int(dtype: str) -> Any:
    def cast(v: Any) -> Any:
        if type(v) in (int, bool):
            return int(v)
        if type(v) is float and v.is_integer():
            return int(v)
        if type(v) is str and _INTEGER.fullmatch(v):
            return int(v)
        raise _unparsable(v, dtype)

    return cast


def _to_float(dtype: str) -> Any:
    def cast(v: Any) -> Any:
        if type(v) in (int, float, bool):
            return float(v)
        if type(v) is str:
            try:
                return float(v)
            except ValueError:
                pass
        raise _unparsable(v, dtype)

    return cast


def _caster(feature: Any) -> Any:
    """A function casting a JSON value as 🤗's Arrow cast does, for scalar ``Value`` features (a value the
    type cannot hold raises, as 🤗's load does); else None."""
    if type(feature).__name__ != "Value":
        return None
    dtype = str(feature.dtype)
    if dtype.startswith(("float", "double", "half")):
        return _to_float(dtype)
    if dtype.startswith(("int", "uint")):
        return _to_int(dtype)
    if dtype in ("string", "large_string"):
        return lambda v: (
            ("true" if v else "false") if type(v) is bool else str(v) if type(v) in (int, float) else v
        )
    return None


def _to_string(v: Any) -> Any:
    if type(v) is bool:  # Arrow's bool -> string cast
        return "true" if v else "false"
    return str(v) if type(v) in (int, float) else v


class Conform:
    """The row transform :func:`conform_rows` builds (picklable: it travels to DataLoader workers)."""

    def __init__(self, columns: Sequence[str], casts: Mapping[str, Any] | None, strict: bool) -> None:
        self.columns, self.strict = list(columns), strict
        self._known = frozenset(self.columns)
        self._features = casts  # 🤗 features (rebuilt into casters in each process)
        self._casts = {k: c for k, f in (casts or {}).items() if (c := _caster(f)) is not None}

    def __reduce__(self):
        return (Conform, (self.columns, self._features, self.strict))

    def __call__(self, row: Any) -> Any:
        if type(row) is not dict:
            return row
        if self.strict and not self._known.issuperset(row):
            extra = [k for k in row if k not in self._known]
            raise FeaturesMismatchError(
                f"a record has column(s) {extra} that features do not list (they list {self.columns})"
            )
        out = {k: row.get(k) for k in self.columns}
        for k, cast in self._casts.items():
            if out[k] is not None:
                out[k] = cast(out[k])
        if not self.strict and len(row) > len(out):  # keys beyond the schema's (none for a full schema)
            out.update((k, v) for k, v in row.items() if k not in out)
        return out


def conform_rows(features: Mapping[str, Any] | None = None, schema: Any = None) -> Conform:
    """A transform giving each record 🤗's shape: the ``features``' columns (in order, scalar ``Value`` types
    cast, other keys refused) or the ``schema``'s columns (missing ones ``None``).

    Example:
        >>> import datasets
        >>> f = datasets.Features({"x": datasets.Value("float64"), "y": datasets.Value("string")})
        >>> conform_rows(features=f)({"x": 1})
        {'x': 1.0, 'y': None}
    """
    if features is not None:
        return Conform(list(features), features, strict=True)
    if schema is None:
        raise ValueError("give features or a schema")
    return Conform(schema.column_names, None, strict=False)
