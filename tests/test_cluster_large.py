"""A JSONL file past 4 GiB of real records (not sparse: every line a record) through the cluster adapters
(slow tier): the parts' row counts and bytes add up to the file exactly, and the part that crosses byte 2**32
reads the same records as ``JSONLDataset`` — as a Ray read task and as a Dask partition. The file is removed
after."""

from __future__ import annotations

import pytest

from sjsonl import JSONLDataset, build_indexes
from sjsonl.data.parts import open_corpus

from ._cluster_data import need_ray
from ._large_file import GiB

pytestmark = pytest.mark.slow

WIDTH = 1024  # bytes of every line: record i starts at byte i * WIDTH
RECORDS = (4 * GiB + 64 * 1024 * 1024) // WIDTH + 3  # a little past 4 GiB
PARTS = 64  # ~66 MiB each


def line(i: int) -> bytes:
    head = b'{"i":%d,"text":"' % i
    return head + b"x" * (WIDTH - len(head) - 3) + b'"}\n'


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("past4g") / "big.jsonl"
    try:
        with open(path, "wb") as f:
            for lo in range(0, RECORDS, 8192):
                f.write(b"".join(line(i) for i in range(lo, min(RECORDS, lo + 8192))))
        assert path.stat().st_size == RECORDS * WIDTH > 2**32
        build_indexes([path], workers=2)
        yield path
    finally:
        for p in path.parent.iterdir():
            p.unlink()


def crossing(corpus) -> tuple[int, object]:
    """The part whose records cross byte 2**32, and its number."""
    parts = corpus.parts(PARTS)
    assert sum(p.rows for p in parts) == RECORDS and sum(p.nbytes for p in parts) == RECORDS * WIDTH
    k = next(k for k, p in enumerate(parts) if p.start * WIDTH <= 2**32 < (p.start + p.rows) * WIDTH)
    return k, parts[k]


def test_a_ray_read_task_across_4_gib_is_exact(big):
    need_ray()
    from sjsonl.ray import JSONLDatasource

    source = JSONLDatasource(big)  # the index is there: no Ray task is needed to open it
    tasks = source.get_read_tasks(PARTS)
    k, part = crossing(source.corpus)
    meta = tasks[k].metadata
    assert (meta.num_rows, meta.size_bytes) == (part.rows, part.rows * WIDTH)
    got = [r for block in tasks[k]() for r in block.to_pylist()]
    assert got == JSONLDataset(big, build_index_on_load=False)[part.start : part.start + part.rows]
    assert [r["i"] for r in got] == list(range(part.start, part.start + part.rows))


def test_a_dask_partition_across_4_gib_is_exact(big):
    from sjsonl.dask import partition_rows, read_jsonl

    df = read_jsonl(big, npartitions=PARTS)
    k, part = crossing(open_corpus(big))
    assert df.known_divisions and partition_rows(df)[k] == part.rows and df.divisions[k] == part.start
    pdf = df.get_partition(k).compute(scheduler="sync")
    assert pdf.index.tolist() == pdf["i"].tolist() == list(range(part.start, part.start + part.rows))
    assert (
        pdf.to_dict("records")
        == JSONLDataset(big, build_index_on_load=False)[part.start : part.start + part.rows]
    )
