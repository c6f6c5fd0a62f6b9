"""fields= (nested projections) and schema= (typed records): each record is its subset; missing-field
policies; views, pickling, load_dataset; a type mismatch names the file, the line and the field."""

from __future__ import annotations

import dataclasses
import json
import pickle
from typing import TypedDict

import msgspec
import pytest

import sjsonl
from sjsonl import JSONLDataset, RecordDecodeError, RecordFieldError
from sjsonl.records.fields import FieldProjection

RECORDS = [
    {"id": 1, "meta": {"lang": "en", "url": "u1", "deep": {"x": 1, "y": [1, 2]}}, "text": "a"},
    {"id": 2, "meta": {"lang": "fr"}, "text": "b"},
    {"id": 3, "text": "c"},
    {"id": 4, "meta": None},
    {"id": 5, "meta": "not an object"},
    {"meta": {"deep": {"y": []}}},
]


def subset(record: dict, paths: list[tuple[str, ...]]) -> dict:
    """The reference: the record's subset at ``paths``, computed from the full record."""
    out: dict = {}
    for path in paths:
        node, dst = record, out
        for i, key in enumerate(path):
            if not isinstance(node, dict) or key not in node:
                break
            if i == len(path) - 1:
                dst[key] = node[key]
            else:
                node = node[key]
                if isinstance(node, dict):
                    dst = dst.setdefault(path[i], {})
                else:
                    break
    return out


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    return p


@pytest.mark.parametrize(
    "fields",
    [
        ["id"],
        ["meta.lang"],
        ["id", "meta.deep.y"],
        ["meta.deep", "meta.deep.x"],
        ["text", "meta.url", "meta.lang"],
    ],
)
def test_fields_equal_the_full_records_subset(path, fields):
    paths = [tuple(f.split(".")) for f in fields]
    want = [subset(r, paths) for r in RECORDS]
    ds = JSONLDataset(path, fields=fields)
    assert ds[:] == want == list(ds) == [ds[i] for i in range(len(ds))]
    assert JSONLDataset(path).select_fields(fields)[:] == want
    assert sorted(map(json.dumps, ds.shuffle(seed=3))) == sorted(map(json.dumps, want))
    assert pickle.loads(pickle.dumps(ds))[:] == want


def test_missing_none_and_error(path):
    ds = JSONLDataset(path, fields=["id", "meta.lang"], missing="none")
    assert ds[2] == {"id": 3, "meta": {"lang": None}} and ds[3] == {"id": 4, "meta": {"lang": None}}
    assert ds[5] == {"id": None, "meta": {"lang": None}}
    strict = JSONLDataset(path, fields=["id", "meta.lang"], missing="error")
    assert strict[0] == {"id": 1, "meta": {"lang": "en"}}
    with pytest.raises(
        RecordFieldError, match=r"d.jsonl:3: record does not match at byte offset \d+: field 'meta' is"
    ):
        strict[2]
    with pytest.raises(RecordFieldError, match=r"d.jsonl:5: .*field 'meta' is a JSON str"):
        strict[4]
    with pytest.raises(ValueError, match="missing must be one of"):
        JSONLDataset(path, fields=["id"], missing="skip")


def test_fields_through_load_dataset_and_refusals(path):
    ds = sjsonl.load_dataset("json", data_files=str(path), split="train", fields=["meta.lang"], as_hf=False)
    assert ds[1] == {"meta": {"lang": "fr"}}
    with pytest.raises(TypeError, match="field names"):
        JSONLDataset(path, fields="id")
    with pytest.raises(ValueError, match="not both"):
        JSONLDataset(path, fields=["id"], schema=dict)
    with pytest.raises(ValueError, match="before map"):
        JSONLDataset(path).select_columns(["id"]).select_fields(["id"])


def test_non_objects_raise_located(tmp_path):
    p = tmp_path / "mixed.jsonl"
    p.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(RecordDecodeError, match=r"mixed.jsonl:2: .*not an object"):
        JSONLDataset(p, fields=["a"])[1]


def test_projection_of_many_keys_matches_a_full_parse():
    record = {f"k{i}": {"v": i, "s": "x" * i, "l": list(range(i % 5))} for i in range(30)}
    raw = json.dumps(record).encode()
    paths = ["k3.v", "k7", "k29.l", "nope.x"]
    assert FieldProjection(paths)(raw) == {
        "k3": {"v": 3},
        "k7": record["k7"],
        "k29": {"l": record["k29"]["l"]},
    }


# ----------------------------------------------------------------------------- typed records
class Meta(msgspec.Struct):
    lang: str
    url: str = ""


class Row(msgspec.Struct):
    id: int
    text: str = ""
    meta: Meta | None = None


@dataclasses.dataclass
class DataRow:
    id: int
    text: str = ""


class DictRow(TypedDict, total=False):
    id: int
    text: str


def test_typed_records_struct_dataclass_typeddict(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"id": 1, "text": "a", "meta": {"lang": "en"}}\n{"id": 2, "extra": [1]}\n')
    assert JSONLDataset(p, schema=Row)[:] == [Row(1, "a", Meta("en")), Row(2)]
    assert JSONLDataset(p, schema=DataRow)[:] == [DataRow(1, "a"), DataRow(2)]
    assert JSONLDataset(p, schema=DictRow)[:] == [{"id": 1, "text": "a"}, {"id": 2}]
    assert list(JSONLDataset(p, schema=Row).shuffle(seed=0)) in (
        [Row(1, "a", Meta("en")), Row(2)],
        [Row(2), Row(1, "a", Meta("en"))],
    )


def test_a_mismatch_names_file_line_and_field(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"id": 1}\n\n{"id": 2, "meta": {"lang": 5}}\n{"text": "no id"}\n')
    ds = JSONLDataset(p, schema=Row)
    assert ds[0] == Row(1)
    with pytest.raises(
        RecordFieldError,
        match=r"t.jsonl:3: .*byte offset 11.*Expected `str`, got `int` - at `\$\.meta\.lang`",
    ):
        ds[1]
    with pytest.raises(RecordFieldError, match=r"t.jsonl:4: .*missing required field `id`"):
        ds[2]
    with pytest.raises(RecordFieldError, match=r"t.jsonl:3: "):
        list(ds)  # iteration stops at the first mismatch, located the same way
    with pytest.raises(TypeError, match="schema must be"):
        JSONLDataset(p, schema=lambda x: x)


def test_typed_records_agree_with_json_on_what_msgspec_declines(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"id": 1, "text": "\\ud800"}\n{"id": 2, "text": "\\u00e9"}\n')
    assert JSONLDataset(p, schema=DataRow)[:] == [DataRow(1, "\ud800"), DataRow(2, "é")]
    bad = tmp_path / "u.jsonl"
    bad.write_bytes(b'{"id": 1, "skipped": "\xff"}\n')
    with pytest.raises(RecordDecodeError, match="UTF-8"):
        JSONLDataset(bad, schema=DataRow)[0]


def test_review_findings(tmp_path, path):
    # a record msgspec's reader declines (a lone surrogate) still types dict keys from JSON strings
    class M(msgspec.Struct):
        id: int
        m: dict[int, str]

    p = tmp_path / "k.jsonl"
    p.write_text('{"id": 3, "m": {"2": "b"}, "s": "\\ud800"}\n[1]\n')
    assert JSONLDataset(p, schema=M)[0] == M(3, {2: "b"})
    with pytest.raises(RecordFieldError, match="cannot select fields from a JSON list"):
        JSONLDataset(p, fields=["id"])[1]  # valid JSON, not what was asked for
    with pytest.raises(ValueError, match="already decoded by fields= or schema="):
        JSONLDataset(path, fields=["id"]).select_columns(["text"])
    assert repr(FieldProjection(["a.b", "c"])) == "FieldProjection(['a.b', 'c'], missing='absent')"
    with pytest.raises(IndexError, match=r"a view of d.jsonl has 1 record"):
        JSONLDataset(path).take(1)[3]


def test_one_document_two_fields_never_share_a_schema(tmp_path):
    doc = tmp_path / "t.json"
    doc.write_text('{"rows": [{"a": 1}, {"a": 2}], "x": [{"b": "s"}, {"b": "t"}]}')
    assert JSONLDataset(doc, field="rows").column_names == ["a"]
    assert JSONLDataset(doc, field="x").column_names == ["b"]


def test_both_ways_of_decoding_a_projection_give_the_same_subsets() -> None:
    """A projection times both ways on its first records and keeps the faster (never asserted here: no
    wall-clock in tests); whichever it keeps, every record's subset is the same."""
    from sjsonl.records.fields import PROBE_RECORDS, FieldProjection, Projection

    rows = [
        b'{"id": 1, "meta": {"lang": "en", "n": 2}, "text": "caf\\u00e9 \xc3\xa9t\xc3\xa9"}',
        b'{"id": 2, "meta": {"lang": "fr"}}',
        b'{"id": 3, "meta": null}',
        b'{"text": "x", "id": 4, "id": 5}',
        b'{"meta": {"lang": "de", "lang": "nl"}, "id": NaN}',
        b"{}",
        b'{"q\\"uote": 1, "back\\\\slash": 2, "caf\xc3\xa9": 3, "id": 4}',
    ]
    for make in (
        lambda: FieldProjection(["id", "meta.lang"]),
        lambda: FieldProjection(["id", "meta.lang"], missing="none"),
        lambda: Projection(["id", "text", "absent"]),
        lambda: Projection(['q"uote', "back\\slash", "caf\u00e9", "id"]),  # names the fast pick quotes
    ):
        ways = {}
        for full in (False, True):
            proj = make()
            proj._probe, proj._full = None, full  # this way from the first record
            ways[full] = [proj(r) for r in rows]
        assert ways[False] == ways[True]
        chooser = make()
        assert chooser.way is None or chooser._decoder is None  # (names msgspec cannot take: full at once)
        got = [chooser(rows[k % len(rows)]) for k in range(PROBE_RECORDS + 10)]
        assert chooser.way in ("projected", "full")
        assert got == [ways[False][k % len(rows)] for k in range(PROBE_RECORDS + 10)]
    from sjsonl.records.decode import FieldMismatch  # (the dataset turns it into a located RecordFieldError)

    for full in (False, True):
        proj = Projection(["id"])
        proj._probe, proj._full = None, full
        with pytest.raises(FieldMismatch, match="not an object"):
            proj(b"[1, 2]")


def test_a_dataset_has_its_projection_choose_once_and_a_pickle_keeps_the_choice(tmp_path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"id": i, "t": "x" * (i % 7)}) + "\n" for i in range(300)))
    for ds in (JSONLDataset(path).select_columns(["id"]), JSONLDataset(path, fields=["id"])):
        way = ds._decode.way
        assert way in ("projected", "full")  # decided at creation, on records of the file
        again = pickle.loads(pickle.dumps(ds))
        assert again._decode.way == way and list(again) == list(ds)
    assert JSONLDataset(path).select_columns(["id"])[:3] == [{"id": 0}, {"id": 1}, {"id": 2}]
