"""Checks shared by the storage tests (gzip, zstd, remote): every access path against the source lines."""

from __future__ import annotations

import json
import multiprocessing as mp
import pickle

import numpy as np

from sjsonl import JSONLDataset


def source_records(raw: bytes) -> list:
    return [json.loads(line) for line in raw.split(b"\n") if line.strip(b" \t\r")]


def check_every_access_path(ds: JSONLDataset, raw: bytes, singles: int = 300) -> None:
    """Iteration, ds[i] in random order (``singles`` of them; all of them as one batch), negative indices,
    slices, index lists, raw bytes, a shuffled view."""
    expected = source_records(raw)
    lines = [line.rstrip(b"\r") for line in raw.split(b"\n") if line.strip(b" \t\r")]
    n = len(expected)
    assert len(ds) == n
    assert list(ds) == expected
    order = np.random.default_rng(0).permutation(n).tolist()
    some = order[:singles]  # one read each: ~2 ms apiece for gzip, a request apiece for S3
    assert [ds[i] for i in some] == [expected[i] for i in some]
    assert ds[order] == [expected[i] for i in order]  # all of them, as one coalesced batch
    assert ds[-1] == expected[-1] and ds[0] == expected[0]
    assert ds[n // 3 : n // 3 + 50] == expected[n // 3 : n // 3 + 50]
    picks = order[:200] + order[:5]  # repeats too
    assert ds[picks] == [expected[i] for i in picks]
    assert [ds.raw(i) for i in order[:100]] == [lines[i] for i in order[:100]]
    shuffled = ds.shuffle(seed=3)
    got = list(shuffled)
    assert sorted(map(json.dumps, got)) == sorted(map(json.dumps, expected))


# A dataset handed to forked children by inheritance, not pickling: the children use the very objects
# (handles included) the parent opened and read through before forking.
_INHERITED: JSONLDataset | None = None


def _read_inherited(seed: int, reads: int, batched: int, expected_ids: list, queue) -> None:
    ds = _INHERITED
    assert ds is not None
    rng = np.random.default_rng(seed)
    wrong = 0
    for i in rng.integers(0, len(ds), size=reads).tolist():
        wrong += ds[i]["id"] != expected_ids[i]
    for _ in range(0, batched, 100):
        idx = rng.integers(0, len(ds), size=100)
        wrong += sum(r["id"] != expected_ids[i] for r, i in zip(ds[idx], idx.tolist()))
    queue.put(wrong)


def _read_pickled(args) -> int:
    blob, seed, reads, expected_ids = args
    ds = pickle.loads(blob)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(ds), size=reads)
    wrong = sum(ds[i]["id"] != expected_ids[i] for i in idx[: reads // 2].tolist())
    batch = ds[idx[reads // 2 :]]  # the coalesced batch path
    return wrong + sum(r["id"] != expected_ids[i] for r, i in zip(batch, idx[reads // 2 :].tolist()))


def check_fork_safety(
    ds: JSONLDataset,
    expected_ids: list,
    *,
    processes: int = 4,
    reads: int = 2000,
    batched: int = 0,
    pickled_reads: int = 500,
) -> None:
    """``processes`` forked children make ``reads`` random ``ds[i]`` reads and ``batched`` more in random
    batches of 100 from the inherited dataset while the parent reads too; then pickled copies in a fork
    pool make ``pickled_reads`` each (half one by one, half as a batch). Not one wrong record anywhere."""
    global _INHERITED
    assert ds[len(ds) - 1]["id"] == expected_ids[-1]  # handles opened and used before forking
    _INHERITED = ds
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    children = [
        ctx.Process(target=_read_inherited, args=(seed, reads, batched, expected_ids, queue))
        for seed in range(processes)
    ]
    for child in children:
        child.start()
    try:
        parent_wrong = sum(ds[i]["id"] != expected_ids[i] for i in range(0, len(ds), max(1, len(ds) // 100)))
        results = [queue.get(timeout=120) for _ in children]
    finally:
        for child in children:
            child.join(timeout=30)
        _INHERITED = None
    assert results == [0] * processes and parent_wrong == 0
    assert all(child.exitcode == 0 for child in children)
    blob = pickle.dumps(ds)
    with ctx.Pool(processes) as pool:
        jobs = [(blob, 100 + s, pickled_reads, expected_ids) for s in range(processes)]
        wrong = pool.map(_read_pickled, jobs)
    assert wrong == [0] * processes
