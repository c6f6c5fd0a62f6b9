"""Running the examples as documented (tests/test_examples_torch.py, tests/test_examples_mindspore.py): on
three real JSONL sources, a full run, and a run stopped mid-epoch and resumed from its checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
    done = subprocess.run(
        cmd, timeout=600, capture_output=True, text=True, cwd=tmp
    )  # MindSpore dumps land in tmp
    assert done.returncode == 0, (
        f"{script} {' '.join(extra)} exited {done.returncode}:\n{done.stderr[-4000:]}"
    )
    return json.loads((tmp / out).read_text()) if out is not None else None


def stop_and_resume(script: str, data: list[str], tmp: Path, steps: int, stop: int) -> tuple[dict, dict]:
    full = run(script, data, tmp, "full.json", "--steps", str(steps))
    ckpt = tmp / "ckpt"
    run(script, data, tmp, None, "--steps", str(steps), "--stop-after", str(stop), "--checkpoint", str(ckpt))
    resumed = run(script, data, tmp, "resumed.json", "--steps", str(steps), "--checkpoint", str(ckpt))
    assert full is not None and resumed is not None
    return full, resumed


def real_sources(shared_data: Path) -> list[str]:
    return [str(shared_data / s) for s in SOURCES]
