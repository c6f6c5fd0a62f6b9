"""JSON documents as rows: a ``.json`` array (pretty-printed or not) and the list under ``field=``, indexed by
element boundaries (``sjsonl.index.elements``) and read at random like lines."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest

from sjsonl import JSONLDataset, RecordDecodeError, load_dataset
from sjsonl.data.streaming import JSONLStream
from sjsonl.errors import StaleDataError
from sjsonl.index.elements import DocumentError, array_end, element_bytes, iter_elements, scan_elements
from sjsonl.sample import write_corpus

from ._storage_checks import check_every_access_path, check_fork_safety, source_records

_TRICKY = ['a\\"b\\\\', '"', "\\", "x,]}[{:", "", "日本", "\\\\\\"]


def _value(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rng.choice([1, -2.5, True, None, 10**20, *_TRICKY])
    if r < 0.6:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {
        rng.choice(['"q', "\\", "k", ","]) + str(i): _value(rng, depth + 1) for i in range(rng.randint(0, 3))
    }


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
def test_element_scan_equals_json_loads_on_random_documents_cut_anywhere() -> None:
    """Strings full of brackets, commas, quotes and backslash runs, cut into chunks of 1..50 bytes (runs of
    backslashes and keys split across chunks): the scan finds exactly json.loads's elements."""
    rng = random.Random(0)
    for case in range(400):
        rows = [_value(rng) for _ in range(rng.randint(0, 25))]
        indent = rng.choice([None, 1, 4])
        field = None if case % 2 else 'da"ta'
        doc = rows if field is None else {"before": {"data": [1]}, field: rows, "after": [_value(rng)]}
        text = json.dumps(doc, indent=indent, ensure_ascii=case % 3 == 0).encode() + b"\n"
        step = rng.randint(1, 50)
        chunks = [text[i : i + step] for i in range(0, len(text), step)]
        found = scan_elements(chunks, field)
        bounds = [*found.starts.tolist(), found.end]
        assert [json.loads(element_bytes(text[a:b])) for a, b in itertools.pairwise(bounds)] == rows, case
        streamed = list(iter_elements(chunks, field))
        assert [json.loads(b) for _, _, b in streamed] == rows
        assert [s for s, _, _ in streamed] == found.starts.tolist()
        assert [line for _, line, _ in streamed] == [text[:s].count(b"\n") + 1 for s in found.starts.tolist()]
        if rows:
            depth = 1 if field is None else 2
            assert array_end(lambda lo, hi, t=text: t[lo:hi], bounds[-2], depth, step=7) == found.end


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, bytes]:
    plain = tmp_path / "lines.jsonl"
    write_corpus(plain, 5000, kind="short", seed=3)
    return plain, plain.read_bytes()


def _as_array(raw: bytes, indent: str = "\n  ") -> bytes:
    lines = [line for line in raw.split(b"\n") if line.strip()]
    return b"[" + indent.encode() + ("," + indent).join(x.decode() for x in lines).encode() + b"\n]\n"


def test_an_array_document_reads_as_its_lines_on_every_access_path(corpus, tmp_path: Path) -> None:
    _plain, raw = corpus
    doc = tmp_path / "data.json"
    doc.write_bytes(_as_array(raw))
    ds = JSONLDataset(doc)
    check_every_access_path(ds, raw)
    again = JSONLDataset(doc, build_index_on_load=False)  # the element index was saved and is reused
    assert again._files[0].layout == "json-array" and again[len(again) - 1] == source_records(raw)[-1]
    check_fork_safety(ds, [r["id"] for r in source_records(raw)], processes=2, reads=300, pickled_reads=200)


def test_rows_under_a_field_and_a_compressed_document(corpus, tmp_path: Path) -> None:
    _plain, raw = corpus
    rows = source_records(raw)
    doc = tmp_path / "squad.json"  # the rows as written in the lines file: raw(i) is their bytes
    doc.write_bytes(b'{"version": "v2", "data": ' + _as_array(raw).rstrip() + b', "after": {"data": [0]}}')
    check_every_access_path(JSONLDataset(doc, field="data"), raw)
    gz = tmp_path / "arr.json.gz"
    gz.write_bytes(gzip.compress(_as_array(raw, " ")))
    check_every_access_path(JSONLDataset(gz), raw)
    assert list(JSONLStream(doc, field="data")) == rows and list(JSONLStream(gz)) == rows


def test_an_index_for_one_field_is_never_used_for_another(tmp_path: Path) -> None:
    doc = tmp_path / "two.json"
    doc.write_text(json.dumps({"a": [{"x": 1}, {"x": 2}], "b": [{"y": 3}]}))
    assert list(JSONLDataset(doc, field="a")) == [{"x": 1}, {"x": 2}]
    assert list(JSONLDataset(doc, field="b")) == [{"y": 3}]  # rebuilt: the index on disk was field a's
    with pytest.raises(DocumentError, match="no top-level key 'c'"):
        JSONLDataset(doc, field="c")
    with pytest.raises(DocumentError, match="does not hold a list"):
        JSONLDataset(_write(tmp_path / "s.json", b'{"a": 5}'), field="a")


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_which_files_are_documents(tmp_path: Path) -> None:
    """A .json array is a document; a .json of lines (objects, or arrays) and a .jsonl never are."""
    cases = {
        "arr.json": (b' \n[{"a": 1},\n {"a": 2}]\n', [{"a": 1}, {"a": 2}], "json-array"),
        "one_line.json": (b'[{"a": 1}, {"a": 2}]', [{"a": 1}, {"a": 2}], "json-array"),
        "empty.json": (b"[]\n", [], "json-array"),
        "bom.json": (b'\xef\xbb\xbf[{"a": 1}]', [{"a": 1}], "json-array"),
        "lines_of_arrays.json": (b"[1, 2]\n[3]\n", [[1, 2], [3]], ""),
        "objects.json": (b'{"a": 1}\n{"a": 2}\n', [{"a": 1}, {"a": 2}], ""),
        "array_line.jsonl": (b'[{"a": 1}, {"a": 2}]\n', [[{"a": 1}, {"a": 2}]], ""),
    }
    for name, (data, rows, layout) in cases.items():
        ds = JSONLDataset(_write(tmp_path / name, data))
        assert (list(ds), ds._files[0].layout) == (rows, layout), name
        assert list(JSONLStream(tmp_path / name)) == rows, name


def test_load_dataset_field_as_hf(tmp_path: Path) -> None:
    doc = _write(tmp_path / "train.json", json.dumps({"data": [{"q": "a"}, {"q": "b", "n": 1}]}).encode())
    ds = load_dataset("json", data_files=str(doc), field="data", split="train", fill_missing=True)
    assert list(ds) == [{"q": "a", "n": None}, {"q": "b", "n": 1}]
    stream = load_dataset("json", data_files=str(doc), field="data", split="train", streaming=True)
    assert list(stream) == [{"q": "a"}, {"q": "b", "n": 1}]


def test_a_bad_element_is_located(tmp_path: Path) -> None:
    doc = _write(tmp_path / "bad.json", b'[\n {"a": 1},\n {"a": 2,},\n {"a": 3}\n]')
    ds = JSONLDataset(doc)
    assert ds[0] == {"a": 1} and ds[2] == {"a": 3}
    with pytest.raises(RecordDecodeError) as info:
        ds[1]
    assert (info.value.line, info.value.offset) == (3, 14)
    with pytest.raises(RecordDecodeError):
        list(JSONLStream(doc))


def test_a_document_cut_short_is_refused_at_once(tmp_path: Path) -> None:
    """A partial download: the scan says so (in a subprocess, so that a hang would fail the test)."""
    doc = _write(tmp_path / "cut.json", json.dumps([{"a": "x" * 100}] * 1000).encode()[:-500])
    code = (
        "import sys; from sjsonl import JSONLDataset\n"
        "try:\n    JSONLDataset(sys.argv[1])\nexcept ValueError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(doc)], capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("DocumentError the JSON document ends inside its array"), done.stderr


def test_a_replaced_document_is_stale_in_a_pickled_copy(tmp_path: Path) -> None:
    doc = _write(tmp_path / "d.json", b'[{"a": 1}, {"a": 2}]')
    ds = JSONLDataset(doc)
    blob = pickle.dumps(ds)
    tmp = tmp_path / "new.json"
    tmp.write_bytes(b'[{"b": 1}, {"b": 2}, {"b": 3}]')
    os.replace(tmp, doc)
    assert ds[1] == {"a": 2}  # the open dataset reads the version it indexed
    with pytest.raises(StaleDataError):
        pickle.loads(blob)[1]


def test_the_seed_indexer_indexes_a_document_by_element(tmp_path: Path) -> None:
    """JSONLIndexer and JSONLDataset share one rule: the index one writes is the index the other uses."""
    from sjsonl import JSONLIndexer
    from sjsonl.data.indexer import InvalidRecordsError

    doc = _write(tmp_path / "d.json", b'[{"a": 1},\n {"a": 2}\n]\n')
    indexer = JSONLIndexer(doc, check=True)
    indexer.populate_index()
    assert indexer.index.tolist() == [1, 12] and indexer.layout == "json-array"
    indexer.write_index_to_disk()
    ds = JSONLDataset(doc, build_index_on_load=False)
    assert list(ds) == [{"a": 1}, {"a": 2}]
    bad = _write(tmp_path / "bad.json", b'[{"a": 1},\n {"a": tru}\n]\n')
    with pytest.raises(InvalidRecordsError) as info:
        JSONLIndexer(bad, check=True).populate_index()
    assert info.value.line == 2 and info.value.total == 1
    lines = _write(tmp_path / "lines.jsonl", b'[{"a": 1}, {"a": 2}]\n')  # never a document
    plain = JSONLIndexer(lines)
    plain.populate_index()
    assert plain.index.tolist() == [0] and plain.layout == ""
