"""Schema layer: types from every row, cached beside the index, invalidated with it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sjsonl import JSONLDataset
from sjsonl.records import chunks, fast_types
from sjsonl.records import schema as schema_mod
from sjsonl.records.schema import ColumnType, RecordSchema, infer_schema, schema_cache_path, schema_of_records
from sjsonl.storage import atomic


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_late_float_makes_the_column_float(tmp_path: Path) -> None:
    rows = [{"n": i, "s": str(i)} for i in range(5000)]
    rows[4321] = {"n": 0.5, "s": None}
    ds = JSONLDataset(_write(tmp_path / "d.jsonl", rows))
    s = infer_schema(ds)
    assert s["n"] == ColumnType("float64", 0, False)
    assert s["s"] == ColumnType("str", 0, True)
    assert s.rows == 5000
    assert infer_schema(ds, sample=50)["n"].kind == "int64"  # what a sample would have said


def test_cache_is_beside_the_index_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = JSONLDataset(_write(tmp_path / "d.jsonl", [{"a": 1}, {"a": [1]}]))
    first = infer_schema(ds)
    cache = Path(schema_cache_path(ds.index_paths[0]))
    assert cache.name == "d.index.schema" and cache.exists()
    # A second call reads the cache: prove it by making any recomputation fail.
    monkeypatch.setattr(schema_mod, "_file_schema", lambda *a: pytest.fail("recomputed"))
    assert infer_schema(JSONLDataset(ds.files[0])) == first
    assert first["a"].kind == "json"


def test_a_rebuilt_index_invalidates_the_cache(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", [{"a": 1}, {"a": 2}])
    assert infer_schema(JSONLDataset(path))["a"].kind == "int64"
    with open(path, "a") as fh:
        fh.write('{"a": "three"}\n')
    s = infer_schema(JSONLDataset(path))  # the index is rebuilt (appended data), so is the schema
    assert s["a"].kind == "json" and s.rows == 3


def test_a_corrupt_cache_is_recomputed(tmp_path: Path) -> None:
    ds = JSONLDataset(_write(tmp_path / "d.jsonl", [{"a": True}]))
    infer_schema(ds)
    Path(schema_cache_path(ds.index_paths[0])).write_bytes(b'{"key": ')
    assert infer_schema(ds)["a"].kind == "bool"


@pytest.mark.parametrize("compiled", [True, False], ids=["threads", "processes"])
def test_parallel_chunks_give_the_sequential_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    rows = [{"i": i, "l": [i, i]} for i in range(3000)]
    rows[2999] = {"i": "x", "late": [[1.5]]}
    ds = JSONLDataset(_write(tmp_path / "d.jsonl", rows))
    if compiled:  # chunks of ~110 records on 2 threads
        monkeypatch.setattr(chunks, "CHUNK_BYTES", 2000)
    else:  # the Python pass in 2 processes, where the compiled pass is not built
        monkeypatch.setattr(fast_types, "NATIVE", None)
        monkeypatch.setattr(schema_mod, "PARALLEL_MIN_RECORDS", 10)
        monkeypatch.setattr(chunks, "_CHUNK_RECORDS", 700)
    parallel = infer_schema(ds, workers=2, cache=False)
    assert parallel == schema_of_records(rows)
    assert parallel.column_names == ["i", "l", "late"]
    assert parallel["late"] == ColumnType("float64", 2, True)


def test_views_and_multi_file_datasets(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.jsonl", [{"x": 1}])
    b = _write(tmp_path / "b.jsonl", [{"x": 2.5, "y": "z"}])
    ds = JSONLDataset([a, b])
    assert infer_schema(ds.take(1)) == infer_schema(ds)  # a view has its files' schema
    assert infer_schema(ds).columns == {"x": ColumnType("float64"), "y": ColumnType("str", 0, True)}


def test_non_object_rows_and_empty(tmp_path: Path) -> None:
    assert schema_of_records([[1, 2], [3]]).value == ColumnType("int64", 1)
    assert schema_of_records([]).rows == 0 and schema_of_records([]).value is None
    empty = JSONLDataset(_write(tmp_path / "e.jsonl", []))
    assert infer_schema(empty) == RecordSchema()


def test_round_trip_through_the_cache_form() -> None:
    s = schema_of_records([{"a": None, "b": [[1]], "c": 2**70}, ["x"], {"b": []}])
    assert RecordSchema.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert s["a"].kind == "null" and s["c"].kind == "json" and s.value.kind == "json"


def test_read_only_index_place_still_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = JSONLDataset(_write(tmp_path / "d.jsonl", [{"a": 1}]))
    where = os.path.dirname(ds.index_paths[0])

    def refuse(*args, **kwargs):
        raise PermissionError(13, "read-only", where)

    monkeypatch.setattr(atomic.tempfile, "mkstemp", refuse)
    assert infer_schema(ds)["a"].kind == "int64"
    assert not os.path.exists(schema_cache_path(ds.index_paths[0]))


def test_real_files_every_row(shared_data: Path) -> None:
    for rel in [
        "jsonl/gsm8k/test.jsonl",
        "jsonl/mindnlp/conll_sample.json",
        "jsonl/xtuner/mllm_sft_text_example_data.jsonl",
    ]:
        path = shared_data / rel
        ds = JSONLDataset(path)
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        assert infer_schema(ds) == schema_of_records(records)
    gsm = infer_schema(JSONLDataset(shared_data / "jsonl/gsm8k/test.jsonl"))
    assert gsm.columns == {"question": ColumnType("str"), "answer": ColumnType("str")}
