"""Every file sjsonl keeps beside data — plain and compact index, bad lines, schema, gzip seek points, bzip2
block offsets — flipped bit by bit and cut at every length class: the default open still succeeds, every
record equals ``json.loads`` of its line, and the damaged file was ignored with a warning (never used, never
a traceback). Edited gzip seek points with a recomputed checksum never serve a wrong record either."""

from __future__ import annotations

import bz2
import gzip
import json
import os
import random
import shutil
import tempfile
import warnings
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from sjsonl import JSONLDataset
from sjsonl.errors import IndexFileError, StaleIndexError
from sjsonl.index import store
from sjsonl.index.store import read_index
from sjsonl.records.badlines import badlines_path
from sjsonl.records.schema import infer_schema, schema_cache_path
from sjsonl.storage import compressed, gzip_build
from sjsonl.storage.seekpoints import _GZIDX, _POINT, seek_key
from sjsonl.storage.sidecar import ArtifactWarning, encode_sidecar

pytestmark = pytest.mark.slow

LINES = [
    b'{"i": 0, "s": "a"}',
    b'{"i": 1, "s": [1.5]}',
    b"{oops",
    b'{"i": 3}',
    b"[1, 2",
    b'{"i": 5, "s": null}',
]
GOOD = [json.loads(line) for line in LINES if not line.startswith((b"{oops", b"[1, 2"))]


@pytest.fixture(autouse=True)
def _indexes_beside_the_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SJSONL_INDEX_DIR", raising=False)  # artifacts beside each test's data


def _mutants(blob: bytes):
    """Every single-bit flip, then cuts: empty, one byte, inside the 32-byte header, inside the body, one
    byte short."""
    for bit in range(len(blob) * 8):
        flipped = bytearray(blob)
        flipped[bit // 8] ^= 1 << (bit % 8)
        yield f"bit {bit}", bytes(flipped)
    for n in sorted({0, 1, 7, 8, 16, 31, 32, 40, len(blob) // 2, len(blob) - 8, len(blob) - 1}):
        if 0 <= n < len(blob):
            yield f"cut at {n}", blob[:n]


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    # thousands of atomic rewrites here; fsync (durability across a power loss) plays no part in what is read
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def _put(path: str, blob: bytes) -> None:
    """Replace ``path`` with ``blob`` (the mutant is a new file version, as a fresh process would see it)."""
    with open(path + ".new", "wb") as f:
        f.write(blob)
    os.replace(path + ".new", path)
    store._VERIFIED.clear()  # (an in-process cache by file identity, which a same-tick rewrite can keep)


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _records_right(ds: JSONLDataset, expected: list) -> None:
    order = list(range(len(expected)))
    random.Random(len(expected)).shuffle(order)
    assert [ds[i] for i in order] == [expected[i] for i in order]


@pytest.fixture
def short_dir():
    """A private directory with a short path (the plain index's trailer holds the data's path: each byte
    costs eight opens here), in memory where there is a tmpfs (thousands of atomic rewrites)."""
    where = tempfile.mkdtemp(prefix="sj", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    yield Path(where)
    shutil.rmtree(where)


@pytest.mark.parametrize("compact", [False, True])
def test_index_files(short_dir: Path, compact: bool) -> None:
    lines = [line for line in LINES if line not in (b"{oops", b"[1, 2")]
    path = _write(short_dir / "d.jsonl", lines)
    other = _write(short_dir / "e.jsonl", [b'{"other": 1}'])
    index = JSONLDataset(path, compact=compact).index_paths[0]
    JSONLDataset(other, compact=compact)
    assert index is not None and index.endswith(".packed" if compact else ".npy")
    good_blob = Path(index).read_bytes()
    reference = read_index(index)
    for k, (name, blob) in enumerate(_mutants(good_blob)):
        _put(index, blob)
        try:
            found = read_index(index)
        except IndexFileError as exc:  # the damage is found, and named with the file
            assert index in str(exc), name
            if k % 16 == 0:
                with pytest.raises((IndexFileError, StaleIndexError), match=os.path.basename(index)):
                    JSONLDataset(path, compact=compact, build_index_on_load=False)
            # What follows a refusal is the same whichever byte was hit: every cut, and one flip in two, is
            # opened as one file (checked at open: warned) or with another (checks deferred to the first
            # read; a damaged data size there reads as an append, which the extension re-checks)
            if k % 2 and not name.startswith("cut"):
                continue
            _put(index, blob)
            if k % 4 == 0:
                with pytest.warns(ArtifactWarning, match="will be rebuilt"):
                    _records_right(JSONLDataset(path, compact=compact), GOOD)
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ArtifactWarning)
                    _records_right(JSONLDataset([path, other], compact=compact), [*GOOD, {"other": 1}])
        else:  # the flip changed the data version it names (then it is stale) or nothing at all
            assert list(found.offsets) == list(reference.offsets), name
            unchanged = replace(found.meta, stamp=reference.meta.stamp, data_path=reference.meta.data_path)
            assert unchanged == reference.meta, name
            with warnings.catch_warnings():
                warnings.simplefilter("error", ArtifactWarning)  # stale, not damaged: rebuilt quietly
                _records_right(JSONLDataset(path, compact=compact), GOOD)
        read_index(index)  # rebuilt, or still the same index


def test_bad_lines_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", LINES)
    ds = JSONLDataset(path, on_bad_lines="skip")
    side = badlines_path(ds.index_paths[0])
    good_blob = Path(side).read_bytes()
    assert good_blob[:8] == b"SJSONLbl" and [b.line for b in ds.bad_lines] == [3, 5]
    for name, blob in _mutants(good_blob):
        _put(side, blob)
        with pytest.warns(ArtifactWarning, match="ignoring .*badlines"):
            again = JSONLDataset(path, on_bad_lines="skip")
        assert again[:] == GOOD and [b.line for b in again.bad_lines] == [3, 5], name
        assert Path(side).read_bytes() == good_blob  # recomputed and saved again


def test_schema_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", LINES)
    ds = JSONLDataset(path, on_bad_lines="skip")
    reference = infer_schema(ds)
    side = schema_cache_path(ds.index_paths[0])
    good_blob = Path(side).read_bytes()
    assert good_blob[:8] == b"SJSONLsc"
    for name, blob in _mutants(good_blob):
        _put(side, blob)
        again = JSONLDataset(path, on_bad_lines="skip")
        with pytest.warns(ArtifactWarning, match="ignoring .*schema"):
            assert infer_schema(again) == reference, name
        assert again[:] == GOOD


def test_gzip_seek_points_file(tmp_path: Path) -> None:
    lines = [line for line in LINES if line not in (b"{oops", b"[1, 2")]
    gz = tmp_path / "d.jsonl.gz"
    gz.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    side = JSONLDataset(gz).index_paths[0][: -len(".npy")] + ".seekpoints"  # type: ignore[index]
    good_blob = Path(side).read_bytes()
    assert good_blob[:8] == b"SJSONLgz"
    for _name, blob in _mutants(good_blob):
        _put(side, blob)
        with pytest.warns(ArtifactWarning, match="ignoring .*seekpoints"):
            again = JSONLDataset(gz)
        _records_right(again, GOOD)


def test_bzip2_block_offsets_file(tmp_path: Path) -> None:
    lines = [line for line in LINES if line not in (b"{oops", b"[1, 2")]
    path = tmp_path / "d.jsonl.bz2"
    path.write_bytes(bz2.compress(b"\n".join(lines) + b"\n"))
    side = JSONLDataset(path).index_paths[0][: -len(".npy")] + ".seekpoints"  # type: ignore[index]
    good_blob = Path(side).read_bytes()
    assert good_blob[:8] == b"SJSONLbz"
    reader = JSONLDataset(path)
    storage = reader._files[0].storage
    for k, (name, blob) in enumerate(_mutants(good_blob)):
        _put(side, blob)
        with pytest.warns(ArtifactWarning, match="ignoring .*seekpoints"):
            assert storage._load_points() is None, name  # what every new handle asks: refused
        if k % 8 == 0 or name.startswith("cut"):  # a read costs ~20 ms in indexed_bzip2: one flip a byte
            again = JSONLDataset(path)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ArtifactWarning)
                _records_right(again, GOOD)


# ------------------------------------------------------------------ edited points, checksum recomputed
def _gzip_points(blob: bytes) -> tuple[bytearray, int, int]:
    """(the decompressed indexed_gzip export, its point count, where its windows start)."""
    points = bytearray(zlib.decompress(blob[64:]))
    n = _GZIDX.unpack_from(points)[-1]
    return points, n, _GZIDX.size + n * _POINT.itemsize


def _resealed(key: dict, points: bytes) -> bytes:
    return b"".join(encode_sidecar(b"SJSONLgz", key, zlib.compress(points)))


def _edits(points: bytearray, n: int, windows_at: int, line: int):
    """Edits of the point table and windows a person (or a tool) could make, each with a fresh checksum."""
    table = np.frombuffer(points, _POINT, count=n, offset=_GZIDX.size).copy()
    with_data = np.flatnonzero(table["data"] == 1).tolist()

    def edited(field: str, j: int, delta: int) -> bytes:
        t = table.copy()
        t[field][j] = int(t[field][j]) + delta
        return bytes(points[: _GZIDX.size]) + t.tobytes() + bytes(points[windows_at:])

    for j in range(1, n):
        for delta in (1, -1, line, -line, 4096):
            yield f"point {j} moved by {delta}", edited("uncmp", j, delta)
        yield f"point {j} compressed offset +1", edited("cmp", j, 1)
        yield f"point {j} bit +1", edited("bits", j, 1 if table["bits"][j] < 7 else -1)
    if len(with_data) >= 2:  # two windows swapped
        a, b = (windows_at + k * 32768 for k in range(2))
        swapped = bytearray(points)
        swapped[a : a + 32768], swapped[b : b + 32768] = points[b : b + 32768], points[a : a + 32768]
        yield "windows swapped", bytes(swapped)
    for k in range(len(with_data)):  # a line break moved inside a window
        at = windows_at + k * 32768
        window = bytes(points[at : at + 32768])
        nl = window.rfind(b"\n", 0, 32000)
        if nl > 0 and window[nl - 1 : nl] not in (b"\n", b"\0"):
            moved = bytearray(points)
            moved[at + nl], moved[at + nl - 1] = window[nl - 1], ord("\n")
            yield f"window {k}: a newline moved", bytes(moved)


@pytest.mark.parametrize("backend", ["rapidgzip", "indexed_gzip"])
def test_edited_gzip_points_never_serve_a_wrong_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    monkeypatch.setenv(gzip_build.BUILD_ENV, backend)
    monkeypatch.setattr(compressed, "GZIP_SPACING", 64 << 10)
    rng = random.Random(7)
    lines = [
        json.dumps({"i": i, "t": "x" * rng.randint(0, 90), "r": rng.random()}).encode() for i in range(6000)
    ]
    gz = tmp_path / "d.jsonl.gz"
    gz.write_bytes(gzip.compress(b"\n".join(lines) + b"\n", 6))
    expected = [json.loads(line) for line in lines]
    built = JSONLDataset(gz)._files[0]
    side = built.index_path[: -len(".npy")] + ".seekpoints"  # type: ignore[index]
    key = seek_key("gzip", built.stamp, built.checksum)
    points, n, windows_at = _gzip_points(Path(side).read_bytes())
    assert n >= 4
    picks = rng.sample(range(len(expected)), 300)
    refused = 0
    for name, edited in _edits(points, n, windows_at, len(lines[100]) + 1):
        _put(side, _resealed(key, edited))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ds = JSONLDataset(gz)
            got = [ds[i] for i in picks]
        assert got == [expected[i] for i in picks], name
        refused += any(issubclass(w.category, ArtifactWarning) for w in caught)
    _put(side, _resealed(key, bytes(points)))  # the same points, resealed: used, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", ArtifactWarning)
        assert [JSONLDataset(gz)[i] for i in picks] == [expected[i] for i in picks]
    assert refused  # (edits that change nothing a read uses need not be refused)
