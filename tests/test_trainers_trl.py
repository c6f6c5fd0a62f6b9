"""TRL's ``SFTTrainer`` runs unchanged on sjsonl data: the same script with 🤗's ``load_dataset`` and with
sjsonl's (``map``, ``formatting_func``, a chat ``messages`` file) sees the same batches and gives the same
losses; on the 🤗-typed iterable it trains on exactly the records of sjsonl's seeded order. Helpers and the
tiny model and tokenizer: tests/test_trainers.py."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("trl")

from trl import SFTConfig, SFTTrainer

import sjsonl

from ._reference_order import reference_order
from .test_trainers import (
    STEPS,
    common,
    datasets,
    losses,
    make_tokenizer,
    own_copy,
    texts_of,
    tiny_model,
    write_qa_file,
)


@pytest.fixture(scope="module")
def qa_file(shared_data, tmp_path_factory) -> Path:
    return write_qa_file(shared_data, tmp_path_factory)


@pytest.fixture(scope="module")
def tok(qa_file):
    return make_tokenizer(qa_file)


@pytest.fixture(scope="module")
def chat_file(shared_data) -> Path:
    return shared_data / "jsonl/xtuner/mllm_sft_text_example_data.jsonl"  # {"id", "messages": [...]}


def sft_with_map(load_dataset, path, tok, out):
    ds = load_dataset("json", data_files=str(path), split="train")
    ds = ds.map(lambda r: {"text": r["question"] + "\n" + r["answer"]}, remove_columns=ds.column_names)
    trainer = SFTTrainer(
        model=tiny_model(tok),
        args=SFTConfig(**common(out), max_length=64),
        train_dataset=ds,
        processing_class=tok,
    )
    return losses(trainer, tok)


def sft_with_formatting_func(load_dataset, path, tok, out):
    ds = load_dataset("json", data_files=str(path), split="train")
    trainer = SFTTrainer(
        model=tiny_model(tok),
        args=SFTConfig(**common(out), max_length=64),
        train_dataset=ds,
        processing_class=tok,
        formatting_func=lambda r: r["question"] + "\n" + r["answer"],
    )
    return losses(trainer, tok)


def sft_on_messages(load_dataset, path, tok, out):
    ds = load_dataset("json", data_files=str(path), split="train")
    ds = ds.remove_columns(["id"])  # keep "messages": TRL applies the chat template
    trainer = SFTTrainer(
        model=tiny_model(tok),
        args=SFTConfig(**common(out), max_length=64),
        train_dataset=ds,
        processing_class=tok,
    )
    return losses(trainer, tok)


@pytest.mark.parametrize(
    "script", [sft_with_map, sft_with_formatting_func, sft_on_messages], ids=lambda f: f.__name__
)
def test_same_script_same_batches_and_losses_as_hf(script, qa_file, chat_file, tok, tmp_path):
    path = chat_file if script is sft_on_messages else qa_file
    theirs = script(datasets.load_dataset, own_copy(path, tmp_path), tok, tmp_path / "hf")
    ours = script(sjsonl.load_dataset, path, tok, tmp_path / "sjsonl")
    assert ours.batches == theirs.batches and len(ours.batches) >= STEPS  # (+ a batch read ahead)
    assert ours.losses == theirs.losses


def test_sft_trainer_on_the_iterable_trains_on_the_seeded_order(qa_file, tok, tmp_path):
    it = (
        sjsonl.load_dataset("json", data_files=str(qa_file), split="train")
        .to_iterable_dataset()
        .shuffle(seed=0)
    )
    args = SFTConfig(**common(tmp_path), max_length=64)
    trainer = SFTTrainer(
        model=tiny_model(tok),
        args=args,
        train_dataset=it,
        processing_class=tok,
        formatting_func=lambda r: r["question"] + "\n" + r["answer"],
    )
    assert isinstance(trainer.train_dataset, datasets.IterableDataset) and len(trainer.train_dataset) == 64
    run = losses(trainer, tok)
    # the batches are the records of epoch 0 of sjsonl's order for seed 0, from the spec: 4 a step
    texts = texts_of(qa_file, tok, lambda r: r["question"] + "\n" + r["answer"])
    seen = [t for batch in run.batches for t in batch]
    assert seen[: 4 * STEPS] == [texts[i] for i in reference_order(64, seed=0)[: 4 * STEPS]]
    assert all(loss == loss and loss > 0 for loss in run.losses)
