"""zstd data files in the seekable format, read in place frame by frame (the ``compress`` extra)."""

from __future__ import annotations

import gzip
import os
import pickle

import pytest
import pyzstd

from sjsonl import DataFileError, JSONLDataset, JSONLIndexer, RecordDecodeError, StaleIndexError, load_dataset
from sjsonl.data.streaming import JSONLStream
from sjsonl.sample import write_corpus
from sjsonl.storage import open_storage
from sjsonl.storage.compressed import SeekableZstdFile, to_seekable_zstd

from ._storage_checks import check_every_access_path, check_fork_safety, source_records
from .test_storage_formats import NAMES, ROWS, check_refused


def write_seekable(path, raw: bytes, frame: int = 32 << 10) -> None:
    """pyzstd's own seekable writer, small frames: many frames, records cut across frame boundaries."""
    with pyzstd.SeekableZstdFile(path, "w", max_frame_content_size=frame) as f:
        f.write(raw)


@pytest.fixture
def corpus(tmp_path):
    plain = tmp_path / "data.jsonl"
    write_corpus(plain, 20_000, kind="short", seed=11)
    raw = plain.read_bytes()
    zst = tmp_path / "data.jsonl.zst"
    write_seekable(zst, raw)
    return zst, raw


def test_every_record_equals_the_source(corpus):
    zst, raw = corpus
    ds = JSONLDataset(zst)
    storage = ds._files[0].storage
    assert isinstance(storage, SeekableZstdFile) and storage.size == len(raw)
    assert 0 < storage.coalesce_gap <= (32 << 10) // 2  # about half a frame: reads decompress whole frames
    check_every_access_path(ds, raw, singles=2000)


def test_human_eval_recompressed_to_seekable_zstd(shared_data, tmp_path):
    folder = shared_data / "jsonl" / "human_eval"
    zst = tmp_path / "HumanEval.jsonl.zst"
    to_seekable_zstd(folder / "HumanEval.jsonl.gz", zst, frame_bytes=16 << 10)
    ds = JSONLDataset(zst)
    check_every_access_path(ds, (folder / "HumanEval.jsonl").read_bytes())
    assert len(ds) == 164


def test_plain_zstd_is_refused_with_a_recompression_recipe(corpus, tmp_path):
    _zst, raw = corpus
    plain = tmp_path / "plain.jsonl.zst"
    plain.write_bytes(pyzstd.compress(raw))
    with pytest.raises(DataFileError) as info:
        JSONLDataset(plain)
    message = str(info.value)
    assert str(plain) in message and "seekable" in message and "to_seekable_zstd" in message
    fixed = tmp_path / "fixed.jsonl.zst"
    to_seekable_zstd(plain, fixed)  # the recipe in the message works
    assert JSONLDataset(fixed)[:] == source_records(raw)
    assert not os.path.exists(str(plain) + ".index.npy")


def test_index_name_keeps_the_zst_suffix(corpus, monkeypatch):
    zst, _raw = corpus
    assert JSONLDataset(zst).index_paths == [str(zst) + ".index.npy"]
    assert JSONLDataset(zst.with_suffix("")).index_paths == [str(zst.parent / "data.index.npy")]
    assert JSONLDataset(zst, build_index_on_load=False)[3]["id"] == 3


def test_rewritten_zst_is_detected_and_reindexed(corpus):
    zst, raw = corpus
    assert len(JSONLDataset(zst)) == 20_000
    write_seekable(zst, raw + b'{"id": "appended"}\n', frame=64 << 10)
    with pytest.raises(StaleIndexError, match="stale"):
        JSONLDataset(zst, build_index_on_load=False)
    ds = JSONLDataset(zst)
    assert len(ds) == 20_001 and ds[-1] == {"id": "appended"} and ds[0]["id"] == 0


def test_bad_line_error_names_file_line_and_offset(tmp_path):
    body = b'{"a": 1}\n{"a": 2}\n\n\n' + b'{"a": 3}\n' * 5000 + b'{"a": nope}\n{"a": 4}\n'
    zst = tmp_path / "bad.jsonl.zst"
    write_seekable(zst, body, frame=4096)
    ds = JSONLDataset(zst)
    offset = body.index(b'{"a": nope}')
    for read in (lambda: ds[len(ds) - 2], lambda: list(ds)):
        with pytest.raises(RecordDecodeError) as info:
            read()
        assert (info.value.path, info.value.line, info.value.offset) == (str(zst), 5005, offset)
        assert f"{zst}:5005:" in str(info.value)
    assert ds[-1] == {"a": 4}


def test_empty_files_and_storage_reads(corpus, tmp_path):
    zst, raw = corpus
    empty = tmp_path / "empty.jsonl.zst"
    empty.write_bytes(b"")
    assert len(JSONLDataset(empty)) == 0
    one_frame_empty = tmp_path / "e2.jsonl.zst"
    write_seekable(one_frame_empty, b"")
    assert len(JSONLDataset(one_frame_empty)) == 0
    f = open_storage(zst)
    assert f.read(len(raw) - 5, len(raw) + 100) == raw[-5:] and f.read(len(raw) + 1, len(raw) + 9) == b""
    g = pickle.loads(pickle.dumps(f))
    assert g.read(100_000, 100_050) == raw[100_000:100_050]
    indexer = JSONLIndexer(zst)
    indexer.populate_index()
    assert len(indexer) == 20_000


def test_to_seekable_zstd_from_gzip_and_plain(tmp_path):
    raw = b"".join(b'{"i": %d}\n' % i for i in range(3000))
    (tmp_path / "a.jsonl").write_bytes(raw)
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(raw))
    for src in ("a.jsonl", "a.jsonl.gz"):
        out = tmp_path / (src + ".zst")
        to_seekable_zstd(tmp_path / src, out, frame_bytes=1024)
        assert pyzstd.SeekableZstdFile(out).seek_table_info[0] > 10  # many frames
        assert JSONLDataset(out)[[2999, 0]] == [{"i": 2999}, {"i": 0}]


def test_fork_and_pickle_safety(corpus):
    zst, raw = corpus
    check_fork_safety(JSONLDataset(zst), [r["id"] for r in source_records(raw)], reads=2000)


@pytest.mark.parametrize("name", NAMES)
def test_zstd_bytes_under_a_text_name_are_refused(tmp_path, name: str) -> None:
    check_refused(tmp_path / "zstd" / name, pyzstd.compress(ROWS), "zstd")


def test_a_plain_zst_streams_and_is_refused_for_random_access(tmp_path) -> None:
    path = tmp_path / "d.jsonl.zst"
    path.write_bytes(pyzstd.compress(ROWS * 1000))
    assert list(JSONLStream(path)) == [{"a": 1}, {"a": 2}] * 1000
    assert len(list(load_dataset(str(path), split="train", streaming=True))) == 2000
    with pytest.raises(DataFileError, match="not in the seekable zstd format"):
        JSONLDataset(path)
