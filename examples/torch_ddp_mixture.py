"""Train a tiny causal language model with torch DDP (2 ranks, gloo, CPU) on a mixture of three JSONL
sources, stop in the middle of an epoch, and resume exactly — on as many ranks, or on another number.

    python examples/torch_ddp_mixture.py --steps 160                       # uninterrupted
    python examples/torch_ddp_mixture.py --steps 160 --stop-after 70 --checkpoint ckpt/
    python examples/torch_ddp_mixture.py --steps 160 --checkpoint ckpt/    # resumes at step 70
    python examples/torch_ddp_mixture.py --steps 160 --checkpoint ckpt/ --world 3   # … on 3 ranks

The data path is all sjsonl, with nothing converted or copied: ``interleave_datasets`` mixes the three
files 50/30/20 (exact proportions at every prefix), sjsonl's ``DistributedSampler`` gives each rank its
half of a fresh exact shuffle every epoch, and torchdata's ``StatefulDataLoader`` saves where each rank
stands. The checkpoint holds the model, the optimizer, the loader state of both ranks and the losses so
far, so the losses after a restart are the same numbers as those of a run that never stopped (the test
``tests/test_examples.py`` checks it bit for bit). Resumed with another ``--world``, the new ranks take
the rest of the stopped epoch — exactly the records the old ranks had not reached — and then ordinary
epochs of the new layout (sjsonl's elastic resume; ``tests/test_examples_elastic.py`` checks every step's
records). ``--data`` takes three files of your own.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from argparse import Namespace

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torchdata.stateful_dataloader import StatefulDataLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _data import SEQ_LEN, VOCAB, parse_run_arguments, render, tokens

import sjsonl
from sjsonl.torch import DistributedSampler

WORLD, BATCH, PROBABILITIES = 2, 8, [0.5, 0.3, 0.2]


class Numbered(torch.utils.data.Dataset):
    """``(i, data[i])``: each batch says which records it holds (the run writes them out per step)."""

    def __init__(self, data: sjsonl.MixtureDataset) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> tuple[int, dict]:
        return i, self.data[i]


class TinyCausalLM(nn.Module):
    """Two transformer layers over byte embeddings, with a causal mask."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.position = nn.Parameter(torch.zeros(SEQ_LEN, width))
        layer = nn.TransformerEncoderLayer(width, nhead=2, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.layers = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(width, VOCAB)
        self.register_buffer(
            "mask", nn.Transformer.generate_square_subsequent_mask(SEQ_LEN), persistent=False
        )

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) + self.position
        return self.head(self.layers(x, mask=self.mask, is_causal=True))


def collate(items: list) -> tuple[torch.Tensor, list[int]]:
    ids = __import__("numpy").stack([tokens(render(r)) for _, r in items])
    return torch.from_numpy(ids), [i for i, _ in items]


def mixture(paths: list[str]) -> sjsonl.MixtureDataset:
    sources = [sjsonl.JSONLDataset(p) for p in paths]
    return sjsonl.interleave_datasets(
        sources, probabilities=PROBABILITIES, seed=0, stopping_strategy="all_exhausted"
    )


def train(rank: int, args: Namespace, rendezvous: str) -> None:
    world = args.world
    # a file rendezvous: no TCP port to pick, so runs side by side never collide
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)

    data = mixture(args.data)
    sampler = DistributedSampler(data, shuffle=True, seed=0, drop_last=True)  # rank/world from dist
    loader = StatefulDataLoader(
        Numbered(data), batch_size=BATCH, sampler=sampler, collate_fn=collate, drop_last=True
    )
    model = DistributedDataParallel(TinyCausalLM())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    step, epoch, losses, samples = 0, 0, [], []  # samples: per step, each rank's record numbers

    ckpt = os.path.join(args.checkpoint, "state.pt") if args.checkpoint else None
    if ckpt and os.path.exists(ckpt):
        saved = torch.load(ckpt, weights_only=False)
        model.module.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        step, epoch, losses, samples = saved["step"], saved["epoch"], saved["losses"], saved["samples"]
        sampler.set_epoch(epoch)
        # ranks move in lockstep, so at another world size any rank's state continues the epoch: the
        # sampler hands the new ranks exactly what the old ones had not reached
        loaders = saved["loaders"]
        loader.load_state_dict(loaders[rank] if len(loaders) == world else loaders[0])

    while step < args.steps:
        sampler.set_epoch(epoch)
        for ids, numbers in loader:
            logits = model(ids[:, :-1])
            loss = nn.functional.cross_entropy(
                logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1), ignore_index=256
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            losses.append(mean.item() / world)
            taken: list = [None] * world
            dist.all_gather_object(taken, numbers)
            samples.append(taken)
            step += 1
            if step == args.stop_after or step == args.steps:
                break
        else:
            epoch += 1
            continue
        if step == args.stop_after and ckpt:
            states = [None] * world
            dist.all_gather_object(states, loader.state_dict())
            if rank == 0:
                os.makedirs(args.checkpoint, exist_ok=True)
                state = {
                    "model": model.module.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "step": step,
                    "epoch": epoch,
                    "losses": losses,
                    "samples": samples,
                    "loaders": states,
                }
                torch.save(state, ckpt + ".tmp")
                os.replace(ckpt + ".tmp", ckpt)
            break
    if rank == 0:
        print(f"steps {step}, epoch {epoch}, {len(data)} records a pass, last loss {losses[-1]:.4f}")
        if args.out:
            with open(args.out, "w") as f:
                run = {"losses": losses, "records_per_pass": len(data), "steps_per_epoch": len(loader)}
                json.dump({**run, "samples": samples, "world": world}, f)
    dist.barrier()  # every rank is done with its peers before any tears the group down
    dist.destroy_process_group()
    # torch's gloo backend can abort a rank at interpreter exit after this clean shutdown ("terminate
    # called without an active exception": about 1 run in 6 at 3 ranks here, TCP or file rendezvous);
    # everything is written and closed, so the rank leaves without the interpreter's teardown
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    args = parse_run_arguments(
        __doc__, 160, "write the losses and each step's records as JSON here", argv, WORLD
    )
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(train, args=(args, os.path.join(d, "rendezvous")), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
