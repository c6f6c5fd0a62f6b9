"""Record → MindSpore row conversion (numpy only; MindSpore itself is exercised in test_mindspore.py)."""

from __future__ import annotations

import json
import math
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from sjsonl import JSONLDataset
from sjsonl.mindspore.columns import Column, Schema, SchemaMismatchError, infer_schema


def _kinds(rows) -> dict[str, str]:
    return {c.name: c.describe() for c in infer_schema(rows).columns}


def test_inference_table() -> None:
    rows = [
        {"s": "a", "i": 1, "f": 1, "b": True, "li": [1, 2], "lf": [[1, 2.5]], "ls": ["x"], "lb": [True]},
        {"s": "b", "i": -(2**63), "f": 2.5, "b": False, "li": [], "lf": [[0, 1], [2, 3]], "ls": [], "lb": []},
        {"s": None, "i": None, "f": None, "b": None, "li": None, "lf": None, "ls": None, "lb": None},
    ]
    assert _kinds(rows) == {
        "s": "str", "i": "int64", "f": "float64", "b": "bool",
        "li": "1-d int64 array", "lf": "2-d float64 array", "ls": "1-d str array", "lb": "1-d bool array",
    }  # fmt: skip
    json_text = [
        {"obj": {"k": 1}, "chat": [{"role": "user"}], "ragged": [[1], [2, 3]], "nulls": [1, None]},
        {"mixed": 1, "boolint": True, "big": 2**63, "only_null": None, "only_empty": [], "deep_empty": [[]]},
        {"mixed": "1", "boolint": 2, "listvsscalar": 1},
        {"listvsscalar": [1], "depths": [1]},
        {"depths": [[1]]},
    ]
    assert set(_kinds(json_text).values()) == {"JSON text"}


def test_column_order_is_first_appearance_and_features_override() -> None:
    rows = [{"b": 1, "a": "x"}, {"c": 2.5, "a": "y"}]
    assert infer_schema(rows).column_names == ["b", "a", "c"]
    import datasets

    features = datasets.Features(
        {
            "c": datasets.Value("float32"),
            "a": datasets.Value("string"),
            "n": datasets.Value("int32"),
            "b": datasets.ClassLabel(names=["x", "y"]),
            "l": datasets.List(datasets.Value("int64")),
        }
    )
    schema = infer_schema([*rows, {"l": [1, 2]}], features)
    assert [(c.name, c.describe()) for c in schema.columns] == [
        ("c", "float64"), ("a", "str"), ("n", "int64"), ("b", "int64"), ("l", "1-d int64 array"),
    ]  # fmt: skip


def test_convert_gives_numpy_arrays_with_stable_dtypes_and_fills() -> None:
    rows = [{"s": "héllo 数据 🚀", "i": 3, "f": 1, "b": True, "l": [[1, 2], [3, 4]], "j": [{"x": None}]}]
    rows.append({"f": 0.5, "l": [[5, 6]], "j": {"x": 1}})
    schema = infer_schema(rows)
    first = schema.convert(rows[0])
    assert all(type(v) is np.ndarray for v in first)
    assert [v.dtype.kind for v in first] == ["U", "i", "f", "b", "i", "U"]
    assert [v.shape for v in first] == [(), (), (), (), (2, 2), ()]
    assert first[2].dtype == np.float64 and first[2] == 1.0
    missing = schema.to_python(schema.convert({}))
    assert missing["s"] == "" and missing["i"] == 0 and math.isnan(missing["f"]) and missing["b"] is False
    assert missing["l"] == [] and schema.convert({})[4].shape == (0, 0) and missing["j"] is None
    assert schema.to_python(schema.convert(rows[1]))["j"] == {"x": 1}
    assert schema.convert({"l": []})[4].shape == (0, 0)


def test_non_object_rows_become_one_value_column(shared_data: Path) -> None:
    ds = JSONLDataset(shared_data / "jsonl/xtuner/openai_sft.jsonl")
    schema = infer_schema(ds)
    assert schema.column_names == ["value"] and schema.columns[0].kind == "json"
    for rec in ds:
        (value,) = schema.convert(rec)
        assert orjson.loads(str(value)) == rec
    assert infer_schema([[1, 2], [3]]).convert([4, 5])[0].tolist() == [4, 5]
    assert infer_schema(["a", 1, {"k": 2}]).columns[0].kind == "json"  # objects mixed in: JSON text
    assert infer_schema([]).columns == (Column("value", "json"),)  # an empty split still has a column


def test_json_text_is_lossless_even_where_strings_are_not() -> None:
    odd = ["lone \ud800", "trailing nul\x00", 2**70, 1e300, -0.0, "emoji 🚀", {"日本": [None, True]}]
    schema = Schema([Column("j", "json", key="j")])
    for value in odd:
        (text,) = schema.convert({"j": value})
        assert text.dtype.kind == "U" and "\ud800" not in str(text)  # MindSpore can carry it
        assert json.loads(str(text)) == value
    assert schema.to_python(schema.convert({"j": odd[0]}))["j"] == odd[0]
    strings = Schema([Column("s", "str", key="s"), Column("l", "str", ndim=1, key="l")])
    s, arr = strings.convert({"s": "a\ud800b", "l": ["\udfff", "ok"]})
    assert str(s) == "a\ufffdb" and arr.tolist() == ["\ufffd", "ok"]  # documented: U+FFFD for lone surrogates


def test_mismatch_names_the_column_and_the_cure() -> None:
    schema = infer_schema([{"n": 1, "l": [1, 2], "s": "x"}])
    for bad in [
        {"n": 1.5},
        {"n": True},
        {"n": 2**63},
        {"l": [1, "2"]},
        {"l": [[1]]},
        {"l": [1, True]},
        {"s": 3},
    ]:
        with pytest.raises(SchemaMismatchError, match="infer_rows=None") as info:
            schema.convert(bad)
        assert repr(next(iter(bad))) in str(info.value)
    with pytest.raises(SchemaMismatchError, match="not a JSON object"):
        schema.convert([1, 2])
    assert isinstance(SchemaMismatchError("x"), ValueError)


def test_schema_select_equality_and_pickling() -> None:
    schema = infer_schema([{"a": 1, "b": "x", "c": [1.5]}])
    assert schema.select(["c", "a"]).column_names == ["c", "a"]
    with pytest.raises(ValueError, match="unknown column"):
        schema.select(["zz"])
    clone = pickle.loads(pickle.dumps(schema))
    assert clone == schema and clone.convert({"a": 2})[0] == 2
    with pytest.raises(ValueError, match="kind"):
        Schema([Column("x", "complex")])


def test_importing_sjsonl_and_its_adapters_imports_no_framework() -> None:
    code = (
        "import sys, sjsonl, sjsonl.hf.load, sjsonl.data.streaming, sjsonl.hf, sjsonl.mindspore; "
        "print(sorted({'mindspore', 'datasets', 'torch'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
