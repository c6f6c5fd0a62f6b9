"""Incremental append (sjsonl.index.append, JSONLDataset.refresh): a file that only grew gets its index
extended — the same offsets a full build gives, every old and new record read back right — and anything
that is not an append is rebuilt. Real files."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sjsonl import JSONLDataset
from sjsonl.errors import InvalidArgumentError
from sjsonl.index.append import extend_grown_index
from sjsonl.index.build import build_offsets
from sjsonl.index.store import read_index
from sjsonl.storage import LocalFile, open_storage
from sjsonl.storage.base import FINGERPRINT_SPAN


def lines(start, n):
    return "".join(
        json.dumps({"i": i, "t": "é" * (i % 3)}, ensure_ascii=False) + "\n" for i in range(start, start + n)
    )


def full_build(path) -> list[int]:
    return build_offsets(LocalFile(path))[0].tolist()


def test_an_append_extends_the_index_and_every_record_reads_back(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(lines(0, 500), encoding="utf-8")
    assert len(JSONLDataset(path)) == 500
    with open(path, "a", encoding="utf-8") as f:
        f.write(lines(500, 7))
    extended = extend_grown_index(open_storage(str(path)))  # what a reopen does, called directly
    assert extended is not None and extended.offsets.tolist() == full_build(path)
    assert read_index(extended.path).offsets.tolist() == full_build(path)  # written over the old one
    ds = JSONLDataset(path, build_index_on_load=False)  # the extended index is current
    assert [r["i"] for r in ds] == list(range(507))


@pytest.mark.parametrize(
    "old, appended",
    [
        ('{"a": 1}\n{"a": ', '2}\n{"a": 3}\n'),  # the last record was cut short when indexed
        ('{"a": 1}\n\n  \n', '{"a": 2}\n'),  # blank lines after the last record
        ('{"a": 1}\r\n', '{"a": 2}\r\n\r\n'),  # CRLF
        ('\ufeff{"a": 1}\n', '{"a": 2}\n'),  # a BOM before the first record
        ("", '{"a": 1}\n'),  # empty when indexed
        ("\n\n", '{"a": 1}'),  # only blank lines when indexed; no final newline after
        ('{"a": 1}', '\n{"a": 2}\n'),  # no final newline when indexed
    ],
)
def test_edges_of_the_old_end(tmp_path, old, appended):
    path = tmp_path / "d.jsonl"
    path.write_bytes(old.encode())
    before = JSONLDataset(path, on_bad_lines="skip")  # a record cut short is a bad line until completed
    with open(path, "ab") as f:
        f.write(appended.encode())
    assert extend_grown_index(open_storage(str(path))).offsets.tolist() == full_build(path)
    after = JSONLDataset(path, build_index_on_load=False)
    expected = [json.loads(x)["a"] for x in (old + appended).lstrip("\ufeff").splitlines() if x.strip()]
    assert [r["a"] for r in after] == expected
    assert len(before) <= len(after)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.sampled_from(['{"a": 1}', "[2]", "", "  ", "\r", '"x y"', "3"]), max_size=30),
    st.sampled_from(["\n", "\r\n"]),
    st.integers(0, 400),
    st.booleans(),
)
def test_any_split_point_gives_the_offsets_of_a_full_build(tmp_path, parts, eol, cut, bom):
    data = (b"\xef\xbb\xbf" if bom else b"") + eol.join(parts).encode()
    cut = min(cut, len(data))
    path = tmp_path / "h.jsonl"
    index_dir = tmp_path / "idx"
    path.write_bytes(data[:cut])
    JSONLDataset(path, index_dir=index_dir, on_bad_lines="skip")
    with open(path, "ab") as f:
        f.write(data[cut:])
    extended = extend_grown_index(open_storage(str(path)), index_dir=str(index_dir))
    if extended is not None:
        assert extended.offsets.tolist() == full_build(path)
    else:  # nothing appended (the index is current), or a cut-short BOM completed: rebuilt instead
        assert cut == len(data) or (bom and cut < 3)
    reopened = JSONLDataset(path, index_dir=index_dir, on_bad_lines="skip")
    assert reopened._files[0].offsets.tolist() == full_build(path)


def test_a_rewrite_or_truncation_is_rebuilt_not_extended(tmp_path):
    path = tmp_path / "d.jsonl"
    body = lines(0, 12000)
    assert len(body) > 2 * FINGERPRINT_SPAN  # the fingerprint covers the head and the tail apart
    path.write_text(body, encoding="utf-8")
    JSONLDataset(path)
    path.write_text(
        body.replace('"i": 0,', '"i": 9,', 1) + lines(12000, 5), encoding="utf-8"
    )  # head rewritten
    assert extend_grown_index(open_storage(str(path))) is None
    ds = JSONLDataset(path)  # rebuilt from scratch
    assert ds[0]["i"] == 9 and len(ds) == 12005
    path.write_text(lines(0, 10), encoding="utf-8")  # truncated
    assert extend_grown_index(open_storage(str(path))) is None and len(JSONLDataset(path)) == 10


def test_compressed_files_are_rebuilt(tmp_path):
    path = tmp_path / "d.jsonl.gz"
    path.write_bytes(gzip.compress(lines(0, 5).encode()))
    JSONLDataset(path)
    with open(path, "ab") as f:  # a second gzip member: the decompressed stream grew
        f.write(gzip.compress(lines(5, 2).encode()))
    assert extend_grown_index(open_storage(str(path))) is None
    assert [r["i"] for r in JSONLDataset(path)] == list(range(7))


def test_refresh_sees_appended_records_and_views_keep_theirs(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text(lines(0, 10), encoding="utf-8")
    ds = JSONLDataset(path)
    view = ds.shuffle(seed=1)
    with open(path, "a", encoding="utf-8") as f:
        f.write(lines(10, 5))
    assert len(ds) == 10 and ds[-1]["i"] == 9  # an open dataset reads what it indexed
    assert ds.refresh() is ds and len(ds) == 15 and [r["i"] for r in ds] == list(range(15))
    assert sorted(r["i"] for r in view) == list(range(10))  # made before: the records it was made from
    assert sorted(r["i"] for r in ds.shuffle(seed=1)) == list(range(15))
    with pytest.raises(InvalidArgumentError, match="cannot be refreshed"):
        view.refresh()


def test_refresh_of_several_files_and_a_column_that_appears_late(tmp_path):
    from sjsonl.records.schema import infer_schema

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(lines(0, 3), encoding="utf-8")
    b.write_text(lines(3, 3), encoding="utf-8")
    ds = JSONLDataset([a, b])
    assert "new" not in infer_schema(ds).columns
    with open(a, "a", encoding="utf-8") as f:
        f.write('{"i": 100, "new": true}\n')
    ds.refresh()
    assert [r["i"] for r in ds] == [0, 1, 2, 100, 3, 4, 5]
    assert "new" in infer_schema(ds).columns  # the schema cache went with the old index


def test_offsets_of_a_grown_file_keep_their_dtype_rule(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(lines(0, 3), encoding="utf-8")
    JSONLDataset(path)
    with open(path, "a", encoding="utf-8") as f:
        f.write(lines(3, 300))
    offsets = extend_grown_index(open_storage(str(path))).offsets
    assert offsets.dtype == np.dtype(np.uint16) and offsets.dtype == build_offsets(LocalFile(path))[0].dtype
    assert os.path.getsize(path) < 2**16


def test_the_index_file_is_extended_in_place_and_mapped_readers_keep_reading(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(lines(0, 200), encoding="utf-8")
    old = JSONLDataset(path)  # maps the index as it is now
    index = old.index_paths[0]
    inode = os.stat(index).st_ino
    with open(path, "a", encoding="utf-8") as f:
        f.write(lines(200, 20))
    new = JSONLDataset(path)
    assert os.stat(index).st_ino == inode  # the same file, grown: only the new offsets were written
    assert read_index(index).offsets.tolist() == full_build(path)
    assert [r["i"] for r in old] == list(range(200)) and [r["i"] for r in new] == list(range(220))


def test_wider_offsets_or_a_longer_header_rewrite_the_index_atomically(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(lines(0, 9), encoding="utf-8")  # < 256 bytes: uint8 offsets
    index = JSONLDataset(path).index_paths[0]
    inode = os.stat(index).st_ino
    with open(path, "a", encoding="utf-8") as f:
        f.write(lines(9, 20))  # past 255 bytes: uint16
    assert JSONLDataset(path, build_index_on_load=True)[-1]["i"] == 28
    assert os.stat(index).st_ino != inode and read_index(index).offsets.dtype == np.uint16
    assert read_index(index).offsets.tolist() == full_build(path)


def test_build_indexes_extends_an_appended_file_as_an_open_does(tmp_path):
    from sjsonl import build_indexes

    path = tmp_path / "d.jsonl"
    path.write_text(lines(0, 200), encoding="utf-8")
    (index,) = build_indexes([str(path)], progress=False)
    inode = os.stat(index).st_ino
    with open(path, "a", encoding="utf-8") as f:
        f.write(lines(200, 20))
    assert build_indexes([str(path)], progress=False) == [index]
    assert os.stat(index).st_ino == inode  # extended in place, not rebuilt
    assert read_index(index).offsets.tolist() == full_build(path)
