"""bzip2 and xz data files read in place, block by block (``compress`` extra: indexed_bzip2, python-xz)."""

from __future__ import annotations

import bz2
import lzma
import os
from pathlib import Path

import pytest

from sjsonl import DataFileError, JSONLDataset, RecordDecodeError, StaleDataError, StaleIndexError
from sjsonl.sample import write_corpus
from sjsonl.storage import open_storage
from sjsonl.storage.bzip2 import Bzip2File
from sjsonl.storage.xz import XZ_MAX_BLOCK, XzFile

from ._storage_checks import check_every_access_path, check_fork_safety, source_records

xz = pytest.importorskip("xz")
pytest.importorskip("indexed_bzip2")


def write_xz_blocks(path: Path, raw: bytes, block: int = 64 << 10) -> None:
    """An xz file of many blocks (what ``xz --block-size`` or ``xz -T0`` write)."""
    with xz.open(str(path), "w") as f:
        for start in range(0, len(raw), block):
            f.write(raw[start : start + block])
            f.change_block()


def write_bz2(path: Path, raw: bytes) -> None:
    path.write_bytes(bz2.compress(raw, compresslevel=1))  # 100 kB blocks: many of them


WRITERS = {"bz2": write_bz2, "xz": write_xz_blocks}
STORAGE = {"bz2": Bzip2File, "xz": XzFile}


# bz2 decompresses ~10x slower than xz: its cases run in the slow tier
@pytest.fixture(params=[pytest.param("bz2", marks=pytest.mark.slow), "xz"])
def corpus(request, tmp_path: Path) -> tuple[Path, bytes, str]:
    plain = tmp_path / "data.jsonl"
    write_corpus(plain, 20_000, kind="short", seed=5)
    raw = plain.read_bytes()
    path = tmp_path / f"data.jsonl.{request.param}"
    WRITERS[request.param](path, raw)
    return path, raw, request.param


def test_every_access_path_equals_the_source(corpus) -> None:
    path, raw, kind = corpus
    ds = JSONLDataset(path)
    storage = ds._files[0].storage
    assert isinstance(storage, STORAGE[kind]) and storage.size == len(raw)
    check_every_access_path(ds, raw)


def test_fork_and_pickle_safety(corpus) -> None:
    path, raw, _kind = corpus
    ids = [r["id"] for r in source_records(raw)]
    check_fork_safety(JSONLDataset(path), ids, processes=2, reads=300, batched=300, pickled_reads=200)


def test_bz2_block_offsets_are_saved_and_reused(tmp_path: Path) -> None:
    plain = tmp_path / "d.jsonl"
    write_corpus(plain, 20_000, kind="short", seed=1)
    raw = plain.read_bytes()
    path = tmp_path / "d.jsonl.bz2"
    write_bz2(path, raw)
    built = JSONLDataset(path)
    seek_file = built.index_paths[0][: -len(".npy")] + ".seekpoints"
    assert os.path.getsize(seek_file) > 0
    reopened = JSONLDataset(path, build_index_on_load=False)
    storage = reopened._files[0].storage
    points = storage._load_points()
    assert points is not None and len(points) >= 3  # several blocks, known without a pass
    expected = source_records(raw)
    assert reopened[len(reopened) - 1] == expected[-1] and reopened[7] == expected[7]
    with open(seek_file, "r+b") as f:  # points that do not match are ignored: reads stay right
        f.seek(30)
        f.write(b"garbage!")
    again = JSONLDataset(path, build_index_on_load=False)
    assert again._files[0].storage._load_points() is None
    assert again[len(again) - 1] == expected[-1] and again[12_345] == expected[12_345]


def test_several_streams_crlf_bom_blank_lines_and_empty(tmp_path: Path) -> None:
    parts = [b'\xef\xbb\xbf{"id": 0}\r\n  \r\n', b'{"id": 1}\n' * 3, b'{"id": 4}']  # no final newline
    expected = [{"id": 0}] + [{"id": 1}] * 3 + [{"id": 4}]
    multi = tmp_path / "multi.jsonl.bz2"
    multi.write_bytes(b"".join(bz2.compress(p) for p in parts))  # what `cat a.bz2 b.bz2` makes
    assert JSONLDataset(multi)[:] == expected
    streams = tmp_path / "multi.jsonl.xz"
    streams.write_bytes(b"".join(lzma.compress(p) for p in parts))
    assert JSONLDataset(streams)[:] == expected
    empty = {"e.jsonl.bz2": bz2.compress(b""), "e.jsonl.xz": lzma.compress(b""), "z.jsonl.xz": b""}
    for name, data in empty.items():
        (tmp_path / name).write_bytes(data)
        assert len(JSONLDataset(tmp_path / name)) == 0


def test_bad_line_names_file_line_and_decompressed_offset(tmp_path: Path) -> None:
    body = b'{"a": 1}\n\n{"a": 2}\n{"a": oops}\n{"a": 4}\n'
    for name, data in [("bad.jsonl.bz2", bz2.compress(body)), ("bad.jsonl.xz", lzma.compress(body))]:
        path = tmp_path / name
        path.write_bytes(data)
        ds = JSONLDataset(path)
        assert ds[3] == {"a": 4}
        with pytest.raises(RecordDecodeError) as info:
            ds[2]
        where = (info.value.path, info.value.line, info.value.offset)
        assert where == (str(path), 4, body.index(b'{"a": oops}'))


def test_truncated_or_corrupt_is_a_clear_error(corpus, tmp_path: Path) -> None:
    path, _raw, kind = corpus
    cut = tmp_path / f"cut.jsonl.{kind}"
    cut.write_bytes(path.read_bytes()[:50_000])  # a partial download
    with pytest.raises(DataFileError, match=rf"cut\.jsonl\.{kind}") as info:
        JSONLDataset(cut)
    assert "\n" not in str(info.value)
    fake = tmp_path / f"fake.jsonl.{kind}"
    fake.write_bytes(b'{"a": 1}\n')  # text under a compressed name
    with pytest.raises(DataFileError, match=r"fake\.jsonl"):
        JSONLDataset(fake)


def test_rewritten_file_is_detected_and_reindexed(corpus) -> None:
    path, raw, kind = corpus
    ds = JSONLDataset(path)
    assert len(ds) == 20_000
    WRITERS[kind](path, raw + b'{"id": "appended"}\n')
    with pytest.raises(StaleIndexError, match="stale"):
        JSONLDataset(path, build_index_on_load=False)
    with pytest.raises(StaleDataError):  # the open dataset's pickled copy refuses the new bytes
        import pickle

        pickle.loads(pickle.dumps(ds))[0]
    fresh = JSONLDataset(path)
    assert len(fresh) == 20_001 and fresh[-1] == {"id": "appended"}


def test_xz_of_one_big_block_is_refused_with_a_recipe_and_still_streams(tmp_path: Path) -> None:
    from sjsonl.data.streaming import JSONLStream

    line = b'{"pad": "' + b"x" * 1000 + b'"}\n'
    raw = line * (XZ_MAX_BLOCK // len(line) + 10)  # one block over the limit: what plain `xz` writes
    path = tmp_path / "big.jsonl.xz"
    path.write_bytes(lzma.compress(raw, preset=0))
    with pytest.raises(DataFileError) as info:
        JSONLDataset(path)
    message = str(info.value)
    assert str(path) in message and "--block-size" in message and "streaming=True" in message
    assert sum(1 for _ in JSONLStream(path)) == raw.count(b"\n")
    assert not list(tmp_path.glob("big.jsonl.xz.index*"))


def test_open_storage_picks_the_reader_by_suffix(corpus) -> None:
    path, raw, kind = corpus
    storage = open_storage(path)
    assert isinstance(storage, STORAGE[kind])
    assert storage.read(0, 100) == raw[:100] and storage.read(len(raw) - 50, len(raw)) == raw[-50:]


def test_human_eval_recompressed(shared_data, tmp_path: Path) -> None:
    raw = (shared_data / "jsonl" / "human_eval" / "HumanEval.jsonl").read_bytes()
    for kind, write in WRITERS.items():
        path = tmp_path / f"HumanEval.jsonl.{kind}"
        write(path, raw)
        ds = JSONLDataset(path)
        assert len(ds) == 164
        check_every_access_path(ds, raw, singles=100)


def test_many_reads_at_the_end_of_a_bz2_file_stay_reads(tmp_path: Path) -> None:
    """indexed_bzip2 seeks to the end and reads nothing there once per request: those empty reads must
    not add up to the limit that stops a decompressor spinning at the end of a cut stream (storage.pinned:
    a seek starts the count again). A review found reads #127 on failing before that."""
    from sjsonl.storage.pinned import MAX_EMPTY_READS

    small, big = tmp_path / "s.jsonl.bz2", tmp_path / "b.jsonl.bz2"
    small.write_bytes(bz2.compress(b'{"a": 1}\n{"a": 2}\n'))
    big.write_bytes(bz2.compress(b"".join(b'{"i": %d}\n' % i for i in range(1000))))
    ds = JSONLDataset(small)
    assert [ds[k % 2]["a"] for k in range(20 * MAX_EMPTY_READS)] == [1, 2] * 10 * MAX_EMPTY_READS
    every = JSONLDataset(big)
    for _ in range(3 * MAX_EMPTY_READS // 2):
        assert sum(r["i"] for r in every) == 499500
