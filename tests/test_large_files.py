"""No 4 GiB cap: a data file past 2**32 bytes (sparse: its gap reads as NUL bytes, one long line that
no test reads) is indexed with uint64 offsets — by a full build, and by extending its index when an
append crosses 4 GiB — and records past 4 GiB read right on every path: ds[i], raw bytes, pread mode,
views and shuffles (the torch sampler and DataLoader: tests/test_large_files_torch.py; MindSpore:
tests/test_large_files_mindspore.py). The file (tests/_large_file.py) is removed after the session."""

from __future__ import annotations

import os

import numpy as np
import pytest

from sjsonl import JSONLDataset

from ._large_file import APPENDED, HEAD, beyond, record

pytestmark = pytest.mark.slow  # the >4 GiB file takes 10-20 s to build (tests/_large_file.py)


def test_offsets_past_4_gib_are_uint64_and_exact(file_past_4_gib):
    _, starts, extended, full = file_past_4_gib
    for ds in (extended, full):
        offsets = ds._files[0].offsets
        assert offsets.dtype == np.uint64 and offsets.tolist() == starts and int(offsets[-1]) > 2**32
        assert len(ds) == len(starts) == HEAD + 3 + len(APPENDED)


def test_records_past_4_gib_read_right_on_every_read_path(file_past_4_gib):
    path, _, ds, _ = file_past_4_gib
    tail = beyond()
    assert [ds[i]["i"] for i in tail] == tail and ds[-1]["i"] == tail[-1]
    assert [r["i"] for r in ds[tail]] == tail  # one batched read
    assert ds.raw(tail[0]) == record(tail[0]).rstrip(b"\n")
    pread = JSONLDataset(path, mmap=False, index_dir=os.path.dirname(ds.index_paths[0]))
    assert [pread[i]["i"] for i in tail] == tail
    view = ds.select(tail).shuffle(seed=3)
    assert sorted(r["i"] for r in view) == tail and [r["i"] for r in view] != tail
    assert sorted(r["i"] for k in range(3) for r in ds.select(tail).shard(3, k)) == tail
