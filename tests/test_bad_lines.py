"""on_bad_lines: injected bad lines are left out exactly, reported with their line numbers, remembered
beside the index, and never read under "error"."""

from __future__ import annotations

import json
import os
import random
import struct
import tracemalloc
import warnings

import numpy as np
import pytest

import sjsonl
from sjsonl import JSONLDataset, RecordDecodeError
from sjsonl.data.corpus import find_bad_lines
from sjsonl.records.badlines import BADLINES_MAGIC, BadLineWarning, badlines_path
from sjsonl.storage.sidecar import index_key, read_sidecar

BAD = [b"{oops", b'{"a": nan}', b'{"t": "\xff"}', b"[1, 2", b'{"a": 1} trailing', b"tru"]


def corpus(tmp_path, n: int = 1000, n_bad: int = 3, seed: int = 0, blank_every: int = 0):
    """n lines, n_bad of them bad at random places; returns (path, good records, bad 1-based line numbers)."""
    rng = random.Random(seed)
    bad_at = sorted(rng.sample(range(n), n_bad))
    lines, good, bad_lines = [], [], []
    for i in range(n):
        if blank_every and i % blank_every == 0:
            lines.append(b"")  # a blank line is not a record and not a bad line
        if i in bad_at:
            lines.append(BAD[len(bad_lines) % len(BAD)])
            bad_lines.append(len(lines))
        else:
            rec = {"i": i, "text": "é" * (i % 5)}
            lines.append(json.dumps(rec, ensure_ascii=False).encode())
            good.append(rec)
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path, good, bad_lines


@pytest.mark.parametrize("n_bad, blank_every", [(3, 0), (6, 7), (0, 0)])
def test_skip_gives_exactly_the_good_records(tmp_path, n_bad, blank_every):
    path, good, bad_lines = corpus(tmp_path, n_bad=n_bad, blank_every=blank_every)
    ds = JSONLDataset(path, on_bad_lines="skip")
    assert len(ds) == len(good)
    assert ds[:] == good == list(ds) == ds[list(range(len(ds)))]
    assert [b.line for b in ds.bad_lines] == bad_lines
    assert [b.line for b in find_bad_lines(path)] == bad_lines
    for b in ds.bad_lines:
        raw = path.read_bytes()
        assert raw.count(b"\n", 0, b.offset) + 1 == b.line and b.reason and b.excerpt
    # views, shuffles and shards of the good records
    assert sorted(r["i"] for r in ds.shuffle(seed=1)) == [r["i"] for r in good]
    assert [r for k in range(3) for r in ds.shard(3, k)] == good
    assert ds.select_columns(["i"])[:3] == [{"i": r["i"]} for r in good[:3]]


def test_warn_warns_once_with_the_line_numbers(tmp_path):
    path, good, bad_lines = corpus(tmp_path)
    with pytest.warns(BadLineWarning, match=rf"3 bad lines skipped .*line {bad_lines[0]}:"):
        ds = JSONLDataset(path, on_bad_lines="warn")
    assert len(ds) == len(good)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        JSONLDataset(path)  # "error": no warning, and every line is a record


def test_error_keeps_every_line_and_raises_where_it_is_bad(tmp_path):
    path, good, bad_lines = corpus(tmp_path)
    ds = JSONLDataset(path)
    assert len(ds) == len(good) + 3 and ds.bad_lines == []
    with pytest.raises(RecordDecodeError, match=rf"data.jsonl:{bad_lines[0]}:"):
        list(ds)


def test_the_index_remembers_the_bad_lines(tmp_path, monkeypatch):
    path, good, bad_lines = corpus(tmp_path)
    ds = JSONLDataset(path, on_bad_lines="skip")
    side = badlines_path(ds.index_paths[0])
    assert os.path.exists(side)
    key = {**index_key(ds._files[0], sjsonl.records.badlines.CACHE_VERSION, skipped=False), "allow_nan": True}
    saved = read_sidecar(side, BADLINES_MAGIC, key)
    m, k = struct.unpack_from("<QQ", saved)
    assert (m, k) == (3, 3) and np.frombuffer(saved, "<i8", m + k, 16)[m:].tolist() == bad_lines
    # a second open reads it: no second parse of the file
    monkeypatch.setattr(sjsonl.records.badlines, "scan_file", lambda *a, **k: pytest.fail("parsed again"))
    again = JSONLDataset(path, on_bad_lines="skip")
    assert [b.line for b in again.bad_lines] == bad_lines and again[:] == good
    monkeypatch.undo()
    # the data changes: the index is rebuilt and the old bad lines are not trusted
    path.write_bytes(path.read_bytes() + b"{still bad\n")
    fresh = JSONLDataset(path, on_bad_lines="skip")
    assert [b.line for b in fresh.bad_lines] == [*bad_lines, 1001]
    assert read_sidecar(side, BADLINES_MAGIC, {"nope": 1}) is None


def test_load_dataset_and_multi_file(tmp_path):
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir(), b_dir.mkdir()
    pa, ga, la = corpus(a_dir, n=200, n_bad=2, seed=1)
    pb, gb, lb = corpus(b_dir, n=300, n_bad=4, seed=2)
    ds = JSONLDataset([pa, pb], on_bad_lines="skip")
    assert ds[:] == ga + gb and [(b.path, b.line) for b in ds.bad_lines] == [(str(pa), x) for x in la] + [
        (str(pb), x) for x in lb
    ]
    loaded = sjsonl.load_dataset(
        "json", data_files=[str(pa), str(pb)], split="train", on_bad_lines="skip", as_hf=False
    )
    assert loaded[:] == ga + gb


def test_bad_policy_is_refused(tmp_path):
    path, _, _ = corpus(tmp_path, n=10, n_bad=1)
    with pytest.raises(ValueError, match="on_bad_lines must be one of error, skip, warn"):
        JSONLDataset(path, on_bad_lines="ignore")


def test_pickled_skip_dataset_reads_the_same(tmp_path):
    import pickle

    path, good, _ = corpus(tmp_path)
    ds = JSONLDataset(path, on_bad_lines="skip")
    assert pickle.loads(pickle.dumps(ds))[:] == good


def test_streams_skip_or_warn_too(tmp_path):
    from sjsonl.data.streaming import JSONLStream

    path, good, bad_lines = corpus(tmp_path)
    assert list(JSONLStream(str(path), on_bad_lines="skip")) == good
    with pytest.warns(BadLineWarning) as caught:
        assert list(JSONLStream(str(path), on_bad_lines="warn")) == good
    assert [int(str(w.message).split("data.jsonl:")[1].split(":")[0]) for w in caught] == bad_lines
    shards = [list(JSONLStream(str(path), on_bad_lines="skip").shard(3, k)) for k in range(3)]
    assert sorted(r["i"] for s in shards for r in s) == [r["i"] for r in good]
    with pytest.raises(RecordDecodeError, match=rf"data.jsonl:{bad_lines[0]}:"):
        list(JSONLStream(str(path)))
    streamed = sjsonl.load_dataset(
        "json", data_files=str(path), split="train", streaming=True, on_bad_lines="skip"
    )
    assert list(streamed) == good
    with pytest.raises(TypeError, match="fields/schema with streaming=True"):
        sjsonl.load_dataset("json", data_files=str(path), split="train", streaming=True, fields=["i"])


def test_columns_and_features_skip_the_bad_lines_too(tmp_path):
    path, good, _ = corpus(tmp_path, n=300, n_bad=3)
    ds = JSONLDataset(path, on_bad_lines="skip")
    assert ds.column_names == ["i", "text"] and ds["i"] == [r["i"] for r in good]
    filled = sjsonl.load_dataset(
        "json", data_files=str(path), split="train", on_bad_lines="skip", fill_missing=True
    )
    assert filled[:] == good
    with pytest.raises(RecordDecodeError):
        _ = JSONLDataset(path).column_names  # "error": the schema pass meets the bad line
    with pytest.raises(IndexError, match=r"data.jsonl without its 3 bad lines has 297 records"):
        ds[297]


def test_line_numbers_beyond_the_kept_ones_are_counted_when_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(sjsonl.records.badlines, "MAX_REPORTED", 1)
    path, _, bad_lines = corpus(tmp_path, n=50, n_bad=3, blank_every=4)
    JSONLDataset(path, on_bad_lines="skip")
    again = JSONLDataset(path, on_bad_lines="skip")  # read back from the sidecar: one line number kept
    assert len(again.bad_lines._parts[0].lines) == 1
    assert [b.line for b in again.bad_lines] == bad_lines  # counted on, in order
    assert [again.bad_lines[k].line for k in (2, 0, 1, -1)] == [bad_lines[k] for k in (2, 0, 1, -1)]
    assert all(b.reason and b.excerpt for b in again.bad_lines)  # parsed again when asked for


def test_many_bad_lines_cost_eight_bytes_each(tmp_path):
    n_bad = 50_000
    path = tmp_path / "many.jsonl"
    path.write_bytes(b"".join(b'{"i": %d}\n{oops %d\n' % (i, i) for i in range(n_bad)))
    JSONLDataset(path)  # the index (its build has buffers of its own)
    for opening in ("first open: a parse", "reopen: the .badlines file"):
        tracemalloc.start()
        ds = JSONLDataset(path, on_bad_lines="skip")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert len(ds) == n_bad and ds[-1] == {"i": n_bad - 1}, opening
        # an int64 a bad line, twice (the dataset's skip map) and more while made; not an object each
        assert peak < 40 * n_bad, (opening, peak / n_bad)
    records = ds.bad_lines.records()
    assert records.dtype == np.int64 and records.nbytes == 8 * n_bad
    assert (
        len(ds.bad_lines._parts[0].lines) == sjsonl.records.badlines.MAX_REPORTED
    )  # line numbers kept: the first
    assert os.path.getsize(badlines_path(ds.index_paths[0])) == 64 + 16 + 8 * (n_bad + 10_000)
    last = ds.bad_lines[-1]  # counted on demand
    assert (last.line, last.record, last.excerpt) == (2 * n_bad, 2 * n_bad - 1, repr(f"{{oops {n_bad - 1}"))
