"""Packing while streaming (``pack_stream``): each window's packs are exactly the planned view's packs of
that window's documents, shards share windows out, the first pack needs one window, and resume is exact at
every pack. (The resume contract, tests/test_resume_contract.py, holds it to the rules every state obeys.)"""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("transformers")


from sjsonl import JSONLDataset, JSONLStream
from sjsonl.data.packing import PackStream
from sjsonl.errors import InvalidArgumentError

from .conftest import gsm8k_lines
from .test_packing import STRATEGIES


def _windows_planned(ds: JSONLDataset, window: int, seq_len: int, **kw) -> list[dict]:
    """The planned view's packs of each window's documents, window after window."""
    out: list[dict] = []
    for lo in range(0, len(ds), window):
        out += list(ds.select(range(lo, min(len(ds), lo + window))).pack(seq_len, **kw))
    return out


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("overflow", ["split", "truncate"])
def test_each_window_packs_as_the_planned_view_of_its_documents(tok, qa, strategy, overflow):
    ds = JSONLDataset(str(qa))
    kw = {"tokenizer": tok, "column": "question", "strategy": strategy, "overflow": overflow}
    got = list(ds.pack_stream(96, window=50, **kw))
    assert got == _windows_planned(ds, 50, 96, **kw)  # every token once in split mode: the view's tests
    assert all(sum(p["seq_lengths"]) == len(p["input_ids"]) <= 96 for p in got)
    assert list(ds.pack_stream(96, window=len(ds), **kw)) == list(ds.pack(96, **kw))  # one window: the view


def test_a_json_lines_stream_packs_as_the_dataset(tok, qa):
    kw = {"tokenizer": tok, "column": "question", "window": 64}
    assert list(JSONLStream(str(qa)).pack_stream(128, **kw)) == list(
        JSONLDataset(str(qa)).pack_stream(128, **kw)
    )


@pytest.mark.parametrize("over_stream", [False, True], ids=["dataset", "JSONLStream"])
@pytest.mark.parametrize("shards", [2, 3, 4])
def test_shards_take_every_window_once(tok, qa, shards, over_stream):
    source = JSONLStream(str(qa)) if over_stream else JSONLDataset(str(qa))
    kw = {"tokenizer": tok, "column": "answer", "window": 40}
    whole = list(source.pack_stream(128, **kw))
    by_window: dict[int, list] = {}
    for i in range(shards):
        stream = source.pack_stream(128, num_shards=shards, shard_index=i, **kw)
        for pack in stream:
            by_window.setdefault(stream.state_dict()["window"], []).append(pack)
    assert sorted(by_window) == list(range(-(-len(JSONLDataset(str(qa))) // 40)))
    assert [p for k in sorted(by_window) for p in by_window[k]] == whole


@pytest.mark.parametrize("over_stream", [False, True], ids=["dataset", "JSONLStream"])
def test_resume_at_every_pack_in_a_fresh_object(tok, shared_data, tmp_path, over_stream):
    small = tmp_path / "small.jsonl"
    small.write_text("\n".join(gsm8k_lines(shared_data, 50)) + "\n")

    def make() -> PackStream:
        source = JSONLStream(str(small)) if over_stream else JSONLDataset(str(small))
        return source.pack_stream(256, tokenizer=tok, column="answer", window=12)

    whole = [p["input_ids"] for p in make()]
    for k in range(len(whole) + 1):
        stream = make()
        it = iter(stream)
        head = [next(it)["input_ids"] for _ in range(k)]
        state = json.loads(json.dumps(stream.state_dict()))
        resumed = make()
        resumed.load_state_dict(state)
        assert head + [p["input_ids"] for p in resumed] == whole, k
        assert [p["input_ids"] for p in resumed] == whole  # the state served one pass


def test_the_first_pack_tokenizes_one_window_and_writes_nothing(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"text": "w " * (i % 17 + 1)}) + "\n" for i in range(5000)))
    ds = JSONLDataset(str(path))
    before = set(os.listdir(tmp_path))
    seen: list[str] = []

    def words(text: str) -> list[int]:
        seen.append(text)
        return [1] * len(text.split())

    first = next(iter(ds.pack_stream(64, tokenizer=words, eos_token_id=2, window=100)))
    assert len(seen) == 100  # one window, no pass over the other 4,900 documents
    assert sum(first["seq_lengths"]) == len(first["input_ids"]) <= 64
    assert set(os.listdir(tmp_path)) == before  # no length cache: nothing is planned ahead


def test_padding_and_labels_as_the_planned_view(tok, qa):
    ds = JSONLDataset(str(qa))
    kw = {"tokenizer": tok, "column": "question", "padding": "max_length", "mask_piece_starts": False}
    got = list(ds.pack_stream(128, window=len(ds), **kw))
    assert got == list(ds.pack(128, **kw))
    assert all(len(p["input_ids"]) == len(p["attention_mask"]) == 128 for p in got)


def test_bad_arguments_and_states_are_refused_with_one_line(tok, qa):
    ds = JSONLDataset(str(qa))
    for kw, says in [
        ({"window": 0}, "window must be an integer >= 1"),
        ({"num_shards": 2, "shard_index": 2}, r"shard_index must be in \[0, 1\]"),
        ({"strategy": "best"}, "strategy"),
    ]:
        with pytest.raises(InvalidArgumentError, match=says):
            ds.pack_stream(64, tokenizer=tok, column="question", **kw)
    stream = ds.pack_stream(64, tokenizer=tok, column="question", window=50)
    with pytest.raises(InvalidArgumentError, match="packed already"):
        PackStream(stream, 64)
    state = stream.state_dict()
    other = ds.pack_stream(64, tokenizer=tok, column="question", window=40)
    with pytest.raises(InvalidArgumentError, match=r"^cannot resume: saved state has window_size=50 but"):
        other.load_state_dict(state)
    sharded = ds.pack_stream(64, tokenizer=tok, column="question", window=50, num_shards=2, shard_index=1)
    bad = {**state, "num_shards": 2, "shard_index": 1, "window": 2}
    with pytest.raises(InvalidArgumentError, match="window=2, not a window of shard 1 of 2") as err:
        sharded.load_state_dict(bad)
    assert "\n" not in str(err.value)
    with pytest.raises(InvalidArgumentError, match="has no 'window'"):
        stream.load_state_dict({k: v for k, v in state.items() if k != "window"})
