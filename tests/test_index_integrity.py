"""An index is one unit and is verified: a reader never uses offsets that do not belong to the data.

One test per way the review made a wrong index pass (offsets of one version with metadata of another,
shifted offsets, corrupt seek points, another user's planted index) or made a bad index fail unclearly."""

from __future__ import annotations

import gzip
import io
import os
import random
import warnings
from pathlib import Path

import numpy as np
import pytest

from sjsonl import IndexFileError, JSONLDataset, JSONLIndexer
from sjsonl.index.layout import FORMAT_VERSION, TRAILER_MAGIC
from sjsonl.index.store import meta_of, read_index, write_index
from sjsonl.storage.trust import UntrustedIndexPlaceWarning

from .conftest import run_unprivileged


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A file of numbered records with its index beside it."""
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"".join(b'{"id": %d}\n' % i for i in range(1000)))
    ds = JSONLDataset(path)
    return path, ds.index_paths[0]


def _rewrite_offsets(index_path, offsets, *, fix_checksum: bool):
    found = read_index(index_path)
    meta = found.meta
    if fix_checksum:
        meta = meta_of(offsets.astype(found.offsets.dtype), meta.stamp, meta.data_path)
    write_index(index_path, offsets.astype(found.offsets.dtype), meta)


def _assert_rebuilt_and_right(path, index_path):
    with pytest.raises(IndexFileError, match=str(index_path)):
        JSONLDataset(path, build_index_on_load=False)  # the error names the index file, not the data
    ds = JSONLDataset(path)
    assert [ds[0], ds[999]] == [{"id": 0}, {"id": 999}]
    assert JSONLDataset(path, build_index_on_load=False)[500] == {"id": 500}  # and the rebuild was saved


def test_offsets_of_one_version_never_pair_with_metadata_of_another(data):
    """Two builders racing once left the .npy of one version beside the metadata of another."""
    path, index_path = data
    other = np.arange(0, 5000, 5, dtype=np.uint16)  # offsets of some other version of the file
    meta = read_index(index_path).meta  # this version's stamp, with other offsets: checksum must fail
    blob = io.BytesIO()
    np.save(blob, other)
    trailer = meta.to_json()
    with open(index_path, "wb") as f:
        f.write(blob.getvalue() + trailer + len(trailer).to_bytes(8, "little") + TRAILER_MAGIC)
    _assert_rebuilt_and_right(path, index_path)


@pytest.mark.parametrize("fix_checksum", [False, True])
def test_shifted_offsets_are_rejected(data, fix_checksum):
    """Offsets moved by one record (same length, dtype and last offset): checksum, or order if forged."""
    path, index_path = data
    offsets = read_index(index_path).offsets.copy()
    shifted = np.concatenate((offsets[1:], offsets[-1:]))
    _rewrite_offsets(index_path, shifted, fix_checksum=fix_checksum)
    _assert_rebuilt_and_right(path, index_path)


def test_a_forged_offset_inside_a_line_blames_the_index_not_the_data(data):
    path, index_path = data
    offsets = read_index(index_path).offsets.copy()
    offsets[10] += 3  # still increasing, checksum recomputed: only the data can tell
    _rewrite_offsets(index_path, offsets, fix_checksum=True)
    ds = JSONLDataset(path, build_index_on_load=False)
    with pytest.raises(IndexFileError, match="is not the start of a line"):
        ds[10]


@pytest.mark.parametrize(
    "damage",
    [
        "empty",
        "truncated",
        "padded",
        "big_endian",
        "not_monotonic",
        "nested_meta",
        "garbage_meta",
        "old_format",
    ],
)
def test_damaged_index_files_are_detected_and_rebuilt(data, damage):
    path, index_path = data
    raw = Path(index_path).read_bytes()
    offsets = read_index(index_path).offsets.copy()
    meta = read_index(index_path).meta
    if damage == "empty":
        raw = b""  # an interrupted copy
    elif damage == "truncated":
        raw = raw[: len(raw) // 2]
    elif damage == "padded":
        raw = raw + b"\0" * 16
    elif damage == "big_endian":
        blob = io.BytesIO()
        np.save(blob, offsets.astype(">u2"))
        tail = meta.to_json()
        raw = blob.getvalue() + tail + len(tail).to_bytes(8, "little") + TRAILER_MAGIC
    elif damage == "not_monotonic":
        offsets[[3, 4]] = offsets[[4, 3]]
        _rewrite_offsets(index_path, offsets, fix_checksum=True)
        raw = Path(index_path).read_bytes()
    else:
        body = raw[: raw.rindex(meta.to_json())]
        tail = {
            "nested_meta": b"[" * 100_000 + b"]" * 100_000,
            "garbage_meta": b'{"stamp": 5}',
            "old_format": None,
        }[damage]
        if tail is None:  # format 1: a bare array with its metadata in a second file
            raw = body
            Path(index_path[: -len(".npy")] + ".meta.json").write_text('{"version": 1}')
        else:
            raw = body + tail + len(tail).to_bytes(8, "little") + TRAILER_MAGIC
    Path(index_path).write_bytes(raw)
    _assert_rebuilt_and_right(path, index_path)
    assert not os.path.exists(index_path[: -len(".npy")] + ".meta.json")  # format 1's sidecar is gone
    assert read_index(index_path).meta.version == FORMAT_VERSION


def test_a_directory_or_fifo_where_the_index_goes_never_blocks_or_fails_the_open(tmp_path, monkeypatch):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"1\n2\n")
    (tmp_path / "d.index.npy").mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "could not save the index": it serves from memory
        assert JSONLDataset(path)[:] == [1, 2]
    os.rmdir(tmp_path / "d.index.npy")
    os.mkfifo(tmp_path / "d.index.npy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert JSONLDataset(path)[:] == [1, 2]  # (a blocking open would hang here)


def test_corrupt_seek_points_never_give_wrong_records(tmp_path):
    """Fuzz the saved gzip seek points: flips, cuts, splices — reads stay right or fail clearly."""
    raw = b"".join(b'{"id": %d, "pad": "%s"}\n' % (i, b"x" * (i % 50)) for i in range(60_000))
    path = tmp_path / "d.jsonl.gz"
    path.write_bytes(gzip.compress(raw, 1))
    index_dir = tmp_path / "idx"
    JSONLDataset(path, index_dir=index_dir)
    seek_file = next(p for p in index_dir.iterdir() if p.name.endswith(".seekpoints"))
    good = seek_file.read_bytes()
    rng = random.Random(0)
    picks = rng.sample(range(60_000), 30)
    for trial in range(40):
        bad = bytearray(good)
        kind = trial % 4
        if kind == 0:
            for _ in range(rng.randint(1, 8)):
                bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
        elif kind == 1:
            bad = bad[: rng.randrange(len(bad))]
        elif kind == 2:
            at = rng.randrange(40, len(bad))
            bad[at : at + 64] = os.urandom(64)
        else:
            header_end = bad.index(b"\n", 20) + 1
            bad = bad[:header_end] + bytes(gzip.compress(os.urandom(4096)))
        seek_file.write_bytes(bytes(bad))
        ds = JSONLDataset(path, index_dir=index_dir, build_index_on_load=False)
        assert [ds[i]["id"] for i in picks] == picks, f"trial {trial}"


def test_another_users_planted_index_is_never_read(tmp_path, monkeypatch, recwarn):
    """A shared index dir (mode 1777, or $SJSONL_INDEX_DIR on a shared disk): another user's file there
    does not decide what we read; the private cache is used instead, and we say so once."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setenv("SJSONL_INDEX_DIR", str(shared))
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"".join(b'{"id": %d}\n' % i for i in range(100)))
    ds = JSONLDataset(path)
    assert not ds.index_paths[0].startswith(str(shared))
    assert any(issubclass(w.category, UntrustedIndexPlaceWarning) for w in recwarn.list)
    # a planted, internally consistent index for this very data, owned by someone else
    plant_dir = tmp_path / "mine"
    plant_dir.mkdir()
    offsets = np.roll(read_index(ds.index_paths[0]).offsets, 1)[:100].copy()
    offsets.sort()
    offsets = np.concatenate((offsets[1:], [offsets[-1] + 1]))
    planted = str(plant_dir / "d.index.npy")
    write_index(planted, offsets, meta_of(offsets, read_index(ds.index_paths[0]).meta.stamp, str(path)))
    os.chown(planted, 4242, 4242)
    assert JSONLDataset(path, index_path=planted)[0] == {"id": 0}


def test_a_group_writable_data_directory_is_not_an_index_place(tmp_path, monkeypatch, recwarn):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = tmp_path / "project"
    folder.mkdir()
    folder.chmod(0o775)
    (folder / "d.jsonl").write_bytes(b"1\n2\n")
    ds = JSONLDataset(folder / "d.jsonl")
    assert ds.index_paths[0].startswith(str(tmp_path / "xdg" / "sjsonl" / "index"))
    assert sorted(os.listdir(folder)) == ["d.jsonl"]
    assert "not using indexes in" in str(recwarn.list[0].message)


def test_an_unreadable_index_file_falls_back_instead_of_failing(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"1\n2\n3\n")
    index_dir = tmp_path / "idx"
    first = JSONLDataset(path, index_dir=index_dir).index_paths[0]
    os.chmod(first, 0o000)
    code = "import sjsonl,sys\nprint(sjsonl.JSONLDataset(sys.argv[1], index_dir=sys.argv[2])[:])"
    out = run_unprivileged(code, str(path), str(index_dir), env={"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert out.stdout.strip() == "[1, 2, 3]", out.stderr


@pytest.mark.parametrize("where", ["index_path", "index_dir"])
def test_an_index_place_that_is_the_data_file_is_refused(tmp_path, where):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"a": 1}\n')
    with pytest.raises(IndexFileError, match="is the data file itself"):
        JSONLDataset(path, **{where: path})
    indexer = JSONLIndexer(path)
    with pytest.raises(IndexFileError, match="is the data file itself"):
        indexer.write_index_to_disk(path)
    assert path.read_bytes() == b'{"a": 1}\n'


def test_temp_files_of_killed_writers_are_removed(tmp_path, monkeypatch):
    from sjsonl.index import store

    path = tmp_path / "d.jsonl"
    path.write_bytes(b"1\n")
    host = store._temp_tag().split("-")[0]
    dead = tmp_path / f"d.index.npy.{host}-999999999.abc.tmp"  # this host, no such process
    old = tmp_path / "d.index.npy.otherhost-1.def.tmp"  # another host's, two days old
    live = tmp_path / f"d.index.npy.{host}-{os.getpid()}.ghi.tmp"  # a writer still running
    for p in (dead, old, live):
        p.write_bytes(b"partial")
    os.utime(old, (0, 1))
    JSONLDataset(path)
    assert not dead.exists() and not old.exists() and live.exists()


def test_a_relative_index_dir_works_in_a_copy_used_elsewhere(tmp_path, monkeypatch):
    import pickle

    (tmp_path / "d.jsonl").write_bytes(b"1\n2\n")
    monkeypatch.chdir(tmp_path)
    blob = pickle.dumps(JSONLDataset("d.jsonl", index_dir="idx"))
    monkeypatch.chdir("/")
    assert pickle.loads(blob)[:] == [1, 2]
