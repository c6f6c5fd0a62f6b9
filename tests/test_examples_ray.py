"""examples/ray_train_resume.py (slow tier): TorchTrainer workers read a compressed JSONL file through
sjsonl's DistributedSampler; a run whose rank 1 dies mid-epoch is restarted by Ray Train from its last
checkpoint (the sampler's state_dict inside a ``ray.train.Checkpoint``) and ends with the same records at
every step on every rank, and the same losses bit for bit, as a run that never failed."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ._cluster_data import need_ray, ray_temp_dir

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ray_train_resume.py"


def train(tmp_path: Path, temp: str, out: str, *extra: str) -> dict:
    env = {**os.environ, "RAY_TMPDIR": temp, "RAY_USAGE_STATS_ENABLED": "0"}
    cmd = [
        sys.executable, str(EXAMPLE), "--data", str(tmp_path / "data.jsonl.gz"), "--steps", "10",
        "--every", "2", "--out", str(tmp_path / out), "--storage", str(tmp_path / f"storage-{out}"), *extra,
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-6000:]
    return json.loads((tmp_path / out).read_text())


def test_a_worker_restart_resumes_exactly(tmp_path):
    need_ray()
    records = [{"i": i, "text": "x" * (i % 13)} for i in range(30)]
    (tmp_path / "data.jsonl.gz").write_bytes(
        gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode())
    )
    with ray_temp_dir() as temp:
        full = train(tmp_path, temp, "full.json")
        failed = train(tmp_path, temp, "failed.json", "--fail-at", "5")  # after the checkpoint of step 4
    assert not os.path.exists(temp)
    assert not full["failed"] and failed["failed"]  # rank 1 did die once
    assert failed["ranks"] == full["ranks"]  # every step's records on each rank, and every loss
    for rank in full["ranks"]:
        assert len(rank["steps"]) == 10
    # 15 records per rank and 3 batches of 4 per epoch: each epoch's batches are distinct records
    epoch1 = [i for rank in full["ranks"] for step in rank["steps"][3:6] for i in step]
    assert len(set(epoch1)) == len(epoch1) == 24
