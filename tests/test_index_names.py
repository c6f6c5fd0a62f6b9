"""Index names for any legal file name: up to 255 bytes, any bytes (``sjsonl.index.store``'s naming).

Every name sjsonl derives from a data file's — the index, the compact index, seek points, the schema and
bad-lines sidecars, and the temp files of their atomic writes — must fit in NAME_MAX, differ from every
other data file's, and keep bytes that are not UTF-8.
"""

from __future__ import annotations

import gzip
import os
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from sjsonl import JSONLDataset
from sjsonl.index.layout import (
    _NAME_ROOM,
    _READABLE_STEM,
    NAME_MAX,
    cache_index_path,
    default_index_path,
    seek_state_path,
)
from sjsonl.index.packed import packed_index_path
from sjsonl.records.badlines import badlines_path
from sjsonl.records.schema import infer_schema, schema_cache_path

ROWS = b'{"a": 1}\n{oops\n{"a": 3}\n'


def _derived(index_path: str) -> list[str]:
    return [
        index_path,
        packed_index_path(index_path),
        seek_state_path(index_path),
        badlines_path(index_path),
        schema_cache_path(index_path),
    ]


def _longest_name(directory: str | bytes) -> int:
    return max(len(os.fsencode(n)) for n in os.listdir(os.fsencode(directory)))


def test_the_seed_names_do_not_change() -> None:
    assert default_index_path("/d/data.jsonl") == "/d/data.index.npy"
    assert default_index_path("/d/data.jsonl.gz") == "/d/data.jsonl.gz.index.npy"
    assert os.path.basename(default_index_path("/d/" + "x" * 184 + ".jsonl")) == "x" * 184 + ".index.npy"


@pytest.mark.parametrize("length", range(241, 256))
def test_every_derived_name_fits_with_a_temp_suffix(length: int) -> None:
    name = "é" * ((length - 6) // 2) + "x" * ((length - 6) % 2) + ".jsonl"
    assert len(name.encode()) == length
    for index in (default_index_path(f"/d/{name}"), cache_index_path(f"/d/{name}", "/ix")):
        for derived in _derived(index):
            base = os.fsencode(os.path.basename(derived))
            assert len(base) + 30 <= NAME_MAX  # ".<host 8>-<pid 7>.<random 8>.tmp" of an atomic write
        assert os.path.basename(index).encode().decode()  # never cut inside a character
    assert len(".index.seekpoints") + 30 <= _NAME_ROOM


def test_long_names_that_differ_only_at_the_end_get_different_indexes() -> None:
    a, b = "x" * 248 + "a.jsonl", "x" * 248 + "b.jsonl"
    assert default_index_path(f"/d/{a}") != default_index_path(f"/d/{b}")
    assert cache_index_path(f"/d/{a}", "/ix") != cache_index_path(f"/d/{b}", "/ix")
    # a cut-and-hashed stem is longer than any stem kept readable: no other file's readable name equals it
    hashed = os.path.basename(default_index_path(f"/d/{a}"))[: -len(".index.npy")]
    assert len(hashed.encode()) > _READABLE_STEM
    kept = "y" * _READABLE_STEM
    assert default_index_path(f"/d/{kept}.jsonl") == f"/d/{kept}.index.npy"


@pytest.mark.parametrize("length", [241, 247, 250, 255])
@pytest.mark.parametrize("where", ["beside", "index_dir"])
def test_a_long_name_opens_with_every_artifact(tmp_path: Path, length: int, where: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / ("x" * (length - 6) + ".jsonl")
    path.write_bytes(ROWS)
    index_dir = str(tmp_path / "ix") if where == "index_dir" else None
    ds = JSONLDataset(path, on_bad_lines="skip", index_dir=index_dir, compact=True)
    assert len(ds) == 2 and ds[1] == {"a": 3}
    infer_schema(ds)
    index = ds.index_paths[0]
    assert index.endswith(".index.packed")
    assert os.path.dirname(index) == (index_dir or str(data))
    for derived in (index, badlines_path(index), schema_cache_path(index)):
        assert os.path.exists(derived), derived
    assert JSONLDataset(path, on_bad_lines="skip", index_dir=index_dir).index_paths == [index]
    assert _longest_name(os.path.dirname(index)) <= NAME_MAX


def test_a_long_gzip_name_keeps_its_seek_points(tmp_path: Path) -> None:
    path = tmp_path / ("g" * 246 + ".jsonl.gz")  # 255 bytes
    path.write_bytes(gzip.compress(b'{"a": 1}\n' * 1000))
    ds = JSONLDataset(path)
    assert len(ds) == 1000 and ds[999] == {"a": 1}
    assert os.path.exists(seek_state_path(ds.index_paths[0]))


@pytest.mark.parametrize("where", ["beside", "index_dir"])
def test_a_name_that_is_not_utf8_keeps_its_bytes(tmp_path: Path, where: str) -> None:
    raw_dir = os.fsencode(tmp_path)
    raw = os.path.join(raw_dir, b"caf\xe9-\xff\xfe.jsonl")  # Latin-1 bytes: not UTF-8
    with open(raw, "wb") as f:
        f.write(ROWS)
    path = os.fsdecode(raw)  # what os.listdir gives: the bad bytes as surrogates
    index_dir = str(tmp_path / "ix") if where == "index_dir" else None
    ds = JSONLDataset(path, on_bad_lines="skip", index_dir=index_dir)
    assert ds[:] == [{"a": 1}, {"a": 3}]
    infer_schema(ds)
    index = os.fsencode(ds.index_paths[0])
    assert os.path.exists(index)
    assert b"caf\xe9-\xff\xfe" in os.path.basename(index)  # the bytes as they were, not replaced
    assert os.path.exists(os.fsencode(schema_cache_path(ds.index_paths[0])))
    again = JSONLDataset(path, on_bad_lines="skip", index_dir=index_dir)
    assert again.index_paths == ds.index_paths


def test_a_long_non_utf8_name(tmp_path: Path) -> None:
    raw = os.path.join(os.fsencode(tmp_path), b"\xff" * 249 + b".jsonl")
    with open(raw, "wb") as f:
        f.write(b'{"a": 1}\n')
    ds = JSONLDataset(os.fsdecode(raw))
    assert ds[0] == {"a": 1}
    assert _longest_name(tmp_path) <= NAME_MAX


def test_zip_member_index_names_are_injective(tmp_path: Path) -> None:
    members = {"a%b/t.jsonl": 1000, "a/b/t.jsonl": 2000, "a%2Fb/t.jsonl": 3000}
    path = tmp_path / "d.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, n in members.items():
            z.writestr(name, "".join(f'{{"m": "{name}", "i": {i}}}\n' for i in range(n)))
    names = {default_index_path(f"{path}::{m}") for m in members}
    assert len(names) == 3
    ds = JSONLDataset(path)
    assert len(ds) == 6000
    again = JSONLDataset(path)  # every index found again, none rebuilt over another
    assert len(again) == 6000 and sorted(again.index_paths) == sorted(names)
    assert Counter(r["m"] for r in again[:]) == members


def test_places_are_made_one_by_one_and_an_index_beside_the_data_skips_the_cache_path(tmp_path, monkeypatch):
    """The private cache's name hashes the data's path (a tenth of a fresh process's first open): a lookup
    that finds the index beside the data never makes it, and the order of the places is unchanged."""
    from sjsonl.index import layout, packed

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n')
    beside = str(tmp_path / "d.index.npy")
    cache = cache_index_path(str(path), str(tmp_path / "xdg/sjsonl/index"))
    expected = [beside, packed_index_path(beside), cache, packed_index_path(cache)]
    assert packed.index_names(str(path), None) == expected
    compact_first = list(packed.iter_index_names(str(path), None, compact=True))
    assert compact_first[:2] == [packed_index_path(beside), beside]
    JSONLDataset(path)  # writes the index beside the data

    made: list[str] = []
    real = layout.cache_index_path
    monkeypatch.setattr(layout, "cache_index_path", lambda *a: made.append(a[0]) or real(*a))
    ds = JSONLDataset(path)
    assert ds._files[0].index_origin == "found" and ds[1] == {"a": 2} and made == []
    os.remove(beside)
    assert JSONLDataset(path)._files[0].index_origin == "built" and made[0] == str(path)  # looked there first
