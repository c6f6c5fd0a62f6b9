"""The local chunk cache of remote objects (sjsonl.storage.chunk_store), on its own: chunks written and read
back at the object's offsets, a torn or corrupt chunk fetched again (never served), the byte limit kept by
removing the least recently used objects, an object over the limit not cached at all, a directory that is not
the user's own and private refused, and two processes filling one store at once."""

from __future__ import annotations

import multiprocessing as mp
import os
import struct
import zlib

import pytest

from sjsonl.storage.chunk_store import ChunkStore, cache_settings

BODY = bytes(range(256)) * 40  # 10,240 bytes: 10 chunks of 1,024, the last short


VERSION = ("s3://b/k", len(BODY), "e1")


def store(directory, version=VERSION, **kw) -> ChunkStore:
    made = ChunkStore.open(str(directory), version, len(BODY), chunk_bytes=1024, **kw)
    assert made is not None
    return made


def fill(s: ChunkStore, chunks) -> None:
    for c in chunks:
        lo, hi = s.span(c)
        s.put(c, BODY[lo:hi])


def test_chunks_are_kept_at_the_objects_offsets_and_reused_by_another_open(tmp_path):
    s = store(tmp_path)
    assert s.count == 10 and s.span(9) == (9216, 10240)
    assert s.chunks_of([(1000, 1030), (5000, 5001), (3, 3)]) == [0, 1, 4]
    assert s.missing(range(10)) == list(range(10))
    fill(s, [0, 1, 4])
    assert s.read(1000, 1030) == BODY[1000:1030] and s.missing(range(10)) == [2, 3, 5, 6, 7, 8, 9]
    again = store(tmp_path)  # a new process's view of the same version
    assert again.missing(range(10)) == [2, 3, 5, 6, 7, 8, 9] and again.read(4096, 5120) == BODY[4096:5120]
    other = store(tmp_path, ("s3://b/k", len(BODY), "e2"))  # another version: another store
    assert other.missing(range(10)) == list(range(10))
    with pytest.raises(ValueError, match="chunk 9 is 1024 bytes, got 3"):
        s.put(9, b"abc")
    data = next(p for p in tmp_path.iterdir() if p.suffix == ".data")
    assert data.stat().st_size == len(BODY) and oct(data.stat().st_mode & 0o777) == "0o600"


def test_a_corrupt_or_torn_chunk_is_fetched_again(tmp_path):
    fill(store(tmp_path), range(10))
    data = next(p for p in tmp_path.iterdir() if p.suffix == ".data")
    table = next(p for p in tmp_path.iterdir() if p.suffix == ".chunks")
    with open(data, "r+b") as f:  # a bit flipped in chunk 3
        f.seek(3 * 1024 + 7)
        f.write(bytes([BODY[3 * 1024 + 7] ^ 1]))
    with open(table, "r+b") as f:  # chunk 6 marked present with bytes that never arrived (a torn write)
        f.seek(6 * 8)
        f.write(struct.pack("<IB3x", zlib.crc32(b"x" * 1024), 1))
    assert store(tmp_path).missing(range(10)) == [3, 6]


def test_the_limit_removes_the_least_recently_used_objects_and_refuses_what_cannot_fit(tmp_path):
    a = store(tmp_path, ("a", len(BODY), "1"))
    fill(a, range(10))
    os.utime(next(p for p in tmp_path.glob("*.chunks")), (1, 1))  # used long ago
    allocated = next(tmp_path.glob("*.data")).stat().st_blocks * 512  # (what the limit counts)
    limit = allocated + len(BODY)
    b = store(tmp_path, ("b", len(BODY), "1"), limit=limit)
    fill(b, range(10))
    assert len(list(tmp_path.glob("*.data"))) == 2  # both fit
    store(tmp_path, ("c", len(BODY), "1"), limit=limit)  # room made: "a" goes first
    names = {p.stem for p in tmp_path.glob("*.chunks")}
    assert len(names) == 2 and a.name not in names and b.name in names
    assert ChunkStore.open(str(tmp_path), ("d", 1, "1"), len(BODY), chunk_bytes=1024, limit=100) is None


def test_a_place_that_is_not_private_is_not_used(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert ChunkStore.open(str(shared), ("x",), 10) is None


def test_settings_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", "off")
    assert cache_settings() is None
    monkeypatch.setenv("SJSONL_REMOTE_CACHE", str(tmp_path))
    monkeypatch.setenv("SJSONL_REMOTE_CACHE_BYTES", "12345")
    assert cache_settings() == (str(tmp_path), 12345)
    monkeypatch.delenv("SJSONL_REMOTE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_settings() == (str(tmp_path / "xdg" / "sjsonl" / "remote"), 12345)


def _filler(directory: str, chunks: list[int]) -> None:
    fill(store(directory), chunks)


def test_two_processes_fill_one_store_at_once(tmp_path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_filler, args=(str(tmp_path), list(range(k, 10)))) for k in (0, 3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    s = store(tmp_path)
    assert s.missing(range(10)) == [] and s.read(0, len(BODY)) == BODY


def test_a_seal_vouches_for_every_chunk_until_a_write_or_another_boot(tmp_path, monkeypatch):
    from sjsonl.storage import chunk_store

    s = store(tmp_path)
    fill(s, range(9))
    assert not s.complete() and not s.seal() and not s.sealed()  # a chunk missing
    fill(s, [9])
    assert s.complete() and s.seal() and s.sealed() and store(tmp_path).sealed()  # another process sees it
    data = next(p for p in tmp_path.iterdir() if p.suffix == ".data")
    with open(data, "r+b") as f:  # a write behind the store's back (its mtime moves)
        f.seek(5000)
        f.write(b"!")
    os.utime(data, ns=(1, 1))
    assert not store(tmp_path).sealed() and not store(tmp_path).seal()  # chunk 4 fails its CRC now
    fill(s, [4])  # fetched again: the store can be sealed again
    assert store(tmp_path).seal() and store(tmp_path).sealed()
    monkeypatch.setattr(chunk_store, "_boot", [b"\0" * 16])  # after a reboot, nothing is vouched for
    assert not store(tmp_path).sealed()


def test_a_seal_checks_every_chunk_written_by_others(tmp_path):
    fill(store(tmp_path), range(10))
    data = next(p for p in tmp_path.iterdir() if p.suffix == ".data")
    with open(data, "r+b") as f:  # a bit flipped in chunk 3 (the flag still says present)
        f.seek(3 * 1024 + 7)
        f.write(bytes([BODY[3 * 1024 + 7] ^ 1]))
    fresh = store(tmp_path)  # checks nothing yet
    assert fresh.complete() and not fresh.seal() and not fresh.sealed()
    fill(fresh, [3])
    assert fresh.seal() and fresh.read(0, len(BODY)) == BODY


def test_the_filler_starts_small_and_takes_more_chunks_a_fetch(tmp_path):
    """A slow start: the first fetches share the window with the first batches' own reads, so the filler
    takes BATCH chunks at first and twice as many at each fetch, up to BATCH_MOST — every chunk once."""
    from sjsonl.storage.chunk_fill import BATCH, BATCH_MOST, ChunkFiller

    body = bytes(range(256)) * 4
    store = ChunkStore.open(str(tmp_path), ("mem://slow", len(body), "e"), len(body), chunk_bytes=8)
    assert store is not None
    sizes: list[int] = []

    def fill(s, chunks):
        sizes.append(len(chunks))
        for c in s.missing(chunks):
            lo, hi = s.span(c)
            s.put(c, body[lo:hi])

    filler = ChunkFiller(store, fill)
    with filler._cond:  # queued all at once, before the thread takes any
        filler._queue.extend(range(store.count))
        filler._queued.update(range(store.count))
    filler.want([])
    assert filler.wait(10)
    want, left, take = [], store.count, BATCH
    while left:
        want.append(min(take, left))
        left, take = left - want[-1], min(BATCH_MOST, take * 2)
    assert sizes == want and want[:3] == [BATCH, 2 * BATCH, 4 * BATCH] and max(want) == BATCH_MOST
    assert store.missing(range(store.count)) == []


def test_the_version_check_is_taken_in_turns(tmp_path):
    """One check per interval for every process of the machine (two opens of one store stand for two
    DataLoader workers); a time in the future (a clock set back) does not hold the turn."""
    first, second = store(tmp_path), store(tmp_path)
    assert first.claim_check(60.0) == 0.0  # this one checks now
    age = second.claim_check(60.0)
    assert 0.0 < age < 60.0  # the other learns that it was taken, and how long ago
    assert first.claim_check(0.0) == 0.0  # once the interval is over, the next to ask takes it
    with open(tmp_path / f"{first.name}.checked", "wb") as f:
        f.write(struct.pack("<d", 4e9))  # a check recorded in 2096
    assert second.claim_check(60.0) == 0.0
    other = store(tmp_path, ("s3://b/k", len(BODY), "e2"))  # another version keeps its own turns
    assert other.claim_check(60.0) == 0.0
