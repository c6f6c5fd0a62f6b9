"""ds[i] served by the compiled lookup (sjsonl/data/_hot.c) gives exactly what the Python path gives: every
record, negative numbers, out-of-range errors, records it declines (NaN, invalid JSON: located by the
Python path), and it is never consulted once the dataset reads something else (a view, a format set in
place, a refresh, a pickled copy, a compact index)."""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
import pickle

import numpy as np
import pytest

from sjsonl import JSONLDataset, RecordDecodeError
from sjsonl.data import dataset as dataset_module
from sjsonl.errors import ArgumentTypeError

from .conftest import missing

HOT = dataset_module.HOT


@pytest.fixture(autouse=True)
def _needs_native():
    if HOT is None:
        missing("the compiled lookup (sjsonl.data._hot) is not built here", "SJSONL_REQUIRE_NATIVE")


def python_path(ds: JSONLDataset, i: int):
    """ds[i] read in Python: the file's own record(), whose parse is tried fast, then the stdlib's."""
    return ds._files[0].record(i + len(ds) if i < 0 else i)


def write(tmp_path, lines: list[bytes], name: str = "d.jsonl") -> str:
    path = tmp_path / name
    path.write_bytes(b"".join(lines))
    return str(path)


def test_every_record_and_negative_numbers_as_the_python_path(tmp_path):
    lines = [b'{"id": %d, "t": "caf\xc3\xa9 %d"}\n' % (k, k) for k in range(300)] + [
        b"\n",
        b"  \n",
        b"[1, 2]",
    ]
    ds = JSONLDataset(write(tmp_path, lines))
    assert ds[0] == {"id": 0, "t": "café 0"}
    assert isinstance(ds._hot, HOT.HotRecords)  # the compiled path is armed
    for i in range(-len(ds), len(ds)):
        assert ds[i] == python_path(ds, i)
    assert ds[-1] == [1, 2]
    with pytest.raises(IndexError, match="out of range"):
        ds[len(ds)]
    with pytest.raises(IndexError, match="out of range"):
        ds[-len(ds) - 1]
    with pytest.raises(IndexError):
        ds[2**70]  # too large for C: the Python path says so
    assert ds[np.int64(3)] == ds[3]  # other int-like keys: the Python path
    with pytest.raises(ArgumentTypeError):
        ds[True]  # as before: a bool is no record number
    assert ds[1:3] == [ds[1], ds[2]]


def test_records_it_declines_go_the_python_way(tmp_path):
    lines = [b'{"x": NaN}\n', b'{"x": 1}\n', b'{"x": \n', b'{"big": 18446744073709551616}\n']
    ds = JSONLDataset(write(tmp_path, lines))
    assert ds[1] == {"x": 1}
    assert math.isnan(ds[0]["x"])
    assert ds[3] == {"big": 18446744073709551616}
    with pytest.raises(RecordDecodeError) as err:
        ds[2]
    assert err.value.line == 3 and err.value.offset == 20


def test_records_are_fresh_objects(tmp_path):
    ds = JSONLDataset(write(tmp_path, [b'{"a": [1]}\n']))
    first = ds[0]
    first["a"].append(2)
    assert ds[0] == {"a": [1]}


@pytest.mark.parametrize("size", [1, 300, 70_000])
def test_every_offset_width(tmp_path, size):
    # uint8, uint16 and uint32 offsets (the index's dtype is the smallest that holds the file's size)
    lines = [b"%d\n" % k for k in range(size)][: max(1, size // 3)]
    ds = JSONLDataset(write(tmp_path, lines))
    assert [ds[i] for i in range(len(ds))] == [python_path(ds, i) for i in range(len(ds))]


def test_never_consulted_once_the_dataset_reads_something_else(tmp_path):
    path = write(tmp_path, [b'{"id": %d}\n' % k for k in range(10)])
    ds = JSONLDataset(path)
    assert ds[0] == {"id": 0} and isinstance(ds._hot, HOT.HotRecords)
    ds.set_format("numpy", columns=["id"])  # in place: the records change shape
    assert isinstance(ds[0]["id"], np.ndarray)
    ds.reset_format()
    assert ds[0] == {"id": 0}
    ds.set_transform(lambda batch: {"id": [v * 10 for v in batch["id"]]})
    assert ds[2] == {"id": 20}
    ds.reset_format()
    assert ds[2] == {"id": 2}
    shuffled = ds.shuffle(seed=1)
    assert [shuffled[i] for i in range(10)] != [ds[i] for i in range(10)]
    assert sorted(shuffled[i]["id"] for i in range(10)) == list(range(10))
    assert ds.select_columns(["x"])[0] == {"x": None}
    with open(path, "ab") as f:
        f.write(b'{"id": 10}\n')
    assert ds.refresh()[-1] == {"id": 10} and len(ds) == 11
    for clone in (copy.copy(ds), pickle.loads(pickle.dumps(ds))):
        assert clone._hot is None and clone[-1] == {"id": 10} and isinstance(clone._hot, HOT.HotRecords)


def test_a_compact_index_reads_through_its_own_decoder(tmp_path):
    path = write(tmp_path, [b'{"id": %d}\n' % k for k in range(1000)])
    ds = JSONLDataset(path, compact=True)
    assert [ds[i] for i in (0, 999, -1, 500)] == [{"id": 0}, {"id": 999}, {"id": 999}, {"id": 500}]
    assert not isinstance(ds._hot, HOT.HotRecords)


def test_hot_records_refuses_what_it_cannot_read():
    with pytest.raises(TypeError):
        HOT.HotRecords(b"[1]\n", np.zeros(1, dtype=np.float64).data, 4, len, len)
    with pytest.raises(TypeError):
        HOT.HotRecords(b"[1]\n", np.zeros(1, dtype=np.uint32).data, 4, "not callable", len)
    hot = HOT.HotRecords(b"[1]\n[22]\n", np.array([0, 4], dtype=np.uint32).data, 9, bytes, max)
    assert len(hot) == 2 and hot.get(0) == b"[1]\n" and hot.get(-1) == b"[22]\n"
    with pytest.raises(IndexError):
        hot.get(2)


def test_a_guarded_map_is_sliced_through_its_c_api_exactly_as_through_its_slices(tmp_path):
    """HotRecords slices a GuardedMap through the map's `_read_api` capsule (no slice object): the same
    bytes as ``m[a:b]``, clamped at the map's end the same way, and the same error once the file is cut."""
    from sjsonl.storage import _guarded

    data = b"".join(b'{"k": %04d}\n' % k for k in range(1000))  # 12 bytes each: three pages
    path = tmp_path / "d.jsonl"
    path.write_bytes(data)
    starts = np.array([0, 12, 24, 8800, len(data) - 3, len(data) + 5], dtype=np.uint64)
    with open(path, "rb") as f:
        m = _guarded.GuardedMap(f.fileno(), len(data))
    hot = HOT.HotRecords(m, starts.data, len(data) + 20, bytes, max)
    bounds = [*starts.tolist(), len(data) + 20]
    assert type(_guarded._read_api).__name__ == "PyCapsule"
    assert [hot.get(i) for i in range(len(starts))] == [m[a:b] for a, b in itertools.pairwise(bounds)]
    assert hot.get(0) == b'{"k": 0000}\n' and hot.get(4) == data[-3:] and hot.get(5) == b""
    with open(path, "r+b") as f:
        f.truncate(100)  # the pages behind record 3 are gone: a read of them is an error, not SIGBUS
    with pytest.raises(OSError, match="could not read bytes"):
        hot.get(3)
    assert hot.get(1) == m[12:24] == b'{"k": 0001}\n'


def test_a_dataset_let_go_is_freed_with_its_map_and_descriptor(tmp_path):
    """A HotRecords holds its file's slow path (a bound method of the file that holds it): a cycle, which
    the cyclic GC must be able to free — it could not, and every dataset dropped kept its file, map and
    descriptor (the cold benchmark found it: its data stayed mapped, so out of reach of eviction)."""
    import gc
    import weakref

    path = write(tmp_path, [b'{"id": %d, "x": NaN}\n' % k for k in range(3000)])
    ds = JSONLDataset(path)
    assert ds[5]["id"] == 5 and len(list(ds)) == 3000  # NaN: the slow path is used too
    it = iter(ds)
    next(it)
    file = weakref.ref(ds._files[0])
    assert isinstance(ds._files[0]._hot_records, HOT.HotRecords)
    del ds, it
    gc.collect()
    assert file() is None
    with open("/proc/self/maps") as maps:
        assert str(path) not in maps.read()
    assert str(path) not in [os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")]


def test_iteration_in_c_gives_the_python_blocks_records(tmp_path):
    lines = [b'{"id": %d, "t": "caf\\u00e9"}\r\n' % k for k in range(20_000)]
    lines[7] = b'{"x": NaN}\n\n  \n'
    lines[9_000] = b'{"big": 18446744073709551616}\n'
    lines[-1] = lines[-1].rstrip()  # no final newline
    ds = JSONLDataset(write(tmp_path, lines))
    f = ds._files[0]
    assert type(iter(ds)).__name__ == "chain" and type(f.iter_records()).__name__ == "RecordIter"
    python = list(f._iter_blocks(0, len(f), None))
    got = list(ds)
    assert len(got) == 20_000 and repr(got) == repr(python)  # (repr: NaN != NaN)
    assert list(f.iter_records(8_190, 8_200)) == python[8_190:8_200]
    assert list(f.iter_records(5, 5)) == []
    with pytest.raises(IndexError):
        f.iter_records(0, len(f) + 1)


def test_iteration_in_c_locates_a_bad_record_and_checks_the_file_per_block(tmp_path):
    lines = [b"[%d]\n" % k for k in range(10_000)]
    lines[9_500] = b"[1, \n"
    path = write(tmp_path, lines)
    ds = JSONLDataset(path)
    it = iter(ds)
    assert [next(it) for _ in range(9_500)] == [[k] for k in range(9_500)]
    with pytest.raises(RecordDecodeError) as err:
        next(it)
    assert err.value.line == 9_501
    checks = []
    hot = ds._files[0].hot_records()
    assert len(list(hot.iter(0, 9_000, lambda: checks.append(1)))) == 9_000
    assert checks == [1, 1]  # before records 0 and 8192


def test_many_files_iterate_in_order(tmp_path):
    a = write(tmp_path, [b"[%d]\n" % k for k in range(3)], "a.jsonl")
    b = write(tmp_path, [b"[%d]\n" % k for k in range(3, 5)], "b.jsonl")
    ds = JSONLDataset([a, b])
    assert list(ds) == [[0], [1], [2], [3], [4]] and list(ds) == [ds[i] for i in range(5)]


def test_a_projection_that_skips_iterates_in_c_and_locates_errors(tmp_path):
    lines = [b'{"id": %d, "text": "%s"}\n' % (k, b"x" * 300) for k in range(2_000)]
    lines[1_500] = b'{"id": 1500, "text": "caf\xe9"}\n'  # invalid UTF-8 in a skipped field
    ds = JSONLDataset(write(tmp_path, lines))
    sel = ds.select_columns(["id"])
    sel._decode._full, sel._decode._probe = False, None  # the projected way, whatever was measured
    f = sel._files[0]
    assert type(f.iter_records(decode=sel._decode)).__name__ == "RecordIter"
    it = iter(sel)
    assert [next(it) for _ in range(1_500)] == [{"id": k} for k in range(1_500)]
    with pytest.raises(RecordDecodeError) as err:
        next(it)
    assert err.value.line == 1_501 and "UTF-8" in str(err.value)


def test_a_projection_in_c_gives_what_project_gives_record_by_record(tmp_path):
    """The projected way in C (FieldProjection.steps: struct decode, UTF-8 check, struct -> dict) against
    project() on every record: columns present, missing, null, nested, big ints, NaN (the slow path),
    records that are not objects, escapes msgspec declines, invalid UTF-8 in a skipped field."""
    lines = [b'{"id": %d, "t": "%s", "n": {"k": [1, 2]}}\n' % (k, b"y" * (k % 7)) for k in range(3_000)]
    lines[3] = b'{"t": "no id"}\n'
    lines[4] = b'{"id": null, "n": 18446744073709551616}\n'
    lines[5] = b'{"id": NaN, "t": "x"}\n'
    lines[6] = b'{"id": 6, "t": "\\ud800"}\n'
    lines[7] = b'{"id": 7, "id": 8}\n'
    lines[8] = b'{"id": 9, "t": "caf\\u00e9 \xe8\xae\xad"}\n'
    path = write(tmp_path, lines)
    sel = JSONLDataset(path).select_columns(["id", "n"])
    decode = sel._decode
    decode._full, decode._probe = False, None  # the projected way, whatever was measured
    assert decode.steps() is not None
    f = sel._files[0]
    assert type(f.iter_records(decode=decode)).__name__ == "RecordIter"
    got = list(sel)
    python = [decode.project(f.raw(i)) for i in range(len(f))]
    assert repr(got) == repr(python)  # (repr: NaN != NaN)
    assert got[3] == {"id": None, "n": None} and got[7] == {"id": 8, "n": None}
    assert got[4]["n"] == 18446744073709551616 and math.isnan(got[5]["id"])


def test_hot_records_check_and_convert_steps():
    data = b"[1]\n[2]\n[3]\n[4]\n"
    starts = np.array([0, 4, 8, 12], dtype=np.uint8).data

    def slow(a, b):
        return ("slow", data[a:b])

    def check(raw):
        if raw == b"[3]\n":
            raise ValueError("a check that fails is the slow path's to decide")
        return raw != b"[2]\n"

    def convert(value):
        if value == [4]:
            raise KeyError("so is a conversion that fails")
        return {"v": value[0]}

    hot = HOT.HotRecords(data, starts, len(data), json.loads, slow, check, convert)
    assert [hot.get(i) for i in range(4)] == [
        {"v": 1},
        ("slow", b"[2]\n"),
        ("slow", b"[3]\n"),
        ("slow", b"[4]\n"),
    ]
    assert list(hot.iter(0, 4, None)) == [hot.get(i) for i in range(4)]
    assert HOT.HotRecords(data, starts, len(data), json.loads, slow, None, None).get(1) == [2]
    with pytest.raises(TypeError):
        HOT.HotRecords(data, starts, len(data), json.loads, slow, "not callable")
