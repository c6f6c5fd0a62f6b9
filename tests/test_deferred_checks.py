"""A dataset of many files defers each index's O(records) checks (CRC-32, order, bounds) to the first read
of that file, so opening a corpus costs O(files); a corrupt index found then is rebuilt as an open would
have, and a copy in another process accepts its index extended in place after an append. Real files."""

from __future__ import annotations

import json
import os
import pickle

from sjsonl import JSONLDataset
from sjsonl.index import store


def write(path, start, n):
    path.write_text("".join(json.dumps({"i": i}) + "\n" for i in range(start, start + n)))
    return path


def line_starts(path) -> list[int]:
    """Where each line of ``path`` starts, from its bytes (no blank lines in these files)."""
    data = path.read_bytes()
    return [0] + [i + 1 for i, byte in enumerate(data[:-1]) if byte == 0x0A]


def identity_of(index_path):
    return store.read_index(index_path, verify=False).identity


def test_opening_many_files_checks_each_index_on_its_first_read(tmp_path):
    files = [write(tmp_path / f"{k}.jsonl", 10 * k, 10) for k in range(4)]
    for f in files:
        JSONLDataset(f)  # indexes built (and checked) by other opens
    store._VERIFIED.clear()  # as in a fresh process
    ds = JSONLDataset(files)
    ids = [identity_of(p) for p in ds.index_paths]
    assert not any(i in store._VERIFIED for i in ids) and len(ds) == 40  # opened, nothing checked
    assert ds[25] == {"i": 25}
    assert [i in store._VERIFIED for i in ids] == [False, False, True, False]  # the file read
    assert [r["i"] for r in ds] == list(range(40))


def test_a_corrupt_index_found_on_first_read_is_rebuilt(tmp_path):
    files = [write(tmp_path / f"{k}.jsonl", 10 * k, 10) for k in range(3)]
    index = JSONLDataset(files[1]).index_paths[0]
    found = store.read_index(index)
    header_len = (
        os.path.getsize(index) - found.offsets.nbytes - (len(found.meta.to_json()) + store._TAIL.size)
    )
    with open(index, "r+b") as f:  # swap two offsets: the header and trailer stay valid, the CRC does not
        f.seek(header_len)
        raw = bytearray(f.read(found.offsets.nbytes))
        item = found.offsets.itemsize
        raw[item : 2 * item], raw[2 * item : 3 * item] = raw[2 * item : 3 * item], raw[item : 2 * item]
        f.seek(header_len)
        f.write(raw)
    store._VERIFIED.clear()
    ds = JSONLDataset(files)  # opens: the check is deferred
    assert [r["i"] for r in ds] == list(range(30))  # the bad index was rebuilt on first read
    assert store.read_index(index).offsets.tolist() == line_starts(files[1])  # and saved, right


def test_a_copy_accepts_its_index_extended_in_place_after_an_append(tmp_path):
    a, b = write(tmp_path / "a.jsonl", 0, 10), write(tmp_path / "b.jsonl", 10, 10)
    ds = JSONLDataset([a, b])
    _ = ds[15]  # checked and mapped here
    copy = pickle.dumps(ds)  # what a worker receives: the offsets are mapped again there
    with open(b, "a") as f:
        f.write(json.dumps({"i": 99}) + "\n")
    grown = JSONLDataset([a, b])  # extends b's index in place
    assert len(grown) == 21
    worker = pickle.loads(copy)
    assert len(worker) == 20 and [r["i"] for r in worker] == list(range(20))
    assert worker._files[1].offsets.tolist() == line_starts(b)[:10]
    assert grown._files[1].offsets.tolist() == line_starts(b)
