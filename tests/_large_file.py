"""A data file past 4 GiB for tests/test_large_files*.py: sparse (its gap reads as NUL bytes, one long line
that no test reads), indexed below 4 GiB and then grown past it by an append. Built once per session by the
``file_past_4_gib`` fixture (tests/conftest.py): reading the hole costs ~5 s per GiB the first time."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from sjsonl import JSONLDataset

GiB = 1 << 30
HEAD, TAIL = 5, 9


def record(i: int) -> bytes:
    return json.dumps({"i": i, "text": f"record {i}"}).encode() + b"\n"


def write_sparse(path, gap_to: int, tail: range) -> list[int]:
    """HEAD records, a hole up to ``gap_to`` (NUL bytes: one line), then ``tail`` records; their starts."""
    starts, pos = [], 0
    with open(path, "wb") as f:
        for i in range(HEAD):
            starts.append(pos)
            pos += f.write(record(i))
        starts.append(pos)  # the NUL line starts here
        f.seek(gap_to)
        pos = gap_to + f.write(b"\n")
        for i in tail:
            starts.append(pos)
            pos += f.write(record(i))
    return starts


APPENDED = range(HEAD + 3, HEAD + 3 + 200)  # ~6 KB, appended past 2**32 bytes


def beyond():
    return list(APPENDED)


def build(root: Path):
    """(path, record starts, the extended dataset, a full build): one sparse file, indexed below 4 GiB,
    grown past it — so the file is read once cold and once from the page cache."""
    path = root / "big.jsonl"
    starts = write_sparse(path, 4 * GiB - 4096, range(HEAD + 1, HEAD + 3))
    first = JSONLDataset(path, index_dir=root / "a")
    assert first._files[0].offsets.dtype == np.uint32 and first._files[0].offsets.tolist() == starts
    pos = os.path.getsize(path)
    with open(path, "ab") as f:
        for i in APPENDED:
            starts.append(pos)
            pos += f.write(record(i))
    assert os.path.getsize(path) > 2**32
    extended = JSONLDataset(path, index_dir=root / "a")  # only the end is scanned
    full = JSONLDataset(path, index_dir=root / "b")  # every byte scanned
    return path, starts, extended, full
