"""Compact indexes (sjsonl.index.packed): the same spans as the plain index on generated corpora and every
real file, the compiled and numpy decoders equal, corrupt files refused and rebuilt, formats chosen,
converted, extended after appends, re-mapped in pickled copies, and the CLI's --compact."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sjsonl import JSONLDataset
from sjsonl.data.document import open_data_file
from sjsonl.data.source import IndexedFile
from sjsonl.errors import IndexFileError, InvalidArgumentError
from sjsonl.index import packed as packed_module
from sjsonl.index.layout import is_index_artifact
from sjsonl.index.packed import PackedOffsets, write_packed_index
from sjsonl.index.packed_codec import NumpyView, encode
from sjsonl.index.store import meta_of, read_index
from sjsonl.sample import write_corpus
from sjsonl.storage import DataStamp

from .conftest import missing

native = packed_module.NATIVE
# $SJSONL_SCAN=numpy asks for the numpy decoder only: then there is no compiled way to run, not a skip
WAYS = ["numpy"] if os.environ.get("SJSONL_SCAN") == "numpy" else ["compiled", "numpy"]


@pytest.fixture(params=WAYS)
def decoder(request, monkeypatch):
    """Each test that takes it runs with the compiled decoder, then with the numpy one."""
    if request.param == "compiled":
        if native is None:
            missing("the compiled decoder (sjsonl.index._packed) is not built here", "SJSONL_REQUIRE_NATIVE")
        monkeypatch.setattr(packed_module, "NATIVE", native)
    else:
        monkeypatch.setattr(packed_module, "NATIVE", None)
    return request.param


def views(offsets: np.ndarray, log2_block: int):
    """The compiled view (when built) and the numpy view of ``offsets`` encoded — by numpy and, when
    it is built, by the compiled encoder, which must write the very same bytes."""
    headers, packed = encode(offsets, log2_block)
    if native is not None:
        for dtype in {offsets.dtype, np.dtype(np.uint64)}:
            h, p = encode(offsets.astype(dtype), log2_block, native)
            assert np.array_equal(h, headers) and np.array_equal(p, packed)
    blob = headers.tobytes() + packed.tobytes()
    out = [NumpyView(headers, packed, len(offsets), log2_block)]
    if native is not None:
        out.append(native.PackedView(blob, len(offsets), log2_block, 0, headers.nbytes, len(packed)))
    return out


def check_views(offsets: np.ndarray, log2_block: int, end: int) -> None:
    n = len(offsets)
    expected = offsets.astype(np.uint64)
    rng = np.random.default_rng(n)
    for view in views(offsets, log2_block):
        assert len(view) == n and [view[i] for i in range(n)] == expected.tolist()
        if n:
            assert view[-1] == int(expected[-1])
            assert view.span(n - 1, end) == (int(expected[-1]), end)
            assert view.span(0, end) == (int(expected[0]), int(expected[1]) if n > 1 else end)
        for lo, hi in [(0, n), (n // 3, n), (0, n // 2), (n // 2, n // 2)] + [
            tuple(sorted(rng.integers(0, n + 1, 2).tolist())) for _ in range(5)
        ]:
            out = np.empty(hi - lo, dtype=np.uint64)
            view.decode(lo, hi, out)
            assert out.tolist() == expected[lo:hi].tolist()
        idx = rng.integers(-n, n, 50) if n else np.zeros(0, np.int64)
        out = np.empty(len(idx), dtype=np.uint64)
        view.gather(idx.astype(np.int64), out)
        assert out.tolist() == expected[idx].tolist()
        with pytest.raises(IndexError):
            view[n]


gaps = st.one_of(st.integers(1, 3), st.integers(100, 3000), st.integers(1, 2**20), st.integers(2**30, 2**40))


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
@settings(max_examples=150, deadline=None)
@given(first=st.integers(0, 2**33), steps=st.lists(gaps, max_size=300), log2_block=st.sampled_from([1, 3, 7]))
def test_both_decoders_give_the_offsets_back(first, steps, log2_block):
    """Tiny and huge gaps, offsets past 2**32, blocks of 2, 8 and 128, partial last blocks, empty."""
    offsets = np.array(np.cumsum([first, *steps]), dtype=np.uint64)[: 1 + len(steps)]
    check_views(offsets, log2_block, int(offsets[-1]) + 5)
    check_views(offsets[:0], log2_block, 0)


def test_offsets_past_4_gib_through_an_index_file(tmp_path, decoder):
    rng = np.random.default_rng(7)
    offsets = np.cumsum(rng.integers(1, 5000, 100_000), dtype=np.uint64) + np.uint64(2**32 - 10**6)
    path = str(tmp_path / "big.index.packed")
    size = int(offsets[-1]) + 10
    write_packed_index(path, offsets, meta_of(offsets, DataStamp(size, 1, "x"), "/big.jsonl"))
    found = read_index(path).offsets
    assert isinstance(found, PackedOffsets) and found.dtype == np.uint64
    assert np.array_equal(found[:], offsets) and found[12345] == int(offsets[12345])
    assert np.array_equal(found[[5, -1, 70000]], offsets[[5, -1, 70000]])
    assert found.crc32() == meta_of(offsets, DataStamp(size, 1, "x"), "/big.jsonl").checksum


def test_encoders_refuse_offsets_that_do_not_increase():
    for bad in ([0, 5, 5], [0, 9, 3], [*range(200), 150], [7, 8, 8, 9]):
        for way in [None] if native is None else [None, native]:
            with pytest.raises(ValueError, match="increase"):
                encode(np.array(bad, dtype=np.uint64), 3, way)
            with pytest.raises(ValueError, match="increase"):
                encode(np.array(bad, dtype=np.uint32), 1, way)


def test_the_extension_refuses_what_it_cannot_read():
    if native is None:
        missing("the compiled decoder (sjsonl.index._packed) is not built here", "SJSONL_REQUIRE_NATIVE")
    headers, packed = encode(np.array([0, 3, 9], np.uint64), 1)
    blob = headers.tobytes() + packed.tobytes()
    with pytest.raises(ValueError, match="does not fit"):
        native.PackedView(blob, 3, 1, 0, headers.nbytes, len(packed) + 1)
    view = native.PackedView(blob, 3, 1, 0, headers.nbytes, len(packed))
    with pytest.raises(TypeError, match="uint64"):
        view.decode(0, 3, np.empty(3, np.float64))
    with pytest.raises(ValueError, match="too small"):
        view.decode(0, 3, np.empty(2, np.uint64))
    with pytest.raises(TypeError, match="unsigned"):
        native.plan(np.array([0.0, 1.0]), 1, np.empty((1, 2), np.uint64))
    corrupt = bytearray(blob)
    corrupt[8 + 5] = 0x3F  # block 0's width: 63 bits
    with pytest.raises(ValueError, match="corrupt"):
        native.PackedView(bytes(corrupt), 3, 1, 0, headers.nbytes, len(packed))[1]


def open_both(path: Path, tmp_path: Path, **kwargs):
    plain = open_data_file(path, index_dir=tmp_path / "plain", compact=False, **kwargs)
    compact = open_data_file(path, index_dir=tmp_path / "compact", compact=True, **kwargs)
    assert plain.index_path.endswith(".index.npy") and compact.index_path.endswith(".index.packed")
    assert isinstance(compact.offsets, PackedOffsets) and isinstance(plain.offsets, np.ndarray)
    return plain, compact


def same_spans(plain: IndexedFile, compact: IndexedFile) -> None:
    n = len(plain)
    assert len(compact) == n and compact.checksum == plain.checksum
    assert [compact.span(i) for i in range(n)] == [plain.span(i) for i in range(n)]
    assert np.array_equal(compact.record_sizes(), plain.record_sizes())
    assert np.array_equal(compact.offsets[:], plain.offsets[:])
    assert compact.offsets.dtype == plain.offsets.dtype
    if n:
        idx = np.random.default_rng(n).integers(0, n, 20)
        assert np.array_equal(compact.offsets[idx], plain.offsets[idx])
        assert compact._spans_at(idx) == plain._spans_at(idx)
        _buf, bounds, _last, _end = compact.hot_state()
        assert [bounds[i] for i in range(n)] == plain.offsets.tolist()


pieces = st.sampled_from([b"{}", b'{"a": 1}', b"[1]", b'"x"', b"", b"  ", b"\t\r", b" {}", b"7"])


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(
        st.one_of(pieces, st.binary(min_size=0, max_size=0).map(lambda _: b'"' + b"y" * 5000 + b'"')),
        max_size=300,
    ),
    endings=st.lists(st.sampled_from([b"\n", b"\r\n", b"\n\n"]), min_size=300, max_size=300),
    bom=st.booleans(),
    final_newline=st.booleans(),
)
def test_same_spans_as_the_plain_index_on_generated_files(
    tmp_path_factory, lines, endings, bom, final_newline
):
    """Blank lines, CRLF, a BOM, no final newline, records of 1 byte and of 5,000."""
    data = (b"\xef\xbb\xbf" if bom else b"") + b"".join(line + end for line, end in zip(lines, endings))
    if not final_newline:
        data = data.rstrip(b"\n")
    tmp = tmp_path_factory.mktemp("gen")
    path = tmp / "d.jsonl"
    path.write_bytes(data)
    for way in WAYS:
        if way == "compiled" and native is None:
            continue
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(packed_module, "NATIVE", native if way == "compiled" else None)
            plain, compact = open_both(path, tmp / way)
            same_spans(plain, compact)
            assert list(compact.iter_records()) == list(plain.iter_records())


@pytest.mark.parametrize("kind", ["short", "long"])
def test_same_records_on_generated_corpora(tmp_path, kind, decoder):
    path = tmp_path / f"{kind}.jsonl"
    write_corpus(path, n_bytes=4 << 20, kind=kind, seed=5)
    plain, compact = open_both(path, tmp_path)
    same_spans(plain, compact)
    ds_plain = JSONLDataset(path, index_dir=tmp_path / "plain")
    ds_compact = JSONLDataset(path, index_dir=tmp_path / "compact")
    assert ds_compact.index_paths[0].endswith(".packed")  # compact=None takes the one that is there
    order = np.random.default_rng(1).permutation(len(ds_plain))[:500]
    assert [ds_compact[int(i)] for i in order] == [ds_plain[int(i)] for i in order]
    assert ds_compact[order.tolist()] == ds_plain[order.tolist()]
    assert list(ds_compact) == list(ds_plain)


def test_same_spans_on_every_real_file(shared_data, tmp_path, decoder):
    files = sorted(
        p
        for p in shared_data.rglob("*")
        if p.is_file() and p.suffix in (".jsonl", ".json", ".ndjson") and "JSONTestSuite" not in p.parts
    )
    assert len(files) >= 20
    for k, p in enumerate(files):
        plain, compact = open_both(p, tmp_path / str(k))
        same_spans(plain, compact)
        assert list(compact.iter_records()) == list(plain.iter_records()), p.name


def test_default_stays_plain_and_auto_turns_compact_for_large_indexes(tmp_path, monkeypatch):
    path = tmp_path / "d.jsonl"
    write_corpus(path, 2000, kind="short", seed=1)
    assert JSONLDataset(path, index_dir=tmp_path / "a").index_paths[0].endswith(".index.npy")
    monkeypatch.setattr(packed_module, "AUTO_COMPACT_BYTES", 4000)  # the plain index: 2000 * 4 bytes
    auto = JSONLDataset(path, index_dir=tmp_path / "b")
    assert auto.index_paths[0].endswith(".index.packed") and auto[1999] == JSONLDataset(path)[1999]


def test_asking_for_a_format_converts_the_index_and_keeps_one(tmp_path):
    path = tmp_path / "d.jsonl"
    write_corpus(path, 3000, kind="short", seed=2)
    where = tmp_path / "ix"
    plain = JSONLDataset(path, index_dir=where)
    expected = list(plain)
    compact = JSONLDataset(path, index_dir=where, compact=True)
    assert compact.index_paths[0].endswith(".packed") and list(compact) == expected
    assert sorted(os.listdir(where)) == [os.path.basename(compact.index_paths[0])]
    assert compact._files[0].index_origin == "found"  # converted from its offsets: nothing scanned
    back = JSONLDataset(path, index_dir=where, compact=False)
    assert back.index_paths[0].endswith(".npy") and list(back) == expected
    assert len(os.listdir(where)) == 1


def test_an_explicit_index_path_names_its_format(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n')
    ds = JSONLDataset(path, index_path=tmp_path / "x.index.packed")
    assert isinstance(ds._files[0].offsets, PackedOffsets) and ds[1] == {"a": 2}
    assert JSONLDataset(path, index_path=tmp_path / "x.index.packed", build_index_on_load=False)[0] == {
        "a": 1
    }
    with pytest.raises(InvalidArgumentError, match=r"index\.packed"):
        JSONLDataset(path, index_path=tmp_path / "y.index.npy", compact=True)


def _corruptions(size: int, body: int):
    """(name, change) pairs, each making a compact index file of ``size`` bytes unusable."""
    return [
        ("truncated", lambda b: b[: size // 2]),
        ("empty", lambda b: b""),
        ("padded", lambda b: b + b"\0" * 16),
        ("header", lambda b: b[:16] + b"\x05" + b[17:]),  # the record count
        ("block header", lambda b: b[: 64 + 8] + bytes([b[72] ^ 0x10]) + b[73:]),  # a bit position
        ("width", lambda b: b[: 64 + 13] + b"\x3f" + b[64 + 14 :]),  # a block's width byte: 63 bits
        ("residuals", lambda b: b[: body - 20] + bytes([b[body - 20] ^ 0xFF]) + b[body - 19 :]),
    ]


def test_corrupt_or_truncated_compact_files_are_refused_and_rebuilt(tmp_path, decoder):
    path = tmp_path / "d.jsonl"
    write_corpus(path, 5000, kind="short", seed=3)
    where = tmp_path / "ix"
    good = JSONLDataset(path, index_dir=where, compact=True)
    index = good.index_paths[0]
    expected = list(good)
    raw = Path(index).read_bytes()
    body = len(raw) - int.from_bytes(raw[-16:-8], "little") - 16
    for name, change in _corruptions(len(raw), body):
        Path(index).write_bytes(change(raw))
        with pytest.raises(IndexFileError, match=f"index file {index} "):
            read_index(index)
        rebuilt = JSONLDataset(path, index_dir=where, compact=True)
        assert list(rebuilt) == expected, name  # the index is checked on its first use: rebuilt then
        assert rebuilt._files[0].index_origin == "built", name
        assert Path(index).read_bytes() == raw, name  # the same bytes again


def test_deferred_checks_refuse_a_corrupt_compact_index_on_first_use(tmp_path, decoder):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_corpus(a, 3000, kind="short", seed=4)
    write_corpus(b, 3000, kind="short", seed=5)
    where = tmp_path / "ix"
    expected = list(JSONLDataset([a, b], index_dir=where, compact=True))
    index = JSONLDataset(a, index_dir=where).index_paths[0]
    raw = bytearray(Path(index).read_bytes())
    raw[len(raw) // 2] ^= 0x40  # a residual: only the CRC-32 of the decoded offsets can tell
    Path(index).write_bytes(bytes(raw))
    many = JSONLDataset([a, b], index_dir=where)  # each index's O(records) checks wait for a read
    assert many._files[0]._offsets is None
    assert list(many) == expected
    assert many._files[0].index_origin == "built" and many._files[0].index_path == index  # on first use
    assert read_index(index).verified


def test_a_pickled_copy_maps_the_compact_index_itself(tmp_path, decoder):
    path = tmp_path / "d.jsonl"
    write_corpus(path, 3000, kind="long", seed=6)
    ds = JSONLDataset(path, index_dir=tmp_path / "ix", compact=True)
    copy = pickle.loads(pickle.dumps(ds))
    assert copy._files[0]._offsets is None
    assert [copy[i] for i in (0, 2999, 1500)] == [ds[i] for i in (0, 2999, 1500)]
    assert isinstance(copy._files[0].offsets, PackedOffsets)
    assert copy.shuffle(seed=1)[:50] == ds.shuffle(seed=1)[:50]


def test_an_append_extends_a_compact_index_in_its_format(tmp_path, decoder):
    path = tmp_path / "d.jsonl"
    write_corpus(path, 4000, kind="short", seed=7)
    where = tmp_path / "ix"
    before = JSONLDataset(path, index_dir=where, compact=True)
    old = pickle.dumps(before)
    with open(path, "ab") as f:
        f.write(b'{"new": 1}\n\n{"new": 2}')
    after = JSONLDataset(path, index_dir=where)
    assert after._files[0].index_origin == "extended" and after.index_paths[0].endswith(".packed")
    assert len(after) == 4002 and after[-1] == {"new": 2} and after[-2] == {"new": 1}
    full = JSONLDataset(path, index_dir=tmp_path / "full", compact=True)
    assert np.array_equal(after._files[0].offsets[:], full._files[0].offsets[:])
    assert Path(after.index_paths[0]).read_bytes()[:-200] == Path(full.index_paths[0]).read_bytes()[:-200]
    copy = pickle.loads(old)  # opened before the append: its 4000 records, from the extended file
    assert len(copy) == 4000 and copy[3999] == before[3999]


def test_a_gzip_file_keeps_its_seek_points_with_a_compact_index(tmp_path):
    import gzip

    plain_path = tmp_path / "d.jsonl"
    write_corpus(plain_path, 2000, kind="short", seed=9)
    path = tmp_path / "d.jsonl.gz"
    path.write_bytes(gzip.compress(plain_path.read_bytes()))
    where = tmp_path / "ix"
    first = JSONLDataset(path, index_dir=where, compact=True)
    names = sorted(os.listdir(where))
    assert [n.rsplit(".", 1)[1] for n in names] == ["packed", "seekpoints"]
    assert all(is_index_artifact(where / n) for n in names)
    again = JSONLDataset(path, index_dir=where)
    assert (
        again._files[0].index_origin == "found"
        and again[1999] == first[1999] == JSONLDataset(plain_path)[1999]
    )


def test_a_rebuild_keeps_the_compact_format(tmp_path):
    path = tmp_path / "d.jsonl"
    write_corpus(path, 1000, kind="short", seed=10)
    where = tmp_path / "ix"
    JSONLDataset(path, index_dir=where, compact=True)
    write_corpus(path, 1200, kind="short", seed=11)  # rewritten: stale
    rebuilt = JSONLDataset(path, index_dir=where)
    assert rebuilt._files[0].index_origin == "built" and rebuilt.index_paths[0].endswith(".packed")
    assert len(rebuilt) == 1200 and len(os.listdir(where)) == 1


def test_the_seed_api_writes_the_plain_npy_whatever_the_size(tmp_path, monkeypatch):
    from sjsonl import JSONLIndexer

    path = tmp_path / "d.jsonl"
    write_corpus(path, 500, kind="short", seed=12)
    monkeypatch.setattr(packed_module, "AUTO_COMPACT_BYTES", 1)
    written = JSONLIndexer(str(path)).write_index_to_disk()
    assert written.endswith(".index.npy") and len(np.load(written)) == 500


def test_cli_index_compact_and_info(tmp_path):
    path = tmp_path / "d.jsonl"
    write_corpus(path, 3000, kind="short", seed=8)
    env = {**os.environ, "SJSONL_INDEX_DIR": str(tmp_path / "ix")}

    def run(*args):
        out = subprocess.run(
            [sys.executable, "-m", "sjsonl.cli", *map(str, args)], capture_output=True, text=True, env=env
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    run("index", "--compact", path)
    assert [p.suffix for p in (tmp_path / "ix").iterdir()] == [".packed"]
    info = run("info", path)
    assert "format:   compact .packed (blocks of 128), uint32 offsets" in info
    assert "status:   fresh" in info
    run("index", "--no-compact", path)
    assert [p.suffix for p in (tmp_path / "ix").iterdir()] == [".npy"]
    assert "format:   plain .npy" in run("info", path)


def test_numpy_is_forced_by_the_environment():
    code = "from sjsonl.index import packed; print(packed.NATIVE is None)"

    def fallback_in_use(value: str) -> str:
        env = {**os.environ, "SJSONL_SCAN": value}
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env
        ).stdout.strip()

    assert fallback_in_use("numpy") == "True"
    if native is not None:
        assert fallback_in_use("") == "False"
