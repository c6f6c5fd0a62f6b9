"""Iterating an order over an S3 object (moto behind the fault-injecting proxy of tests/_s3_proxy.py): it is
read in windows, the next ones fetched while one is decoded (sjsonl.storage.ahead, sjsonl.data.readahead) —
the first record waits for one small window, the reads ahead stop where the bound says, every record comes
exactly once and in the order under faults, through torch's DataLoader too, and a replaced object raises
StaleDataError, never a record of the new one."""

from __future__ import annotations

import itertools
import json
import threading
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("aiohttp")

import numpy as np  # noqa: E402

from sjsonl import JSONLDataset  # noqa: E402
from sjsonl.data import dataset as dataset_module  # noqa: E402
from sjsonl.data import readahead  # noqa: E402
from sjsonl.data.readahead import FIRST_WINDOW, LAST_WINDOW, windows_of  # noqa: E402
from sjsonl.errors import InvalidArgumentError, StaleDataError  # noqa: E402
from sjsonl.storage.ahead import WINDOWS, windows_under_way  # noqa: E402
from sjsonl.storage.fetch import fetcher_for  # noqa: E402
from sjsonl.storage.remote import RemoteFile  # noqa: E402
from sjsonl.torch import IterableDataset  # noqa: E402

from ._s3_proxy import s3_proxy, serving_bucket  # noqa: E402, F401

N = 2000


def window_bounds(n: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` of the windows an order of ``n`` records is read in, in one block."""
    ends = np.cumsum([0] + [len(w) for w in windows_of([np.arange(n)])]).tolist()
    return list(itertools.pairwise(ends))


def body(n: int = N, tag: str = "") -> bytes:
    return b"".join(json.dumps({"i": i, "t": tag + "x" * (i % 89)}).encode() + b"\n" for i in range(n))


@pytest.fixture
def remote(s3, s3_proxy, monkeypatch, tmp_path):  # noqa: F811
    """``put(data)`` → an s3:// URL served through the proxy; no chunk cache and no merging of nearby
    records (each record its own range, as records far apart in a large object are)."""
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", "off")
    monkeypatch.setattr(RemoteFile, "REMOTE_GAP", -1)
    yield from serving_bucket(s3, s3_proxy)


def settled_gets(remote, url: str, hedged: int) -> int:
    """The ranged GETs once no more arrive for 0.2 s (up to 30 s: a wait, not a timing assertion), less the
    copies the process's fetcher sent again (hedges, counted from ``hedged``)."""
    seen, deadline = -1, time.monotonic() + 30
    while time.monotonic() < deadline:
        now = remote.stats()["ranged_gets"] - (fetcher_for(url).hedged - hedged)
        if now == seen:
            return now
        seen = now
        time.sleep(0.2)
    return seen


def no_reads_ahead() -> None:
    """Wait (up to 30 s) for the reads of earlier iterations to end: a window under way when its iteration
    stopped still finishes its requests."""
    deadline = time.monotonic() + 30
    while windows_under_way() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert windows_under_way() == 0


def test_the_first_record_waits_for_one_window_and_the_reads_ahead_are_bounded(remote, tmp_path):
    url = remote.put(body())
    ds = JSONLDataset(url, storage_options=remote.options, index_dir=str(tmp_path / "index"))
    remote.reset_stats()
    hedged = fetcher_for(url).hedged
    it = iter(ds.shuffle(seed=4))
    first = next(it)
    windows = list(window_bounds(N))
    ahead = windows[WINDOWS][1]  # the first window and the WINDOWS after it
    gets = settled_gets(remote, url, hedged)
    assert FIRST_WINDOW < gets <= ahead < N  # read ahead of the first window, and no further
    rest = list(it)
    assert [r["i"] for r in [first, *rest]] == [r["i"] for r in ds.shuffle(seed=4)]
    assert remote.stats()["ranged_gets"] >= N  # (one range a record: nothing merged here)
    assert (
        windows[1][1] - windows[1][0] == 2 * FIRST_WINDOW and windows[-2][1] - windows[-2][0] == LAST_WINDOW
    )


@pytest.mark.slow  # (~20 s: retries back off)
@pytest.mark.parametrize("seed", [0, 11])
def test_an_iterated_shuffle_under_faults_is_exact_and_in_order(remote, tmp_path, seed):
    data = body()
    url = remote.put(data)
    local = tmp_path / "local.jsonl"
    local.write_bytes(data)
    ds = JSONLDataset(url, storage_options=remote.options, index_dir=str(tmp_path / "index"))
    remote.set_faults(latency=0.002, error_rate=0.15, reset_rate=0.02, stall_rate=0.002, stall_seconds=1.0)
    remote.reset_stats()
    got = [r["i"] for r in ds.shuffle(seed=seed)]
    assert got == [r["i"] for r in JSONLDataset(str(local)).shuffle(seed=seed)]
    assert sorted(got) == list(range(N))
    assert remote.stats()["errors_injected"] > 0


@pytest.mark.slow  # (~10 s)
def test_an_iterable_dataset_through_a_dataloader_is_the_local_copys(remote, tmp_path):
    """Two workers, each reading its share of the exact shuffle ahead, under 503s: the batches of the local
    copy, in the same order."""
    data = body()
    url = remote.put(data)
    local = tmp_path / "local.jsonl"
    local.write_bytes(data)
    ds = JSONLDataset(url, storage_options=remote.options, index_dir=str(tmp_path / "index"))
    remote.set_faults(latency=0.001, error_rate=0.1)

    def batches(dataset):
        loader = torch.utils.data.DataLoader(
            IterableDataset(dataset, seed=9),
            batch_size=64,
            num_workers=2,
            collate_fn=lambda b: [r["i"] for r in b],
        )
        return list(loader)

    assert batches(ds) == batches(JSONLDataset(str(local)))


def test_an_object_replaced_while_windows_are_read_ahead_raises_stale(remote, tmp_path):
    """Windows already fetched hold the indexed version's bytes (reads are pinned to its ETag); once a read
    meets the new object, StaleDataError — no record of the new one ever comes out."""
    url = remote.put(body())
    ds = JSONLDataset(url, storage_options=remote.options, index_dir=str(tmp_path / "index"))
    it = iter(ds.shuffle(seed=2))
    got = [next(it)]
    remote.put(body(tag="new!"))  # same key, other bytes and ETag
    with pytest.raises(StaleDataError):
        for record in it:
            got.append(record)
    assert len(got) < N and all("new!" not in r["t"] for r in got)
    no_reads_ahead()  # (the windows under way end in the new object's 412s)


def test_closing_the_iteration_stops_the_reads_ahead(remote, tmp_path):
    url = remote.put(body())
    ds = JSONLDataset(url, storage_options=remote.options, index_dir=str(tmp_path / "index"))
    remote.set_faults(latency=0.01)
    no_reads_ahead()
    remote.reset_stats()
    hedged = fetcher_for(url).hedged
    it = iter(ds.shuffle(seed=6))
    next(it)
    it.close()
    gets = settled_gets(remote, url, hedged)
    assert gets <= list(window_bounds(N))[WINDOWS][1]
    no_reads_ahead()  # its threads ended


def test_with_a_filling_cache_windows_stay_a_batch_and_nothing_is_fetched_ahead(
    remote, tmp_path, monkeypatch
):
    """A fresh chunk cache fills behind the reads: the windows stay FIRST_WINDOW records and are read when
    wanted (reads ahead by ranges would crowd out the filler's chunk requests) — the order still exact."""
    data = body()
    url = remote.put(data)
    local = tmp_path / "local.jsonl"
    local.write_bytes(data)
    index_dir = str(tmp_path / "index")
    JSONLDataset(url, storage_options=remote.options, index_dir=index_dir)  # (the cache off: it stays empty)
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", str(tmp_path / "chunks"))
    ds = JSONLDataset(url, storage_options=remote.options, index_dir=index_dir)
    storage = ds._files[0].storage
    assert storage.reads_in_windows and not storage.fetches_ahead
    asked: list[tuple[int, threading.Thread]] = []
    read_many = storage.read_many
    monkeypatch.setattr(
        storage,
        "read_many",
        lambda ranges: asked.append((len(ranges), threading.current_thread())) or read_many(ranges),
    )
    got = [r["i"] for r in ds.shuffle(seed=8)]
    assert got == [r["i"] for r in JSONLDataset(str(local)).shuffle(seed=8)]
    assert len(asked) == -(-N // FIRST_WINDOW) and max(n for n, _ in asked) <= FIRST_WINDOW
    assert {t for _, t in asked} == {threading.current_thread()}  # each window read when wanted, here


@pytest.mark.parametrize("seed", [0, 5])
def test_windows_of_blocks_run_on_across_them(seed):
    """However an order is cut into blocks, its windows are those of the whole order, in the same order."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(3000)
    cuts = np.sort(rng.choice(np.arange(1, 3000), size=int(rng.integers(1, 40)), replace=False))
    blocks = [b for block in np.split(order, cuts) for b in (block, order[:0])]  # empty blocks between
    pulled = []
    windows = list(windows_of(pulled.append(len(b)) or b for b in blocks))
    assert len(pulled) == len(blocks)
    pulled.clear()
    first = next(windows_of(pulled.append(len(b)) or b for b in blocks))  # a window takes only what it needs
    assert len(first) == FIRST_WINDOW and sum(pulled) - pulled[-1] < FIRST_WINDOW <= sum(pulled)
    assert [(len(w)) for w in windows] == [hi - lo for lo, hi in window_bounds(len(order))]
    assert np.concatenate(windows).tolist() == order.tolist()


@pytest.mark.parametrize("through", ["view", "iterable"])
def test_an_order_iterated_in_blocks_is_read_in_windows_that_run_on(remote, tmp_path, monkeypatch, through):
    """View iteration and IterableDataset hand their order over in blocks (small ones here): the windows
    do not start small again at each block — they are the whole order's — and the records are the local
    copy's, in order."""
    data = body()
    url = remote.put(data)
    local = tmp_path / "local.jsonl"
    local.write_bytes(data)
    monkeypatch.setattr(dataset_module, "_BLOCK", 100)
    sizes: list[int] = []
    runs = readahead.coalesced_runs
    monkeypatch.setattr(readahead, "coalesced_runs", lambda s, *a: sizes.append(len(s)) or runs(s, *a))

    def records(ds):
        if through == "view":
            return [r["i"] for r in ds.shuffle(seed=8)]
        return [r["i"] for r in IterableDataset(ds, seed=8, num_replicas=1, rank=0, block_size=100)]

    got = records(JSONLDataset(url, storage_options=remote.options, index_dir=str(tmp_path / "index")))
    assert got == records(JSONLDataset(str(local)))
    assert sizes == [hi - lo for lo, hi in window_bounds(N)]


def test_sjsonl_remote_gap_0_fetches_only_the_records_bytes(remote, tmp_path, monkeypatch):
    """Where bytes are billed: with SJSONL_REMOTE_GAP=0 the windows' neighbours no longer share a request
    through the gaps between them — an exact shuffle fetches the object's bytes once, not several times."""
    data = body()
    url = remote.put(data)
    ds = JSONLDataset(url, storage_options=remote.options, index_dir=str(tmp_path / "index"))
    expected = [r["i"] for r in ds.shuffle(seed=3)]
    fetched = {}
    for gap in ("0", str(256 << 10)):  # (256 KiB: the default, which this module's fixture turns off)
        monkeypatch.setenv("SJSONL_REMOTE_GAP", gap)
        no_reads_ahead()
        remote.reset_stats()
        assert [r["i"] for r in ds.shuffle(seed=3)] == expected
        no_reads_ahead()
        fetched[gap] = remote.stats()["bytes_served"]
    assert fetched["0"] <= len(data) * 1.5  # (and the copies hedged of slow requests)
    assert fetched[str(256 << 10)] > 2 * len(data)  # the default reads through gaps


def test_a_bad_sjsonl_remote_gap_is_refused(remote, tmp_path, monkeypatch):
    url = remote.put(body(100))
    ds = JSONLDataset(url, storage_options=remote.options, index_dir=str(tmp_path / "index"))
    monkeypatch.setenv("SJSONL_REMOTE_GAP", "256k")
    with pytest.raises(InvalidArgumentError, match="SJSONL_REMOTE_GAP"):
        list(ds.shuffle(seed=0))


def test_a_cache_sealed_during_the_pass_has_the_rest_read_mapped(remote, tmp_path, monkeypatch):
    """Once the chunk cache seals (the object whole on disk, mapped), the blocks after it are read through
    the map — the local file's path — not in windows; the records are still the local copy's, in order."""
    data = body()
    url = remote.put(data)
    local = tmp_path / "local.jsonl"
    local.write_bytes(data)
    ds = JSONLDataset(url, storage_options=remote.options, index_dir=str(tmp_path / "index"))
    monkeypatch.setattr(dataset_module, "_BLOCK", 500)
    asked = []
    # sealed from the fourth look on (one as the pass starts, one a block before it is read in windows):
    # the bytes as a map
    monkeypatch.setattr(RemoteFile, "buffer", property(lambda self: asked.append(1) or (
        (lambda: data) if len(asked) > 3 else None)))  # fmt: skip
    sizes: list[int] = []
    runs = readahead.coalesced_runs
    monkeypatch.setattr(readahead, "coalesced_runs", lambda s, *a: sizes.append(len(s)) or runs(s, *a))
    assert [r["i"] for r in ds.shuffle(seed=1)] == [r["i"] for r in JSONLDataset(str(local)).shuffle(seed=1)]
    assert sum(sizes) == 2 * 500  # the first two blocks in windows, the rest mapped
