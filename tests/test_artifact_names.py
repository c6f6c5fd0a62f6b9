"""Data files named like sjsonl's artifacts are data; sjsonl's own artifacts are skipped — told apart by
their bytes, never by their names (``sjsonl.index.layout.is_index_artifact``, used by folder and glob
loading in ``sjsonl.hf.data_files``)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from sjsonl import JSONLDataset, load_dataset
from sjsonl.hf.data_files import resolve_data_files
from sjsonl.index.layout import is_index_artifact
from sjsonl.records.badlines import badlines_path
from sjsonl.records.schema import infer_schema, schema_cache_path

#: real data files whose names look like artifacts
LOOKALIKES = [
    "search.index.meta.jsonl",
    "books.index.schema.jsonl",
    "x.index.npy.jsonl",
    "y.index.packed.jsonl",
    "z.index.badlines.jsonl",
    "w.index.seekpoints.jsonl",
    "v.index.meta.json",  # the format-1 metadata's own name, holding records
]


def _folder(tmp_path: Path) -> tuple[Path, list[Path]]:
    """A folder of lookalike data files, each indexed (plain and compact, with sidecars), plus a gzip
    file's seek points, temp files of atomic writes and a format-1 metadata file."""
    root = tmp_path / "corpus"
    root.mkdir()
    data = []
    for k, name in enumerate(LOOKALIKES):
        path = root / name
        path.write_text(json.dumps({"file": name, "k": k}) + "\n{oops\n")
        data.append(path)
        ds = JSONLDataset(path, on_bad_lines="skip", compact=k % 2 == 1)
        infer_schema(ds)
        assert os.path.exists(badlines_path(ds.index_paths[0]))
        assert os.path.exists(schema_cache_path(ds.index_paths[0]))
    gz = root / "g.jsonl.gz"
    gz.write_bytes(gzip.compress(b'{"file": "g.jsonl.gz", "k": 99}\n'))
    data.append(gz)
    JSONLDataset(gz)
    (root / "t.index.npy.ab12cd34-4242.x7Yq0_aZ.tmp").write_bytes(b"")  # created, nothing written yet
    partial = root / "t.index.npy.ab12cd34-4243.Qw3rTy9u.tmp"
    with open(partial, "wb") as f:
        np.save(f, np.arange(3, dtype=np.uint32))  # the array written, the trailer not yet
    legacy = {"stamp": {"size": 1}, "records": 1, "dtype": "uint8", "data_path": "/d/t.jsonl", "version": 1}
    (root / "t.index.meta.json").write_text(json.dumps(legacy, indent=1))
    return root, data


def _artifacts(root: Path, data: list[Path]) -> set[str]:
    return set(os.listdir(root)) - {p.name for p in data}


def test_only_the_artifacts_are_recognised(tmp_path: Path) -> None:
    root, data = _folder(tmp_path)
    artifacts = _artifacts(root, data)
    suffixes = {n.rsplit(".", 1)[1] for n in artifacts}
    assert {"npy", "packed", "badlines", "schema", "seekpoints", "tmp", "json"} <= suffixes
    assert not [p.name for p in data if is_index_artifact(p)]
    assert sorted(n for n in artifacts if not is_index_artifact(root / n)) == []


def test_folder_and_glob_loading_read_every_lookalike_and_no_artifact(tmp_path: Path) -> None:
    root, data = _folder(tmp_path)
    names = sorted(p.name for p in data)
    assert sorted(os.path.basename(f) for f in resolve_data_files(root)["train"]) == names
    assert sorted(os.path.basename(f) for f in resolve_data_files("json", root, "*")["train"]) == names
    assert sorted(os.path.basename(f) for f in resolve_data_files(str(root / "*"))["train"]) == names
    found = load_dataset(str(root), split="train", on_bad_lines="skip")
    assert sorted(r["file"] for r in found) == sorted([*LOOKALIKES, "g.jsonl.gz"])


@pytest.mark.parametrize("name", LOOKALIKES)
def test_a_lookalike_is_found_by_its_name(tmp_path: Path, name: str) -> None:
    root, _ = _folder(tmp_path)
    files = resolve_data_files("json", root, {"train": name})["train"]
    assert files == [str(root / name)]
    ds = load_dataset("json", data_dir=str(root), data_files=name, split="train", on_bad_lines="skip")
    assert [r["file"] for r in ds] == [name]


def test_an_artifact_named_explicitly_is_still_not_data(tmp_path: Path) -> None:
    root, _ = _folder(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such data file"):
        resolve_data_files("json", root, "search.index.meta.index.npy")
