"""sjsonl.ray on real Ray (slow tier): a local Ray started by a plain script (no main guard) in a subprocess,
and a two-node ``ray.cluster_utils.Cluster``. Rows equal ``JSONLDataset``'s over plain, ``.gz``, ``.zst``,
several files and S3 (moto behind tests/_s3_proxy.py); read tasks balanced to ±1 record with exact metadata;
missing indexes built by Ray tasks; a Dataset written back as indexed shards; the module's doctests. Ray's
session files go to a short temp directory that is removed after."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from sjsonl import JSONLDataset
from sjsonl.data.parts import expand_paths
from sjsonl.sampling.ranges import record_ranges

from ._cluster_data import COUNTS, lines, need_ray, ray_temp_dir, rows, write_corpus
from ._s3_proxy import s3_proxy  # noqa: F401

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]

#: A plain script, as a user writes one: no main guard. It prints one JSON line of what it saw.
READS = """
import doctest, json, math, os, sys
import ray
import sjsonl.ray
from sjsonl import JSONLDataset
from sjsonl.ray import JSONLDatasource, read_jsonl, write_jsonl

ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
ray.data.DataContext.get_current().execution_options.preserve_order = True  # rows compared in file order
cfg = json.loads(sys.argv[1])
so = cfg["storage_options"]
out = {"reads": {}, "nodes": len(ray.nodes())}
for name, paths in cfg["reads"].items():
    opts = {"storage_options": so} if any("://" in p for p in paths) else {}
    for k in (1, 3, 8):
        tasks = JSONLDatasource(paths, **opts).get_read_tasks(k)
        ds = read_jsonl(paths, override_num_blocks=k, **opts)
        got = ds.take_all()
        out["reads"][f"{name}/{k}"] = {
            "rows": [[r["i"], r["text"], str(r["big"])] for r in got],
            "count": ds.count(),
            "tasks": [[t.metadata.num_rows, t.metadata.size_bytes] for t in tasks],
            "files": [list(t.metadata.input_files) for t in tasks],
        }
# options the dataset has: fields, columns, bad lines skipped
base = cfg["reads"]["dir"]
out["columns"] = read_jsonl(base, columns=["i"], override_num_blocks=2).take(2)
out["fields"] = read_jsonl(base, fields=["big"], override_num_blocks=2).take(1)
out["bad"] = read_jsonl(cfg["bad"], on_bad_lines="skip", override_num_blocks=2).take_all()
# one Arrow schema for every block: the types it names; a value that does not fit raises
import pyarrow as pa
fixed = pa.schema([("i", pa.int32()), ("text", pa.string())])
typed = read_jsonl(base, columns=["i", "text"], arrow_schema=fixed, override_num_blocks=2)
out["typed"] = [str(typed.schema().types[0]), typed.count(), typed.take(1)]
task = JSONLDatasource(base, arrow_schema=pa.schema([("big", pa.int64())])).get_read_tasks(1)[0]
try:
    list(task())
    out["overflow"] = None
except (OverflowError, pa.ArrowInvalid) as exc:
    out["overflow"] = type(exc).__name__
# the way back: shards written with their indexes, read back exactly (big ints and NaN included)
items = [{"i": i, "big": 2**70 + i, "x": float("nan") if i == 3 else i / 2} for i in range(20)]
src = ray.data.from_items(items)
shards = write_jsonl(src.repartition(3), cfg["out"])
back = JSONLDataset(shards, build_index_on_load=False)
out["written"] = {"shards": len(shards), "rows": sorted((r["i"], str(r["big"]), repr(r["x"])) for r in back)}
out["again"] = sorted(r["i"] for r in read_jsonl(cfg["out"], override_num_blocks=4).take_all())
failed, attempted = doctest.testmod(sjsonl.ray, optionflags=doctest.ELLIPSIS)
out["doctests"] = [failed, attempted]
ray.shutdown()
print(json.dumps(out))
"""


def run_script(script: str, cfg: dict, cwd: Path, temp: str) -> dict:
    env = {**os.environ, "RAY_TMPDIR": temp, "PYTHONPATH": str(REPO / "src"), "RAY_USAGE_STATS_ENABLED": "0"}
    path = cwd / f"script-{uuid.uuid4().hex[:8]}.py"  # run as a user runs a file: python script.py
    path.write_text(script)
    proc = subprocess.run(
        [sys.executable, str(path), json.dumps(cfg)], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-6000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def expected_rows(paths, options=None) -> list[list]:
    ds = JSONLDataset(paths, build_index_on_load=False, storage_options=options)
    return [[r["i"], r["text"], str(r["big"])] for r in ds]


@pytest.fixture
def remote_file(s3, s3_proxy):  # noqa: F811
    """An s3:// object (80 records) served through the proxy, and the options that reach it."""
    name = f"sjsonl-{uuid.uuid4().hex[:12]}"
    s3.client.create_bucket(Bucket=name)
    data = lines(rows(80, 1000))
    s3.client.put_object(Bucket=name, Key="part.jsonl", Body=data)
    s3_proxy.serve_locally(name, "part.jsonl", data)
    yield f"s3://{name}/part.jsonl", s3_proxy.options
    s3_proxy.reset()


def test_read_write_and_doctests_on_a_local_ray(tmp_path, remote_file):
    need_ray()
    root = write_corpus(tmp_path / "corpus")
    (tmp_path / "bad.jsonl").write_text('{"i": 1}\n{oops\n{"i": 2}\n')
    url, options = remote_file
    reads = {
        "plain": [str(root / "a.jsonl")],
        "gz": [str(root / "b.jsonl.gz")],
        "zst": [str(root / "d.jsonl.zst")],
        "dir": [str(root)],
        "s3": [url],
    }
    cfg = {
        "reads": reads,
        "storage_options": options,
        "bad": str(tmp_path / "bad.jsonl"),
        "out": str(tmp_path / "out"),
    }
    assert not list(root.glob("*.index.*"))  # the Ray tasks build them
    with ray_temp_dir() as temp:
        out = run_script(READS, cfg, tmp_path, temp)
        assert os.listdir(temp)  # Ray's session was there ...
    assert not os.path.exists(temp)  # ... and is gone
    assert sorted(p.name for p in root.glob("*.index.npy")) == [
        "a.index.npy", "b.jsonl.gz.index.npy", "c.index.npy", "d.jsonl.zst.index.npy",
    ]  # fmt: skip
    for name, paths in reads.items():
        files = expand_paths(paths, options)
        want = expected_rows(files, options)
        counts = [len(JSONLDataset(f, build_index_on_load=False, storage_options=options)) for f in files]
        for k in (1, 3, 8):
            got = out["reads"][f"{name}/{k}"]
            assert got["rows"] == want, (name, k)  # every record, in order, big ints exact
            assert got["count"] == len(want)
            sizes = [n for n, _ in got["tasks"]]
            assert sizes == [len(r) for r in record_ranges(counts, k)]  # balanced: ±1 record
            assert max(sizes) - min(sizes) <= 1 and len(sizes) == min(k, len(want))
            at, nbytes = 0, []
            for n in sizes:
                nbytes.append(
                    sum(len(lines([r])) for r in JSONLDataset(files, storage_options=options)[at : at + n])
                )
                at += n
            assert [b for _, b in got["tasks"]] == nbytes  # exact bytes of each task's records
    assert out["reads"]["dir/3"]["files"][1] == [str(root / "a.jsonl"), str(root / "b.jsonl.gz")]
    assert out["columns"] == [{"i": 0}, {"i": 1}]
    assert out["fields"] == [{"big": 2**64}]
    assert out["bad"] == [{"i": 1}, {"i": 2}]
    assert out["typed"] == ["int32", 250, [{"i": 0, "text": ""}]]
    assert out["overflow"] is not None  # 2**64 in an int64 column: an error, never a wrapped number
    assert out["written"]["shards"] == 3
    assert out["written"]["rows"] == sorted(
        [i, str(2**70 + i), "nan" if i == 3 else repr(i / 2)] for i in range(20)
    )
    assert out["again"] == list(range(20))
    failed, attempted = out["doctests"]
    assert failed == 0 and attempted >= 15


#: Two nodes of one CPU each; the index tasks and the read tasks are spread over both.
TWO_NODES = """
import json, sys
import ray
from ray.cluster_utils import Cluster
from sjsonl.ray import read_jsonl

cfg = json.loads(sys.argv[1])
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
cluster.add_node(num_cpus=1)
ray.init(address=cluster.address, log_to_driver=False)
ray.data.DataContext.get_current().execution_options.preserve_order = True
ds = read_jsonl(cfg["paths"], override_num_blocks=6, ray_remote_args={"scheduling_strategy": "SPREAD"})
def where(batch):
    batch["node"] = [ray.get_runtime_context().get_node_id()] * len(batch["i"])
    return batch
got = ds.map_batches(where, batch_format="pandas").take_all()
print(json.dumps({
    "rows": [[r["i"], r["text"], str(r["big"])] for r in got],
    "nodes": len({r["node"] for r in got}),
    "alive": sum(n["Alive"] for n in ray.nodes()),
}))
ray.shutdown()
cluster.shutdown()
"""


def test_a_two_node_cluster_reads_every_record_once(tmp_path):
    need_ray()
    root = write_corpus(tmp_path)
    with ray_temp_dir() as temp:
        out = run_script(TWO_NODES, {"paths": [str(root)]}, tmp_path, temp)
    assert not os.path.exists(temp)
    assert out["alive"] == 2 and out["nodes"] == 2
    assert out["rows"] == expected_rows(expand_paths(root))
    assert math.fsum(COUNTS.values()) == len(out["rows"])
