"""The examples run as documented, on three real JSONL sources: stopped mid-epoch and resumed, the torch
DDP run's losses equal an uninterrupted run's bit for bit, and the MindSpore run trains on exactly the
epoch's records (and its losses match too)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
SOURCES = (
    "jsonl/gsm8k/test.jsonl",
    "jsonl/human_eval/HumanEval.jsonl",
    "jsonl/llama_factory/v1_sft_demo.jsonl",
)


def run(script: str, data: list[str], tmp: Path, out: str | None, *extra: str) -> dict | None:
    cmd = [sys.executable, str(EXAMPLES / script), "--data", *data, *extra]
    if out is not None:
        cmd += ["--out", str(tmp / out)]
    subprocess.run(cmd, check=True, timeout=600, capture_output=True, cwd=tmp)  # MindSpore dumps land in tmp
    return json.loads((tmp / out).read_text()) if out is not None else None


def stop_and_resume(script: str, data: list[str], tmp: Path, steps: int, stop: int) -> tuple[dict, dict]:
    full = run(script, data, tmp, "full.json", "--steps", str(steps))
    ckpt = tmp / "ckpt"
    run(script, data, tmp, None, "--steps", str(steps), "--stop-after", str(stop), "--checkpoint", str(ckpt))
    resumed = run(script, data, tmp, "resumed.json", "--steps", str(steps), "--checkpoint", str(ckpt))
    assert full is not None and resumed is not None
    return full, resumed


@pytest.fixture
def real_sources(shared_data) -> list[str]:
    return [str(shared_data / s) for s in SOURCES]


def test_torch_ddp_loss_after_resume_equals_an_uninterrupted_run(real_sources, tmp_path):
    pytest.importorskip("torchdata")
    full, resumed = stop_and_resume("torch_ddp_mixture.py", real_sources, tmp_path, steps=180, stop=90)
    assert full["steps_per_epoch"] < 180  # the run crosses an epoch boundary after the restart
    assert len(full["losses"]) == len(resumed["losses"]) == 180
    assert resumed["losses"] == full["losses"]  # exactly: same batches, same order, same arithmetic
    assert full["losses"][-1] < full["losses"][0]  # and it learns


def test_mindspore_epoch_records_are_the_expected_multiset(real_sources, tmp_path):
    pytest.importorskip("mindspore")
    sys.path.insert(0, str(EXAMPLES))
    try:
        import mindspore_mixture as example
    finally:
        sys.path.remove(str(EXAMPLES))
    data = example.mixture(real_sources)
    per_epoch = len(data) // example.BATCH
    full, resumed = stop_and_resume(
        "mindspore_mixture.py", real_sources, tmp_path, steps=per_epoch + 10, stop=150
    )
    assert full["steps_per_epoch"] == per_epoch and per_epoch > 150
    batch = example.BATCH
    epoch0 = Counter(resumed["records"][: per_epoch * batch])
    # what epoch 0 must hold: every record of the mixture, less the < BATCH dropped by drop_remainder
    dropped = Counter(example.digest(r["text"]) for r in data.shuffle(seed=0, epoch=0)[per_epoch * batch :])
    expected = Counter(example.digest(r["text"]) for r in data)
    assert epoch0 + dropped == expected and sum(dropped.values()) < batch
    assert resumed["records"] == full["records"] and resumed["losses"] == full["losses"]
