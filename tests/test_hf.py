"""🤗 datasets both ways, offline: 🤗 sources through sjsonl.mindspore; JSONLDataset → to_hf → same rows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import datasets
import numpy as np
import orjson
import pytest

from sjsonl import JSONLDataset
from sjsonl.data.streaming import JSONLStream
from sjsonl.hf import hf_kind, to_hf
from sjsonl.mindspore import load_dataset, make_schema, to_generator_dataset


def _rows(gd) -> list[dict]:
    return [
        {k: v.tolist() for k, v in r.items()}
        for r in gd.create_dict_iterator(output_numpy=True, num_epochs=1)
    ]


@pytest.fixture
def semicolon_csv(tmp_path: Path) -> Path:
    path = tmp_path / "people.csv"
    path.write_text("name;age;city\nAda;36;London\n李雷;28;北京\nJosé;51;\n")
    return path


def test_csv_goes_through_huggingface_with_every_keyword(semicolon_csv: Path) -> None:
    gd = load_dataset("csv", data_files=str(semicolon_csv), sep=";")  # sep reaches 🤗's CSV builder
    assert type(gd.source.ds).__name__ == "Dataset"  # one split: the bare GeneratorDataset (MindNLP's rule)
    assert _rows(gd) == [
        {"name": "Ada", "age": 36, "city": "London"},
        {"name": "李雷", "age": 28, "city": "北京"},
        {"name": "José", "age": 51, "city": ""},  # 🤗 reads the empty field as null: the str fill
    ]
    gd = load_dataset("csv", data_files=str(semicolon_csv), split="train[1:]", sep=";", column_names=["age"])
    assert _rows(gd) == [{"age": 28}, {"age": 51}]  # MindSpore's column_names: which columns
    named = load_dataset(
        "csv",
        data_files=str(semicolon_csv),
        split="train",
        sep=";",
        hf_kwargs={"column_names": ["n", "a", "c"]},
    )
    assert named.get_col_names() == ["n", "a", "c"] and _rows(named)[0] == {
        "n": "name",
        "a": "age",
        "c": "city",
    }


def test_wrong_keywords_reach_huggingface_and_fail_there(semicolon_csv: Path) -> None:
    with pytest.raises((TypeError, ValueError), match="not_a_csv_option"):
        load_dataset("csv", data_files=str(semicolon_csv), not_a_csv_option=1)


def test_in_memory_dataset_in_every_mode() -> None:
    data = {
        "text": ["a", "bé", None, "数据", "e"],
        "ids": [[1, 2], [], [3], None, [4, 5, 6]],
        "meta": [{"k": 1}, {"k": None}, None, {"k": 4}, {"k": 5}],
        "score": [0.5, 1.0, None, 2.0, 3.5],
    }
    hf = datasets.Dataset.from_dict(data)
    assert hf_kind(hf) == "map"
    schema = make_schema(hf)
    assert [c.describe() for c in schema.columns] == ["str", "1-d int64 array", "JSON text", "float64"]
    base = _rows(to_generator_dataset(hf))
    assert [r["text"] for r in base] == ["a", "bé", "", "数据", "e"]
    assert [r["ids"] for r in base] == [[1, 2], [], [3], [], [4, 5, 6]]
    assert [orjson.loads(r["meta"]) for r in base] == data["meta"]
    assert np.isnan(base[2]["score"]) and base[3]["score"] == 2.0
    keys = lambda rows: [orjson.dumps(r) for r in rows]  # noqa: E731  (NaN != NaN; orjson writes null)
    assert keys(_rows(to_generator_dataset(hf, num_parallel_workers=2, python_multiprocessing=True))) == keys(
        base
    )
    assert Counter(keys(_rows(to_generator_dataset(hf, shuffle=True)))) == Counter(keys(base))
    halves = [keys(_rows(to_generator_dataset(hf, num_shards=2, shard_id=k))) for k in (0, 1)]
    assert halves == [keys(base)[0::2], keys(base)[1::2]]


def test_iterable_dataset_is_streamed_shuffled_and_sharded() -> None:
    hf = datasets.Dataset.from_dict({"i": list(range(20))}).to_iterable_dataset(num_shards=4)
    assert hf_kind(hf) == "iterable"
    assert [r["i"] for r in _rows(to_generator_dataset(hf))] == list(range(20))
    shuffled = [r["i"] for r in _rows(to_generator_dataset(hf, shuffle=True, seed=3, buffer_size=5))]
    assert sorted(shuffled) == list(range(20)) and shuffled != list(range(20))
    shards = [{r["i"] for r in _rows(to_generator_dataset(hf, num_shards=2, shard_id=k))} for k in (0, 1)]
    assert not shards[0] & shards[1] and shards[0] | shards[1] == set(range(20))


def test_same_rows_as_the_mindnlp_route_where_types_agree(shared_data: Path) -> None:
    path = shared_data / "jsonl/jglue/jcommonsenseqa_valid-v1.3.json"
    ours = _rows(load_dataset(str(path), split="train"))
    via_arrow = _rows(
        to_generator_dataset(datasets.load_dataset("json", data_files=str(path), split="train"))
    )
    assert ours == via_arrow and len(ours) == 1119


@pytest.mark.parametrize(
    "rel",
    [
        "jsonl/xtuner/mllm_sft_text_example_data.jsonl",
        "jsonl/gsm8k/test.jsonl",
        "jsonl/xtuner/openai_sft.jsonl",
    ],
)
def test_to_hf_round_trip(shared_data: Path, tmp_path: Path, rel: str) -> None:
    ds = JSONLDataset(shared_data / rel)
    records = [r if isinstance(r, dict) else {"value": r} for r in ds]
    streamed = to_hf(ds, streaming=True)
    assert hf_kind(streamed) == "iterable" and streamed.num_shards == 8
    assert list(streamed) == records  # lazily, as they are
    table = to_hf(ds, cache_dir=str(tmp_path))
    keys = list(dict.fromkeys(k for r in records for k in r))
    assert hf_kind(table) == "map" and table.num_rows == len(ds)
    assert list(table) == [{k: r.get(k) for k in keys} for r in records]  # a missing key is null, as in 🤗


def test_to_hf_keeps_views_and_never_serves_stale_data(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(10)))
    view = JSONLDataset(path).select([7, 2, 5])
    assert [r["i"] for r in to_hf(view, cache_dir=str(tmp_path / "c"))] == [7, 2, 5]
    assert [r["i"] for r in to_hf(view, streaming=True, num_shards=2)] == [7, 2, 5]
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(100, 110)))  # same size, new content
    fresh = JSONLDataset(path).select([7, 2, 5])
    assert [r["i"] for r in to_hf(fresh, cache_dir=str(tmp_path / "c"))] == [107, 102, 105]


def test_to_hf_from_a_stream_is_sharded_by_file(tmp_path: Path) -> None:
    for k in range(3):
        (tmp_path / f"{k}.jsonl").write_text(f'{{"k": {k}}}\n')
    stream = JSONLStream(sorted(tmp_path.glob("*.jsonl")))
    hf = to_hf(stream, streaming=True)
    assert hf.num_shards == 3 and [r["k"] for r in hf] == [0, 1, 2]
    with pytest.raises(TypeError, match="streaming=True"):
        to_hf(stream)
