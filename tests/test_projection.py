"""select_columns: decode only some fields, same records and same located errors as a full parse."""

from __future__ import annotations

import json
import pickle

import pytest

from sjsonl import JSONLDataset, RecordDecodeError
from sjsonl.records.fields import Projection
from sjsonl.sample import write_corpus


def test_projection_equals_full_parse_then_pick(tmp_path):
    path = tmp_path / "d.jsonl"
    write_corpus(path, 3000, kind="long", seed=4)
    ds = JSONLDataset(path)
    cols = ["id", "text", "messages"]
    view = ds.select_columns(cols)
    expected = [{c: r.get(c) for c in cols} for r in ds]
    assert list(view) == expected
    assert [view[i] for i in (0, 17, -1)] == [expected[0], expected[17], expected[-1]]
    assert view[[5, 3]] == [expected[5], expected[3]]
    shuffled = view.shuffle(seed=1)
    assert sorted(r["id"] for r in shuffled) == list(range(3000))
    assert list(pickle.loads(pickle.dumps(view)).take(3)) == expected[:3]


def test_projection_checks_the_skipped_fields_too():
    proj = Projection(["a", "b"])
    for raw in (
        b'{"a": 1, "c": [1, {"x": 2}]}',
        b'{"b": "\\u00e9", "a": null}',
        b"{}",
        b'{"a": 1, "z": 1e400}',
    ):
        assert proj(raw) == {k: json.loads(raw).get(k) for k in ("a", "b")}
    for raw in (b'{"a": 1, "c": "\xff"}', b'{"a": 1, "c": nan}', b'{"a": 1, "c": "\\x"}'):
        with pytest.raises(ValueError):
            proj(raw)  # json.loads refuses these, so the projection does too


def test_projection_errors_are_located(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"a": 1}\n[1, 2]\n{"a": \n{"a": +Infinity}\n')
    view = JSONLDataset(path).select_columns(["a"])
    assert view[0] == {"a": 1}
    with pytest.raises(RecordDecodeError, match=r":2: .*not an object"):
        view[1]
    with pytest.raises(RecordDecodeError) as info:
        view[2]
    assert (info.value.line, info.value.offset) == (3, 16)
    with pytest.raises(RecordDecodeError, match=":4:"):
        view[3]
    with pytest.raises(RecordDecodeError):
        list(view)


def test_columns_must_be_names():
    with pytest.raises(TypeError):
        Projection("id")
