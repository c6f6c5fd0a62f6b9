"""Train a tiny byte-level model with MindSpore (CPU) on a mixture of three JSONL sources, stop in the
middle of an epoch, and resume: the records of the epoch are exactly the mixture's, none lost or repeated.

    python examples/mindspore_mixture.py --steps 300                       # uninterrupted
    python examples/mindspore_mixture.py --steps 300 --stop-after 100 --checkpoint ckpt/
    python examples/mindspore_mixture.py --steps 300 --checkpoint ckpt/    # resumes at step 100

``interleave_datasets`` mixes the files 50/30/20; each epoch reads the mixture in a fresh exact shuffle
(``mixture.shuffle(seed, epoch)``), and ``sjsonl.mindspore.to_generator_dataset`` — the adapter
``sjsonl.mindspore.load_dataset`` builds its splits with — hands it to MindSpore as a map-style
``GeneratorDataset``. MindSpore has no mid-epoch state of its own, so the order is sjsonl's and a resume
is a view: ``.skip(records already trained on)``. The checkpoint is MindSpore's parameter file plus a
small JSON of where the run stands. ``--data`` takes three files of your own.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import mindspore as ms
import numpy as np
from mindspore import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _data import VOCAB, parse_run_arguments, render, tokens

import sjsonl
from sjsonl.mindspore import to_generator_dataset

BATCH, PROBABILITIES = 8, [0.5, 0.3, 0.2]


def as_text(record) -> dict:
    return {"text": render(record)}


def mixture(paths: list[str]) -> sjsonl.MixtureDataset:
    sources = [sjsonl.JSONLDataset(p, record_transform=as_text) for p in paths]
    return sjsonl.interleave_datasets(
        sources, probabilities=PROBABILITIES, seed=0, stopping_strategy="all_exhausted"
    )


def epoch_pipeline(data: sjsonl.MixtureDataset, epoch: int, skip: int):
    """MindSpore batches of byte ids for one epoch, from record ``skip`` of its order on."""
    order = data.shuffle(seed=0, epoch=epoch).skip(skip)
    gd = to_generator_dataset(order, column_names=["text"], python_multiprocessing=False)
    gd = gd.map(
        operations=lambda t: (tokens(str(t)).astype(np.int32), t),
        input_columns=["text"],
        output_columns=["ids", "text"],
    )
    return gd.batch(BATCH, drop_remainder=True)


class NextByte(nn.Cell):
    """Embedding → dense: predicts each byte from the one before it."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.head = nn.Dense(width, VOCAB - 1)
        self.loss = nn.CrossEntropyLoss(ignore_index=VOCAB - 1)

    def construct(self, ids):
        logits = self.head(self.embed(ids[:, :-1]))
        return self.loss(logits.reshape((-1, VOCAB - 1)), ids[:, 1:].reshape((-1,)))


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def main(argv: list[str] | None = None) -> None:
    args = parse_run_arguments(__doc__, 300, "write the losses and the records trained on as JSON here", argv)
    # Graph mode: MindSpore 2.10's PyNative reshape fails under numpy 2 ("Numpy init failed").
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    ms.set_seed(0)

    data = mixture(args.data)
    steps_per_epoch = len(data) // BATCH
    net = NextByte()
    train = nn.TrainOneStepCell(net, nn.Adam(net.trainable_params(), learning_rate=3e-3))
    state = {"step": 0, "losses": [], "records": []}  # records: a digest of each record trained on
    ckpt = os.path.join(args.checkpoint, "state") if args.checkpoint else None
    if ckpt and os.path.exists(ckpt + ".json"):
        with open(ckpt + ".json") as f:
            state = json.load(f)
        ms.load_param_into_net(train, ms.load_checkpoint(ckpt + ".ckpt"))

    while state["step"] < args.steps:
        epoch, done = divmod(state["step"], steps_per_epoch)
        for batch in epoch_pipeline(data, epoch, done * BATCH).create_dict_iterator(
            num_epochs=1, output_numpy=True
        ):
            loss = train(ms.Tensor(batch["ids"]))
            state["step"] += 1
            state["losses"].append(float(loss.asnumpy()))
            state["records"] += [digest(str(t)) for t in batch["text"]]
            if state["step"] in (args.stop_after, args.steps) or state["step"] % steps_per_epoch == 0:
                break
        if ckpt and state["step"] == args.stop_after:
            os.makedirs(args.checkpoint, exist_ok=True)
            ms.save_checkpoint(train, ckpt + ".ckpt")
            with open(ckpt + ".json.tmp", "w") as f:
                json.dump(state, f)
            os.replace(ckpt + ".json.tmp", ckpt + ".json")
            break
    print(f"steps {state['step']} of {steps_per_epoch} an epoch, last loss {state['losses'][-1]:.4f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**state, "steps_per_epoch": steps_per_epoch, "batch": BATCH}, f)


if __name__ == "__main__":
    main()
