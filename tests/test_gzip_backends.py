"""The gzip index build by rapidgzip and by indexed_gzip: the same offsets, records, errors and seek points.

Reads are always indexed_gzip's; a rapidgzip build hands it rapidgzip's seek points (indexed_gzip's own
export format), so those points must read exactly the bytes the file holds.
"""

from __future__ import annotations

import gzip
import io
import itertools
import os
import pickle
import subprocess
import sys

import indexed_gzip
import numpy as np
import pytest

from sjsonl import DataFileError, JSONLDataset, JSONLIndexer, StaleDataError
from sjsonl.errors import MissingDependencyError
from sjsonl.sample import write_corpus
from sjsonl.storage import LocalFile, compressed, gzip_build
from sjsonl.storage.compressed import GzipFile

from ._storage_checks import check_every_access_path, check_fork_safety, source_records

BACKENDS = ("rapidgzip", "indexed_gzip")


def _members(raw: bytes, cuts: list[int]) -> bytes:
    """``raw`` gzipped as one member per piece between ``cuts`` (mid-line too), as ``cat a.gz b.gz`` makes."""
    bounds = [0, *cuts, len(raw)]
    return b"".join(gzip.compress(raw[a:b], compresslevel=1, mtime=0) for a, b in itertools.pairwise(bounds))


@pytest.fixture
def corpus(tmp_path):
    """~3.5 MB of short records in 4 gzip members (cut mid-line): several seek points per member."""
    plain = tmp_path / "data.jsonl"
    write_corpus(plain, 20_000, kind="short", seed=11)
    raw = plain.read_bytes()
    gz = tmp_path / "data.jsonl.gz"
    gz.write_bytes(_members(raw, [len(raw) // 4 + 17, len(raw) // 2, 3 * len(raw) // 4 - 5]))
    return gz, raw


def _dataset(gz, backend: str, tmp_path, monkeypatch, **kw) -> JSONLDataset:
    monkeypatch.setenv(gzip_build.BUILD_ENV, backend)
    return JSONLDataset(gz, index_dir=tmp_path / f"index-{backend}", **kw)


def _npoints(ds: JSONLDataset) -> int:
    _lock, handle = ds._files[0].storage._handle()
    return handle.raw.npoints


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
def test_both_backends_give_identical_offsets_and_records(corpus, tmp_path, monkeypatch):
    gz, raw = corpus
    offsets = {}
    for backend in BACKENDS:
        storage = GzipFile(LocalFile(str(gz)), build_backend=backend)
        assert storage.build_backend == backend
        chunks = list(gzip_build.build_pass(storage, 1 << 20, compressed.GZIP_SPACING))
        assert b"".join(chunks) == raw and storage.size == len(raw)
        ds = _dataset(gz, backend, tmp_path, monkeypatch)
        offsets[backend] = ds._files[0].offsets.tolist()
        assert _npoints(ds) >= 3  # the build left every seek point in the reading handle
        check_every_access_path(ds, raw)
    assert offsets["rapidgzip"] == offsets["indexed_gzip"]


def test_rapidgzip_points_read_the_bytes_the_file_holds(tmp_path):
    # many members shorter than the spacing: points fall next to member boundaries, too
    plain = tmp_path / "d.jsonl"
    write_corpus(plain, 12_000, kind="short", seed=5)
    raw = plain.read_bytes()
    gz = tmp_path / "d.jsonl.gz"
    gz.write_bytes(_members(raw, list(range(300_000, len(raw), 300_001))))
    build = gzip_build.ParallelPass(LocalFile(str(gz)).open_reader(), 256 << 10)
    assert b"".join(build.chunks(1 << 20)) == raw and build.size == len(raw)
    assert build.points is not None
    with indexed_gzip.IndexedGzipFile(str(gz), drop_handles=False) as f:
        f.import_index(fileobj=io.BytesIO(build.points))
        assert f.raw.npoints >= len(raw) // (512 << 10)
        starts = np.random.default_rng(2).integers(0, len(raw), 300).tolist()
        starts += [k * (256 << 10) + d for k in range(len(raw) >> 18) for d in (-3, 0, 1)]
        for s in starts:
            s = max(0, s)
            assert f.raw.pread(5000, s) == raw[s : s + 5000], s


@pytest.mark.parametrize("backend", BACKENDS)
def test_small_and_odd_files(backend, tmp_path, monkeypatch):
    cases = {
        "empty.jsonl.gz": (b"", []),
        "empty-member.jsonl.gz": (gzip.compress(b""), []),
        "no-final-newline.jsonl.gz": (gzip.compress(b'{"a": 1}\n\n{"a": 2}'), [{"a": 1}, {"a": 2}]),
        "members.jsonl.gz": (
            gzip.compress(b'\xef\xbb\xbf{"a": 1}\r\n{"a"') + gzip.compress(b"") + gzip.compress(b": 2}\n[3]"),
            [{"a": 1}, {"a": 2}, [3]],
        ),
        # zlib reads past zero padding after the last member; rapidgzip refuses it, so indexed_gzip decides
        "padded.jsonl.gz": (gzip.compress(b'{"a": 1}\n') + b"\0" * 64, [{"a": 1}]),
    }
    for name, (blob, records) in cases.items():
        path = tmp_path / name
        path.write_bytes(blob)
        ds = _dataset(path, backend, tmp_path, monkeypatch)
        assert ds[:] == records, name
        assert (
            JSONLDataset(path, index_dir=tmp_path / f"index-{backend}", build_index_on_load=False)[:]
            == records
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_truncated_or_corrupt_gzip_is_an_error_naming_the_file(backend, corpus, tmp_path, monkeypatch):
    gz, _raw = corpus
    blob = gz.read_bytes()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(blob[: len(blob) // 3])  # a partial download
    with pytest.raises(DataFileError, match=f"{cut} looks truncated"):
        _dataset(cut, backend, tmp_path, monkeypatch)
    short = tmp_path / "short.jsonl.gz"
    short.write_bytes(blob[:-3])  # only the trailer cut
    with pytest.raises(DataFileError, match=str(short)):
        _dataset(short, backend, tmp_path, monkeypatch)
    bad = tmp_path / "bad.jsonl.gz"
    middle = len(blob) // 2
    bad.write_bytes(
        blob[:middle] + bytes(b ^ 0x5A for b in blob[middle : middle + 200]) + blob[middle + 200 :]
    )
    with pytest.raises(DataFileError, match=f"cannot decompress {bad}"):
        _dataset(bad, backend, tmp_path, monkeypatch)
    fake = tmp_path / "fake.jsonl.gz"
    fake.write_bytes(b"\x1f\x8b\x08\x00" + b"not deflate at all" * 10)
    with pytest.raises(DataFileError, match=f"cannot decompress {fake}"):
        _dataset(fake, backend, tmp_path, monkeypatch)


def test_a_file_changed_during_the_rapidgzip_pass_is_stale_data(tmp_path):
    plain = tmp_path / "big.jsonl"
    write_corpus(plain, 60_000, kind="short", seed=3)
    gz = tmp_path / "big.jsonl.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes(), compresslevel=1))
    storage = GzipFile(LocalFile(str(gz)), build_backend="rapidgzip")
    storage.pin(storage.stamp(fingerprint=False))
    chunks = gzip_build.build_pass(storage, 256 << 10, compressed.GZIP_SPACING)
    next(chunks)
    with open(gz, "r+b") as f:  # truncated in place: the pinned descriptor sees it
        f.truncate(os.path.getsize(gz) // 2)
    with pytest.raises(StaleDataError):
        list(chunks)  # the rest of the pass


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_changed_file_is_stale_after_the_build(backend, corpus, tmp_path, monkeypatch):
    gz, raw = corpus
    ds = _dataset(gz, backend, tmp_path, monkeypatch)
    assert ds[5] == source_records(raw)[5]
    blob = gz.read_bytes()
    with open(gz, "r+b") as f:  # rewritten in place, same size: the fingerprint tells it apart
        f.write(blob[: len(blob) // 2] + blob[: len(blob) - len(blob) // 2])
    with pytest.raises(StaleDataError):
        ds[len(ds) - 1]


@pytest.mark.parametrize(
    ("builder", "reader"), [("rapidgzip", "indexed_gzip"), ("indexed_gzip", "rapidgzip")]
)
def test_seek_points_saved_by_one_backend_serve_the_other(builder, reader, corpus, tmp_path, monkeypatch):
    gz, raw = corpus
    built = _dataset(gz, builder, tmp_path, monkeypatch)
    seek_file = built.index_paths[0][: -len(".npy")] + ".seekpoints"
    assert os.path.getsize(seek_file) > 0
    total = _npoints(built)
    monkeypatch.setenv(gzip_build.BUILD_ENV, reader)
    reopened = JSONLDataset(gz, index_dir=tmp_path / f"index-{builder}", build_index_on_load=False)
    assert _npoints(reopened) == total  # imported before any read
    expected = source_records(raw)
    picks = np.random.default_rng(4).permutation(len(expected))[:100].tolist()
    assert [reopened[i] for i in picks] == [expected[i] for i in picks]
    assert reopened[-1] == expected[-1]


def test_fork_and_pickle_after_a_rapidgzip_build(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(compressed, "GZIP_SPACING", 64 << 10)  # cheap reads, more state in each child
    gz, raw = corpus
    ds = _dataset(gz, "rapidgzip", tmp_path, monkeypatch)
    assert _npoints(ds) > 20
    assert b"RapidgzipFile" not in pickle.dumps(ds) and b"IndexedGzip" not in pickle.dumps(ds)
    check_fork_safety(ds, [r["id"] for r in source_records(raw)], reads=1000)


def test_choosing_the_backend(monkeypatch):
    assert gzip_build.build_backend("indexed_gzip") == "indexed_gzip"
    assert gzip_build.build_backend() == "rapidgzip"  # installed with the compress extra
    monkeypatch.setenv(gzip_build.BUILD_ENV, "indexed_gzip")
    assert gzip_build.build_backend() == "indexed_gzip"
    assert gzip_build.build_backend("rapidgzip") == "rapidgzip"  # an argument wins over the variable
    monkeypatch.setenv(gzip_build.BUILD_ENV, "pigz")
    with pytest.raises(ValueError, match="SJSONL_GZIP_BUILD"):
        gzip_build.build_backend()
    monkeypatch.delenv(gzip_build.BUILD_ENV)
    monkeypatch.setitem(sys.modules, "rapidgzip", None)  # as if not installed
    assert gzip_build.build_backend() == "indexed_gzip"
    with pytest.raises(MissingDependencyError, match=r"sjsonl\[compress\]"):
        gzip_build.build_backend("rapidgzip")


def test_indexer_with_each_backend_writes_the_same_index(corpus, tmp_path, monkeypatch):
    gz, _raw = corpus
    written = {}
    for backend in BACKENDS:
        monkeypatch.setenv(gzip_build.BUILD_ENV, backend)
        out = JSONLIndexer(gz).write_index_to_disk(tmp_path / backend / "my.index.npy")
        assert os.path.exists(tmp_path / backend / "my.index.seekpoints")
        written[backend] = np.load(out).tolist()
    assert written["rapidgzip"] == written["indexed_gzip"]


def test_a_decompressor_asking_past_the_pinned_end_gets_an_error_not_a_spin(tmp_path):
    """indexed_gzip asks again and again for bytes at the end of a stream it expects to go on. A chaos run
    (a writer truncating a .gz under readers) hung there for good: the file was pinned at 0 bytes while zran
    was mid-stream, and every ask got b"". After MAX_EMPTY_READS asks in a row the reader raises, naming
    the file, so the read fails (and is checked against the file) instead of spinning."""
    from sjsonl.storage import pinned

    path = tmp_path / "d.bin"
    path.write_bytes(b"abc")
    reader = LocalFile(str(path)).open_reader()
    assert reader.read(10) == b"abc"
    for _ in range(pinned.MAX_EMPTY_READS):
        assert reader.read(10) == b""
    with pytest.raises(OSError, match=r"d\.bin ends at byte 3"):
        reader.read(10)
    reader.seek(0)
    assert reader.read(2) == b"ab"  # a read that returns bytes starts the count again
    assert reader.read(10) == b"c"
    assert all(reader.read(10) == b"" for _ in range(pinned.MAX_EMPTY_READS))


_PINNED_AT_NOTHING = r"""
import dataclasses, gzip, random, sys
import sjsonl.storage.compressed as compressed
from sjsonl import SJSONLError
from sjsonl.storage import LocalFile
path = sys.argv[1]
compressed.GZIP_SPACING = 1 << 16
rng = random.Random(0)
data = b"".join(b'{"i": %d, "t": "%s"}\n' % (i, bytes(rng.choice(b"abcdefghij") for _ in range(40)))
                for i in range(60000))
open(path, "wb").write(gzip.compress(data))
f = compressed.GzipFile(LocalFile(path), build_backend="indexed_gzip")
# a whole pass: zran holds seek points all along the stream
assert sum(map(len, f.chunks(1 << 20))) == len(data) == f.size
stamp = f.source.stamp(fingerprint=False)
f.source.pin(dataclasses.replace(stamp, size=0, stored_size=0))  # as the chaos run had it: 0 bytes pinned
try:
    f.read(len(data) - 1000, len(data) - 900)  # zran seeks to a late point and asks for bytes past the end
except SJSONLError as exc:
    print(type(exc).__name__)
"""


def test_a_read_past_the_pinned_bytes_from_a_late_seek_point_fails_instead_of_hanging(tmp_path):
    """The chaos run's hang, replayed: zran mid-stream (at a late seek point) over a file pinned at 0 bytes
    spun forever on empty reads — and, in C, out of reach of pytest's timeout. Now the read fails (checked
    against the file: it changed) in a subprocess that the test gives a minute."""
    out = subprocess.run(
        [sys.executable, "-c", _PINNED_AT_NOTHING, str(tmp_path / "d.jsonl.gz")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() in ("StaleDataError", "DataFileError"), out.stdout


@pytest.mark.parametrize("backend", BACKENDS)
def test_tiny_records_build_in_the_index_size_plus_a_constant(backend, tmp_path, monkeypatch):
    """24M records of ``1\\n`` (a 48 MB stream from a ~50 KB file): what the build allocates itself is the
    index plus a constant. Two costs per record once hid here — the window check cast the whole index to
    int64 at every seek point (3.2 GB and 78 s of page faults on 268M records), and the offsets buffer grew
    by ``ndarray.resize``, which zero-fills up to twice the index."""
    import tracemalloc

    gz = tmp_path / "ones.jsonl.gz"
    n = 24 << 20
    gz.write_bytes(gzip.compress(b"1\n" * n, compresslevel=1, mtime=0))
    tracemalloc.start()
    try:
        ds = _dataset(gz, backend, tmp_path, monkeypatch)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(ds) == n and ds[n - 1] == 1 and ds._files[0].offsets[-1] == 2 * (n - 1)
    index_bytes = 4 * n  # uint32 offsets, as the build holds them
    assert peak <= index_bytes + (64 << 20), (peak >> 20, index_bytes >> 20)
