"""sjsonl.load_dataset: 🤗's parameters and file/split rules over JSON Lines read in place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import sjsonl
from sjsonl import JSONLDataset
from sjsonl.data.streaming import JSONLStream
from sjsonl.hf.load import is_jsonl_source, load_dataset, resolve_data_files


def _write(path: Path, n: int, start: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(start, start + n)))
    return path


def _ids(ds) -> list[int]:
    return [r["i"] for r in ds]


LAYOUTS = {
    "file names": ["train.jsonl", "my-test.jsonl", "dev.json", "val-1.ndjson", "README.md", "notes.txt"],
    "no keyword": ["a.jsonl", "b/c.jsonl", "train_x.jsonl", ".hidden.jsonl"],  # "_" is not a separator
    "folders": ["train/a.jsonl", "train/b.jsonl", "x-validation/c.jsonl", "test.jsonl"],
    "sharded": [
        "data/train-00000-of-00002.jsonl",
        "data/train-00001-of-00002.jsonl",
        "data/test-00000-of-00001.jsonl",
    ],
    "special dirs": ["__pycache__/train.jsonl", "sub/eval_set/train.jsonl", "sub/evaluation.jsonl"],
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_split_inference_matches_huggingface(tmp_path: Path, layout: str) -> None:
    from datasets.data_files import DataFilesDict, get_data_patterns

    for name in LAYOUTS[layout]:
        _write(tmp_path / name, 1)
    hf = DataFilesDict.from_patterns(get_data_patterns(str(tmp_path)), base_path=str(tmp_path))
    expected = {
        str(k): sorted(f for f in v if f.endswith((".jsonl", ".json", ".ndjson"))) for k, v in hf.items()
    }
    ours = resolve_data_files(tmp_path)
    assert {k: sorted(v) for k, v in ours.items()} == expected
    assert list(ours) == list(expected)  # split order too


def test_directory_returns_a_dict_even_for_one_split(tmp_path: Path) -> None:
    _write(tmp_path / "a.jsonl", 3)
    _write(tmp_path / "b.jsonl", 2, start=3)
    dsd = load_dataset(tmp_path)
    assert list(dsd) == ["train"] and isinstance(dsd["train"], JSONLDataset)
    assert _ids(dsd["train"]) == [0, 1, 2, 3, 4]  # one multi-file dataset, files in sorted order
    assert _ids(load_dataset(tmp_path, split="train")) == [0, 1, 2, 3, 4]


def test_json_with_data_files_in_every_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c = (
        _write(tmp_path / "a.jsonl", 3),
        _write(tmp_path / "b.jsonl", 2, 3),
        _write(tmp_path / "c.json", 1, 5),
    )
    assert _ids(load_dataset("json", data_files=str(a), split="train")) == [0, 1, 2]
    assert _ids(load_dataset("json", data_files=[a, b], split="train")) == [0, 1, 2, 3, 4]
    dsd = load_dataset("json", data_files={"train": [str(a), str(b)], "test": str(c)})
    assert list(dsd) == ["train", "test"] and _ids(dsd["test"]) == [5]
    assert len(load_dataset("json", data_files="*.json*", data_dir=tmp_path, split="train")) == 6
    monkeypatch.chdir(tmp_path)
    assert _ids(load_dataset("json", data_files="b.jsonl", split="train")) == [3, 4]
    assert _ids(load_dataset("b.jsonl", split="train")) == [3, 4]  # a file path: the train split
    assert _ids(load_dataset("[ab].jsonl", split="train")) == [0, 1, 2, 3, 4]  # a glob
    with pytest.raises(FileNotFoundError):
        load_dataset("json", data_files="missing.jsonl")
    with pytest.raises(FileNotFoundError):
        load_dataset("json", data_files={"train": "*.nothing"})
    with pytest.raises(FileNotFoundError):
        load_dataset(tmp_path / "nowhere")


def test_data_dir_below_a_directory(tmp_path: Path) -> None:
    _write(tmp_path / "sub" / "test.jsonl", 2)
    _write(tmp_path / "other" / "train.jsonl", 5)
    assert list(load_dataset(tmp_path, data_dir="sub")) == ["test"]
    assert list(load_dataset("json", data_dir=tmp_path / "sub")) == ["test"]


def test_split_slicing_follows_huggingface(tmp_path: Path) -> None:
    from datasets.arrow_reader import ReadInstruction

    _write(tmp_path / "train.jsonl", 25)
    _write(tmp_path / "test.jsonl", 7, start=100)
    sizes = {"train": 25, "test": 7}
    for spec in ["train[:10%]", "train[10:20]", "train[-5:]", "train[:-3]", "test[33%:67%]", "train[5%:15%]",
                 "train[:200]", "test+train[3:5]", "train[-100:2]"]:  # fmt: skip
        expected = []
        for instr in ReadInstruction.from_spec(spec).to_absolute(sizes):
            offset = 0 if instr.splitname == "train" else 100
            expected += list(range(instr.from_ + offset, instr.to + offset))
        assert _ids(load_dataset(tmp_path, split=spec)) == expected, spec
    ds = load_dataset(tmp_path, split="train[20:]")
    assert _ids(ds.shuffle(seed=1)) != [] and sorted(_ids(ds.shuffle(seed=1))) == list(range(20, 25))
    a, b = load_dataset(tmp_path, split=["train[:2]", "test[:1]"])
    assert (_ids(a), _ids(b)) == ([0, 1], [100])
    with pytest.raises(ValueError, match="Unknown split"):
        load_dataset(tmp_path, split="validation")
    with pytest.raises(ValueError, match="pct1_dropremainder"):
        load_dataset(tmp_path, split="train[:10%](pct1_dropremainder)")


def test_streaming_returns_index_free_streams(tmp_path: Path) -> None:
    _write(tmp_path / "train.jsonl", 3)
    _write(tmp_path / "test.jsonl", 2, start=3)
    cache = Path(os.environ["XDG_CACHE_HOME"])
    before = set(cache.rglob("*"))
    dsd = load_dataset(tmp_path, streaming=True)
    assert all(isinstance(s, JSONLStream) for s in dsd.values()) and _ids(dsd["test"]) == [3, 4]
    assert _ids(load_dataset(tmp_path, split="train+test", streaming=True)) == [0, 1, 2, 3, 4]
    assert set(cache.rglob("*")) == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "test.jsonl",
        "train.jsonl",
    ]  # no index was built, beside the data or in the cache
    with pytest.raises(ValueError, match="streaming"):
        load_dataset(tmp_path, split="train[:1]", streaming=True)


def test_unknown_keywords_and_names_are_refused(tmp_path: Path) -> None:
    _write(tmp_path / "train.jsonl", 1)
    with pytest.raises(TypeError, match="token, trust_remote_code"):
        load_dataset(tmp_path, trust_remote_code=True, token="x")
    with pytest.raises(ValueError, match="BuilderConfig"):
        load_dataset(tmp_path, name="plain_text")
    assert len(load_dataset(tmp_path, name="default", split="train")) == 1
    with pytest.raises(ValueError, match="split name"):
        load_dataset("json", data_files={"bad split": str(tmp_path / "train.jsonl")})


def test_index_dir_and_workers_reach_the_index(tmp_path: Path) -> None:
    _write(tmp_path / "data" / "train.jsonl", 4)
    ds = load_dataset(tmp_path / "data", split="train", index_dir=tmp_path / "idx", workers=1)
    assert Path(ds.index_paths[0]).parent == tmp_path / "idx"


def test_is_jsonl_source(tmp_path: Path) -> None:
    _write(tmp_path / "j" / "a.jsonl", 1)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.csv").write_text("x\n1\n")
    (tmp_path / "c" / "b.csv").write_text("x\n1\n")
    (tmp_path / "c" / "meta.json").write_text("{}\n")
    assert (
        is_jsonl_source("json")
        and is_jsonl_source(tmp_path / "j")
        and is_jsonl_source(tmp_path / "j/a.jsonl")
    )
    assert is_jsonl_source(str(tmp_path / "j" / "*.jsonl"))
    assert (
        not is_jsonl_source(tmp_path / "c") and not is_jsonl_source("csv") and not is_jsonl_source("org/name")
    )
    assert is_jsonl_source(tmp_path / "c", data_files="meta.json")
    assert not is_jsonl_source("json", data_files=[str(tmp_path / "j/a.jsonl"), "hf://datasets/x/y.jsonl"])


def test_real_shared_files(shared_data: Path) -> None:
    root = shared_data / "jsonl"
    files = {"train": str(root / "gsm8k/train.jsonl"), "test": "gsm8k/test.jsonl"}  # absolute and relative
    dsd = load_dataset("json", data_files=files, data_dir=root)
    assert (len(dsd["train"]), len(dsd["test"])) == (7473, 1319)
    clue = load_dataset("json", data_files=str(root / "clue" / "fewclue_*.json"), split="train")
    assert len(clue) == 1772 + 976 + 610
    assert load_dataset(root / "gsm8k", split="test[-1:]")[0] == JSONLDataset(root / "gsm8k/test.jsonl")[-1]


def test_exported_from_package() -> None:
    assert sjsonl.load_dataset is load_dataset


def test_index_files_beside_the_data_are_never_data(tmp_path, monkeypatch):
    """Indexes written beside the data (the default) must not turn into records or change the routing."""
    for split in ("train", "test"):
        (tmp_path / f"{split}.jsonl").write_text('{"a": 1}\n{"a": 2}\n')
    first = load_dataset(str(tmp_path))
    assert {s: len(d) for s, d in first.items()} == {"train": 2, "test": 2}
    assert (tmp_path / "train.index.npy").exists()  # its metadata is a trailer inside it (no .meta.json)
    second = load_dataset(str(tmp_path))  # now the folder also holds .index.npy files
    assert {s: list(d) for s, d in second.items()} == {
        "train": [{"a": 1}, {"a": 2}],
        "test": [{"a": 1}, {"a": 2}],
    }
    assert is_jsonl_source(str(tmp_path))
