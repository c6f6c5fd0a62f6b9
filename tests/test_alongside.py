"""The type pass run alongside the index scan (sjsonl/index/alongside.py, sjsonl/records/alongside.py): the
same offsets, content hash and schema — column order included — as an index built with ``pread`` and a type
pass afterwards, on every file of ../shared/data and on a file built so that the chunk cuts fall where they
are hardest (inside a record that brings a new column, on a line boundary followed by a blank line, inside a
record the compiled pass hands back, a whole chunk inside one record); bad lines left out fall back to the
pass afterwards; a file cut short under the in-place scan is scanned again, not a crash; and the MindSpore
loader takes this path by default."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from sjsonl import JSONLDataset
from sjsonl.index import alongside as index_alongside
from sjsonl.index.scan import FILE_CHUNK_BYTES
from sjsonl.records import alongside, fast_types
from sjsonl.records.schema import infer_schema

from .conftest import missing
from .test_real_files import _settled, _suite, shared_data_files

CUT = FILE_CHUNK_BYTES


@pytest.fixture(autouse=True)
def compiled() -> None:
    if fast_types.NATIVE is None or not index_alongside.MAPPED:
        missing(
            "the compiled scan and type pass (with xxhash's XXH3) are not built here", "SJSONL_REQUIRE_NATIVE"
        )


def _outcome(ds: JSONLDataset):
    try:
        return infer_schema(ds, cache=False).to_dict()
    except Exception as exc:  # a file whose records the rules refuse: the same located error either way
        return type(exc), str(exc)


def _both(path, tmp_path, tag: str, **kwargs):
    """(plain dataset, dataset typed alongside, whether the runs described its index)."""
    plain = JSONLDataset(path, index_dir=tmp_path / f"plain-{tag}", **kwargs)
    with alongside.typing_alongside():
        typed = JSONLDataset(path, index_dir=tmp_path / f"along-{tag}", **kwargs)
    f = typed._files[0]
    used = isinstance(f.alongside, alongside.ChunkTypes) and f.alongside.parts(f) is not None
    return plain, typed, used


def _same(plain: JSONLDataset, typed: JSONLDataset) -> None:
    assert np.array_equal(np.asarray(plain._files[0].offsets), np.asarray(typed._files[0].offsets))
    assert plain._files[0].stamp.content == typed._files[0].stamp.content != ""
    assert _outcome(typed) == _outcome(plain)


def test_every_shared_file_types_alike(shared_data, tmp_path):
    files = shared_data_files(shared_data)
    used = 0
    for k, path in enumerate(files):
        plain, typed, taken = _both(path, tmp_path, str(k))
        _same(plain, typed)
        used += taken
    assert used == len(files)  # every one typed alongside (none has bad lines left out)


def test_json_test_suite_values_type_alike(shared_data, tmp_path):
    """Every y_ case of the JSONTestSuite that is one line, as records of one file (then each wrapped in an
    object, so that columns hold them), repeated past several chunk cuts."""
    cases = [p.read_bytes().strip() for p in _suite(shared_data, "y_")]
    lines = [c for c in cases if c and b"\n" not in c and b"\r" not in c]
    assert len(lines) > 50
    for name, rows in (("values", lines), ("objects", [b'{"v": ' + c + b', "k": 1}' for c in lines])):
        body = b"\n".join(rows) + b"\n"
        path = _settled(tmp_path / f"{name}.jsonl", body * (3 * CUT // len(body) + 1))
        plain, typed, used = _both(path, tmp_path, name)
        assert used
        _same(plain, typed)


def _record(a, pad: int = 0, **extra) -> bytes:
    body = {"a": a, **extra}
    text = ", ".join(f'"{k}": {v}' for k, v in body.items())
    return ("{" + text + ', "t": "' + "é" * (pad // 2) + "x" * (pad % 2) + '"}\n').encode()


def _fill_to(out: bytearray, end: int, i: int) -> int:
    """Filler records up to exactly ``end`` bytes (the last one padded to end there)."""
    while len(out) < end:
        rec = _record(i, 40 + i % 300)
        if len(out) + len(rec) > end - 60:
            rec = _record(i, 0)
            rec = rec[:-3] + b"x" * (end - len(out) - len(rec)) + rec[-3:]
        out += rec
        i += 1
    assert len(out) == end
    return i


def _hard_file(path) -> None:
    out = bytearray(b"\xef\xbb\xbf")
    i = _fill_to(out, CUT - 50, 0)
    out += _record(i, 200, late=7)  # straddles the first cut, and brings a new column
    i = _fill_to(out, 2 * CUT, i + 1)  # the second cut falls on a line boundary...
    out += b"  \r\n\n"  # ...and the chunk after it opens with blank lines
    out += b'{"\\u0061b": 1, "a": 2}\n'  # an escaped key, inside a run: handed back
    i = _fill_to(out, 3 * CUT - 30, i)
    out += b'{"a": NaN, "late": 1}\n'  # handed back, across the third cut
    out += _record(2.5, 5 * CUT // 2)  # a whole chunk inside one record; "a" becomes a float
    i = _fill_to(out, len(out) + 5000, i)
    out += b'{"a": 1, "late": null}'  # no final newline (the file is settled: a record)
    _settled(path, bytes(out))


@pytest.mark.parametrize("workers", [1, 2])
def test_records_across_chunk_cuts(tmp_path, workers):
    path = tmp_path / "hard.jsonl"
    _hard_file(path)
    plain, typed, used = _both(path, tmp_path, "hard", workers=workers)
    assert used
    _same(plain, typed)
    schema = infer_schema(typed)
    assert schema.column_names == ["a", "t", "late", "ab"] and schema["a"].kind == "float64"


def test_bad_lines_left_out_type_as_before(tmp_path):
    path = _settled(tmp_path / "bad.jsonl", b'{"a": 1}\n{"a": \n{"a": 2.5}\n')
    plain, typed, used = _both(path, tmp_path, "bad", on_bad_lines="skip")
    assert len(typed) == 2 and not used
    _same(plain, typed)


def _indexed_while(path, change, tmp_path) -> tuple[JSONLDataset, bytes, int]:
    """(a dataset of ``path`` — three chunks and more of complete lines — typed alongside while another
    process runs ``change()`` at each chunk the scan shows, its bytes, how many times it ran)."""
    out = bytearray()
    _fill_to(out, 3 * CUT + 123, 0)
    path.write_bytes(bytes(out))
    runs = []

    class Meddled(alongside.ChunkTypes):
        def __call__(self, data, lo, hi, starts):
            runs.append(change())
            super().__call__(data, lo, hi, starts)

    with index_alongside.observing_chunks(Meddled):
        ds = JSONLDataset(path, index_dir=tmp_path / "along", workers=2)
    return ds, bytes(out), len(runs)


def test_file_cut_short_under_the_scan_is_scanned_again(tmp_path):
    path = tmp_path / "cut.jsonl"
    cut = []  # (once, at the first chunk)
    typed, _, runs = _indexed_while(path, lambda: cut or cut.append(os.truncate(path, 1000)), tmp_path)
    assert runs and cut
    assert os.path.getsize(path) == 1000 and typed._files[0].end <= 1000
    plain = JSONLDataset(path, index_dir=tmp_path / "plain")
    assert [typed[i] for i in range(len(typed))] == [plain[i] for i in range(len(plain))]
    assert _outcome(typed) == _outcome(plain)


def _append_a_line(path) -> None:
    """A writer appending a complete line, then the map's next version check due (CHECK_SECONDS)."""
    with open(path, "ab") as f:
        f.write(b'{"a": 99, "t": "late"}\n')
    time.sleep(0.15)


def test_a_file_appended_to_while_indexed_keeps_the_lines_it_had(tmp_path):
    path = tmp_path / "growing.jsonl"
    ds, out, runs = _indexed_while(path, lambda: _append_a_line(path), tmp_path)
    n = out.count(b"\n")
    assert runs and len(ds) == n and ds[n - 1] == json.loads(out.splitlines()[-1])
    original = _settled(tmp_path / "original.jsonl", out)
    assert _outcome(ds) == _outcome(JSONLDataset(original, index_dir=tmp_path / "plain"))


def test_an_observer_that_fails_leaves_the_types_to_the_pass_after(tmp_path, monkeypatch):
    path = tmp_path / "hard.jsonl"
    _hard_file(path)
    calls = []
    real = alongside.scan_parts

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise MemoryError("no room for a chunk's columns")
        return real(*args, **kwargs)

    monkeypatch.setattr(alongside, "scan_parts", failing)
    plain, typed, used = _both(path, tmp_path, "fail")
    assert len(calls) > 2 and not used
    _same(plain, typed)


def _described(monkeypatch) -> list:
    """What each ChunkTypes.parts call answered (None: the runs did not describe the index)."""
    described: list = []
    parts = alongside.ChunkTypes.parts
    monkeypatch.setattr(
        alongside.ChunkTypes, "parts", lambda self, f: described.append(parts(self, f)) or described[-1]
    )
    return described


def test_fill_missing_types_alongside(tmp_path, monkeypatch):
    import sjsonl

    path = _settled(tmp_path / "d.jsonl", b'{"a": 1}\n{"b": "x"}\n')
    described = _described(monkeypatch)
    ds = sjsonl.load_dataset(str(path), split="train", fill_missing=True, cache_dir=str(tmp_path / "idx"))
    assert len(described) == 1 and described[0] is not None
    assert list(ds) == [{"a": 1, "b": None}, {"a": None, "b": "x"}]


def test_starts_in_map_refuses_what_it_cannot_read(tmp_path):
    path = _settled(tmp_path / "d.jsonl", b'{"a": 1}\n')
    storage = JSONLDataset(path, index_dir=tmp_path)._files[0].storage
    room = np.empty(8, dtype=np.uint64)
    native = index_alongside.NATIVE
    assert native is not None
    assert native.starts_in_map(storage.buffer(), 0, 9, room)[:2] == (1, 0)
    with pytest.raises(IndexError):
        native.starts_in_map(storage.buffer(), 0, 10, room)
    with pytest.raises(TypeError):
        native.starts_in_map(b'{"a": 1}\n', 0, 9, room)


def test_mindspore_loader_types_alongside(tmp_path, monkeypatch):
    pytest.importorskip("mindspore")
    from sjsonl.mindspore import load_dataset

    path = tmp_path / "hard.jsonl"
    _hard_file(path)
    described = _described(monkeypatch)
    gd = load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "idx"))
    assert len(described) == 1 and described[0] is not None
    rows = list(gd.create_dict_iterator(num_epochs=1, output_numpy=True))
    assert len(rows) == len(JSONLDataset(path, index_dir=tmp_path / "plain"))
    assert gd.get_col_names() == ["a", "t", "late", "ab"] and rows[0]["a"].dtype == np.float64
