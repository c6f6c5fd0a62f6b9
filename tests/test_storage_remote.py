"""Remote data files over a real S3 protocol: moto's server on 127.0.0.1 (the ``remote`` extra)."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest
import pyzstd

from sjsonl import DataFileError, JSONLDataset, JSONLIndexer, RecordDecodeError, StaleIndexError
from sjsonl.index.layout import cache_index_path, default_cache_dir
from sjsonl.sample import write_corpus
from sjsonl.storage.compressed import GzipFile
from sjsonl.storage.remote import RemoteFile

from ._storage_checks import check_every_access_path, check_fork_safety, source_records


@pytest.fixture(scope="module")
def raw() -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "train.jsonl")
        write_corpus(path, 4000, kind="short", seed=21)
        with open(path, "rb") as f:
            return f.read()


def test_every_record_equals_the_source(bucket, raw):
    url = bucket.put("dir/train.jsonl", raw)
    ds = JSONLDataset(url, storage_options=bucket.options)
    assert isinstance(ds._files[0].storage, RemoteFile) and ds.files == [url]
    check_every_access_path(ds, raw, singles=150)
    # the index lives in the cache directory, keyed by the URL; nothing was written to the bucket
    assert ds.index_paths == [cache_index_path(url, default_cache_dir())]
    assert bucket.keys() == ["dir/train.jsonl"]
    again = JSONLDataset(url, storage_options=bucket.options, build_index_on_load=False)
    assert again[3999] == json.loads(raw.splitlines()[3999])


def test_default_index_place_is_the_user_cache(bucket, raw, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    url_a = bucket.put("a/train.jsonl", raw)
    url_b = bucket.put("b/train.jsonl", raw[: raw.index(b"\n") + 1])  # same name, other object
    a = JSONLDataset(url_a, storage_options=bucket.options)
    b = JSONLDataset(url_b, storage_options=bucket.options)
    assert a.index_paths[0].startswith(str(tmp_path / "xdg" / "sjsonl" / "index"))
    assert a.index_paths != b.index_paths and (len(a), len(b)) == (4000, 1)
    assert len(JSONLDataset(url_a, storage_options=bucket.options, build_index_on_load=False)) == 4000


def test_human_eval_over_s3_gzip_zstd_and_plain(bucket, shared_data, tmp_path):
    folder = shared_data / "jsonl" / "human_eval"
    plain = (folder / "HumanEval.jsonl").read_bytes()
    gz_url = bucket.put("HumanEval.jsonl.gz", (folder / "HumanEval.jsonl.gz").read_bytes())
    ds = JSONLDataset(gz_url, storage_options=bucket.options)
    assert isinstance(ds._files[0].storage, GzipFile)
    check_every_access_path(ds, plain, singles=50)
    with pyzstd.SeekableZstdFile(tmp_path / "h.zst", "w", max_frame_content_size=16 << 10) as f:
        f.write(plain)
    zst_url = bucket.put("HumanEval.jsonl.zst", (tmp_path / "h.zst").read_bytes())
    assert JSONLDataset(zst_url, storage_options=bucket.options)[:] == source_records(plain)
    plain_url = bucket.put("HumanEval.jsonl", plain)
    assert list(JSONLDataset(plain_url, storage_options=bucket.options)) == source_records(plain)
    reopened = JSONLDataset(gz_url, storage_options=bucket.options, build_index_on_load=False)
    assert reopened[163] == source_records(plain)[163]


def test_overwritten_object_is_detected_and_reindexed(bucket, raw):
    url = bucket.put("train.jsonl", raw)
    assert len(JSONLDataset(url, storage_options=bucket.options)) == 4000
    lines = raw.split(b"\n")
    lines[1] = lines[1].replace(b'"id":1,', b'"id":7,')  # same size, different bytes
    changed = b"\n".join(lines)
    assert len(changed) == len(raw)
    bucket.put("train.jsonl", changed)
    with pytest.raises(StaleIndexError, match=r"stale: data (object was replaced|file)"):
        JSONLDataset(url, storage_options=bucket.options, build_index_on_load=False)
    ds = JSONLDataset(url, storage_options=bucket.options)
    assert ds[1]["id"] == 7 and len(ds) == 4000
    bucket.put("train.jsonl", changed + b'{"id": "appended"}\n')
    ds = JSONLDataset(url, storage_options=bucket.options)
    assert len(ds) == 4001 and ds[-1] == {"id": "appended"}


def test_bad_line_error_names_the_url_line_and_offset(bucket):
    body = b'{"a": 1}\n\n{"a": 2}\n{"a": oops}\n'
    url = bucket.put("bad.jsonl", body)
    ds = JSONLDataset(url, storage_options=bucket.options)
    assert ds[1] == {"a": 2}
    for read in (lambda: ds[2], lambda: list(ds), lambda: ds[[0, 2]]):
        with pytest.raises(RecordDecodeError) as info:
            read()
        err = info.value
        assert (err.path, err.line, err.offset) == (url, 4, 19)
        assert str(err).startswith(f"{url}:4: invalid JSON record at byte offset 19:") and "oops" in str(err)


def test_missing_object_and_indexer(bucket, raw, tmp_path):
    with pytest.raises(DataFileError, match=f"no such data file: s3://{bucket.name}/nope.jsonl"):
        JSONLDataset(f"s3://{bucket.name}/nope.jsonl", storage_options=bucket.options)
    url = bucket.put("train.jsonl", raw)
    indexer = JSONLIndexer(url, check=True, storage_options=bucket.options)
    out = indexer.write_index_to_disk()
    assert out == cache_index_path(url, default_cache_dir())
    offsets = JSONLDataset(url, storage_options=bucket.options)._files[0].offsets
    assert np.load(out).tolist() == offsets.tolist()


def test_pickle_carries_no_connection(bucket, raw):
    url = bucket.put("train.jsonl", raw)
    ds = JSONLDataset(url, storage_options=bucket.options)
    assert ds[10]["id"] == 10  # the filesystem exists in this process
    blob = pickle.dumps(ds)
    assert b"S3FileSystem" not in blob and b"aiobotocore" not in blob
    assert pickle.loads(blob)[[3999, 0]] == [ds[3999], ds[0]]


def test_fork_and_pickle_safety(bucket, raw):
    url = bucket.put("train.jsonl", raw)
    ds = JSONLDataset(url, storage_options=bucket.options)
    # every single read is a request to a server that shares the parent's GIL: a few hundred per child,
    # and the thousands more as random batches (one coalesced request each)
    ids = [r["id"] for r in source_records(raw)]
    check_fork_safety(ds, ids, reads=150, batched=2000, pickled_reads=100)


def test_load_dataset_reads_urls_in_place(bucket, raw):
    """sjsonl.load_dataset (and the MindSpore loader on top of it) take URLs in data_files: no download."""
    from sjsonl.data.streaming import JSONLStream
    from sjsonl.hf.load import is_jsonl_source, load_dataset

    url = bucket.put("splits/train.jsonl", raw)
    expected = [json.loads(line) for line in raw.splitlines()]
    files = {"train": url}
    assert is_jsonl_source("json", data_files=files)
    ds = load_dataset("json", data_files=files, split="train[:10]", storage_options=bucket.options)
    assert list(ds) == expected[:10]
    stream = load_dataset("json", data_files=files, streaming=True, storage_options=bucket.options)["train"]
    assert isinstance(stream, JSONLStream) and list(stream) == expected
    assert list(pickle.loads(pickle.dumps(stream)).take(3)) == expected[:3]
    assert bucket.keys() == ["splits/train.jsonl"]
