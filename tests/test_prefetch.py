"""Prefetcher (ds.batch() against 🤗's: tests/test_batch_hf.py): same items in the same order as without it,
errors at their position, early stops, resume — on a real local file and on a storage with latency."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from sjsonl import JSONLDataset, Prefetcher, interleave_datasets
from sjsonl.errors import RecordDecodeError

from . import _slow_storage

N = 1_000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("prefetch") / "d.jsonl"
    with open(path, "w") as f:
        f.writelines(f'{{"id": {i}, "text": "{"x" * (i % 17)}"}}\n' for i in range(N))
    return path


def test_batch_views_and_alias(corpus):
    ds = JSONLDataset(corpus)
    assert len(ds.batch(64, drop_last_batch=True)) == N // 64 == len(ds.batch(64, True))
    with pytest.raises(TypeError):  # one name for it, as 🤗 Dataset.batch: no drop_last alias
        ds.batch(64, drop_last=True)  # type: ignore[call-arg]
    batches = ds.batch(100)
    order = [b["id"][0] // 100 for b in batches.shuffle(seed=2)]
    assert sorted(order) == list(range(10)) and order != list(range(10))
    assert [b["id"][0] for b in batches.shard(2, 1)] == [500, 600, 700, 800, 900]
    with pytest.raises(ValueError, match="batch_size"):
        ds.batch(0)
    with pytest.raises(
        IndexError, match=r"has 10 batches: index 10 is out of range \(valid: 0..9 or -10..-1\)"
    ):
        batches[10]
    assert batches[1:3] == [batches[1], batches[2]] == batches[[1, -8]]
    assert ds.batch(2).batch(2)[0] == {"id": [[0, 1], [2, 3]], "text": [["", "x"], ["xx", "xxx"]]}


@pytest.mark.parametrize("prefetch, threads", [(1, 1), (4, 2), (16, 8)])
def test_prefetch_gives_the_same_sequence(corpus, prefetch, threads):
    ds = JSONLDataset(corpus).shuffle(seed=1)
    plain = list(ds.batch(32))
    assert list(ds.batch(32).prefetch(prefetch, threads=threads)) == plain
    assert list(Prefetcher(ds, prefetch=prefetch, threads=threads)) == list(ds)


def test_prefetch_on_a_slow_storage_is_ordered_and_overlaps_the_waits(corpus):
    _slow_storage.register()
    slow = _slow_storage.SlowFileSystem
    ds = JSONLDataset(_slow_storage.url(corpus), storage_options={"latency": 0.02})
    reference = list(JSONLDataset(corpus).batch(50))
    slow.reset_counts()
    assert list(ds.batch(50)) == reference and slow.peak == 1  # without prefetch: one read at a time
    slow.reset_counts()
    assert list(ds.batch(50).prefetch(10, threads=10)) == reference
    assert slow.reads >= 20 and slow.peak >= 4  # reads were in flight together, results still in order


def test_an_error_arrives_at_its_position(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(10)) + "{oops\n" + '{"i": 11}\n')
    got = []
    with pytest.raises(RecordDecodeError, match=r"bad.jsonl:11: .* byte offset 90"):
        for rec in JSONLDataset(path).prefetch(8, threads=4):
            got.append(rec["i"])
    assert got == list(range(10))  # every record before it, in order


def test_stopping_early_leaves_no_threads(corpus):
    before = threading.active_count()
    it = iter(JSONLDataset(corpus).prefetch(8, threads=4))
    assert next(it) == {"id": 0, "text": ""}
    it.close()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() <= before


@pytest.mark.parametrize("k", [0, 1, 7, 31, 32])
def test_resume(corpus, k):
    make = lambda: interleave_datasets(  # noqa: E731
        [JSONLDataset(corpus), JSONLDataset(corpus).shuffle(seed=3)], probabilities=[0.5, 0.5], seed=1
    ).batch(64)
    loader = make().prefetch(4, threads=2)
    full = list(loader)
    assert len(full) == 32  # 1,999 draws: the second source's last record ends it
    it = iter(loader)
    head = [next(it) for _ in range(k)]
    state = loader.state_dict()
    resumed = make().prefetch(4, threads=2)
    resumed.load_state_dict(state)
    assert head + list(resumed) == full
    assert list(resumed) == full  # the pass after a resumed one starts from the beginning
    with pytest.raises(ValueError, match="cannot resume"):
        Prefetcher(list(range(3))).load_state_dict(state)


def test_arguments_are_checked(corpus):
    ds = JSONLDataset(corpus)
    with pytest.raises(ValueError, match="prefetch"):
        ds.prefetch(0)
    with pytest.raises(ValueError, match="threads"):
        ds.prefetch(2, threads=0)
    assert len(ds.batch(7).prefetch()) == len(ds.batch(7)) == int(np.ceil(N / 7))
