"""sjsonl.dask on a real ``dask.distributed.LocalCluster`` of two worker processes (slow tier): missing
indexes built on the workers, then rows equal ``JSONLDataset``'s over plain, ``.gz``, ``.zst``, several
files and S3 (moto behind tests/_s3_proxy.py), with known divisions and one partition per balanced record
range."""

from __future__ import annotations

import uuid

import pytest

from sjsonl import JSONLDataset
from sjsonl.dask import partition_rows, read_jsonl, read_jsonl_bag
from sjsonl.data.parts import expand_paths
from sjsonl.sampling.ranges import record_ranges

from ._cluster_data import lines, rows, write_corpus
from ._s3_proxy import s3_proxy  # noqa: F401

pytestmark = pytest.mark.slow
distributed = pytest.importorskip("distributed")


@pytest.fixture
def client():
    """Two worker processes, started after conftest's per-test cache directory is set: they index remote
    files into the same cache as this process reads them from (as workers must share an index place)."""
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as c,
        distributed.Client(c) as client,
    ):
        yield client


def test_local_cluster_rows_are_exact_over_every_kind_of_file(tmp_path, client, s3, s3_proxy):  # noqa: F811
    root = write_corpus(tmp_path)
    bucket = f"sjsonl-{uuid.uuid4().hex[:12]}"
    s3.client.create_bucket(Bucket=bucket)
    data = lines(rows(80, 1000))
    s3.client.put_object(Bucket=bucket, Key="part.jsonl", Body=data)
    s3_proxy.serve_locally(bucket, "part.jsonl", data)
    url, options = f"s3://{bucket}/part.jsonl", s3_proxy.options
    reads = {
        "plain": [root / "a.jsonl"], "gz": [root / "b.jsonl.gz"], "zst": [root / "d.jsonl.zst"],
        "dir": [root], "s3": [url],
    }  # fmt: skip
    for name, paths in reads.items():
        kw = {"storage_options": options} if name == "s3" else {}
        for k in (1, 3, 7):
            df = read_jsonl(paths, npartitions=k, **kw)  # the running client builds the indexes
            files = expand_paths(paths, options)
            expected = list(JSONLDataset(files, build_index_on_load=False, **kw))
            counts = [len(JSONLDataset(f, build_index_on_load=False, **kw)) for f in files]
            assert df.known_divisions and partition_rows(df) == [len(r) for r in record_ranges(counts, k)]
            pdf = df.compute()  # on the two worker processes
            assert pdf.to_dict("records") == expected, (name, k)
            assert pdf.index.tolist() == list(range(len(expected)))
            assert read_jsonl_bag(paths, npartitions=k, **kw).compute() == expected
    built = sorted(p.name for p in root.glob("*.index.npy"))
    assert built == ["a.index.npy", "b.jsonl.gz.index.npy", "c.index.npy", "d.jsonl.zst.index.npy"]
    s3_proxy.reset()
