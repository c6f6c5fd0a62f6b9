"""JSONLStream: the index-free iterable behind ``load_dataset(..., streaming=True)``."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import pytest

from sjsonl import DataFileError, InvalidArgumentError, JSONLDataset, RecordDecodeError
from sjsonl.data.streaming import JSONLStream

EDGE_FILES = [
    "jsonl/clue/fewclue_bustm_test_public.json",  # CRLF
    "jsonl/xtuner/openai_sft.jsonl",  # arrays per line, no final newline
    "jsonl/llama_factory/v1_multimodal_demo.jsonl",  # trailing blank line
    "ndjson_spec/derived/example.ndjson",  # leading spaces
    "jsonl/jglue/jsquad_valid-v1.3.json",  # one 2 MB line
    "jsonl/open_assistant/en_100_tree.jsonl",  # surrogate-pair escapes, deep nesting
]


@pytest.mark.parametrize("rel", EDGE_FILES)
def test_stream_equals_indexed_dataset_on_real_files(shared_data: Path, rel: str) -> None:
    path = shared_data / rel
    assert list(JSONLStream(path)) == list(JSONLDataset(path))


def test_bom_blank_lines_crlf_and_no_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\r\n   \n{"a": "\\u2028 x\xe2\x80\xa8"}\n{"a": 3}')
    assert [r["a"] for r in JSONLStream(path)] == [1, "\u2028 x\u2028", 3]


def test_gzip_files_are_decompressed(shared_data: Path) -> None:
    gz = list(JSONLStream(shared_data / "jsonl/human_eval/HumanEval.jsonl.gz"))
    assert gz == list(JSONLDataset(shared_data / "jsonl/human_eval/HumanEval.jsonl"))


def test_bad_line_error_names_file_line_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"a": 1}\n\n{"a": oops}\n')
    it = iter(JSONLStream(path).shuffle(seed=0, buffer_size=1))
    with pytest.raises(RecordDecodeError) as info:
        list(it)
    assert (info.value.path, info.value.line, info.value.offset) == (str(path), 3, 10)


def test_views_compose_in_call_order(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(f'{{"i": {i}}}\n' for i in range(5)))
    b.write_text("".join(f'{{"i": {i}}}\n' for i in range(5, 12)))
    s = JSONLStream([a, b])
    ids = lambda st: [r["i"] for r in st]  # noqa: E731
    assert ids(s) == list(range(12))
    assert ids(s.take(6).shard(2, 1)) == [1, 3, 5]
    assert ids(s.shard(2, 1).take(2)) == [1, 3]
    assert ids(s.skip(3).take(2)) == [3, 4]
    shards = [ids(s.shard(3, k)) for k in range(3)]
    assert sorted(i for shard in shards for i in shard) == list(range(12)) and shards[1] == [1, 4, 7, 10]
    shuffled = ids(s.shuffle(seed=3, buffer_size=4))
    assert sorted(shuffled) == list(range(12)) and shuffled != list(range(12))
    assert shuffled == ids(s.shuffle(seed=3, buffer_size=4))


def test_stream_and_dataset_agree_on_shard_and_shuffle(tmp_path: Path) -> None:
    """One meaning per name: a stream's shard is the dataset's ``contiguous=False`` shard (and refuses
    ``contiguous=True`` instead of dealing round-robin under that name); both shuffles default to seed 0."""
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(11)))
    stream, ds = JSONLStream(path), JSONLDataset(path)
    for k in range(3):
        assert list(stream.shard(3, k)) == list(ds.shard(3, k, contiguous=False))
    with pytest.raises(InvalidArgumentError, match="contiguous"):
        stream.shard(3, 0, contiguous=True)
    assert list(stream.shuffle()) == list(stream.shuffle(seed=0)) != list(stream)
    assert list(ds.shuffle()) == list(ds.shuffle(seed=0))


def test_pickles_and_checks_files_up_front(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write('{"a": 1}\n')
    s = pickle.loads(pickle.dumps(JSONLStream(path).take(1)))
    assert list(s) == [{"a": 1}] and s.files == [str(path)]
    with pytest.raises(DataFileError):
        JSONLStream(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError):
        JSONLStream([])
