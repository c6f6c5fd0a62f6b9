"""Members of ``.zip`` archives read in place: stored ones as byte ranges, deflated ones from restart
points (``sjsonl.storage.zip``)."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import pytest

from sjsonl import DataFileError, JSONLDataset, StaleDataError, StaleIndexError, load_dataset
from sjsonl.data.streaming import JSONLStream
from sjsonl.sample import write_corpus
from sjsonl.storage.zip import ZIP_SPACING, ZipMemberFile, zip_members

from ._storage_checks import check_every_access_path, check_fork_safety, source_records

METHODS = {"stored": zipfile.ZIP_STORED, "deflated": zipfile.ZIP_DEFLATED}


def write_zip(path: Path, members: dict[str, bytes], method: int) -> Path:
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


@pytest.fixture(params=list(METHODS))
def corpus(request, tmp_path: Path) -> tuple[Path, bytes]:
    plain = tmp_path / "data.jsonl"
    write_corpus(plain, 30_000, kind="short", seed=9)  # ~5 MB: several restart points when deflated
    raw = plain.read_bytes()
    return write_zip(tmp_path / "data.zip", {"data.jsonl": raw}, METHODS[request.param]), raw


def test_every_access_path_equals_the_source(corpus) -> None:
    path, raw = corpus
    ds = JSONLDataset(path)
    storage = ds._files[0].storage
    assert isinstance(storage, ZipMemberFile) and storage.size == len(raw)
    check_every_access_path(ds, raw)
    handle = storage._handle()[1]
    if hasattr(handle, "points"):  # deflated: the index scan made every restart point
        assert handle.complete and len(handle.points) >= len(raw) // ZIP_SPACING


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
def test_fork_and_pickle_safety(corpus) -> None:
    path, raw = corpus
    ids = [r["id"] for r in source_records(raw)]
    check_fork_safety(JSONLDataset(path), ids, processes=2, reads=300, batched=300, pickled_reads=200)


def test_an_archive_is_its_data_members_in_name_order(tmp_path: Path, monkeypatch) -> None:
    members = {
        "b.jsonl": b'{"f": "b"}\n',
        "a/x.jsonl": b'{"f": "a/x"}\n{"f": "a/x2"}\n',
        ".hidden.jsonl": b'{"f": "hidden"}\n',
        "__MACOSX/._b.jsonl": b"\x00\x05junk",
        "empty/": b"",
    }
    path = write_zip(tmp_path / "t.zip", members, zipfile.ZIP_DEFLATED)
    assert [m.split("::")[1] for m in zip_members(path)] == ["a/x.jsonl", "b.jsonl"]
    expected = [{"f": "a/x"}, {"f": "a/x2"}, {"f": "b"}]
    assert list(JSONLDataset(path)) == expected and list(JSONLStream(path)) == expected
    assert list(load_dataset("json", data_files=str(path), split="train")) == expected
    one = JSONLDataset(f"{path}::b.jsonl")
    assert list(one) == [{"f": "b"}] and one.index_paths == [f"{path}::b.jsonl.index.npy"]
    assert list(JSONLDataset(f"{path}::a/x.jsonl", build_index_on_load=False))[1] == {"f": "a/x2"}


def test_a_json_array_member_is_a_document(tmp_path: Path) -> None:
    path = write_zip(
        tmp_path / "d.zip", {"rows.json": b'[\n {"a": 1},\n {"a": 2}\n]\n'}, zipfile.ZIP_DEFLATED
    )
    assert list(JSONLDataset(path)) == [{"a": 1}, {"a": 2}]
    assert list(JSONLStream(path)) == [{"a": 1}, {"a": 2}]


def test_a_changed_archive_is_stale_everywhere(corpus) -> None:
    path, raw = corpus
    ds = JSONLDataset(path)
    assert len(ds) == 30_000
    copy = pickle.dumps(ds)
    method = zipfile.ZipFile(path).infolist()[0].compress_type
    write_zip(path, {"data.jsonl": raw + b'{"id": "new"}\n'}, method)
    with pytest.raises(StaleIndexError, match="stale"):
        JSONLDataset(path, build_index_on_load=False)
    with pytest.raises(StaleDataError):
        pickle.loads(copy)[0]
    fresh = JSONLDataset(path)
    assert len(fresh) == 30_001 and fresh[-1] == {"id": "new"}


def test_truncated_archive_is_a_clear_error(corpus, tmp_path: Path) -> None:
    path, _raw = corpus
    cut = tmp_path / "cut.zip"
    cut.write_bytes(path.read_bytes()[:100_000])  # a partial download: no central directory
    with pytest.raises(DataFileError, match=r"cut\.zip") as info:
        JSONLDataset(cut)
    assert "\n" not in str(info.value)


def test_members_it_cannot_read_in_place_are_refused_with_a_recipe(tmp_path: Path) -> None:
    import gzip

    nested = write_zip(tmp_path / "n.zip", {"t.jsonl.gz": gzip.compress(b"{}\n")}, zipfile.ZIP_STORED)
    with pytest.raises(DataFileError, match=r"gzip-compressed inside a zip archive.*unzip"):
        JSONLDataset(nested)
    hidden_gzip = write_zip(tmp_path / "h.zip", {"t.jsonl": gzip.compress(b"{}\n")}, zipfile.ZIP_STORED)
    with pytest.raises(DataFileError, match="holds gzip-compressed data, not text"):
        JSONLDataset(hidden_gzip)
    other = write_zip(tmp_path / "b.zip", {"t.jsonl": b'{"a": 1}\n'}, zipfile.ZIP_BZIP2)
    with pytest.raises(DataFileError, match=r"compression method 12.*unzip -p"):
        JSONLDataset(other)
    empty = write_zip(tmp_path / "e.zip", {".hidden.jsonl": b"{}\n"}, zipfile.ZIP_STORED)
    with pytest.raises(DataFileError, match=r"e\.zip holds no data files"):
        JSONLDataset(empty)
    with pytest.raises(DataFileError, match=r"no member 'nope\.jsonl'"):
        JSONLDataset(f"{other}::nope.jsonl")


def test_human_eval_zipped(shared_data, tmp_path: Path) -> None:
    raw = (shared_data / "jsonl" / "human_eval" / "HumanEval.jsonl").read_bytes()
    for name, method in METHODS.items():
        path = write_zip(tmp_path / f"{name}.zip", {"HumanEval.jsonl": raw}, method)
        ds = JSONLDataset(path)
        assert len(ds) == 164
        check_every_access_path(ds, raw, singles=100)
