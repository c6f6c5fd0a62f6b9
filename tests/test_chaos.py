"""Chaos: a writer keeps appending to, rewriting, replacing and truncating a file while readers in this
process, a forked worker and a spawned worker read it for a bounded time. Zero wrong records; the only
failures allowed are sjsonl's own errors (stale data, a half-written line, a cut gzip file)."""

from __future__ import annotations

import multiprocessing as mp
import random
import time
from typing import Any

import pytest

from sjsonl import JSONLDataset

from . import _chaos

# Readers must see the writer's versions go by: a liveness check that needs the CPU to itself
pytestmark = [pytest.mark.slow, pytest.mark.alone]

SECONDS = 4.0


def _run_readers(open_ds, child, child_args, first, enough, seconds=SECONDS):
    """This process, a fork child (inherits ``first``) and a spawn child (gets ``first`` pickled); each
    reads for ``seconds``, and on until it has read and seen ``enough`` = (records, versions): a slow start
    is no failure."""
    results, procs = [], []
    for seed, method in enumerate(("fork", "spawn"), 2):
        ctx = mp.get_context(method)
        queue = ctx.Queue()
        proc = ctx.Process(target=child, args=(*child_args, seconds, enough, seed, first, queue))
        proc.start()
        procs.append((method, proc, queue))
    results.append(("parent", _chaos.read_and_check(open_ds, seconds, 1, first, enough)))
    for method, proc, queue in procs:
        results.append((method, queue.get(timeout=seconds + _chaos.GRACE_SECONDS + 60)))
        proc.join(timeout=60)
        assert proc.exitcode == 0, f"{method} reader died with exit code {proc.exitcode}"
    return results


ENOUGH_LOCAL, ENOUGH_S3 = (200, 3), (20, 2)  # (records read, versions seen) for a run to mean anything


def _check(results, enough=ENOUGH_LOCAL):
    min_reads, min_versions = enough
    for who, res in results:
        stats = res["stats"]
        assert res["wrong_count"] == 0, f"{who}: wrong records {res['wrong']}"
        assert not [k for k in stats if k.startswith("unexpected")], f"{who}: {stats}"
        assert stats.get("reads", 0) >= min_reads, f"{who} read too little to mean anything: {stats}"
        # the readers followed the writer through several versions: the test tested something
        assert res["versions"] >= min_versions, f"{who} saw {res['versions']} version(s): {stats}"


@pytest.mark.parametrize(
    ("compress", "mmap", "ops"),
    [
        (False, False, _chaos.FileWriter.OPS),  # safe mode: every change, in place or not
        (True, False, _chaos.FileWriter.OPS),  # gzip (always read through pread)
        (False, True, ("append", "replace")),  # default mode: what a memory map can pin
    ],
    ids=["plain-safe", "gzip", "plain-mmap"],
)
def test_no_wrong_records_while_a_writer_changes_the_file(tmp_path, compress, mmap, ops):
    path = str(tmp_path / ("d.jsonl.gz" if compress else "d.jsonl"))
    index_dir = str(tmp_path / "idx")
    _chaos.FileWriter(path, compress, ops).start()
    first = JSONLDataset(path, index_dir=index_dir, mmap=mmap)
    ctx = mp.get_context("spawn")
    done = ctx.Event()
    longest = SECONDS + _chaos.GRACE_SECONDS + 60  # as long as _run_readers waits for a reader
    writer = ctx.Process(target=_chaos.run_file_writer, args=(path, compress, ops, longest, 7, done))
    writer.start()
    try:
        open_ds = _chaos.open_local(path, index_dir, mmap)
        results = _run_readers(open_ds, _chaos.child_reader, (path, index_dir, mmap), first, ENOUGH_LOCAL)
    finally:
        done.set()
        writer.join(timeout=60)
    _check(results)
    if "rewrite" in ops:  # in-place changes are refused, not read
        assert any(r["stats"].get("StaleDataError") for _, r in results), results


def _s3_writer(name: str, options: dict, seconds: float, done: Any) -> None:
    """Puts a new version of the object every few hundred ms (its own process: the test process also
    runs the S3 server, and a writer thread there would starve it) until the readers are ``done`` — a
    reader spawned on a loaded machine can start after any fixed time — or ``seconds`` at the most."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=options["endpoint_url"],
        aws_access_key_id="x",
        aws_secret_access_key="x",
        region_name="us-east-1",
    )
    rng = random.Random(3)
    stop = time.monotonic() + seconds
    version = 10
    while time.monotonic() < stop and not done.is_set():
        time.sleep(rng.uniform(0.4, 0.9))  # S3 requests are slow: readers need time between versions
        version += 1
        body = _chaos.records(version, 0, rng.randint(300, 900), rng.randint(0, 40))
        client.put_object(Bucket=name, Key="chaos.jsonl", Body=body)


def test_no_wrong_records_from_an_s3_object_being_replaced(bucket, monkeypatch):
    # every read checks the version first (the strictest setting; with the default, a background check
    # at most every second: tests/test_pinning.py), so the readers meet the replacements as errors too
    monkeypatch.setenv("SJSONL_REMOTE_CHECK_SECONDS", "0")
    url = bucket.put("chaos.jsonl", _chaos.records(1, 0, 500, 5))
    first = JSONLDataset(url, storage_options=bucket.options)
    ctx = mp.get_context("spawn")
    done = ctx.Event()
    longest = SECONDS + _chaos.GRACE_SECONDS + 60  # as long as _run_readers waits for a reader
    writer = ctx.Process(target=_s3_writer, args=(bucket.name, bucket.options, longest, done))
    writer.start()
    try:
        open_ds = lambda: JSONLDataset(url, storage_options=bucket.options)  # noqa: E731
        results = _run_readers(open_ds, _chaos.child_s3_reader, (url, bucket.options), first, ENOUGH_S3)
    finally:
        done.set()
        writer.join(timeout=60)
    _check(results, ENOUGH_S3)
    assert any(k == "StaleDataError" for _, r in results for k in r["stats"])
