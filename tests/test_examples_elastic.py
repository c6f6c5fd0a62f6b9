"""examples/torch_ddp_mixture.py trained on 4 ranks, stopped mid-epoch, and resumed on 2 ranks and on 3:
every optimizer step's records, on every rank, are what the layout change implies — before the stop,
torch's layout of the epoch's order on 4 ranks; after it, torch's layout (real ``DistributedSampler``,
shuffle off) of exactly the records the 4 ranks had not reached, on the new ranks; then an ordinary epoch
of the new layout. The epoch's order is sjsonl's ``Permutation(n, seed=0, epoch)`` (pinned to golden values
in tests/test_torch_sampler.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchdata")

from torch.utils.data.distributed import DistributedSampler as TorchSampler  # noqa: E402

from sjsonl.sampling import Permutation  # noqa: E402

from ._examples import run  # noqa: E402

pytestmark = pytest.mark.slow  # three DDP runs of 4, 2 and 3 processes

BATCH, STOP = 8, 3


def _steps(left: list[int], world: int) -> list[list[list[int]]]:
    """Per optimizer step, each rank's batch: torch's layout of ``left`` (drop_last, as the example's
    sampler), cut into batches of BATCH with the last partial one dropped (as its loader)."""
    per_rank = [
        [left[i] for i in TorchSampler(range(len(left)), world, r, shuffle=False, drop_last=True)]
        for r in range(world)
    ]
    count = len(per_rank[0]) // BATCH
    return [[p[j * BATCH : (j + 1) * BATCH] for p in per_rank] for j in range(count)]


def _order(n: int, epoch: int) -> list[int]:
    return Permutation(n, seed=0, epoch=epoch).take(np.arange(n)).tolist()


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> list[str]:
    d = tmp_path_factory.mktemp("elastic_example")
    paths = []
    for name, n in (("web", 120), ("code", 60), ("chat", 40)):
        path = d / f"{name}.jsonl"
        path.write_text(
            "".join(json.dumps({"src": name, "i": i, "text": f"{name} {i} " * 3}) + "\n" for i in range(n))
        )
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("new_world", [2, 3])
def test_four_ranks_stop_and_the_new_world_takes_exactly_the_rest(
    sources, tmp_path: Path, new_world: int
) -> None:
    ckpt = str(tmp_path / "ckpt")
    stopped = run(
        "torch_ddp_mixture.py",
        sources,
        tmp_path,
        "stopped.json",
        "--world",
        "4",
        "--steps",
        "1000",
        "--stop-after",
        str(STOP),
        "--checkpoint",
        ckpt,
    )
    assert stopped is not None
    n = stopped["records_per_pass"]
    epoch0 = _order(n, 0)
    assert stopped["samples"] == _steps(epoch0, 4)[:STOP]  # 4 ranks, the first steps of epoch 0
    rest = _steps(epoch0[STOP * BATCH * 4 :], new_world)  # what no rank had reached, on the new ranks
    nxt = _steps(_order(n, 1), new_world)
    total = STOP + len(rest) + 2  # into epoch 1
    resumed = run(
        "torch_ddp_mixture.py",
        sources,
        tmp_path,
        "resumed.json",
        "--world",
        str(new_world),
        "--steps",
        str(total),
        "--checkpoint",
        ckpt,
    )
    assert resumed is not None and resumed["world"] == new_world
    after = resumed["samples"][STOP:]
    assert after[: len(rest)] == rest
    assert after[len(rest) :] == nxt[:2]  # then an ordinary epoch of the new layout
    seen = sorted(i for step in resumed["samples"][: STOP + len(rest)] for batch in step for i in batch)
    assert len(seen) == len(set(seen)) and n - len(seen) < new_world * BATCH + 4 * BATCH  # only cut tails
    assert len(resumed["losses"]) == total
