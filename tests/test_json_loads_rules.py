"""Records read exactly as ``json.loads`` reads them: a key an object holds twice gives its LAST value, and
``NaN``/``Infinity``/``-Infinity`` (what ``json.dumps`` writes for float nan and inf) are floats —
``allow_nan=False`` refuses them with the located error; what ``json.loads`` refuses (``nan``,
``+Infinity``) stays refused. Differential tests against ``json.loads`` over hypothesis-generated objects
(duplicate keys hand-built, nan/inf written by ``json.dumps``) through every path: ``ds[i]``, iteration,
batches, views, ``select_columns``, ``fields=``, ``schema=``, ``field=`` documents and streams; column
types and the torch / MindSpore conversions of NaN. (The JSONTestSuite is in test_real_files.py, the
``field=`` rule against 🤗 in test_hf_differential.py.)"""

from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, Union

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sjsonl.data.streaming
from sjsonl import JSONLDataset, RecordDecodeError, load_dataset
from sjsonl.data.streaming import JSONLStream
from sjsonl.errors import RecordFieldError
from sjsonl.index.elements import DocumentError, element_bytes, iter_elements, scan_elements
from sjsonl.records.schema import infer_schema

from .test_decoder_agreement import big_ints, same

REFUSED = "<refused>"  # what json.loads refuses, and sjsonl raises a RecordDecodeError for


def _refuse(name: str) -> Any:
    raise ValueError(name)


def reference(line: bytes, allow_nan: bool = True) -> Any:
    """``json.loads`` of a record's text (JSON Lines are UTF-8), or :data:`REFUSED`."""
    try:
        text = line.decode("utf-8")
        return json.loads(text) if allow_nan else json.loads(text, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return REFUSED


def attempt(call) -> Any:
    try:
        return call()
    except RecordDecodeError:
        return REFUSED


def assert_same(got: list, want: list, what: str) -> None:
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if not same(g, w)]
    assert len(got) == len(want) and not bad, f"{what}: record {bad[:1]}: {got[bad[0]]!r} != {want[bad[0]]!r}"


def check_whole(call, want: list, what: str) -> None:
    """A call that reads many records: all of them as json.loads reads them, or it raises."""
    if any(w is REFUSED for w in want):
        with pytest.raises(RecordDecodeError):
            call()
    else:
        assert_same(call(), want, what)


# ------------------------------------------------------------------------------------- generated objects
KEYS = st.sampled_from(["a", "b", "id", "data", "é"])  # few keys: duplicates are frequent


def _object(pairs: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {v}" for k, v in pairs) + "}"


scalar_texts = st.one_of(
    st.none(),
    st.booleans(),
    big_ints,
    st.floats(),  # nan and ±inf included: json.dumps writes NaN, Infinity, -Infinity
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0]),
    st.text(max_size=6),
    st.sampled_from(["NaN", "Infinity", "-Infinity"]),  # in a string: just a string
).map(json.dumps)
value_texts = st.recursive(
    scalar_texts,
    lambda inner: (
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]")
        | st.lists(st.tuples(KEYS, inner), max_size=4).map(_object)
    ),
    max_leaves=10,
)
records = st.lists(st.tuples(KEYS, value_texts), max_size=6).map(_object)


class Row(msgspec.Struct):
    a: Any = None
    b: Any = None
    id: Any = None


def _nested(r: dict) -> dict:
    """What ``fields=["data.a", "id"]`` gives (missing="absent"), from json.loads's record."""
    out: dict[str, Any] = {}
    if isinstance(r.get("data"), dict):
        out["data"] = {"a": r["data"]["a"]} if "a" in r["data"] else {}
    if "id" in r:
        out["id"] = r["id"]
    return out


def check_every_path(path: Path, lines: list[bytes], want: list, field: str | None = None) -> None:
    """``path`` holds the records whose json.loads values are ``want`` (objects) — as the rows under
    ``field`` of a JSON document, if given: every path agrees."""
    n = len(want)
    ds = JSONLDataset(path, field=field)
    assert len(ds) == n
    perm = np.random.default_rng(n).permutation(n).tolist()
    assert_same([ds[i] for i in range(n)], want, "ds[i]")
    assert_same(list(ds), want, "iteration")
    assert_same(ds[perm], [want[i] for i in perm], "batch (records_at)")
    assert_same(list(ds.select(perm)), [want[i] for i in perm], "view")
    assert_same(ds.select(perm)[:], [want[i] for i in perm], "view batch")
    assert_same(list(JSONLDataset(path, mmap=False, field=field)), want, "mmap=False")
    cols = ["a", "id"]
    assert_same(ds.select_columns(cols)[:], [{k: r.get(k) for k in cols} for r in want], "select_columns")
    flat = JSONLDataset(path, fields=["a", "b"], field=field)
    assert_same(list(flat), [{k: r[k] for k in ("a", "b") if k in r} for r in want], "fields=")
    nested = JSONLDataset(path, fields=["data.a", "id"], field=field)
    assert_same(nested[perm], [_nested(want[i]) for i in perm], "nested fields=")
    typed = [msgspec.structs.asdict(r) for r in JSONLDataset(path, schema=Row, field=field)]
    assert_same(typed, [{k: r.get(k) for k in ("a", "b", "id")} for r in want], "schema=")
    assert_same(list(JSONLStream(str(path), field=field)), want, "stream")
    # allow_nan=False: exactly the records json.loads refuses without its NaN/Infinity constants raise
    strict_want = [reference(line, allow_nan=False) for line in lines]
    strict = JSONLDataset(path, allow_nan=False, field=field)
    assert_same([attempt(lambda i=i: strict[i]) for i in range(n)], strict_want, "allow_nan=False")
    projected = strict.select_columns(cols)
    got = [attempt(lambda i=i: projected[i]) for i in range(n)]
    assert_same(got, [w if w is REFUSED else {k: w.get(k) for k in cols} for w in strict_want], "strict cols")
    check_whole(lambda: list(strict), strict_want, "strict iteration")
    subsets = [w if w is REFUSED else {k: w[k] for k in ("a",) if k in w} for w in strict_want]
    for name, view in {
        "strict fields=": JSONLDataset(path, allow_nan=False, field=field, fields=["a"]),
        "strict select_fields": strict.select_fields(["a"]),
    }.items():
        assert_same([attempt(lambda i=i, v=view: v[i]) for i in range(n)], subsets, name)
    check_whole(
        lambda: list(JSONLStream(str(path), field=field, allow_nan=False)), strict_want, "strict stream"
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(records, min_size=1, max_size=8), ascii_only=st.booleans())
def test_generated_objects_with_duplicate_keys_and_nan_on_every_path(tmp_path_factory, lines, ascii_only):
    raw = [(line.encode("ascii", "backslashreplace") if ascii_only else line.encode()) for line in lines]
    raw = [line.replace(b"\\x", b"\\u00") for line in raw]  # ascii: \xe9 → \u00e9, still JSON
    want = [reference(line) for line in raw]
    assert all(isinstance(w, dict) for w in want)  # what json.dumps writes, json.loads reads
    root = tmp_path_factory.mktemp("gen")
    path = root / "g.jsonl"
    path.write_bytes(b"\n".join(raw) + b"\n")
    check_every_path(path, raw, want)
    # the same records as the rows of a JSON document whose "data" key comes twice: the last list counts
    doc = root / "doc.json"
    stale, rows = b", ".join(raw[::-1]), b",\n ".join(raw)
    doc.write_bytes(b'{"data": [' + stale + b'], "v": 1, "data": [' + rows + b"]}")
    assert same(json.loads(doc.read_bytes())["data"], want)
    check_every_path(doc, raw, want, field="data")


def test_duplicate_keys_keep_the_last_value_on_every_path(tmp_path: Path) -> None:
    lines = [
        b'{"a": 1, "a": 2}',
        b'{"data": {"a": 1, "b": 2}, "data": {"b": 3}}',  # the last object whole, not merged
        b'{"data": {"a": 1}, "data": 5}',  # a nested path whose last value is no object
        b'{"data": 5, "data": {"a": [1]}, "id": 1, "id": 18446744073709551616}',
        b'{"a": NaN, "a": "NaN", "b": Infinity, "b": -Infinity}',
    ]
    path = tmp_path / "dup.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    want = [json.loads(line) for line in lines]
    assert want[3]["id"] == 2**64 and want[4] == {"a": "NaN", "b": -math.inf}
    check_every_path(path, lines, want)


def test_allow_nan_false_through_load_dataset_and_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    path.write_bytes(b'{"x": 1}\n{"x": NaN}\n{"x": -Infinity}\n{"x": nan}\n')
    loose = load_dataset("json", data_files=str(path), split="train", on_bad_lines="skip")
    assert len(loose) == 3 and math.isnan(loose[1]["x"]) and loose[2]["x"] == -math.inf
    assert [b.line for b in loose.bad_lines] == [4]  # nan: json.loads refuses it too
    # the bad lines remembered beside the index are those of allow_nan=True: not reused here
    strict = load_dataset("json", data_files=str(path), split="train", on_bad_lines="skip", allow_nan=False)
    assert strict[:] == [{"x": 1}] and [b.line for b in strict.bad_lines] == [2, 3, 4]
    assert len(JSONLDataset(path, on_bad_lines="skip")) == 3  # and back
    with pytest.raises(RecordDecodeError, match=r"train\.jsonl:2: .*allow_nan=False"):
        load_dataset(str(path), split="train", allow_nan=False)[1]
    stream = load_dataset(str(path), split="train", streaming=True, allow_nan=False)
    with pytest.raises(RecordDecodeError, match=r"train\.jsonl:2: .*allow_nan=False"):
        list(stream)


# ------------------------------------------------------------------------------------------ typed schemas
class FloatStruct(msgspec.Struct):
    x: float


@dataclass
class FloatClass:
    x: float


class FloatDict(TypedDict):
    x: float


class Cat(msgspec.Struct, tag="cat"):
    lives: int = 9


class Dog(msgspec.Struct, tag="dog"):
    name: str = ""


@pytest.mark.parametrize("schema", [FloatStruct, FloatClass, FloatDict])
def test_a_typed_float_field_reads_nan_and_the_last_of_duplicate_keys(tmp_path: Path, schema) -> None:
    path = tmp_path / "typed.jsonl"
    path.write_bytes(
        b'{"x": NaN}\n{"x": Infinity}\n{"x": "one", "x": 1.5}\n{"x": -Infinity, "x": 2}\n{"x": 1e400}\n'
        b'{"x": 1.5, "x": "one"}\n'
    )
    ds = JSONLDataset(path, schema=schema)

    def x(i: int) -> float:
        value = ds[i]
        return value["x"] if isinstance(value, dict) else value.x

    assert math.isnan(x(0)) and [x(i) for i in range(1, 5)] == [math.inf, 1.5, 2.0, math.inf]
    with pytest.raises(RecordFieldError, match=r"typed.jsonl:6: .*\$\.x"):  # the last value is no float
        ds[5]
    strict = JSONLDataset(path, schema=schema, allow_nan=False)
    for i in (0, 1):
        with pytest.raises(RecordDecodeError, match=rf"typed.jsonl:{i + 1}: .*allow_nan=False"):
            strict[i]
    assert [strict[i] for i in (2, 4)] == [ds[2], ds[4]]  # 1e400 is a JSON number: inf either way


def test_a_tag_held_twice_picks_the_last_variant(tmp_path: Path) -> None:
    path = tmp_path / "pets.jsonl"
    path.write_bytes(b'{"type": "cat", "type": "dog", "name": "rex"}\n{"type": "dog", "type": "cat"}\n')
    assert JSONLDataset(path, schema=Union[Cat, Dog])[:] == [Dog(name="rex"), Cat()]  # noqa: UP007


# --------------------------------------------------------------------------------------- field= documents
def _doc_value(rng: random.Random) -> Any:
    return rng.choice([[], [1, "a,]"], [{"data": [0]}, [2, 3]], 5, None, {"k": [1]}, "[x]"])


def test_the_rows_are_the_last_occurrence_of_the_key_cut_anywhere() -> None:
    """Documents with the key 1–3 times (lists or not), pretty-printed or not, cut into chunks of 1..40
    bytes: the scan finds the elements of json.loads's value, or raises when that is no list; a stream
    gives them too, or raises once rows of an earlier occurrence were streamed."""
    rng = random.Random(1)
    for case in range(300):
        pairs = [("data", _doc_value(rng)) for _ in range(rng.randint(1, 3))]
        for _ in range(rng.randint(0, 2)):
            pairs.insert(rng.randint(0, len(pairs)), ("v", _doc_value(rng)))
        sep = rng.choice([", ", ",\n  "])
        indent = rng.choice([None, 1])
        text = "{" + sep.join(f'"{k}": {json.dumps(v, indent=indent)}' for k, v in pairs) + "}"
        data = text.encode()
        want = json.loads(data)["data"]
        step = rng.randint(1, 40)
        chunks = [data[i : i + step] for i in range(0, len(data), step)]
        if not isinstance(want, list):
            with pytest.raises(DocumentError, match="does not hold a list"):
                scan_elements(chunks, "data")
            continue
        found = scan_elements(chunks, "data")
        bounds = [*found.starts.tolist(), found.end]
        assert [json.loads(element_bytes(data[a:b])) for a, b in itertools.pairwise(bounds)] == want, case
        try:
            streamed = [json.loads(b) for _, _, b in iter_elements(chunks, "data")]
        except DocumentError as exc:
            assert "more than once" in str(exc) or "does not hold" in str(exc), case
        else:
            assert streamed == want, case
        assert [json.loads(b) for _, _, b in iter_elements([data], "data")] == want  # one chunk: exact


def _twice(path: Path) -> tuple[list, list]:
    first = [{"q": "stale", "i": i} for i in range(3)]
    last = [{"q": "kept", "i": i, "x": math.nan if i == 1 else i / 2} for i in range(5)]
    body = json.dumps({"data": first, "version": "1.1"}, indent=2)[:-2]
    path.write_text(body + ',\n  "data": ' + json.dumps(last, indent=2) + "\n}\n")
    return first, last


def test_every_path_reads_the_last_list_of_a_key_held_twice(tmp_path: Path) -> None:
    path = tmp_path / "squad.json"
    _first, last = _twice(path)
    assert same(json.loads(path.read_bytes())["data"], last)
    ds = JSONLDataset(path, field="data")
    assert_same([ds[i] for i in range(len(ds))], last, "ds[i]")
    assert_same(list(ds), last, "iteration")
    assert_same(ds[[4, 0, 1]], [last[4], last[0], last[1]], "batch")
    assert_same(ds.select_columns(["x"])[:], [{"x": r["x"]} for r in last], "select_columns")
    assert_same(list(load_dataset("json", data_files=str(path), field="data", split="train")), last, "load")
    assert_same(list(JSONLStream(path, field="data")), last, "stream")
    assert ds._files[0].layout == "json-field-last:data"


def test_an_index_made_for_the_first_occurrence_is_built_again(tmp_path: Path) -> None:
    from sjsonl.index.build import save_index

    path = tmp_path / "squad.json"
    first, last = _twice(path)
    ds = JSONLDataset(path, field="data", index_dir=tmp_path / "idx")
    f = ds._files[0]
    at = path.read_bytes().index(b'"q": "stale"')  # the indexes earlier versions built: the first list
    starts = [path.read_bytes().rindex(b"{", 0, at)]
    for _ in first[1:]:
        starts.append(path.read_bytes().index(b"{", starts[-1] + 1))
    old = np.array(starts, f.offsets.dtype)
    save_index(f.storage, old, f.stamp, index_path=f.index_path, layout="json-field:data")
    with pytest.raises(Exception, match="indexes json-field:data"):
        JSONLDataset(path, field="data", index_dir=tmp_path / "idx", build_index_on_load=False)
    assert_same(list(JSONLDataset(path, field="data", index_dir=tmp_path / "idx")), last, "rebuilt")


def test_a_stream_never_mixes_two_occurrences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "squad.json"
    _twice(path)
    monkeypatch.setattr(
        sjsonl.data.streaming, "_CHUNK_BYTES", 64
    )  # the first list is streamed before the second
    rows = []
    with pytest.raises(DocumentError, match="more than once"):
        for row in JSONLStream(path, field="data"):
            rows.append(row)
    assert rows and all(r["q"] == "stale" for r in rows)


def test_a_trailing_comma_is_refused_as_json_loads_refuses_it(tmp_path: Path) -> None:
    cases = [(b"[1,\n]", None), (b'{"data": [{"a": 1},]}', "data"), (b'{"data": [1], "data": [2, ]}', "data")]
    for k, (data, field) in enumerate(cases):
        path = tmp_path / f"t{k}.json"
        path.write_bytes(data)
        with pytest.raises(ValueError):
            json.loads(data)
        with pytest.raises(DocumentError, match="trailing comma"):
            JSONLDataset(path, field=field)
        with pytest.raises(ValueError):  # the last element read with its comma, or the document refused
            list(JSONLStream(path, field=field))
    # JSON Lines whose first array has one: lines (the document check waits for the end of the bytes)
    path = tmp_path / "lines.json"
    path.write_bytes(b"[1,]\n[2]\n")
    ds = JSONLDataset(path)
    assert ds._files[0].layout == "" and ds[1] == [2]
    with pytest.raises(RecordDecodeError, match=r"lines\.json:1:"):
        ds[0]


# ----------------------------------------------------------------------------- column types and adapters
NAN_ROWS = (
    b'{"f": NaN, "i": 1, "l": [1.5, NaN], "m": {"x": Infinity}, "all": NaN}\n'
    b'{"f": 2, "i": -Infinity, "l": [Infinity], "m": {"x": 1}, "all": NaN}\n'
    b'{"f": null, "i": 3, "l": [], "m": null, "all": -Infinity}\n'
)


def test_a_column_with_nan_is_a_float_column(tmp_path: Path) -> None:
    path = tmp_path / "nan.jsonl"
    path.write_bytes(NAN_ROWS)
    schema = infer_schema(JSONLDataset(path))
    kinds = {name: (schema[name].kind, schema[name].ndim) for name in schema.column_names}
    assert kinds == {
        "f": ("float64", 0),
        "i": ("float64", 0),
        "l": ("float64", 1),
        "m": ("json", 0),
        "all": ("float64", 0),
    }


def test_torch_collates_nan_into_float_tensors(tmp_path: Path) -> None:
    import torch

    from sjsonl.torch import collate_records

    path = tmp_path / "nan.jsonl"
    path.write_bytes(NAN_ROWS)
    loader = torch.utils.data.DataLoader(JSONLDataset(path), batch_size=3, collate_fn=collate_records)
    batch = next(iter(loader))
    assert math.isnan(batch["f"][0]) and batch["f"][1:] == [2, None]  # None keeps the column a list
    assert batch["all"].dtype == torch.float64 and torch.isnan(batch["all"][:2]).all()
    assert batch["all"][2] == -math.inf and batch["i"].tolist()[1] == -math.inf


def test_mindspore_rows_keep_nan_and_infinity(tmp_path: Path) -> None:
    from sjsonl.mindspore import load_dataset as ms_load_dataset
    from sjsonl.mindspore.columns import infer_schema as ms_schema

    path = tmp_path / "nan.jsonl"
    path.write_bytes(NAN_ROWS)
    gd = ms_load_dataset(str(path), split="train", num_parallel_workers=1)
    names = gd.get_col_names()
    rows = [dict(zip(names, r)) for r in gd.create_tuple_iterator(output_numpy=True, num_epochs=1)]
    assert math.isnan(rows[0]["f"]) and rows[1]["i"] == -math.inf and math.isnan(rows[2]["f"])  # null: fill
    assert np.isnan(rows[0]["l"][1]) and rows[1]["l"].tolist() == [math.inf]
    # a JSON-text column keeps them too: orjson alone would write NaN and Infinity as null
    records = list(JSONLDataset(path))
    schema = ms_schema(records)
    assert json.loads(str(rows[0]["m"])) == {"x": math.inf}
    back = schema.to_python(schema.convert(records[0]))
    assert back["m"] == {"x": math.inf} and math.isnan(back["f"])
