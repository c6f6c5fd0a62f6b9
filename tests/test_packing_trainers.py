"""Packed datasets in real trainers and where users run them (slow tier).

- 🤗 ``Trainer`` over a packed dataset with ``unpacked(DataCollatorWithFlattening())``: stopped at a
  checkpoint and resumed (a new packed dataset, its plan from the length cache), the steps after the
  checkpoint have the losses of an uninterrupted run.
- TRL's ``SFTTrainer`` (padding-free) over the packs streamed as a 🤗 ``IterableDataset``: it trains on
  exactly the packs, in their order, with TRL's own collator.
- MindSpore's GeneratorDataset (to_generator_dataset) gives the packs, padded or not.
- A plain script without a main guard (and a notebook kernel) packs 60,000 records with a Python tokenizer
  defined in the script (``workers=2``: the length pass goes to sjsonl's worker processes): the script runs
  once, and the lengths are those a single process gives.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("trl")

import torch  # noqa: E402
from transformers import DataCollatorWithFlattening, Trainer, TrainingArguments  # noqa: E402
from trl import SFTConfig, SFTTrainer  # noqa: E402

from sjsonl import JSONLDataset  # noqa: E402
from sjsonl.data.packing import unpacked  # noqa: E402
from sjsonl.hf import to_hf  # noqa: E402

from .test_trainers import common, make_tokenizer, tiny_model  # noqa: E402
from .test_user_scripts import run_script  # noqa: E402

SEQ_LEN = 64


@pytest.fixture(scope="module")
def qa_file(shared_data, tmp_path_factory) -> Path:
    lines = (shared_data / "jsonl/gsm8k/train.jsonl").read_text().splitlines()[:400]
    path = tmp_path_factory.mktemp("packing") / "qa.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def tok(qa_file):
    return make_tokenizer(qa_file)


def packed_of(path: Path, tok):
    return JSONLDataset(str(path)).pack(SEQ_LEN, tokenizer=tok, column="question")


def train(tok, dataset, out: Path, max_steps: int, resume: str | None = None, save: bool = False) -> dict:
    """The loss logged at each step, by step (a resumed run's history holds the checkpoint's steps too)."""
    options = {**common(out), "max_steps": max_steps, "learning_rate": 3e-3, "lr_scheduler_type": "constant"}
    if save:
        options.update(save_strategy="steps", save_steps=2)
    args = TrainingArguments(**options, remove_unused_columns=False)
    trainer = Trainer(
        model=tiny_model(tok),
        args=args,
        train_dataset=dataset,
        data_collator=unpacked(DataCollatorWithFlattening(return_tensors="pt")),
    )
    trainer.train(resume_from_checkpoint=resume)
    return {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}


def test_trainer_stopped_and_resumed_has_the_losses_of_an_uninterrupted_run(qa_file, tok, tmp_path):
    whole = train(tok, packed_of(qa_file, tok), tmp_path / "whole", 5)
    train(tok, packed_of(qa_file, tok), tmp_path / "stopped", 2, save=True)
    resumed_dataset = packed_of(qa_file, tok)  # another dataset object: the plan comes from the length cache
    checkpoint = str(tmp_path / "stopped/checkpoint-2")
    resumed = train(tok, resumed_dataset, tmp_path / "stopped", 5, resume=checkpoint)
    assert sorted(whole) == sorted(resumed) == [1, 2, 3, 4, 5]
    assert [resumed[s] for s in (3, 4, 5)] == pytest.approx([whole[s] for s in (3, 4, 5)], rel=1e-5)
    assert whole[5] < whole[1]  # it learns


def test_trl_sft_trainer_trains_on_exactly_the_packs(qa_file, tok, tmp_path):
    packed = packed_of(qa_file, tok).shuffle(seed=4)
    stream = to_hf(packed, streaming=True, num_shards=1)
    steps, batch = 4, 2
    args = SFTConfig(
        **{**common(tmp_path), "max_steps": steps, "per_device_train_batch_size": batch},
        padding_free=True,
        max_length=None,  # the packs are seq_len already
        dataset_kwargs={"skip_prepare_dataset": True},
        remove_unused_columns=False,
    )
    trainer = SFTTrainer(model=tiny_model(tok), args=args, train_dataset=stream, processing_class=tok)
    seen: list[list[int]] = []
    collate = trainer.data_collator

    def recording(features):
        seen.extend(list(f["input_ids"]) for f in features)
        out = collate(features)
        # TRL's padding-free batch: one row, positions restarting per document as in the packs
        flat = [p for f in features for p in f["position_ids"]]
        assert out["position_ids"].reshape(-1).tolist() == flat
        return out

    trainer.data_collator = recording
    trainer.train()
    want = [packed[i]["input_ids"] for i in range(steps * batch)]
    assert seen[: steps * batch] == want
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == steps and all(torch.isfinite(torch.tensor(losses)))


SCRIPT = """
    from sjsonl import JSONLDataset
    from sjsonl.data.packing.lengths import token_lengths
    from sjsonl.data.packing.tokens import DocumentTokens

    def words(text):  # a Python tokenizer, defined in the script
        return [len(w) for w in text.split()]

    ds = JSONLDataset("big.jsonl")
    packed = ds.pack(128, tokenizer=words, column="text", cache_key="words-v1", workers=2)
    here = token_lengths(ds, DocumentTokens(words, "text"), workers=1)  # no cache_key: in this process
    print(json.dumps({"packs": len(packed), "tokens": int(packed.plan.tokens),
                      "same": packed.plan.lengths.tolist() == here.tolist(),
                      "first": packed[0]["seq_lengths"][:3]}))
"""


@pytest.fixture
def big_file(tmp_path) -> Path:
    path = tmp_path / "big.jsonl"
    with open(path, "w") as f:
        for i in range(60_000):
            f.write(json.dumps({"text": " ".join("w" * (1 + j % 5) for j in range(i % 40 + 1))}) + "\n")
    return path


def test_a_plain_script_without_a_main_guard_packs_with_worker_processes(big_file, tmp_path):
    out = run_script(tmp_path, SCRIPT)
    expected_tokens = sum(i % 40 + 1 for i in range(60_000))  # a token per word; a function: no EOS
    assert out["same"] is True and out["tokens"] == expected_tokens
    assert out["packs"] >= expected_tokens // 128 and (tmp_path / "big.index.tokens").exists()


def test_a_notebook_kernel_packs(big_file, tmp_path, monkeypatch):
    import os

    import nbformat
    from nbclient import NotebookClient

    from .test_user_scripts import _pythonpath

    monkeypatch.delenv("SJSONL_INDEX_DIR", raising=False)
    monkeypatch.setenv("PYTHONPATH", _pythonpath(os.environ))
    cell = "import json\n" + textwrap.dedent(SCRIPT)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell)])
    where = {"metadata": {"path": str(tmp_path)}}  # the kernel's working directory
    NotebookClient(nb, kernel_name="python3", timeout=900, resources=where).execute()
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs if o["output_type"] == "stream")
    out = json.loads([line for line in text.splitlines() if line.startswith("{")][-1])
    assert out["same"] is True and out["tokens"] == sum(i % 40 + 1 for i in range(60_000))


@pytest.mark.parametrize("padding", [False, "max_length"])
def test_mindspore_generator_dataset_gives_the_packs(tmp_path, padding):
    pytest.importorskip("mindspore")
    from sjsonl.mindspore import to_generator_dataset

    path = tmp_path / "ids.jsonl"
    path.write_text("".join(json.dumps({"ids": list(range(i % 7 + 1))}) + "\n" for i in range(200)))
    packed = JSONLDataset(str(path)).pack(16, column="ids", padding=padding).shuffle(seed=2)
    rows = list(to_generator_dataset(packed, shuffle=False).create_dict_iterator(output_numpy=True))
    assert len(rows) == len(packed)
    for row, pack in zip(rows, packed):
        assert sorted(row) == sorted(pack)
        assert all(row[k].tolist() == pack[k] for k in pack)
