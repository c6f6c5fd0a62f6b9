"""Ray Train on JSON Lines read in place: ``TorchTrainer`` workers draw their records through sjsonl's
``DistributedSampler``, and a worker that dies mid-epoch is restarted from the last checkpoint and goes on
with exactly the records it had not reached — Ray Data keeps no position to resume from
(ray-project/ray#48224), the sampler's ``state_dict`` does, in a ``ray.train.Checkpoint``.

    python examples/ray_train_resume.py --data data.jsonl --steps 12 --out run.json
    python examples/ray_train_resume.py --data data.jsonl --steps 12 --out run.json --fail-at 7

The second run kills rank 1 at step 7 (once); Ray Train restarts both workers from the checkpoint of step 6
(one is saved every ``--every`` steps) and the run ends with the same records at every step, on every rank,
and the same losses, as the first (``tests/test_examples_ray.py`` checks it bit for bit). ``--out`` gets, per
rank, the record numbers of each step and the losses.

Like any plain script this one has no main guard: Ray runs the training function in its own worker
processes and never re-runs the script.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import ray
import ray.train
import torch
from ray.train import Checkpoint, FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, prepare_model
from torch import nn

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data", nargs="+", required=True, help="JSONL files (plain or compressed)")
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--every", type=int, default=3, help="save a checkpoint every this many steps")
parser.add_argument("--fail-at", type=int, default=0, help="rank 1 dies (once) when it reaches this step")
parser.add_argument("--batch", type=int, default=4)
parser.add_argument("--out", required=True, help="where the per-rank records and losses go (JSON)")
parser.add_argument("--storage", default=None, help="Ray Train's storage (default: a temp directory)")
args = parser.parse_args()


def features(records: list[dict]) -> torch.Tensor:
    """A fixed-size view of each record: counts of its JSON text's bytes, folded into 16 buckets."""
    out = torch.zeros(len(records), 16)
    for row, record in enumerate(records):
        for b in json.dumps(record, sort_keys=True).encode():
            out[row, b % 16] += 1.0
    return out / 64.0


class Numbered(torch.utils.data.Dataset):
    """``(i, data[i])``: each batch says which records it holds."""

    def __init__(self, data) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> tuple[int, dict]:
        return i, self.data[i]


def train_loop(config: dict) -> None:
    from sjsonl import JSONLDataset
    from sjsonl.torch import DistributedSampler

    rank = ray.train.get_context().get_world_rank()
    torch.manual_seed(0)
    data = JSONLDataset(config["data"])
    sampler = DistributedSampler(data, shuffle=True, seed=0)  # over the process group Ray Train set up
    loader = torch.utils.data.DataLoader(
        Numbered(data), batch_size=config["batch"], sampler=sampler, collate_fn=list, drop_last=True
    )
    model = prepare_model(nn.Linear(16, 1))  # DDP over gloo (CPU)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step, epoch, history, resume = 0, 0, {"steps": [], "losses": []}, None
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:  # a restart: the model, the optimizer, and where this rank stood
        with checkpoint.as_directory() as d:
            saved = torch.load(os.path.join(d, f"rank{rank}.pt"), weights_only=False)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        step, epoch, history, resume = saved["step"], saved["epoch"], saved["history"], saved["sampler"]
    while step < config["steps"]:
        sampler.set_epoch(epoch)
        if resume is not None:
            sampler.load_state_dict(resume)  # the rest of the saved epoch, exactly
            resume = None
        for batch in loader:
            if step + 1 == config["fail_at"] and rank == 1 and not os.path.exists(config["failed"]):
                open(config["failed"], "w").close()
                raise RuntimeError(f"rank 1 dies at step {step + 1} (as a preempted node would)")
            x = features([record for _, record in batch])
            loss = ((model(x).squeeze(1) - x.sum(1)) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            history["steps"].append([i for i, _ in batch])
            history["losses"].append(float(loss))
            metrics = {"step": step, "loss": float(loss)}
            if step % config["every"] == 0 or step == config["steps"]:
                with tempfile.TemporaryDirectory() as directory:  # report() copies it into the run's storage
                    torch.save(
                        {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                         "epoch": epoch, "history": history, "sampler": sampler.state_dict()},
                        os.path.join(directory, f"rank{rank}.pt"),
                    )  # fmt: skip
                    ray.train.report(metrics, checkpoint=Checkpoint.from_directory(directory))
            else:
                ray.train.report(metrics)
            if step == config["steps"]:
                break
        else:
            epoch += 1
    with open(f"{config['out']}.rank{rank}", "w") as f:
        json.dump(history, f)


storage = args.storage or tempfile.mkdtemp(prefix="ray-train-")
ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
trainer = TorchTrainer(
    train_loop,
    train_loop_config={
        "data": [os.path.abspath(p) for p in args.data],
        "steps": args.steps,
        "every": args.every,
        "batch": args.batch,
        "fail_at": args.fail_at,
        "out": os.path.abspath(args.out),
        "failed": os.path.abspath(args.out) + ".failed",
    },
    scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
    run_config=RunConfig(storage_path=storage, name="sjsonl", failure_config=FailureConfig(max_failures=1)),
)
trainer.fit()
ranks = []
for rank in range(2):
    with open(f"{os.path.abspath(args.out)}.rank{rank}") as f:
        ranks.append(json.load(f))
    os.unlink(f"{os.path.abspath(args.out)}.rank{rank}")
with open(args.out, "w") as f:
    json.dump({"ranks": ranks, "failed": os.path.exists(os.path.abspath(args.out) + ".failed")}, f)
ray.shutdown()
