"""Columns: ``column_names``, ``features``, ``ds["col"]``, ``remove_columns``, ``rename_column(s)``,
``select_columns`` — with 🤗's contracts.

``column_names`` and ``features`` come from one schema: :func:`sjsonl.records.schema.infer_schema`, the types
of ALL rows of the files, computed once and cached beside the index. Column operations are known to the
schema and keep it exact. After a lazy ``map`` (whose output columns are only known by running it) both come
from the first row, typed by :func:`sjsonl.records.schema.schema_of_records` — as 🤗's ``IterableDataset``
does.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"q": "a", "n": 1}\\n{"q": "b", "n": 2.5}\\n')
    >>> ds = JSONLDataset(path)
    >>> ds.column_names, ds["n"], ds.rename_column("q", "question").remove_columns("n")[:]
    (['q', 'n'], [1, 2.5], [{'question': 'a'}, {'question': 'b'}])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sjsonl.data.transforms.pipeline import Pipeline
from sjsonl.data.transforms.protocol import D
from sjsonl.errors import InvalidArgumentError

if TYPE_CHECKING:
    from sjsonl.records.schema import ColumnType, RecordSchema


class ColumnsStage:
    """Keep (``select``), drop and rename top-level columns of object rows; other rows pass unchanged."""

    batch_size = 1

    def __init__(
        self,
        select: Sequence[str] | None = None,
        drop: Sequence[str] = (),
        rename: Mapping[str, str] | None = None,
    ) -> None:
        self.select = list(select) if select is not None else None
        self.drop = frozenset(drop)
        self.rename = dict(rename or {})

    def columns(self, names: list[str]) -> list[str]:
        """What this stage makes of the column list ``names``.

        Example:
            >>> ColumnsStage(drop=["b"], rename={"a": "x"}).columns(["a", "b", "c"])
            ['x', 'c']
        """
        if self.select is not None:
            names = [c for c in self.select]
        return [self.rename.get(c, c) for c in names if c not in self.drop]

    def apply(self, rows: list[Any], base: np.ndarray | None) -> list[Any]:
        sel, drop, ren = self.select, self.drop, self.rename
        out = []
        for r in rows:
            if type(r) is dict:
                if sel is not None:
                    r = {c: r.get(c) for c in sel}
                r = {ren.get(k, k): v for k, v in r.items() if k not in drop}
            out.append(r)
        return out


def _file_schema(ds: D) -> RecordSchema:
    from sjsonl.records.schema import infer_schema

    return infer_schema(ds)


def schema(ds: D) -> RecordSchema:
    """The schema behind ``column_names`` and ``features`` (see the module docstring).

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write('{"a": 1}\\n{"b": "x"}\\n')
        >>> schema(JSONLDataset(path).rename_column("a", "c"))
        RecordSchema(c: int64?, b: str?; 2 rows)
    """
    from sjsonl.records.schema import RecordSchema, schema_of_records

    stages = Pipeline.of(ds._transform).stages
    if any(not isinstance(s, ColumnsStage) for s in stages):
        return schema_of_records(_pre_output(ds)[:1])  # a lazy map: its columns show only when it runs
    full = _file_schema(ds)
    projected = getattr(ds._decode, "columns", None)  # a projection's top-level fields
    names = list(projected) if projected is not None else full.column_names
    d = full.to_dict()
    sigs = {c: (s, p) for c, s, p in d["columns"]}
    for stage in stages:
        source = {new: old for old, new in stage.rename.items()}
        names = stage.columns(names)
        sigs = {c: sigs.get(source.get(c, c), (None, 0)) for c in names}
    cols = [[c, *sigs.get(c, (None, 0))] for c in names]
    return RecordSchema.from_dict({**d, "columns": cols})


def _pre_output(ds: D) -> list[Any]:
    # The first row as the pipeline makes it, before a format or 🤗 transform changes its shape.
    pipe = Pipeline.of(ds._transform)
    view = ds._with_pipeline(pipe.with_output(None)) if pipe.output is not None else ds
    return view[:1]


def column_names(ds: D) -> list[str]:
    """🤗 ``column_names``: top-level keys, in order (``["value"]`` for rows that are not objects)."""
    s = schema(ds)
    return s.column_names + (["value"] if s.value is not None and "value" not in s.column_names else [])


def to_feature(t: ColumnType) -> Any:
    """A schema column type as a 🤗 feature (``json`` → ``datasets.Json``).

    Example:
        >>> from sjsonl.records.schema import ColumnType
        >>> to_feature(ColumnType("int64", 1))
        List(Value('int64'))
    """
    import datasets

    name = {"str": "string", "int64": "int64", "float64": "float64", "bool": "bool", "null": "null"}
    feature: Any = datasets.Json() if t.kind == "json" else datasets.Value(name[t.kind])
    for _ in range(t.ndim if t.kind != "json" else 0):
        feature = datasets.List(feature)
    return feature


def features(ds: D) -> Any:
    """🤗 ``features`` (a ``datasets.Features``) from the same schema as :func:`column_names`."""
    s = schema(ds)
    import datasets

    out = {c: to_feature(t) for c, t in s.columns.items()}
    if s.value is not None and "value" not in out:
        out["value"] = to_feature(s.value)
    return datasets.Features(out)


def column(ds: D, name: str) -> list[Any]:
    """``ds["col"]``: the column as a list, in the dataset's order (only that field is decoded when the
    dataset has no ``map``)."""
    names = column_names(ds)
    if name not in names:
        raise KeyError(f"Column {name!r} not in the dataset. Current columns in the dataset: {names}")
    if ds._transform is None and ds._decode is None:
        return [r.get(name) if type(r) is dict else r for r in ds.select_columns([name])]
    return [r.get(name) if type(r) is dict else r for r in ds]


def _names(columns: str | Sequence[str]) -> list[str]:
    return [columns] if isinstance(columns, str) else list(columns)


def _check(ds: D, wanted: Sequence[str], what: str) -> None:
    names = column_names(ds)
    missing = [c for c in wanted if c not in names]
    if missing:
        raise InvalidArgumentError(
            f"Column name {missing} not in the dataset. Current columns in the dataset: {names}{what}"
        )


def remove_columns(ds: D, columns: str | Sequence[str], **_: Any) -> D:
    """🤗 ``remove_columns`` (a view)."""
    cols = _names(columns)
    _check(ds, cols, "")
    return ds._with_pipeline(Pipeline.of(ds._transform).then(ColumnsStage(drop=cols)))


def rename_columns(ds: D, mapping: Mapping[str, str], **_: Any) -> D:
    """🤗 ``rename_columns`` (a view)."""
    _check(ds, list(mapping), "")
    taken = set(column_names(ds)) - set(mapping)
    clash = [new for new in mapping.values() if new in taken]
    if clash or len(set(mapping.values())) != len(mapping):
        raise InvalidArgumentError(f"Column(s) {clash or list(mapping.values())} already in the dataset")
    return ds._with_pipeline(Pipeline.of(ds._transform).then(ColumnsStage(rename=mapping)))


def select_columns(ds: D, columns: str | Sequence[str]) -> D:
    """🤗 ``select_columns``: a projection at decode time (only those fields are parsed) when nothing
    transforms the rows yet; else a column stage after the transforms."""
    from sjsonl.records.fields import Projection

    cols = _names(columns)
    if ds._decode is not None:
        raise InvalidArgumentError(
            "select_columns on a dataset already decoded by fields= or schema=: ask for the columns there"
        )
    if ds._transform is None:
        return ds._with_decode(Projection(cols, ds._allow_nan))
    return ds._with_pipeline(Pipeline.of(ds._transform).then(ColumnsStage(select=cols)))
