"""Real trainers run unchanged on sjsonl data (issue 13): the same script with 🤗's ``load_dataset`` and with
sjsonl's — ``transformers.Trainer`` (``map``, 🤗-style batch ``with_transform``; TRL's ``SFTTrainer``:
tests/test_trainers_trl.py). A tiny GPT-2 and a BPE tokenizer are built here (CPU, offline, a few steps).
sjsonl's datasets are map-style, so the Trainer samples them with the same sampler and seed as 🤗's: the
same batches — recorded and compared — hence equal losses; on a learnable toy file the loss falls.

The 🤗-typed iterable (``to_iterable_dataset``) is checked through the real accelerate / Trainer code:
every record once per epoch, a new order each epoch (``set_epoch``), disjoint and complete over 2 processes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

datasets = pytest.importorskip("datasets")

import torch  # noqa: E402
from accelerate.data_loader import prepare_data_loader  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import (  # noqa: E402
    DataCollatorForLanguageModeling,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
)

import sjsonl  # noqa: E402
from sjsonl import JSONLDataset  # noqa: E402

CHAT_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
STEPS = 3


def write_qa_file(shared_data: Path, tmp_path_factory) -> Path:
    """The first 64 GSM8K test problems, written to a temp file (never into the repo)."""
    lines = (shared_data / "jsonl/gsm8k/test.jsonl").read_text().splitlines()[:64]
    path = tmp_path_factory.mktemp("qa") / "qa.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def make_tokenizer(qa_file: Path) -> PreTrainedTokenizerFast:
    """A byte-level BPE of 300 tokens trained on the problems, with a chat template."""
    texts = [r["question"] + r["answer"] for r in map(json.loads, qa_file.read_text().splitlines())]
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()  # decode() gives the text back (the tests read the batches so)
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<unk>", "<pad>", "<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(texts, trainer)
    out = PreTrainedTokenizerFast(
        tokenizer_object=bpe, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>", model_max_length=64
    )
    out.chat_template = CHAT_TEMPLATE
    return out


@pytest.fixture(scope="module")
def qa_file(shared_data, tmp_path_factory) -> Path:
    return write_qa_file(shared_data, tmp_path_factory)


@pytest.fixture(scope="module")
def tok(qa_file) -> PreTrainedTokenizerFast:
    return make_tokenizer(qa_file)


def tiny_model(tok: PreTrainedTokenizerFast) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tok),
        n_positions=64,
        n_embd=32,
        n_layer=1,
        n_head=2,
        bos_token_id=tok.eos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    return GPT2LMHeadModel(config)


def common(out: Path) -> dict:
    return dict(
        output_dir=str(out),
        max_steps=STEPS,
        per_device_train_batch_size=4,
        logging_steps=1,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        bf16=False,
    )


class Run:
    """What a training run saw and did: each batch's texts (decoded from the collator's input) and the
    loss logged at each step."""

    def __init__(self, trainer: Trainer, tok: PreTrainedTokenizerFast) -> None:
        self.batches: list[list[str]] = []
        collate = trainer.data_collator

        def recording(features):
            self.batches.append([tok.decode(f["input_ids"], skip_special_tokens=True) for f in features])
            return collate(features)

        trainer.data_collator = recording
        trainer.train()
        self.losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        assert len(self.losses) == trainer.state.max_steps


def losses(trainer: Trainer, tok: PreTrainedTokenizerFast) -> Run:
    return Run(trainer, tok)


def own_copy(path: Path, tmp_path: Path) -> Path:
    """A copy of ``path`` for 🤗 to read (nothing on its side comes from a file sjsonl has read)."""
    copy = tmp_path / "hf-copy" / path.name
    copy.parent.mkdir(exist_ok=True)
    copy.write_bytes(path.read_bytes())
    return copy


def texts_of(
    path: Path, tok: PreTrainedTokenizerFast, fmt=lambda r: r["question"] + " " + r["answer"]
) -> list[str]:
    """Each record's text as the model sees it (formatted, cut at the tokenizer's 64 tokens), in file order,
    from the file's lines."""
    rows = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    return [tok.decode(tok(fmt(r), truncation=True)["input_ids"], skip_special_tokens=True) for r in rows]


# ------------------------------------------------------------------------------- the scripts, unchanged
def trainer_with_map(load_dataset, path, tok, out):
    ds = load_dataset("json", data_files=str(path), split="train")

    def tokenize(batch):
        return tok([q + " " + a for q, a in zip(batch["question"], batch["answer"])], truncation=True)

    ds = ds.map(tokenize, batched=True, remove_columns=ds.column_names)
    collator = DataCollatorForLanguageModeling(tok, mlm=False)
    trainer = Trainer(
        model=tiny_model(tok), args=TrainingArguments(**common(out)), train_dataset=ds, data_collator=collator
    )
    return losses(trainer, tok)


def trainer_with_transform(load_dataset, path, tok, out):
    ds = load_dataset("json", data_files=str(path), split="train")

    def tokenize_batch(batch):  # 🤗's contract: a dict of lists in, a dict of lists out
        return tok([q + " " + a for q, a in zip(batch["question"], batch["answer"])], truncation=True)

    ds = ds.with_transform(tokenize_batch)
    args = TrainingArguments(**common(out), remove_unused_columns=False)
    trainer = Trainer(
        model=tiny_model(tok),
        args=args,
        train_dataset=ds,
        data_collator=DataCollatorForLanguageModeling(tok, mlm=False),
    )
    return losses(trainer, tok)


@pytest.mark.parametrize("script", [trainer_with_map, trainer_with_transform], ids=lambda f: f.__name__)
def test_same_script_same_batches_and_losses_as_hf(script, qa_file, tok, tmp_path):
    theirs = script(datasets.load_dataset, own_copy(qa_file, tmp_path), tok, tmp_path / "hf")
    ours = script(sjsonl.load_dataset, qa_file, tok, tmp_path / "sjsonl")
    # same sampler, same seed, same rows, same tokens: the very same batches and losses
    assert ours.batches == theirs.batches and len(ours.batches) >= STEPS  # (+ a batch read ahead)
    texts = texts_of(qa_file, tok)
    assert all(t in texts for batch in ours.batches for t in batch)
    assert ours.losses == theirs.losses


def test_hf_typed_dataset_passes_the_gates_and_stays_sjsonl(qa_file):
    ds = sjsonl.load_dataset("json", data_files=str(qa_file), split="train")
    assert isinstance(ds, datasets.Dataset) and isinstance(ds, JSONLDataset)
    mapped = ds.map(lambda r: {"n": len(r["question"])}).filter(lambda r: r["n"] < 200).shuffle(seed=1)
    assert isinstance(mapped, datasets.Dataset) and isinstance(mapped, JSONLDataset)
    with pytest.raises(AttributeError, match="to_hf"):
        ds.sort("question")  # needs an Arrow table: a clear error, never a silently wrong result
    plain = sjsonl.load_dataset("json", data_files=str(qa_file), split="train", as_hf=False)
    assert type(plain) is JSONLDataset and plain[:3] == ds[:3]


# ------------------------------------------------------------------------------- the 🤗-typed iterable
def test_iterable_every_record_once_per_epoch_new_order_disjoint_over_two_processes(qa_file):
    base = JSONLDataset(qa_file)
    it = base.to_iterable_dataset().shuffle(seed=7)
    assert isinstance(it, datasets.IterableDataset) and len(it) == len(base) == 64
    orders = []
    for epoch in range(2):
        seen = []
        for rank in range(2):  # accelerate's own preparation, as each of 2 processes runs it
            loader = prepare_data_loader(
                torch.utils.data.DataLoader(it, batch_size=4, collate_fn=list),
                num_processes=2,
                process_index=rank,
                put_on_device=False,
            )
            loader.set_epoch(epoch)  # what Trainer calls every epoch
            seen.append([r["question"] for batch in loader for r in batch])
        assert len(seen[0]) == len(seen[1]) == 32 and not set(seen[0]) & set(seen[1])
        order = [r["question"] for r in base.shuffle(seed=7, epoch=epoch)]
        assert sorted(seen[0] + seen[1]) == sorted(order)  # complete: every record exactly once
        assert seen[0] + seen[1] == order  # exactly sjsonl's permutation for this epoch, split in two
        orders.append(order)
    assert orders[0] != orders[1]


def test_trainer_reseeds_the_iterable_every_epoch(qa_file, tok, tmp_path):
    base = JSONLDataset(qa_file).take(16)
    it = base.to_iterable_dataset().shuffle(seed=3)
    seen: list[list[str]] = []

    def collate(rows):
        seen.append([r.pop("question") for r in rows])
        return DataCollatorForLanguageModeling(tok, mlm=False)(
            [tok(r["answer"], truncation=True) for r in rows]
        )

    args = TrainingArguments(
        **{**common(tmp_path), "max_steps": -1}, num_train_epochs=2, remove_unused_columns=False
    )
    trainer = Trainer(model=tiny_model(tok), args=args, train_dataset=it, data_collator=collate)
    trainer.train()
    flat = [q for batch in seen for q in batch]
    assert len(flat) == 32  # len() is known: 4 steps of 4 per epoch, no max_steps needed
    for epoch in range(2):
        assert flat[16 * epoch : 16 * (epoch + 1)] == [
            r["question"] for r in base.shuffle(seed=3, epoch=epoch)
        ]
    assert flat[:16] != flat[16:]


def write_toy(path: Path, n: int = 32) -> Path:
    """A learnable file: counting (``"3 4 5 6 …"``), so each next token follows from the one before."""
    rows = [
        {"question": f"count from {i % 10}", "answer": " ".join(str((i + k) % 10) for k in range(24))}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow  # two trainings of 24 steps
def test_training_on_sjsonl_records_learns_what_hf_learns(tok, tmp_path):
    toy = write_toy(tmp_path / "toy.jsonl")

    def run(load_dataset, path, out):
        ds = load_dataset("json", data_files=str(path), split="train")
        ds = ds.map(lambda b: tok([q + " " + a for q, a in zip(b["question"], b["answer"])]), batched=True)
        ds = ds.remove_columns(["question", "answer"])
        args = TrainingArguments(**{**common(out), "max_steps": 24, "learning_rate": 1e-2})
        trainer = Trainer(
            model=tiny_model(tok),
            args=args,
            train_dataset=ds,
            data_collator=DataCollatorForLanguageModeling(tok, mlm=False),
        )
        return Run(trainer, tok)

    theirs = run(datasets.load_dataset, own_copy(toy, tmp_path), tmp_path / "hf")
    ours = run(sjsonl.load_dataset, toy, tmp_path / "sjsonl")
    assert ours.batches == theirs.batches and ours.losses == theirs.losses
    per_epoch = 32 // 4
    for epoch in range(3):  # every record once per epoch
        seen = sorted(t for batch in ours.batches[epoch * per_epoch : (epoch + 1) * per_epoch] for t in batch)
        assert seen == sorted(texts_of(toy, tok))
    assert max(ours.losses[-4:]) < 0.5 * ours.losses[0]  # it learns: the loss falls to under half
