"""Zip members whose names look like paths that climb out (``../../x.jsonl``), start at the root
(``/x.jsonl``) or use Windows separators (``a\\..\\x.jsonl``): sjsonl never extracts a member, it reads it in
place by its whole name, so such members are data like any other — read, named by that name, indexed beside
the archive — and never dropped silently (issue #32, item 2). Hidden files and ``__MACOSX/`` keep 🤗's rule:
skipped without a word."""

from __future__ import annotations

import json
import os
import warnings
import zipfile
from pathlib import Path

import pytest

from sjsonl import IndexFileError, JSONLDataset, load_dataset
from sjsonl.data.streaming import JSONLStream
from sjsonl.storage.zip import zip_members

METHODS = {"stored": zipfile.ZIP_STORED, "deflated": zipfile.ZIP_DEFLATED}

#: read: every name whose only odd parts are "", "." and ".." (or a backslash, which is not a separator)
READ = [
    "../../x.jsonl",
    "/abs.jsonl",
    "a\\..\\bs.jsonl",
    "./dot.jsonl",
    "a/../mid.jsonl",
    "..",
    "ok.jsonl",
    "sub/ok.jsonl",
]
#: skipped silently, as 🤗 skips them: hidden files and folders, __special__ parts, folders themselves
SKIPPED = [
    ".hidden.jsonl",
    "../.hidden.jsonl",
    "sub/.git/x.jsonl",
    "__MACOSX/._ok.jsonl",
    "/__pycache__/x.jsonl",
    "sub/",
]


def write_zip(path: Path, names: list[str], method: int) -> Path:
    with zipfile.ZipFile(path, "w", method) as archive:
        for name in names:
            archive.writestr(name, "" if name.endswith("/") else json.dumps({"m": name}) + "\n")
    return path


def files_under(root: Path) -> set[str]:
    return {os.path.join(d, f) for d, _, files in os.walk(root) for f in files}


@pytest.fixture(params=list(METHODS))
def method(request) -> int:
    return METHODS[request.param]


def test_the_issue_s_archive_reads_all_six_members(tmp_path: Path, method: int) -> None:
    names = [f"part-{k}.jsonl" for k in range(5)] + ["../../x.jsonl"]
    path = write_zip(tmp_path / "d.zip", names, method)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ds = JSONLDataset(path)
        rows = ds[:]
    assert sorted(r["m"] for r in rows) == sorted(names) and len(ds) == 6
    assert [str(w.message) for w in seen] == []


def test_every_member_is_read_or_skipped_by_the_hidden_rule(tmp_path: Path, method: int) -> None:
    here = tmp_path / "deep" / "er"
    here.mkdir(parents=True)
    path = write_zip(here / "d.zip", READ + SKIPPED, method)
    with zipfile.ZipFile(path) as archive:  # the archive holds exactly these, nothing else to account for
        assert sorted(i.filename for i in archive.infolist()) == sorted(READ + SKIPPED)
    before = files_under(tmp_path)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert zip_members(path) == [f"{path}::{name}" for name in sorted(READ)]
        ds = JSONLDataset(path)
        rows = ds[:]
        streamed = list(JSONLStream(path))
        loaded = list(load_dataset("json", data_files=str(path), split="train"))
    assert [str(w.message) for w in seen] == []  # nothing dropped, so nothing to say
    expected = [{"m": name} for name in sorted(READ)]  # in name order, each once
    assert rows == streamed == loaded == expected
    # each member's index is beside the archive, under its whole (percent-encoded) name: no name reaches
    # another directory, and no two members share an index
    assert len(set(ds.index_paths)) == len(READ)
    assert all(os.path.dirname(p) == str(here) for p in ds.index_paths)
    assert {p for p in files_under(tmp_path) - before if os.path.dirname(p) != str(here)} == set()
    assert not (tmp_path / "x.jsonl").exists() and not (here / "a").exists()
    # and each is read again by its own name, from the index saved for it
    for name in READ:
        one = JSONLDataset(f"{path}::{name}")
        assert one[:] == [{"m": name}] and one._files[0].index_origin == "found"


def test_a_hidden_member_stays_readable_by_its_name(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "d.zip", ["ok.jsonl", "../.hidden.jsonl"], zipfile.ZIP_DEFLATED)
    assert JSONLDataset(path)[:] == [{"m": "ok.jsonl"}]
    assert JSONLDataset(f"{path}::../.hidden.jsonl")[:] == [{"m": "../.hidden.jsonl"}]


def test_a_member_name_is_never_resolved_as_a_path(tmp_path: Path) -> None:
    """``d.zip::a/../mid.jsonl`` and ``d.zip::../x.jsonl`` are members, whatever files sit beside the
    archive under the names a path resolution would give (``mid.jsonl``, ``../x.jsonl``)."""
    here = tmp_path / "here"
    here.mkdir()
    path = write_zip(here / "d.zip", ["a/../mid.jsonl", "../x.jsonl", "../../y.jsonl"], zipfile.ZIP_DEFLATED)
    for decoy in (here / "mid.jsonl", tmp_path / "x.jsonl", here / "y.jsonl", tmp_path / "y.jsonl"):
        decoy.write_text('{"m": "a decoy"}\n')
    for name in ("a/../mid.jsonl", "../x.jsonl", "../../y.jsonl"):
        member = f"{path}::{name}"
        assert JSONLDataset(member)[:] == list(JSONLStream(member)) == [{"m": name}]
        assert JSONLStream(member).files == [member]
    assert sorted(r["m"] for r in JSONLStream(path)) == ["../../y.jsonl", "../x.jsonl", "a/../mid.jsonl"]
    # in the private cache too, each member has an index of its own
    ds = JSONLDataset(path, index_dir=tmp_path / "ix")
    assert len(set(ds.index_paths)) == 3 and all(
        os.path.dirname(p) == str(tmp_path / "ix") for p in ds.index_paths
    )


def test_the_archive_of_a_member_is_its_data_file(tmp_path: Path) -> None:
    """An index asked to go where the member's archive is would overwrite the data: refused."""
    path = write_zip(tmp_path / "d.zip", ["m.jsonl"], zipfile.ZIP_STORED)
    kept = path.read_bytes()
    for where in ({"index_path": path}, {"index_dir": path}):
        with pytest.raises(IndexFileError, match="is the data file itself"):
            JSONLDataset(f"{path}::m.jsonl", **where)
    assert path.read_bytes() == kept
