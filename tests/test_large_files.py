"""No 4 GiB cap: a data file past 2**32 bytes (sparse: its gap reads as NUL bytes, one long line that
no test reads) is indexed with uint64 offsets — by a full build, and by extending its index when an
append crosses 4 GiB — and records past 4 GiB read right on every path: ds[i], raw bytes, pread mode,
views, shuffles, the torch sampler and DataLoader, MindSpore. Removed after."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

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


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """(path, record starts, the extended dataset, a full build): one sparse file, indexed below 4 GiB,
    grown past it. Reading the hole costs ~5 s per GiB the first time (the kernel fills zero pages), so
    the module reads it once cold and once from the page cache."""
    root = tmp_path_factory.mktemp("big")
    path = root / "big.jsonl"
    starts = write_sparse(path, 4 * GiB - 4096, range(HEAD + 1, HEAD + 3))
    try:
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
        yield path, starts, extended, full
    finally:
        os.remove(path)


def beyond():
    return list(APPENDED)


def test_offsets_past_4_gib_are_uint64_and_exact(big):
    _, starts, extended, full = big
    for ds in (extended, full):
        offsets = ds._files[0].offsets
        assert offsets.dtype == np.uint64 and offsets.tolist() == starts and int(offsets[-1]) > 2**32
        assert len(ds) == len(starts) == HEAD + 3 + len(APPENDED)


def test_records_past_4_gib_read_right_on_every_read_path(big):
    path, _, ds, _ = big
    tail = beyond()
    assert [ds[i]["i"] for i in tail] == tail and ds[-1]["i"] == tail[-1]
    assert [r["i"] for r in ds[tail]] == tail  # one batched read
    assert ds.raw(tail[0]) == record(tail[0]).rstrip(b"\n")
    pread = JSONLDataset(path, mmap=False, index_dir=os.path.dirname(ds.index_paths[0]))
    assert [pread[i]["i"] for i in tail] == tail
    view = ds.select(tail).shuffle(seed=3)
    assert sorted(r["i"] for r in view) == tail and [r["i"] for r in view] != tail
    assert sorted(r["i"] for k in range(3) for r in ds.select(tail).shard(3, k)) == tail


def test_torch_and_mindspore_read_records_past_4_gib(big):
    torch = pytest.importorskip("torch")
    _, _, ds, _ = big
    from sjsonl.torch import DistributedSampler, collate_records

    tail = ds.select(beyond())
    seen = []
    for rank in range(2):
        sampler = DistributedSampler(tail, num_replicas=2, rank=rank, shuffle=True, seed=1)
        loader = torch.utils.data.DataLoader(tail, batch_size=4, sampler=sampler, collate_fn=collate_records)
        seen += [int(i) for b in loader for i in b["i"]]
    assert sorted(set(seen)) == beyond()
    pytest.importorskip("mindspore")
    from sjsonl.mindspore import to_generator_dataset

    # the types from these rows: every row of the file includes the NUL line, which is no JSON
    gd = to_generator_dataset(tail, column_names=["i"], infer_rows=len(tail))
    assert [int(r[0]) for r in gd.create_tuple_iterator(output_numpy=True, num_epochs=1)] == beyond()
