"""sjsonl.mindspore against real MindSpore (CPU): load_dataset over real chat / CJK JSONL files, every row
checked against its source record under the documented conversion, in every worker / shuffle / shard mode."""

from __future__ import annotations

import json
import pickle
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pytest

from sjsonl import JSONLDataset
from sjsonl.data.streaming import JSONLStream
from sjsonl.errors import MissingDependencyError
from sjsonl.mindspore import load_dataset, make_schema, make_source, to_generator_dataset
from sjsonl.mindspore.context import distributed_defaults

PAIRS = {  # train file, test file (under shared/data/jsonl)
    "llama_factory chat": ("llama_factory/v1_sft_demo.jsonl", "llama_factory/reason_tool_use_demo_50.jsonl"),
    "xtuner chat + jglue": (
        "xtuner/mllm_sft_text_example_data.jsonl",
        "jglue/jcommonsenseqa_valid-v1.3.json",
    ),
    "clue prompts + pairs": ("clue/pCLUE_train_9.json", "clue/fewclue_bustm_test_public.json"),
    "clue nested": ("clue/cluener_ner_predict.json", "clue/fewclue_cluewsc_test_public.json"),
    "arrays per line + clue": ("xtuner/openai_sft.jsonl", "clue/fewclue_eprstmt_test_public.json"),
}
MODES = {
    "2 worker processes": dict(num_parallel_workers=2, python_multiprocessing=True),
    "2 worker threads": dict(num_parallel_workers=2, python_multiprocessing=False),
}
_DTYPE_KIND = {"str": "U", "json": "U", "int64": "i", "float64": "f", "bool": "b"}


def _rows(gd) -> list[tuple[np.ndarray, ...]]:
    return [tuple(r) for r in gd.create_tuple_iterator(output_numpy=True, num_epochs=1)]


def _key(row) -> bytes:
    """A canonical, hashable form of a row (dtype and values; orjson writes NaN as null)."""
    return orjson.dumps([[v.dtype.str, v.tolist()] for v in row])


# ----------------------------------------------------------------------------- the documented conversion
# Written out here from the table in sjsonl.mindspore.columns, on records split from the file's bytes, so
# that no expected row comes from the converter under test.
_FILLS = {"str": "", "int64": 0, "float64": float("nan"), "bool": False}
_NUMPY = {"str": np.str_, "int64": np.int64, "float64": np.float64, "bool": np.bool_}


def file_records(path: Path) -> list:
    return [json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip(b" \t\r")]


def _signature(value) -> tuple[str, tuple[int, ...]] | str | None:
    """(kind, shape) of a value the table gives an array, ``"[]"`` for an empty list, ``"json"`` for the
    rest, None for null."""
    if value is None:
        return None
    if type(value) is bool:
        return ("bool", ())
    if type(value) is int:
        return ("int64", ()) if -(2**63) <= value < 2**63 else "json"
    if type(value) in (float, str):
        return ("float64" if type(value) is float else "str", ())
    if type(value) is not list:
        return "json"
    if not value:
        return "[]"
    inner = {_signature(v) for v in value}
    if not all(isinstance(sig, tuple) for sig in inner) or len({shape for _, shape in inner}) != 1:
        return "json"  # nulls, objects, empty or ragged sublists, mixed depths
    kinds, shape = {kind for kind, _ in inner}, next(iter(inner))[1]
    if kinds == {"int64", "float64"}:
        kinds = {"float64"}
    return (kinds.pop(), (len(value), *shape)) if len(kinds) == 1 else "json"


def reference_columns(records: list) -> list[tuple[str, str | None, str, int]]:
    """(name, key, kind, ndim) of each column, as the table gives them for these records."""
    if not records or any(type(r) is not dict for r in records):
        objects = any(type(r) is dict for r in records)
        return [("value", None, *(("json", 0) if objects or not records else _column_kind(records)))]
    keys = list(dict.fromkeys(k for r in records for k in r))
    return [(k, k, *_column_kind([r.get(k) for r in records])) for k in keys]


def _column_kind(values: list) -> tuple[str, int]:
    sigs = {_signature(v) for v in values} - {None}
    if "json" in sigs or not sigs - {"[]"}:
        return ("json", 0)  # anything else, or a column seen only as null or []
    arrays = {(kind, len(shape)) for kind, shape in sigs - {"[]"}}  # shapes may differ from row to row
    kinds, depths = {k for k, _ in arrays}, {d for _, d in arrays}
    if len(depths) != 1 or ("[]" in sigs and 0 in depths):  # mixed depths, or [] beside scalars
        return ("json", 0)
    if kinds == {"int64", "float64"}:
        kinds = {"float64"}
    return (kinds.pop(), depths.pop()) if len(kinds) == 1 else ("json", 0)


def reference_row(columns, record) -> tuple[np.ndarray, ...]:
    out = []
    for _, key, kind, ndim in columns:
        value = record if key is None else record.get(key)
        if kind == "json":
            out.append(np.array(json.dumps(value, ensure_ascii=False, separators=(",", ":"))))
        elif value is None:
            out.append(
                np.array(_FILLS[kind], dtype=_NUMPY[kind])
                if ndim == 0
                else np.zeros((0,) * ndim, _NUMPY[kind])
            )
        else:
            out.append(np.array(value, dtype=_NUMPY[kind]))
    return tuple(out)


def test_the_written_out_conversion_on_the_documented_examples() -> None:
    rows = [{"q": "a", "n": 1, "tags": ["x"]}, {"q": "b", "n": 2.5, "msgs": [{"r": 1}]}]
    columns = reference_columns(rows)
    assert columns == [
        ("q", "q", "str", 0),
        ("n", "n", "float64", 0),
        ("tags", "tags", "str", 1),
        ("msgs", "msgs", "json", 0),
    ]
    assert _key(reference_row(columns, {"q": "c", "n": 3, "tags": ["y", "z"], "msgs": [{"r": 2}]})) == _key(
        (np.array("c"), np.array(3.0), np.array(["y", "z"]), np.array('[{"r":2}]'))
    )
    assert reference_columns([[1, 2], [3]]) == [("value", None, "int64", 1)]
    assert reference_columns([{"a": None}, {"a": [[1, 2], [3]]}, {"b": True}])[0][2] == "json"


@pytest.fixture(scope="module")
def pairs(shared_data: Path) -> dict[str, tuple[Path, Path]]:
    root = shared_data / "jsonl"
    return {name: (root / a, root / b) for name, (a, b) in PAIRS.items()}


@pytest.fixture(scope="module")
def columns(pairs) -> dict[str, dict[str, list]]:
    """Each split's columns, by the documented table (not by sjsonl)."""
    return {
        name: {split: reference_columns(file_records(path)) for split, path in zip(("train", "test"), pair)}
        for name, pair in pairs.items()
    }


@pytest.fixture(scope="module")
def expected(pairs, columns) -> dict[str, dict[str, list[bytes]]]:
    """Each split's rows in file order, converted by the documented table (not by sjsonl)."""
    return {
        name: {
            split: [_key(reference_row(columns[name][split], r)) for r in file_records(path)]
            for split, path in zip(("train", "test"), pair)
        }
        for name, pair in pairs.items()
    }


def _load(pair, **kw):
    a, b = pair
    return load_dataset("json", data_files={"train": str(a), "test": str(b)}, **kw)


@pytest.mark.parametrize("name", list(PAIRS))
def test_every_row_equals_its_source_record(pairs, columns, expected, name: str) -> None:
    dsd = _load(pairs[name])
    assert isinstance(dsd, dict) and list(dsd) == ["train", "test"]  # 🤗's rule: a dict when split=None
    for split in ("train", "test"):
        assert dsd[split].get_col_names() == [c[0] for c in columns[name][split]]
        assert dsd[split].get_dataset_size() == len(expected[name][split])
        assert [_key(r) for r in _rows(dsd[split])] == expected[name][split]


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
@pytest.mark.parametrize("mode", list(MODES))
def test_worker_modes_give_the_same_rows_in_order(pairs, expected, mode: str) -> None:
    for name, pair in pairs.items():
        dsd = _load(pair, **MODES[mode])
        for split in ("train", "test"):
            assert [_key(r) for r in _rows(dsd[split])] == expected[name][split], (name, split)


def test_shuffle_gives_the_same_multiset_in_another_order(pairs, expected) -> None:
    for name, pair in pairs.items():
        dsd = _load(pair, shuffle=True)
        for split in ("train", "test"):
            keys = [_key(r) for r in _rows(dsd[split])]
            assert Counter(keys) == Counter(expected[name][split]) and keys != expected[name][split]


@pytest.mark.parametrize("shuffle", [False, True], ids=["in order", "shuffled"])
def test_two_shards_are_disjoint_and_complete(pairs, expected, shuffle: bool) -> None:
    for name, pair in pairs.items():
        shards = [_load(pair, num_shards=2, shard_id=k, shuffle=shuffle) for k in (0, 1)]
        for split in ("train", "test"):
            parts = [[_key(r) for r in _rows(s[split])] for s in shards]
            full = expected[name][split]
            assert Counter(parts[0]) + Counter(parts[1]) == Counter(full)  # nothing lost, nothing twice
            assert abs(len(parts[0]) - len(parts[1])) <= 1
            if not shuffle:
                assert parts[0] == full[0::2] and parts[1] == full[1::2]


def test_pad_shards_hands_sharding_to_mindspore(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(7)))
    shards = [
        to_generator_dataset(JSONLDataset(path), num_shards=2, shard_id=k, pad_shards=True) for k in (0, 1)
    ]
    sizes = [len(_rows(s)) for s in shards]
    assert sizes == [4, 4]  # MindSpore's DistributedSampler repeats a row to even the shards out


def test_split_slices_column_selection_and_single_split(pairs) -> None:
    a, _ = pairs["xtuner chat + jglue"]
    gd = load_dataset("json", data_files={"train": str(a)}, split="train[:10%]", column_names=["messages"])
    rows = _rows(gd)
    assert gd.get_col_names() == ["messages"] and len(rows) == 20
    assert orjson.loads(str(rows[3][0])) == JSONLDataset(a)[3]["messages"]
    one = load_dataset(str(a))  # one split: the bare GeneratorDataset (MindNLP's rule)
    assert len(_rows(one)) == 200 and one.source.ds.files == [str(a)]


def test_streaming_sources_shuffle_and_shard_in_the_source(pairs, expected) -> None:
    a, b = pairs["clue prompts + pairs"]
    dsd = _load((a, b), streaming=True)
    assert [_key(r) for r in _rows(dsd["test"])] == expected["clue prompts + pairs"]["test"]
    full = expected["clue prompts + pairs"]["train"]
    parts = [
        [_key(r) for r in _rows(_load((a, b), streaming=True, num_shards=2, shard_id=k)["train"])]
        for k in (0, 1)
    ]
    assert parts == [full[0::2], full[1::2]]
    gd = to_generator_dataset(JSONLStream(a), shuffle=True, seed=5, buffer_size=64)
    first = [_key(r) for r in _rows(gd)]
    assert Counter(first) == Counter(full) and first != full


def test_two_epochs_and_iterable_reshuffle(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(40)))
    src = make_source(JSONLStream(path), shuffle=True, seed=1, buffer_size=8)
    epochs = [[int(i) for (i,) in src] for _ in range(2)]
    assert sorted(epochs[0]) == sorted(epochs[1]) == list(range(40)) and epochs[0] != epochs[1]
    gd = to_generator_dataset(JSONLDataset(path), num_parallel_workers=2)
    it = gd.create_tuple_iterator(output_numpy=True, num_epochs=2)
    assert [int(i) for _epoch in range(2) for (i,) in it] == list(range(40)) * 2


def test_json_path_refuses_what_it_cannot_honour(pairs) -> None:
    a, _ = pairs["llama_factory chat"]
    with pytest.raises(TypeError, match="token, trust_remote_code"):
        load_dataset("json", data_files=str(a), token="x", trust_remote_code=True)
    # 🤗's preparation-only parameters have nothing to prepare here: accepted, no effect
    gd = load_dataset(str(a), split="train[:2]", download_mode="reuse_dataset_if_exists", keep_in_memory=True)
    assert len(_rows(gd)) == 2


def test_num_proc_and_cache_dir_drive_the_index(pairs, tmp_path: Path) -> None:
    a, _ = pairs["clue nested"]
    load_dataset(str(a), split="train", cache_dir=str(tmp_path / "idx"), num_proc=2)
    assert [p.suffix for p in (tmp_path / "idx").iterdir() if p.suffix == ".npy"] == [".npy"]


def test_sources_pickle_small_and_work_after_unpickling(pairs) -> None:
    a, _ = pairs["xtuner chat + jglue"]
    ds = JSONLDataset(a).shuffle(seed=2)
    sources = [make_source(ds, num_shards=2, shard_id=1), make_source(JSONLStream(a), shuffle=True, seed=1)]
    for source in sources:
        blob = pickle.dumps(source)
        assert len(blob) < 4096  # by path: no records, no offsets
        clone = pickle.loads(blob)
        assert clone.schema == source.schema
        if hasattr(source, "__getitem__"):
            assert _key(clone[7]) == _key(source[7]) and len(clone) == len(source) == 100
        else:
            assert [_key(r) for r in clone] == [_key(r) for r in source]


def test_an_empty_split_is_an_empty_dataset(tmp_path: Path) -> None:
    (tmp_path / "train.jsonl").write_text('{"a": 1}\n')
    (tmp_path / "test.jsonl").write_text("\n")  # blank lines only: no records
    dsd = load_dataset(str(tmp_path), shuffle=True, num_shards=2, shard_id=0)
    assert len(_rows(dsd["train"])) == 1 and _rows(dsd["test"]) == []


def test_no_distributed_context_means_no_shards() -> None:
    assert distributed_defaults(None, None) == (None, None)
    assert distributed_defaults(4, 1) == (4, 1)


def test_missing_mindspore_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mindspore.dataset", None)  # what an uninstalled package looks like
    with pytest.raises(MissingDependencyError, match=r"sjsonl\[mindspore\]"):
        to_generator_dataset([{"a": 1}])


def test_a_stream_takes_its_column_types_from_its_first_rows(tmp_path) -> None:
    from sjsonl.mindspore import SchemaMismatchError
    from sjsonl.mindspore.sources import STREAM_SAMPLE_ROWS

    n = STREAM_SAMPLE_ROWS + 50
    path = tmp_path / "s.jsonl"
    late = STREAM_SAMPLE_ROWS + 10  # past the sample: a float where the first rows had integers
    path.write_text("".join(orjson.dumps({"n": 0.5 if i == late else i}).decode() + "\n" for i in range(n)))
    stream = JSONLStream(path)
    assert str(make_schema(stream)) == "Schema(n: int64)"  # no pass over the whole stream first
    rows = iter(make_source(stream))
    assert [int(next(rows)[0]) for _ in range(late)] == list(range(late))
    with pytest.raises(SchemaMismatchError, match=r"0\.5"):
        next(rows)
    assert str(make_schema(JSONLDataset(path))) == "Schema(n: float64)"  # random access: every row
