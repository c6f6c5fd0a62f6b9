"""Corpus manifests (sjsonl.data.manifest, sjsonl.data.members, sjsonl.index.adopted): a first open of many
small files writes no index file a file, a reopen opens none of them until it is read, and neither ever
counts or reads a record of a version other than the one opened. Each test runs twice: with small files
(offsets in the manifest) and with every file over the small-file size (an index file each)."""

from __future__ import annotations

import glob
import os
import pickle
import re
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from sjsonl import JSONLDataset
from sjsonl.data import members
from sjsonl.data.manifest import MANIFEST_MAGIC, MANIFEST_MIN_FILES
from sjsonl.data.members import LazyMembers
from sjsonl.errors import ArtifactWarning, DataFileError, StaleDataError
from sjsonl.storage.local import MappedFile

FILES = MANIFEST_MIN_FILES + 6


@pytest.fixture(autouse=True, params=["small files", "index files"])
def kept(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where the members' offsets are kept: in the manifest, or (no file small enough) index files."""
    if request.param == "index files":
        monkeypatch.setattr(members, "SMALL_FILE_BYTES", -1)
    return str(request.param)


def _index_files(d: Path) -> list[str]:
    return glob.glob(str(d / "*.index.*"))


def _corpus(d: Path, files: int = FILES, sizes: list[int] | None = None) -> list[str]:
    paths = []
    for k in range(files):
        p = d / f"part-{k:04d}.jsonl"
        n = (k % 5) + 1 if sizes is None else sizes[k]
        p.write_text("".join(f'{{"file": {k}, "i": {i}}}\n' for i in range(n)))
        paths.append(str(p))
    return paths


def _expected(paths: list[str]) -> list[dict]:
    import json

    return [json.loads(line) for p in paths for line in Path(p).read_text().splitlines()]


def _manifests() -> list[str]:
    return glob.glob(os.path.join(os.environ["XDG_CACHE_HOME"], "sjsonl", "corpora", "*.manifest"))


def test_a_reopen_opens_no_file_until_it_is_read(tmp_path: Path, kept: str) -> None:
    paths = _corpus(tmp_path)
    first = JSONLDataset(paths)
    assert isinstance(first._files, LazyMembers)
    assert first._files.opened == (0 if kept == "small files" else FILES)
    assert len(_index_files(tmp_path)) == (0 if kept == "small files" else FILES)
    (manifest,) = _manifests()
    assert Path(manifest).read_bytes()[:8] == MANIFEST_MAGIC
    again = JSONLDataset(paths)
    assert isinstance(again._files, LazyMembers) and again._files.opened == 0
    assert len(again) == len(first) == len(_expected(paths))
    assert again.files == first.files and again._files.opened == 0
    assert again[-1] == _expected(paths)[-1] and again._files.opened == 1
    # small files are read with pread: a process may hold only ~65,530 maps (tests/test_manifest_many.py)
    assert isinstance(again._files[-1].storage, MappedFile) == (kept == "index files")
    assert list(again) == _expected(paths) and again[[3, 0, -2]] == first[[3, 0, -2]]
    assert list(first) == _expected(paths)


def test_a_member_changed_before_the_reopen_is_read_again_at_once(tmp_path: Path) -> None:
    paths = _corpus(tmp_path)
    JSONLDataset(paths)
    with open(paths[7], "a") as f:
        f.write('{"file": 7, "i": "appended"}\n')
    Path(paths[9]).write_text('{"file": 9, "i": "rewritten"}\n')
    again = JSONLDataset(paths)
    assert list(again) == _expected(paths)
    third = JSONLDataset(paths)  # the manifest was written again: nothing to open now
    assert third._files.opened == 0 and len(third) == len(again) and list(third) == _expected(paths)


@pytest.mark.parametrize("change", ["same count", "other count", "replaced"])
def test_a_member_changed_after_the_open_is_never_read(tmp_path: Path, change: str) -> None:
    paths = _corpus(tmp_path, sizes=[2] * FILES)
    JSONLDataset(paths)
    ds = JSONLDataset(paths)
    new = '{"file": 4, "i": "x"}\n' * (2 if change == "same count" else 3)
    if change == "replaced":
        Path(paths[4] + ".new").write_text(new)
        os.replace(paths[4] + ".new", paths[4])
    else:
        Path(paths[4]).write_text(new)
    with pytest.raises(StaleDataError, match=re.escape(f"{paths[4]} changed after the dataset was opened")):
        ds[8]
    assert ds[10] == {"file": 5, "i": 0}  # the other files still read
    assert JSONLDataset(paths)[8] == {"file": 4, "i": "x"}  # a new open sees the new version


def test_a_missing_member_fails_the_open_naming_it(tmp_path: Path) -> None:
    paths = _corpus(tmp_path)
    JSONLDataset(paths)
    os.unlink(paths[3])
    with pytest.raises(DataFileError, match=r"part-0003\.jsonl"):
        JSONLDataset(paths)


def test_a_lost_index_is_built_at_the_first_read(tmp_path: Path, kept: str) -> None:
    paths = _corpus(tmp_path)
    JSONLDataset(paths)
    for index in _index_files(tmp_path):
        os.unlink(index)
    ds = JSONLDataset(paths)
    assert ds._files.opened == 0 and list(ds) == _expected(paths)
    assert len(_index_files(tmp_path)) == (0 if kept == "small files" else FILES)


def test_a_damaged_manifest_is_ignored_with_a_warning_and_written_again(tmp_path: Path) -> None:
    paths = _corpus(tmp_path)
    JSONLDataset(paths)
    (manifest,) = _manifests()
    blob = bytearray(Path(manifest).read_bytes())
    blob[-3] ^= 0xFF  # a record count, under the CRC-32
    Path(manifest).write_bytes(bytes(blob))
    with pytest.warns(ArtifactWarning, match="checksum does not match"):
        ds = JSONLDataset(paths)
    assert list(ds) == _expected(paths)
    assert JSONLDataset(paths)._files.opened == 0 and len(_manifests()) == 1


def test_a_pickled_dataset_opens_its_members_in_the_receiver(tmp_path: Path) -> None:
    paths = _corpus(tmp_path)
    JSONLDataset(paths)
    ds = JSONLDataset(paths)
    ds[0]
    copy = pickle.loads(pickle.dumps(ds.shuffle(seed=1)))
    assert copy._files.opened == 1
    assert sorted(copy, key=lambda r: (r["file"], r["i"])) == _expected(paths)


def test_relative_paths_from_another_directory_are_another_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, size in (("a", 1), ("b", 2)):
        (tmp_path / name).mkdir()
        _corpus(tmp_path / name, sizes=[size] * FILES)
    names = [f"part-{k:04d}.jsonl" for k in range(FILES)]
    for name, size in (("a", 1), ("b", 2), ("a", 1), ("b", 2)):
        monkeypatch.chdir(tmp_path / name)
        assert len(JSONLDataset(names)) == size * FILES
    assert len(_manifests()) == 2


def test_small_datasets_and_zip_members_have_no_manifest(tmp_path: Path) -> None:
    few = _corpus(tmp_path, files=MANIFEST_MIN_FILES - 1)
    JSONLDataset(few)
    JSONLDataset(few)
    archive = tmp_path / "parts.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for k in range(FILES):
            z.writestr(f"p{k:03d}.jsonl", f"[{k}]\n")
    assert JSONLDataset(archive)[-1] == [FILES - 1]
    assert not _manifests()


def test_small_files_get_the_index_builds_offsets(shared_data: Path, kept: str) -> None:
    """The offsets kept for a small file are an index build's, on every real file (CRLF, blank lines, no
    final newline, a BOM, a 2 MB line: the files over the small-file size are opened as before)."""
    from sjsonl.data.document import is_json_name
    from sjsonl.index.adopted import SMALL_FILE_BYTES
    from sjsonl.index.build import build_offsets
    from sjsonl.storage import open_storage

    from .test_real_files import shared_data_files

    files = [str(p) for p in shared_data_files(shared_data)]
    paths = (files * (MANIFEST_MIN_FILES // len(files) + 1))[: max(MANIFEST_MIN_FILES, len(files))]
    ds = JSONLDataset(paths)
    for k, path in enumerate(paths[: len(files)]):
        built, _stamp = build_offsets(open_storage(path))
        assert ds._files[k].offsets.tolist() == built.tolist(), path
        small = kept == "small files" and os.path.getsize(path) <= SMALL_FILE_BYTES and not is_json_name(path)
        assert (ds._files[k].index_path is None) == small, path  # (a .json file may be a document)
    again = JSONLDataset(paths)
    assert [again[i] for i in range(0, len(ds), 97)] == [ds[i] for i in range(0, len(ds), 97)]


def test_offsets_are_adopted_only_for_the_bytes_they_came_from(tmp_path: Path) -> None:
    from sjsonl.index.adopted import adopt_offsets, scan_small_file
    from sjsonl.storage import open_storage

    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\xef\xbb\xbf[1]\r\n\n  \n[22]\n[3]")
    offsets, size, crc = scan_small_file(path)
    assert offsets.tolist() == [3, 12, 17] and size == path.stat().st_size
    adopted = adopt_offsets(open_storage(path), offsets, size, crc)
    assert adopted.offsets.tolist() == [3, 12, 17]
    storage = open_storage(path)  # the stamp an index build would give these bytes
    assert adopted.stamp == replace(storage.stamp(), content=storage.content_hash(size))
    path.write_bytes(b"\xef\xbb\xbf[1]\r\n\n  \n[2]\n\n[3]")  # as long, other bytes: the CRC-32 tells
    with pytest.raises(StaleDataError, match="changed after the dataset was opened"):
        adopt_offsets(open_storage(path), offsets, size, crc)


def test_a_member_that_is_no_small_json_lines_file_is_opened_and_explained(tmp_path: Path) -> None:
    import gzip

    paths = _corpus(tmp_path)
    Path(paths[5]).write_bytes(gzip.compress(b"[1]\n"))  # compressed bytes under a .jsonl name
    with pytest.raises(DataFileError, match=r"part-0005\.jsonl"):
        JSONLDataset(paths)
    Path(paths[5]).write_text("[5]\n")
    os.mkfifo(tmp_path / "fifo.jsonl")
    with pytest.raises(DataFileError, match=r"fifo\.jsonl"):
        JSONLDataset([*paths, str(tmp_path / "fifo.jsonl")])


def test_field_reads_each_small_file_as_a_document_as_an_eager_open_does(tmp_path: Path) -> None:
    paths = []
    for k in range(FILES):
        paths.append(str(tmp_path / f"d{k:03d}.jsonl"))
        Path(paths[-1]).write_text(f'{{"data": [{k}, {k}, {k}]}}')
    for _ in range(2):
        ds = JSONLDataset(paths, field="data")
        assert len(ds) == 3 * FILES and ds[0] == 0 and ds[-1] == FILES - 1
    assert len(JSONLDataset(paths[:5], field="data")) == 15


def test_home_relative_paths_see_a_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    _corpus(tmp_path)
    paths = [f"~/part-{k:04d}.jsonl" for k in range(FILES)]
    n = len(JSONLDataset(paths))
    with open(tmp_path / "part-0000.jsonl", "a") as f:
        f.write('{"file": 0, "i": "appended"}\n')
    ds = JSONLDataset(paths)
    assert len(ds) == n + 1 and ds[:2] == [{"file": 0, "i": 0}, {"file": 0, "i": "appended"}]


def test_a_file_with_other_bytes_under_the_same_stat_forgets_the_manifest(tmp_path: Path) -> None:
    """A rewrite within one tick of the clock keeps a file's stat: simulated by a manifest whose row for
    file 3 holds another CRC-32 (or count). The read raises; the next open reads every file again."""
    from sjsonl.data import manifest

    paths = _corpus(tmp_path)
    JSONLDataset(paths)
    key = manifest.manifest_key(paths, None)
    rows, offsets = manifest.read_manifest(key, FILES)
    rows[3, manifest.CRC if rows[3, manifest.START] >= 0 else manifest.COUNT] += 1
    manifest.write_manifest(key, rows, offsets)
    ds = JSONLDataset(paths)
    with pytest.raises(StaleDataError, match=r"part-0003\.jsonl changed after the dataset was opened"):
        ds[6]  # file 3's first record (files 0, 1 and 2 hold 1, 2 and 3)
    assert not _manifests()
    assert list(JSONLDataset(paths)) == _expected(paths)


def test_index_path_with_many_files_is_refused(tmp_path: Path) -> None:
    from sjsonl.errors import InvalidArgumentError

    paths = _corpus(tmp_path)
    with pytest.raises(InvalidArgumentError, match="index_path names one index"):
        JSONLDataset(paths, index_path=str(tmp_path / "one.index.npy"))


def test_relative_paths_keep_their_files_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _corpus(tmp_path / "a", sizes=[1] * FILES)
    _corpus(tmp_path / "b", sizes=[2] * FILES)
    names = [f"part-{k:04d}.jsonl" for k in range(FILES)]
    monkeypatch.chdir(tmp_path / "a")
    JSONLDataset(names)
    ds = JSONLDataset(names)
    monkeypatch.chdir(tmp_path / "b")
    assert ds.files[0] == str(tmp_path / "a" / names[0]) and len(list(ds)) == FILES


def test_a_fork_while_a_member_is_opened_does_not_hang_the_child(tmp_path: Path) -> None:
    import multiprocessing

    paths = _corpus(tmp_path)
    JSONLDataset(paths)
    ds = JSONLDataset(paths)
    queue = multiprocessing.get_context("fork").SimpleQueue()
    with ds._files._lock:  # as a thread opening a file when the process forks
        child = multiprocessing.get_context("fork").Process(target=lambda: queue.put(ds[5]))
        child.start()
    child.join(60)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive and queue.get() == ds[5]


def test_build_index_on_load_false_serves_small_files_from_the_manifest(tmp_path: Path, kept: str) -> None:
    from sjsonl.errors import IndexFileError, StaleIndexError

    paths = _corpus(tmp_path)
    JSONLDataset(paths)
    assert list(JSONLDataset(paths, build_index_on_load=False)) == _expected(paths)
    Path(paths[2]).write_text('{"file": 2, "i": "new"}\n')  # changed: its index must exist, or be built
    with pytest.raises((IndexFileError, StaleIndexError), match=r"part-0002\.jsonl"):
        JSONLDataset(paths, build_index_on_load=False)
