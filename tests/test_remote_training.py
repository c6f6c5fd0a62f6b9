"""Training from S3 through a real S3 protocol (moto behind the fault-injecting proxy of tests/_s3_proxy.py,
which serves ranged GETs of registered objects itself, in O(range)):

- a shuffled epoch through ``DistributedSampler`` and a ``DataLoader`` with 2 workers delivers every record
  exactly once, in the sampler's order, while 20% of range requests fail with 503 SlowDown, some
  connections are reset and some stall — with the local chunk cache and without it;
- the cache: the index scan fills it, so an epoch asks for no ranges; another process reuses it; an object
  over the cache limit is read by ranges and leaves nothing cached;
- a 403 fails at once (no retries), naming the URL; a 503 that never ends fails after the attempts, naming
  the URL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("aiohttp")

from sjsonl import JSONLDataset  # noqa: E402
from sjsonl.errors import DataFileError, StaleDataError  # noqa: E402
from sjsonl.torch import DistributedSampler  # noqa: E402

from ._s3_proxy import s3_proxy, serving_bucket  # noqa: E402, F401

N = 3000


def body(n: int = N) -> bytes:
    return b"".join(json.dumps({"i": i, "text": "x" * (i % 97)}).encode() + b"\n" for i in range(n))


@pytest.fixture
def remote(s3, s3_proxy, monkeypatch, tmp_path):  # noqa: F811
    """``put(data)`` → an s3:// URL served through the proxy (ranges in O(range)); the chunk cache in
    ``tmp_path/chunks``; no faults to begin with."""
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", str(tmp_path / "chunks"))
    yield from serving_bucket(s3, s3_proxy)


def collate(batch):
    return [r["i"] for r in batch]


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
@pytest.mark.parametrize("read", ["cache", "ahead", "batch by batch"])
def test_a_shuffled_epoch_under_faults_is_exact_and_in_order(remote, monkeypatch, read):
    """Through the cache, through batches read ahead without it (sjsonl.data.batches_ahead: fewer, larger
    requests, so a larger share fails), and batch by batch without it."""
    if read != "cache":
        monkeypatch.setenv("SJSONL_REMOTE_CACHE", "off")
    if read == "batch by batch":
        monkeypatch.setenv("SJSONL_BATCHES_AHEAD", "0")
    url = remote.put(body())
    ds = JSONLDataset(url, storage_options=remote.options)
    remote.reset_stats()
    errors = 0.5 if read == "ahead" else 0.2
    remote.set_faults(latency=0.002, error_rate=errors, reset_rate=0.03, stall_rate=0.01, stall_seconds=1.0)
    sampler = DistributedSampler(ds, num_replicas=1, rank=0, seed=3)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=64, sampler=sampler, num_workers=2, collate_fn=collate
    )
    got = [i for batch in loader for i in batch]
    assert got == list(sampler) and sorted(got) == list(range(N))
    stats = remote.stats()
    if read == "batch by batch":  # every batch went to the server, and the faults happened
        assert stats["ranged_gets"] >= N // 64 and stats["errors_injected"] > 0
    elif read == "ahead":  # the records came from the server, under faults
        assert stats["ranged_gets"] > 0 and stats["errors_injected"] > 0
    else:  # the index scan filled the cache: the epoch asked for no ranges
        assert stats["ranged_gets"] == 0


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
def test_the_cache_is_reused_by_another_process(remote, tmp_path):
    url = remote.put(body())
    JSONLDataset(url, storage_options=remote.options)  # the index scan fills the cache
    remote.reset_stats()
    code = (
        "import json, sys; from sjsonl import JSONLDataset; from sjsonl.torch import DistributedSampler\n"
        "ds = JSONLDataset(sys.argv[1], storage_options=json.loads(sys.argv[2]))\n"
        "print(json.dumps([ds[i]['i'] for i in DistributedSampler(ds, num_replicas=1, rank=0, seed=1)]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, url, json.dumps(remote.options)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert sorted(json.loads(out.stdout)) == list(range(N))
    assert remote.stats()["ranged_gets"] == 0


def test_an_object_over_the_cache_limit_is_read_by_ranges(remote, monkeypatch, tmp_path):
    monkeypatch.setenv("SJSONL_REMOTE_CACHE_BYTES", "4096")
    data = body()
    url = remote.put(data)
    ds = JSONLDataset(url, storage_options=remote.options)
    remote.reset_stats()
    assert [ds[i]["i"] for i in (5, 2999, 17)] == [5, 2999, 17]
    assert remote.stats()["ranged_gets"] >= 1
    assert not list((tmp_path / "chunks").glob("*.data"))


def test_a_forbidden_object_fails_at_once_naming_the_url(remote, monkeypatch):
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", "off")
    url = remote.put(body(100))
    ds = JSONLDataset(url, storage_options=remote.options)
    remote.forbid(url.split("/")[2], "train.jsonl")
    remote.reset_stats()
    with pytest.raises((DataFileError, PermissionError), match=url.split("://")[1]):
        ds[5]
    assert remote.stats()["ranged_gets"] <= 2  # no retries of a 403 (s3fs may ask once more)


@pytest.mark.slow  # s3fs's own retries back off for ~13 s before each of sjsonl's attempts fails
def test_a_503_that_never_ends_fails_after_the_attempts_naming_the_url(remote, monkeypatch):
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", "off")
    monkeypatch.setenv("SJSONL_REMOTE_ATTEMPTS", "3")
    url = remote.put(body(100))
    # botocore retries a 503 itself first (minutes of backoff by default): only sjsonl's attempts here
    options = {**remote.options, "config_kwargs": {"retries": {"max_attempts": 1}}}
    ds = JSONLDataset(url, storage_options=options)
    remote.reset_stats()
    remote.set_faults(error_rate=1.0)
    with pytest.raises(DataFileError, match=rf"cannot read {url}"):
        ds[5]
    assert remote.stats()["errors_injected"] >= 3  # each of sjsonl's attempts (s3fs may try again inside)


def test_a_fresh_cache_gives_first_batches_by_ranges_and_fills_in_the_background(
    remote, monkeypatch, tmp_path
):
    """An index built elsewhere (here: with the cache off) leaves the cache empty: the first batches read
    their own ranges (no chunks are fetched before the first batch) and hand the chunks to the background
    filler; once it has brought them, reads ask the server for nothing."""
    from sjsonl.storage.chunk_fill import ChunkFiller

    url = remote.put(body(80_000))  # ~5 MB: 5 chunks
    index_dir = str(tmp_path / "index")
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", "off")
    JSONLDataset(url, storage_options=remote.options, index_dir=index_dir)
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", str(tmp_path / "chunks"))
    wanted: list[int] = []
    monkeypatch.setattr(ChunkFiller, "want", lambda self, chunks: wanted.extend(chunks))  # held back here
    monkeypatch.setattr("sjsonl.storage.remote.DIRECT_ABOVE", 1)  # (a small object: few chunks)
    ds = JSONLDataset(url, storage_options=remote.options, index_dir=index_dir)
    storage = ds._files[0].storage
    store = storage._store()
    remote.reset_stats()
    order = list(DistributedSampler(ds, num_replicas=1, rank=0, seed=5))
    assert [r["i"] for r in ds[order[:64]]] == order[:64]
    assert remote.stats()["ranged_gets"] >= 1  # the batch's own (merged) ranges; no chunk was stored:
    assert wanted and set(wanted) <= set(store.missing(range(store.count)))  # left to the filler
    monkeypatch.undo()  # (the real filler, the same environment)
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", str(tmp_path / "chunks"))
    filler = ChunkFiller(store, storage._fill)
    filler.want(sorted(set(wanted)))
    assert filler.wait(60) and store.missing(range(store.count)) == []
    remote.reset_stats()
    assert [r["i"] for k in range(0, 80_000, 4000) for r in ds[order[k : k + 4000]]] == order
    assert remote.stats()["ranged_gets"] == 0


def test_a_sealed_cache_is_read_through_a_map_and_still_notices_a_replaced_object(remote, monkeypatch):
    """The index scan fills the cache and seals it: the next process's batches read it through a map (no
    request, no pread per batch) — and a replaced object still raises StaleDataError, never old bytes."""
    monkeypatch.setenv("SJSONL_REMOTE_CHECK_SECONDS", "0")  # (every batch checks the version at once)
    data = body()
    url = remote.put(data)
    ds = JSONLDataset(url, storage_options=remote.options)
    storage = ds._files[0].storage
    assert storage._store().sealed() and storage.buffer is not None
    assert storage.buffer()[0 : len(data)] == data
    from sjsonl.storage.chunk_store import ChunkStore

    def no_pread(*args):
        raise AssertionError("a sealed cache is read through its map")

    monkeypatch.setattr(ChunkStore, "read", no_pread)  # (the forked workers inherit it)
    remote.reset_stats()
    sampler = DistributedSampler(ds, num_replicas=1, rank=0, seed=7)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=64, sampler=sampler, num_workers=2, collate_fn=collate
    )
    assert [i for batch in loader for i in batch] == list(sampler)
    assert remote.stats()["ranged_gets"] == 0
    remote.put(body(N + 5))  # replaced: a new ETag
    with pytest.raises(StaleDataError, match="changed after it was indexed"):
        ds[[1, 2, 3]]


def _until(condition, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_the_processes_of_a_machine_take_turns_checking_the_version(remote, monkeypatch):
    """Two opens of one cached object (as two DataLoader workers) send one version check per interval
    between them, not one each; once one finds the object replaced, the others check at their next read
    instead of waiting for their turn."""
    monkeypatch.setenv("SJSONL_REMOTE_CHECK_SECONDS", "0.5")
    url = remote.put(body())
    a, b, c = (JSONLDataset(url, storage_options=remote.options) for _ in range(3))
    sa, sb = a._files[0].storage, b._files[0].storage
    assert sa._store().sealed()
    time.sleep(0.6)  # (the opens' own turns are over)
    remote.reset_stats()
    sa.check_unchanged()
    sb.check_unchanged()
    assert _until(lambda: remote.stats()["requests"] >= 1)
    time.sleep(0.3)  # (within the interval: b's check, had it sent one, would be here by now)
    assert remote.stats()["requests"] == 1
    remote.put(body(N + 5))  # replaced: a new ETag
    time.sleep(0.6)
    sa._checked_at = None
    sa.check_unchanged()  # a's turn: it finds the object replaced
    assert _until(lambda: sa._version_error is not None)
    for other in (sb, c._files[0].storage):  # within a's turn, each checks for itself
        remote.reset_stats()
        other._checked_at = None
        other.check_unchanged()
        assert _until(lambda o=other: o._version_error is not None)
        assert remote.stats()["requests"] == 1
    for ds in (a, b, c):
        with pytest.raises(StaleDataError, match="changed after it was indexed"):
            ds[[1, 2, 3]]


def test_a_workers_batches_are_read_ahead_in_the_samplers_order(remote, monkeypatch):
    """Without the chunk cache, each DataLoader worker reads the batches the sampler will deal it as one
    stream of windows fetched ahead: every record in the sampler's order, in fewer GETs than batch by batch.
    A persistent worker in a later epoch (its copy of the sampler an epoch behind), and a loader without
    workers, read what they are asked for."""
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", "off")
    url = remote.put(body())

    def loader(ds: JSONLDataset, sampler: DistributedSampler, **options) -> Any:
        return torch.utils.data.DataLoader(ds, batch_size=25, sampler=sampler, collate_fn=collate, **options)

    def epoch(loader: Any) -> tuple[list[int], int]:
        remote.reset_stats()
        return [i for batch in loader for i in batch], remote.stats()["ranged_gets"]

    ds = JSONLDataset(url, storage_options=remote.options)
    sampler = DistributedSampler(ds, num_replicas=1, rank=0, seed=5)
    got, ahead_gets = epoch(loader(ds, sampler, num_workers=2))
    assert got == list(sampler)
    ds.batches_ahead = None  # (as before: each batch reads its own ranges)
    got, plain_gets = epoch(loader(ds, sampler, num_workers=2))
    assert got == list(sampler) and ahead_gets < plain_gets
    ds = JSONLDataset(url, storage_options=remote.options)
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, seed=5)
    persistent = loader(ds, sampler, num_workers=2, persistent_workers=True)
    for e in (0, 1):
        sampler.set_epoch(e)
        assert epoch(persistent)[0] == list(sampler)
    assert epoch(loader(ds, sampler, num_workers=0))[0] == list(sampler)


def test_the_filler_seals_the_store_it_completes(remote, monkeypatch, tmp_path):
    """A cache filled by the background filler (not by the scan) is sealed when its last chunk arrives, and
    a new reader of it maps it."""

    url = remote.put(body(80_000))  # ~5 MB: 5 chunks
    index_dir = str(tmp_path / "index")
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", "off")
    JSONLDataset(url, storage_options=remote.options, index_dir=index_dir)
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", str(tmp_path / "chunks"))
    ds = JSONLDataset(url, storage_options=remote.options, index_dir=index_dir)
    storage = ds._files[0].storage
    store = storage._store()
    assert storage.buffer is None and not store.sealed()
    filler = storage._filler(store)
    missing = store.missing(range(store.count))  # (the open's head and tail hash brought the first and last)
    remote.reset_stats()
    filler.want(list(range(store.count)))
    assert filler.wait(60) and store.sealed()
    assert len(missing) >= 3 and remote.stats()["ranged_gets"] < len(missing)  # adjacent chunks: one request
    again = JSONLDataset(url, storage_options=remote.options, index_dir=index_dir)
    assert again._files[0].storage.buffer is not None
    remote.reset_stats()
    assert [r["i"] for r in again[[79_999, 0, 40_000]]] == [79_999, 0, 40_000]
    assert remote.stats()["ranged_gets"] == 0


def test_a_complete_store_found_unsealed_is_sealed_in_the_background_then_mapped(remote, monkeypatch):
    """A store whose chunks all arrived but that nobody sealed (its filler was killed first, say): the
    first look for a map finds none and asks the filler's thread to seal it; a later look maps it."""
    monkeypatch.setattr("sjsonl.storage.remote.MAP_RECHECK_SECONDS", 0.0)
    url = remote.put(body())
    ds = JSONLDataset(url, storage_options=remote.options)  # the scan fills the cache and seals it
    storage = ds._files[0].storage
    store = storage._store()
    where = store.count * 8
    os.pwrite(store._table, b"\0" * 32, where)  # the seal wiped: complete, unsealed
    fresh = JSONLDataset(url, storage_options=remote.options)._files[0].storage
    assert fresh._store().complete() and not fresh._store().sealed()
    assert fresh.buffer is None  # not yet: the filler's thread was asked to seal it
    assert fresh._filler(fresh._store()).wait(60) and fresh._store().sealed()
    assert fresh.buffer is not None and fresh.buffer()[0:20] == body()[0:20]
