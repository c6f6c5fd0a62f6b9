"""Packing (``ds.pack(seq_len, tokenizer=, column=)``): every token of every document lands exactly once,
in order, in a pack no longer than ``seq_len``; labels, positions and lengths are what 🤗's and TRL's
padding-free collators make; the token-length cache is reused only when nothing it depends on changed; a
packed dataset is a view like any other (shuffle, shard, DataLoader workers, mixtures, 🤗 streaming).

The tokenizer is a byte-level BPE trained here on GSM8K questions (offline, a second); the reference for every
document is that tokenizer called on it directly, plus EOS.
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")

from tokenizers import Tokenizer  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

from sjsonl import JSONLDataset, StaleDataError, interleave_datasets  # noqa: E402
from sjsonl.data.packing import PackedDataset, unpacked  # noqa: E402
from sjsonl.errors import ColumnNotFoundError, InvalidArgumentError  # noqa: E402

STRATEGIES = ("bfd", "first_fit", "wrapped")


def reference(tok, texts: list[str]) -> list[list[int]]:
    return [tok(t)["input_ids"] + [tok.eos_token_id] for t in texts]


def rebuilt(packed: PackedDataset) -> dict[int, list[int]]:
    """Each document's tokens, put back together from the packs (pieces in token order)."""
    pieces: dict[int, list[tuple[int, list[int]]]] = defaultdict(list)
    for p in range(len(packed)):
        item = packed[p]
        at = 0
        for (doc, start, stop), n in zip(packed.pieces(p), item["seq_lengths"]):
            assert stop - start == n
            pieces[doc].append((start, item["input_ids"][at : at + n]))
            at += n
        assert at == len(item["input_ids"]) <= packed.seq_len
    return {d: [t for _, ids in sorted(ps) for t in ids] for d, ps in pieces.items()}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("overflow", ["split", "truncate"])
def test_every_token_once_in_order(tok, qa, strategy, overflow):
    ds = JSONLDataset(str(qa))
    packed = ds.pack(96, tokenizer=tok, column="question", strategy=strategy, overflow=overflow)
    want = reference(tok, [r["question"] for r in ds])
    assert max(map(len, want)) > 96  # some documents are split or truncated
    got = rebuilt(packed)
    assert sorted(got) == list(range(len(ds)))
    for d, ids in got.items():
        assert ids == (want[d] if overflow == "split" else want[d][:96])
    total = sum(len(packed[p]["input_ids"]) for p in range(len(packed)))
    assert total == packed.plan.tokens and packed.efficiency == total / (len(packed) * 96)
    if strategy == "bfd" and overflow == "split":  # (truncated, most questions nearly fill a pack alone)
        assert packed.efficiency > 0.97


def test_labels_positions_and_lengths(tok, qa):
    packed = JSONLDataset(str(qa)).pack(128, tokenizer=tok, column="question")
    for p in range(0, len(packed), 7):
        item = packed[p]
        starts = np.cumsum([0, *item["seq_lengths"][:-1]])
        expected_positions = [i for n in item["seq_lengths"] for i in range(n)]
        assert item["position_ids"] == expected_positions
        assert [i for i, x in enumerate(item["labels"]) if x == -100] == starts.tolist()
        assert all(
            item["labels"][i] == item["input_ids"][i] for i in range(len(item["labels"])) if i not in starts
        )
        assert "attention_mask" not in item


def test_padding_to_max_length_collates_with_torch(tok, qa):
    torch = pytest.importorskip("torch")
    packed = JSONLDataset(str(qa)).pack(128, tokenizer=tok, column="question", padding="max_length")
    item = next(p for p in packed if sum(p["seq_lengths"]) < 128)  # a pack with padding
    real = sum(item["seq_lengths"])
    assert real < 128 and item["attention_mask"] == [1] * real + [0] * (128 - real)
    assert item["input_ids"][real:] == [tok.pad_token_id] * (128 - real)
    assert item["labels"][real:] == [-100] * (128 - real) and item["position_ids"][real:] == [0] * (
        128 - real
    )
    batch = torch.utils.data.default_collate(
        [{k: torch.tensor(v) for k, v in packed[i].items() if k != "seq_lengths"} for i in range(4)]
    )
    assert batch["input_ids"].shape == (4, 128)


def test_a_chat_file_with_labels_from_a_column_function(tok, shared_data):
    """Only the assistant's tokens are trained: a column function gives input_ids and labels per document;
    pieces keep those labels (and mask their first token)."""
    path = shared_data / "jsonl/xtuner/openai_sft.jsonl"

    def turns(record):
        ids: list[int] = []
        labels: list[int] = []
        for turn in record:
            part = tok(f"{turn['role']}: {turn['content']}\n")["input_ids"]
            ids += part
            labels += part if turn["role"] == "assistant" else [-100] * len(part)
        return {"input_ids": ids, "labels": labels}

    ds = JSONLDataset(str(path))
    packed = ds.pack(256, tokenizer=tok, column=turns)
    docs = {d: turns(ds[d]) for d in range(len(ds))}
    seen = 0
    for p in range(len(packed)):
        item = packed[p]
        at = 0
        for doc, start, stop in packed.pieces(p):
            want = docs[doc]["labels"] + [tok.eos_token_id]
            got = item["labels"][at : at + stop - start]
            assert got[1:] == want[start + 1 : stop] and got[0] == -100
            assert (
                item["input_ids"][at : at + stop - start]
                == (docs[doc]["input_ids"] + [tok.eos_token_id])[start:stop]
            )
            at += stop - start
            seen += stop - start
    assert seen == sum(len(d["input_ids"]) + 1 for d in docs.values())
    assert not list(path.parent.glob("*.tokens"))  # a function column without cache_key: nothing cached


class Counting:
    """A Python tokenizer (characters as ids) that counts the documents it tokenizes."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> list[int]:
        self.calls += 1
        return [ord(c) % 500 for c in text]


def test_the_length_cache_is_reused_and_refused_exactly_when_it_should_be(tok, qa):
    ds = JSONLDataset(str(qa))
    count = Counting()
    first = ds.pack(200, tokenizer=count, column="question", cache_key="chars-v1")
    sidecar = qa.with_suffix(".index.tokens")
    assert sidecar.exists() and count.calls == len(ds)
    count.calls = 0
    again = JSONLDataset(str(qa)).pack(200, tokenizer=count, column="question", cache_key="chars-v1")
    assert count.calls == 0 and [again.pieces(p) for p in range(len(again))] == [
        first.pieces(p) for p in range(len(first))
    ]
    # another column, another key, another EOS rule: the lengths are computed again
    for options in (
        {"column": "answer", "cache_key": "chars-v1"},
        {"column": "question", "cache_key": "chars-v2"},
        {"column": "question", "cache_key": "chars-v1", "eos_token_id": 7},
    ):
        count.calls = 0
        JSONLDataset(str(qa)).pack(200, tokenizer=count, **options)
        assert count.calls == len(ds), options
    # a 🤗 tokenizer is keyed by its whole serialization: a changed vocabulary is a new key
    JSONLDataset(str(qa)).pack(200, tokenizer=tok, column="question")
    other = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(tok.backend_tokenizer.to_str()), eos_token="<eos>"
    )
    other.add_tokens(["Natalia"])
    packed = JSONLDataset(str(qa)).pack(200, tokenizer=other, column="question")
    assert rebuilt(packed)[0] == reference(other, [ds[0]["question"]])[0]
    # appended data: a new index, new lengths, the new documents packed
    with open(qa, "a") as f:
        f.write(json.dumps({"question": "one more", "answer": "1"}) + "\n")
    grown = JSONLDataset(str(qa)).pack(200, tokenizer=tok, column="question")
    assert rebuilt(grown)[len(ds)] == reference(tok, ["one more"])[0]


def test_a_tokenizer_that_changed_under_its_cache_key_raises_instead_of_a_wrong_pack(qa):
    JSONLDataset(str(qa)).pack(200, tokenizer=Counting(), column="question", cache_key="chars")
    packed = JSONLDataset(str(qa)).pack(
        200, tokenizer=lambda t: [1, 2, 3], column="question", cache_key="chars"
    )
    with pytest.raises(
        StaleDataError,
        match=r"document \d+ of .*qa.jsonl has 3 tokens where the pack plan has \d+: its tokenizer changed",
    ):
        packed[0]


def test_a_packed_dataset_is_a_view(tok, qa):
    packed = JSONLDataset(str(qa)).pack(128, tokenizer=tok, column="question")
    whole = [tuple(packed[p]["input_ids"]) for p in range(len(packed))]
    shuffled = packed.shuffle(seed=3)
    assert (
        sorted(tuple(x["input_ids"]) for x in shuffled) == sorted(whole)
        and [tuple(x["input_ids"]) for x in shuffled] != whole
    )
    for contiguous in (True, False):
        parts = [tuple(x["input_ids"]) for i in range(3) for x in shuffled.shard(3, i, contiguous=contiguous)]
        assert sorted(parts) == sorted(whole)
    assert [x["input_ids"] for x in packed.select([4, 1])] == [list(whole[4]), list(whole[1])]
    assert [x["input_ids"] for x in packed[2:5]] == [list(w) for w in whole[2:5]]
    assert len(packed.batch(4)) == -(-len(packed) // 4)
    assert [tuple(x["input_ids"]) for x in packed.prefetch(4)] == whole
    assert "PackedDataset(packs=" in repr(packed) and packed.files == [str(qa)]


def test_dataloader_workers_read_the_same_packs(tok, qa):
    torch = pytest.importorskip("torch")
    from sjsonl.torch import DistributedSampler

    packed = JSONLDataset(str(qa)).pack(128, tokenizer=tok, column="question")
    sampler = DistributedSampler(packed, num_replicas=1, rank=0, seed=5)
    want = [packed[i]["input_ids"] for i in sampler]
    loader = torch.utils.data.DataLoader(
        packed, batch_size=3, sampler=sampler, num_workers=2, collate_fn=list
    )
    got = [x["input_ids"] for batch in loader for x in batch]
    assert got == want


def test_mixtures_pack_and_packed_datasets_mix(tok, qa, tmp_path):
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({"question": f"question number {i}?"}) + "\n" for i in range(50)))
    a, b = JSONLDataset(str(qa)), JSONLDataset(str(other))
    mixed = interleave_datasets([a, b], probabilities=[0.8, 0.2], seed=1)
    packed = mixed.pack(128, tokenizer=tok, column="question")
    texts = [r["question"] for r in mixed]
    got = rebuilt(packed)
    assert [got[d] for d in range(len(texts))] == reference(tok, texts)
    both = interleave_datasets(
        [a.pack(128, tokenizer=tok, column="question"), b.pack(64, tokenizer=tok, column="question")], seed=2
    )
    assert all(len(x["input_ids"]) <= 128 for x in both) and len(both) > 0


def test_streaming_to_hf(tok, qa):
    pytest.importorskip("datasets")
    packed = JSONLDataset(str(qa)).pack(128, tokenizer=tok, column="question")
    from sjsonl.hf import to_hf

    hf = to_hf(packed.shuffle(seed=1), streaming=True, num_shards=2)
    got = sorted(tuple(x["input_ids"]) for x in hf)
    assert got == sorted(tuple(packed[p]["input_ids"]) for p in range(len(packed)))


def test_unpacked_with_data_collator_with_flattening_is_the_packed_batch(tok, qa):
    """🤗's DataCollatorWithFlattening over the pieces gives the same input_ids, labels and position_ids as
    the pack itself: a Trainer fed either trains on the same tokens."""
    from transformers import DataCollatorWithFlattening

    packed = JSONLDataset(str(qa)).pack(128, tokenizer=tok, column="question")
    batch = unpacked(DataCollatorWithFlattening(return_tensors="np"))([packed[0], packed[1]])
    flat = {k: [t for i in (0, 1) for t in packed[i][k]] for k in ("input_ids", "labels", "position_ids")}
    for key, value in flat.items():
        assert batch[key].reshape(-1).tolist() == value, key


def test_token_ids_in_the_file_need_no_tokenizer(tmp_path):
    path = tmp_path / "ids.jsonl"
    docs = [[i] * (i % 7 + 1) for i in range(100)]
    path.write_text("".join(json.dumps({"ids": d}) + "\n" for d in docs))
    packed = JSONLDataset(str(path)).pack(16, column="ids")
    assert rebuilt(packed) == dict(enumerate(docs))  # no tokenizer: no EOS unless asked
    with_eos = JSONLDataset(str(path)).pack(16, column="ids", eos_token_id=6)
    # EOS is appended unless the document already ends with it (document 6 is [6] * 7)
    assert rebuilt(with_eos) == {d: ids if ids[-1] == 6 else [*ids, 6] for d, ids in enumerate(docs)}


def test_clear_errors(tok, qa, tmp_path):
    ds = JSONLDataset(str(qa))
    with pytest.raises(
        ColumnNotFoundError,
        match=r"qa.jsonl, line 1: a record has no column 'text' to pack "
        r"\(a JSON object with keys \['question', 'answer'\]\)",
    ):
        ds.pack(64, tokenizer=tok)
    with pytest.raises(
        InvalidArgumentError,
        match=r"line 1: documents are text: pack\(..., tokenizer=\) is needed",
    ):
        ds.pack(64, column="question")
    with pytest.raises(InvalidArgumentError, match="strategy"):
        ds.pack(64, tokenizer=tok, column="question", strategy="magic")
    with pytest.raises(InvalidArgumentError, match="seq_len"):
        ds.pack(0, tokenizer=tok, column="question")
    with pytest.raises(InvalidArgumentError, match="padding"):
        ds.pack(64, tokenizer=tok, column="question", padding=True)
    packed = ds.pack(64, tokenizer=tok, column="question")
    with pytest.raises(InvalidArgumentError, match="packed already"):
        PackedDataset(packed, 64)
    with pytest.raises(IndexError):
        packed[len(packed)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"ids": [1, 2]}\n{"ids": [1, "x"]}\n')
    with pytest.raises(
        InvalidArgumentError,
        match=r"bad.jsonl, line 2: a document must be text or a list of integer token ids",
    ):
        JSONLDataset(str(bad)).pack(8, column="ids")
    assert bad.read_text() == '{"ids": [1, 2]}\n{"ids": [1, "x"]}\n'


def test_a_view_packs_when_records_outside_it_have_no_document(tok, tmp_path):
    """A filter (or a shard) of a file whose other records lack the column packs: the file's length cache
    marks those records, and only a record of the packed view without a document is an error."""
    path = tmp_path / "mixed.jsonl"
    rows = [{"text": f"text number {i}"} if i % 3 else {"messages": [{"content": "hi"}]} for i in range(30)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = JSONLDataset(str(path))
    texts = ds.filter(lambda r: "text" in r)
    packed = texts.pack(32, tokenizer=tok, column="text")
    got = rebuilt(packed)
    assert [got[d] for d in range(len(texts))] == reference(tok, [r["text"] for r in texts])
    with pytest.raises(ColumnNotFoundError, match=r"mixed.jsonl, line 1: a record has no column 'text'"):
        ds.pack(32, tokenizer=tok, column="text")

    def first_turn(record):  # a function column raising KeyError outside the view
        return record["messages"][0]["content"]

    chats = ds.filter(lambda r: "messages" in r).pack(32, tokenizer=tok, column=first_turn, cache_key="turn")
    assert len(chats) >= 1 and chats.plan.tokens == 10 * (len(tok("hi")["input_ids"]) + 1)
    with pytest.raises(
        InvalidArgumentError, match=r"mixed.jsonl, line 2: making its document raised KeyError"
    ):
        ds.pack(32, tokenizer=tok, column=first_turn, cache_key="turn")
