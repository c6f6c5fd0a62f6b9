"""sjsonl.dask on a real ``dask.distributed.LocalCluster`` of two worker processes (slow tier): missing
indexes built on the workers, then rows equal ``JSONLDataset``'s over plain, ``.gz``, ``.zst``, several
files and S3 (moto behind tests/_s3_proxy.py), with known divisions and one partition per balanced record
range."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

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


#: A plain script (no main guard) reading a .gz through sjsonl.dask with Dask's default DataFrame scheduler
#: (threads) and a Bag on threads: nothing in it starts a process that would re-run the script.
SCRIPT = """
import gzip, json, sys
from sjsonl.dask import read_jsonl, read_jsonl_bag
path = sys.argv[1]
with gzip.open(path, "wt") as f:
    f.writelines(json.dumps({"i": i, "big": 2**70 + i}) + "\\n" for i in range(1000))
df = read_jsonl(path, npartitions=3)
print(json.dumps({
    "rows": df.compute()["i"].tolist(), "big": str(df["big"].compute().iloc[-1]),
    "bag": read_jsonl_bag(path, npartitions=3).count().compute(scheduler="threads"),
}))
"""


def test_a_script_without_a_main_guard(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "d.jsonl.gz")], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"rows": list(range(1000)), "big": str(2**70 + 999), "bag": 1000}
