"""gzip data files read in place through indexed_gzip seek points (the ``compress`` extra)."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import threading

import numpy as np
import pytest

from sjsonl import DataFileError, JSONLDataset, JSONLIndexer, RecordDecodeError, StaleIndexError
from sjsonl.data.indexer import InvalidRecordsError
from sjsonl.sample import write_corpus
from sjsonl.storage import compressed, open_storage
from sjsonl.storage.compressed import GZIP_SPACING, GzipFile

from ._storage_checks import check_every_access_path, check_fork_safety, source_records


@pytest.fixture
def corpus(tmp_path):
    """~3.5 MB of short records, gzipped: several seek points (one per MiB of decompressed data)."""
    plain = tmp_path / "data.jsonl"
    write_corpus(plain, 20_000, kind="short", seed=7)
    raw = plain.read_bytes()
    gz = tmp_path / "data.jsonl.gz"
    gz.write_bytes(gzip.compress(raw, compresslevel=1, mtime=0))
    return gz, raw


def test_every_record_equals_the_source(corpus):
    gz, raw = corpus
    ds = JSONLDataset(gz)
    assert isinstance(ds._files[0].storage, GzipFile)
    assert len(raw) > 2 * GZIP_SPACING
    check_every_access_path(ds, raw)


def test_human_eval_gz_matches_its_decompressed_twin(shared_data):
    folder = shared_data / "jsonl" / "human_eval"
    ds = JSONLDataset(folder / "HumanEval.jsonl.gz")
    check_every_access_path(ds, (folder / "HumanEval.jsonl").read_bytes())
    assert len(ds) == 164


def test_index_beside_a_gz_file_never_collides_with_its_namesake(corpus, monkeypatch):
    gz, raw = corpus
    plain = gz.with_suffix("")  # data.jsonl, beside data.jsonl.gz
    a, b = JSONLDataset(gz), JSONLDataset(plain)
    assert a.index_paths == [str(gz) + ".index.npy"] and b.index_paths == [str(gz.parent / "data.index.npy")]
    assert (gz.parent / "data.jsonl.gz.index.seekpoints").exists()
    stamps = {p: os.stat(p).st_mtime_ns for p in gz.parent.iterdir() if ".index." in p.name}
    for _ in range(2):  # alternate opens reuse both indexes: nothing is rebuilt
        assert JSONLDataset(gz, build_index_on_load=False)[5] == JSONLDataset(plain)[5]
    assert stamps == {p: os.stat(p).st_mtime_ns for p in gz.parent.iterdir() if ".index." in p.name}
    assert gz.read_bytes() == gzip.compress(raw, compresslevel=1, mtime=0)  # the data was never touched
    assert np.load(str(gz) + ".index.npy").tolist() == np.load(gz.parent / "data.index.npy").tolist()


def _npoints(ds: JSONLDataset) -> int:
    _lock, handle = ds._files[0].storage._handle()
    return handle.raw.npoints


def test_seek_points_are_saved_and_reused(corpus):
    gz, raw = corpus
    built = JSONLDataset(gz)
    total = _npoints(built)
    assert total >= 3
    seek_file = built.index_paths[0][: -len(".npy")] + ".seekpoints"
    assert os.path.getsize(seek_file) > 0
    reopened = JSONLDataset(gz, build_index_on_load=False)
    assert _npoints(reopened) == total  # imported, before any read past the start
    expected = source_records(raw)
    assert reopened[len(reopened) - 1] == expected[-1]
    # seek points that do not match the data are ignored: reads stay right, points are rebuilt
    with open(seek_file, "r+b") as f:
        f.seek(40)
        f.write(b"garbage!")
    fresh = JSONLDataset(gz, build_index_on_load=False)
    assert fresh[len(fresh) - 1] == expected[-1] and fresh[0] == expected[0]
    os.unlink(seek_file)
    assert JSONLDataset(gz, build_index_on_load=False)[12_345] == expected[12_345]


def test_rewritten_gz_is_detected_and_reindexed(corpus):
    gz, raw = corpus
    assert len(JSONLDataset(gz)) == 20_000
    lines = raw.split(b"\n")
    lines[0] = b'{"id": "changed"}'
    gz.write_bytes(gzip.compress(b"\n".join(lines) + b'{"id": "appended"}\n', compresslevel=1))
    with pytest.raises(StaleIndexError, match="stale"):
        JSONLDataset(gz, build_index_on_load=False)
    ds = JSONLDataset(gz)
    assert len(ds) == 20_001 and ds[0] == {"id": "changed"} and ds[-1] == {"id": "appended"}
    assert JSONLDataset(gz, build_index_on_load=False)[-1] == {"id": "appended"}


def test_bad_line_error_names_file_line_and_decompressed_offset(tmp_path):
    body = b'{"a": 1}\n\n{"a": 2}\n{"a": oops}\n{"a": 4}\n'
    gz = tmp_path / "bad.jsonl.gz"
    gz.write_bytes(gzip.compress(body))
    ds = JSONLDataset(gz)
    assert ds[0] == {"a": 1} and ds[3] == {"a": 4}
    offset = body.index(b'{"a": oops}')
    for read in (lambda: ds[2], lambda: list(ds), lambda: ds[[3, 2]]):
        with pytest.raises(RecordDecodeError) as info:
            read()
        err = info.value
        assert (err.path, err.line, err.offset) == (str(gz), 4, offset)
        assert f"{gz}:4:" in str(err) and "oops" in err.excerpt
    with pytest.raises(InvalidRecordsError) as info:
        JSONLIndexer(gz, check=True).populate_index()
    assert info.value.line == 4 and info.value.total == 1


def test_concatenated_members_crlf_bom_and_empty(tmp_path):
    parts = [b'\xef\xbb\xbf{"id": 0}\r\n  \r\n', b'{"id": 1}\n' * 3, b'{"id": 4}']  # no final newline
    multi = tmp_path / "multi.jsonl.gz"
    multi.write_bytes(b"".join(gzip.compress(p) for p in parts))
    assert JSONLDataset(multi)[:] == [{"id": 0}] + [{"id": 1}] * 3 + [{"id": 4}]
    empty = tmp_path / "empty.jsonl.gz"
    empty.write_bytes(gzip.compress(b""))
    assert len(JSONLDataset(empty)) == 0
    zero = tmp_path / "zero.jsonl.gz"
    zero.write_bytes(b"")
    assert len(JSONLDataset(zero)) == 0


def test_truncated_or_not_gzip_is_a_clear_error(corpus, tmp_path):
    gz, _raw = corpus
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gz.read_bytes()[:100_000])  # a partial download
    with pytest.raises(DataFileError, match="looks truncated"):
        JSONLDataset(cut)
    fake = tmp_path / "fake.jsonl.gz"
    fake.write_bytes(b'{"a": 1}\n')
    with pytest.raises(DataFileError, match=f"cannot decompress {fake}"):
        JSONLDataset(fake)


def test_indexer_writes_index_and_seek_points(corpus, tmp_path):
    gz, raw = corpus
    indexer = JSONLIndexer(gz)
    out = indexer.write_index_to_disk(tmp_path / "elsewhere" / "my.index.npy")
    assert np.load(out).tolist() == JSONLDataset(gz)._files[0].offsets.tolist()
    assert os.path.exists(tmp_path / "elsewhere" / "my.index.seekpoints")
    ds = JSONLDataset(gz, index_path=out, build_index_on_load=False)
    assert _npoints(ds) >= 3 and ds[-1] == json.loads(raw.split(b"\n")[-2])


def test_storage_reads_and_size(corpus):
    gz, raw = corpus
    f = open_storage(gz)
    assert f.size == len(raw)
    for start in (0, 1, GZIP_SPACING - 3, len(raw) - 10):
        assert f.read(start, start + 100) == raw[start : start + 100]
    assert f.read(len(raw) + 5, len(raw) + 10) == b"" and f.read(7, 7) == b""
    assert f.read_many([(5, 9), (len(raw) - 4, len(raw))]) == [raw[5:9], raw[-4:]]
    g = pickle.loads(pickle.dumps(f))
    assert g.read(GZIP_SPACING * 2, GZIP_SPACING * 2 + 50) == raw[GZIP_SPACING * 2 : GZIP_SPACING * 2 + 50]
    assert b"IndexedGzip" not in pickle.dumps(f)


def test_threads_share_one_handle_safely(corpus):
    gz, raw = corpus
    ds = JSONLDataset(gz)
    expected_ids = [r["id"] for r in source_records(raw)]
    wrong = []

    def reader(seed):
        rng = np.random.default_rng(seed)
        wrong.append(sum(ds[i]["id"] != expected_ids[i] for i in rng.integers(0, len(ds), 150).tolist()))

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == [0, 0, 0, 0]


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
def test_fork_and_pickle_safety(corpus, monkeypatch):
    # Denser seek points make each random read ~15x cheaper, so thousands of reads per process stay fast;
    # more points also means more state copied into each child.
    monkeypatch.setattr(compressed, "GZIP_SPACING", 64 << 10)
    gz, raw = corpus
    ds = JSONLDataset(gz)
    assert _npoints(ds) > 20
    check_fork_safety(ds, [r["id"] for r in source_records(raw)], reads=2000)
