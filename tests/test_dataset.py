"""JSONLDataset: the seed API, access semantics, errors, pickling and fork safety."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import pickle

import numpy as np
import pytest

from sjsonl import DataFileError, IndexFileError, JSONLDataset, JSONLIndexer, RecordDecodeError
from sjsonl.sample import iter_records, write_corpus

from .conftest import run_unprivileged


def test_seed_readme_example_verbatim(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    data_dir = tmp_path / "data" / "path" / "to" / "my"
    data_dir.mkdir(parents=True)
    write_corpus(data_dir / "data.jsonl", 12_000, kind="short", seed=3)

    indexer = JSONLIndexer("~/data/path/to/my/data.jsonl")
    indexer.populate_index()
    indexer.write_index_to_disk()
    index_file = data_dir / "data.index.npy"
    offsets = np.load(index_file)
    raw = (data_dir / "data.jsonl").read_bytes()
    expected = [0] + [i + 1 for i, b in enumerate(raw[:-1]) if b == 0x0A]
    assert offsets.ndim == 1 and offsets.tolist() == expected

    ds = JSONLDataset("~/data/path/to/my/data.jsonl")
    assert len(ds) == 12_000
    assert ds[10929] == json.loads(raw.splitlines()[10929])


def test_write_index_to_explicit_path(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"a":1}\n\n{"a":2}\n')
    out = JSONLIndexer(path).write_index_to_disk(tmp_path / "elsewhere" / "my.index.npy")
    assert np.load(out).tolist() == [0, 9]
    ds = JSONLDataset(path, index_path=out, build_index_on_load=False)
    assert ds[1] == {"a": 2}


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.jsonl"
    records = list(iter_records(500, kind="short", seed=1))
    path.write_bytes(b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records))
    return path, records


def test_indexing_semantics(small):
    path, records = small
    ds = JSONLDataset(path)
    assert len(ds) == 500
    assert ds[0] == records[0] and ds[-1] == records[-1] and ds[np.int64(7)] == records[7]
    assert ds[np.uint32(8)] == records[8] and ds[-500] == records[0]
    assert ds[10:20] == records[10:20] and ds[::-97] == records[::-97] and ds[600:] == []
    assert ds[[3, 1, -1]] == [records[3], records[1], records[-1]]
    assert ds[np.array([5, 5], dtype=np.int32)] == [records[5]] * 2
    assert list(ds) == records
    for bad in (500, -501, 10**12):
        with pytest.raises(IndexError):
            ds[bad]
    with pytest.raises(IndexError):
        ds[[0, 500]]
    with pytest.raises(KeyError):  # a string is a column name, as in 🤗
        ds["0"]
    with pytest.raises(TypeError):
        ds[[0.5]]


def test_fresh_objects(small):
    path, records = small
    ds = JSONLDataset(path)
    a = ds[0]
    a["mutated"] = True
    assert ds[0] == records[0] and ds[0] is not ds[0]


def test_raw_and_transform(tmp_path):
    path = tmp_path / "crlf.json"  # .json extension, CRLF, blank lines, no final newline
    path.write_bytes(b'{"a": 1}\r\n\r\n  \r\n{"a": 2}  \r\n[3]')
    ds = JSONLDataset(path)
    assert [ds.raw(i) for i in range(3)] == [b'{"a": 1}', b'{"a": 2}', b"[3]"]
    assert list(ds) == [{"a": 1}, {"a": 2}, [3]]
    assert list(JSONLDataset(path, record_transform=str)) == ["{'a': 1}", "{'a': 2}", "[3]"]


def test_extensionless_and_ndjson(tmp_path):
    for name in ("records", "x.ndjson"):
        (tmp_path / name).write_bytes(b"1\n2\n")
        assert list(JSONLDataset(tmp_path / name)) == [1, 2]


def test_empty_file(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    ds = JSONLDataset(path)
    assert len(ds) == 0 and list(ds) == [] and ds[:] == []


def test_multi_file(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(b"1\n2\n")
    b.write_bytes(b"3\n\n4\n5")
    ds = JSONLDataset([a, b])
    assert len(ds) == 5 and list(ds) == [1, 2, 3, 4, 5] and ds[2] == 3 and ds[-1] == 5
    assert ds[[4, 0, 2]] == [5, 1, 3] and ds.raw(3) == b"4"
    assert pickle.loads(pickle.dumps(ds))[3] == 4


def test_decode_error_names_file_line_offset(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"ok": 1}\n\n\n{"broken": \n{"ok": 2}\n')
    ds = JSONLDataset(path)
    assert len(ds) == 3 and ds[2] == {"ok": 2}
    with pytest.raises(RecordDecodeError) as info:
        ds[1]
    err = info.value
    assert (err.path, err.line, err.offset) == (str(path), 4, 12)
    assert '{"broken":' in err.excerpt and str(path) in str(err) and ":4:" in str(err)
    with pytest.raises(RecordDecodeError):
        list(ds)
    with pytest.raises(RecordDecodeError):
        ds[[0, 1]]
    revived = pickle.loads(pickle.dumps(err))
    assert (revived.line, revived.offset) == (4, 12)


def test_invalid_utf8_is_a_decode_error(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"a": 1}\n["caf\xe9"]\n')
    with pytest.raises(RecordDecodeError, match=r":2: .*offset 9"):
        JSONLDataset(path)[1]


def test_nan_and_infinity_read_as_json_loads_reads_them_unless_allow_nan_is_false(tmp_path):
    path = tmp_path / "nan.jsonl"
    path.write_bytes(b"[NaN]\n[Infinity]\n[-Infinity]\n[1e400]\n")
    ds = JSONLDataset(path)
    assert math.isnan(ds[0][0]) and ds[1:] == [[math.inf], [-math.inf], [math.inf]]
    strict = JSONLDataset(path, allow_nan=False)
    for i in range(3):
        with pytest.raises(RecordDecodeError, match="allow_nan=False"):
            strict[i]
    assert strict[3] == [math.inf]  # a valid JSON number too large for a double: what json.loads gives


def test_check_reports_bad_lines(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"1\n{\n2\n\n[}\n")
    JSONLIndexer(path).populate_index()  # without check: no parsing
    with pytest.raises(RecordDecodeError) as info:
        JSONLIndexer(path, check=True).populate_index()
    assert [e.line for e in info.value.errors] == [2, 5] and "2 invalid record" in str(info.value)


def test_file_errors_are_one_line(tmp_path):
    with pytest.raises(DataFileError, match="no such data file"):
        JSONLDataset(tmp_path / "missing.jsonl")
    with pytest.raises(DataFileError, match="directory"):
        JSONLDataset(tmp_path)
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"1\n")
    with pytest.raises(IndexFileError, match="no index"):
        JSONLDataset(path, build_index_on_load=False)


def test_unreadable_file(tmp_path):
    path = tmp_path / "secret.jsonl"
    path.write_bytes(b"1\n")
    path.chmod(0o000)
    code = (
        "import sjsonl,sys\ntry: sjsonl.JSONLDataset(sys.argv[1])\nexcept sjsonl.DataFileError as e: print(e)"
    )
    out = run_unprivileged(code, str(path))
    assert out.stdout.strip() == f"permission denied reading data file: {path}", out.stderr


def test_pickle_round_trip_after_reads(small):
    path, records = small
    ds = JSONLDataset(path)
    _ = [ds[i] for i in range(0, 500, 7)]
    clone = pickle.loads(pickle.dumps(ds))
    assert len(clone) == 500 and clone[123] == records[123] and list(clone) == records
    view = pickle.loads(pickle.dumps(ds.skip(10).take(5)))
    assert list(view) == records[10:15]


def _fork_reader(args):
    ds, seed = args
    rng = np.random.default_rng(seed)
    wrong = 0
    for i in rng.integers(0, len(ds), size=20_000).tolist():
        rec = ds[i]
        wrong += rec["id"] != i
    return wrong


def test_fork_four_processes_random_reads(tmp_path):
    path = tmp_path / "corpus.jsonl"
    write_corpus(path, 30_000, kind="short", seed=5)
    ds = JSONLDataset(path)
    assert ds[29_999]["id"] == 29_999  # opened and read in the parent before forking
    ctx = mp.get_context("fork")
    with ctx.Pool(4) as pool:
        wrong = pool.map(_fork_reader, [(ds, s) for s in range(4)])
    assert wrong == [0, 0, 0, 0]
    assert _fork_reader((ds, 9)) == 0


def test_getitems_is_a_batch_lookup(small):
    path, records = small
    ds = JSONLDataset(path)
    assert ds.__getitems__([4, 2, -1]) == [records[4], records[2], records[-1]]
    assert ds[3:3] == [] and ds[-3:] == records[-3:]


def test_out_of_range_names_the_file_and_the_valid_range(tmp_path):
    from sjsonl.errors import RecordIndexError

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("1\n2\n3\n")
    b.write_text("4\n")
    with pytest.raises(
        RecordIndexError, match=r"^a.jsonl has 3 records: index 7 is out of range \(valid: 0..2 or -3..-1\)$"
    ):
        JSONLDataset(a)[7]
    with pytest.raises(
        RecordIndexError, match=r"^a.jsonl and 1 more file has 4 records: index -5 is out of range"
    ):
        JSONLDataset([a, b])[-5]
    assert repr(JSONLDataset([a, b])) == f"JSONLDataset([{str(a)!r}, {str(b)!r}], records=4)"


def test_an_index_dir_that_is_a_file_is_named(tmp_path, monkeypatch):
    data, blocker = tmp_path / "d.jsonl", tmp_path / "not-a-dir"
    data.write_text("1\n")
    blocker.write_text("")
    message = (
        rf"the index directory {blocker} \(index_dir= or \$SJSONL_INDEX_DIR\) exists and is not a directory"
    )
    with pytest.raises(ValueError, match=message):
        JSONLDataset(data, index_dir=blocker)
    monkeypatch.setenv("SJSONL_INDEX_DIR", str(blocker))
    with pytest.raises(ValueError, match=message):
        JSONLDataset(data)
