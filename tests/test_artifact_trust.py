"""The files sjsonl keeps beside an index obey the index's rules: one that others can write, or a link, is
not read; contents edited with a recomputed checksum are still range- and spot-checked against the data."""

from __future__ import annotations

import bz2
import gzip
import json
import os
import struct
from pathlib import Path

import numpy as np
import orjson
import pytest

from sjsonl import JSONLDataset
from sjsonl.data.manifest import MANIFEST_MAGIC
from sjsonl.data.packing.lengths import TOKENS_MAGIC, tokens_path
from sjsonl.index import store
from sjsonl.index.leaves import LEAVES_MAGIC
from sjsonl.records.badlines import BADLINES_MAGIC, CACHE_VERSION, badlines_path
from sjsonl.records.schema import CACHE_VERSION as SCHEMA_VERSION
from sjsonl.records.schema import SCHEMA_MAGIC, infer_schema, schema_cache_path
from sjsonl.storage import seekpoints
from sjsonl.storage.sidecar import (
    ARTIFACT_MAGICS,
    INDEX_TRAILER_MAGIC,
    ArtifactWarning,
    index_key,
    read_sidecar,
    write_sidecar,
)

LINES = [b'{"i": 0, "f": 0.5, "s": "a"}', b"{oops", b'{"i": 2, "f": 1.5, "s": "b"}', b'{"i": 3, "f": 2.0}']
GOOD = [json.loads(line) for line in LINES if line != b"{oops"]


@pytest.fixture(autouse=True)
def _indexes_beside_the_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SJSONL_INDEX_DIR", raising=False)


def _digits(text: str) -> list[int]:
    return [int(c) for c in text]


def _packed(path: Path) -> list[dict]:
    """The data's packs (their token lengths are a sidecar: ``.index.tokens``)."""
    ds = JSONLDataset(path, on_bad_lines="skip")
    return ds.pack(4, tokenizer=_digits, column=lambda r: str(r["i"]), cache_key="digits", eos_token_id=9)[:]


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    return path


def _sidecars(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Data with every kind of sidecar built: (data path, {kind: sidecar path})."""
    path = _data(tmp_path)
    ds = JSONLDataset(path, on_bad_lines="skip")
    infer_schema(ds)
    _packed(path)
    good = b"\n".join(line for line in LINES if line != b"{oops") + b"\n"
    (tmp_path / "g.jsonl.gz").write_bytes(gzip.compress(good))
    (tmp_path / "b.jsonl.bz2").write_bytes(bz2.compress(good))
    index = ds.index_paths[0]
    assert index is not None
    files = {
        "bad lines": badlines_path(index),
        "schema": schema_cache_path(index),
        "token lengths": tokens_path(index),
        "gzip points": str(JSONLDataset(tmp_path / "g.jsonl.gz").index_paths[0])[:-4] + ".seekpoints",
        "bzip2 blocks": str(JSONLDataset(tmp_path / "b.jsonl.bz2").index_paths[0])[:-4] + ".seekpoints",
    }
    assert all(os.path.exists(f) for f in files.values())
    return path, files


def _open_all(tmp_path: Path, path: Path) -> None:
    """Open everything the sidecars serve, checking every record."""
    ds = JSONLDataset(path, on_bad_lines="skip")
    assert ds[:] == GOOD and [b.line for b in ds.bad_lines] == [2]
    assert infer_schema(ds).column_names == ["i", "f", "s"]
    assert [p["input_ids"] for p in _packed(path)] == [[0, 9, 2, 9], [3, 9]]
    for name in ("g.jsonl.gz", "b.jsonl.bz2"):
        assert JSONLDataset(tmp_path / name)[::-1] == GOOD[::-1]


@pytest.mark.parametrize("kind", ["bad lines", "schema", "token lengths", "gzip points", "bzip2 blocks"])
def test_a_sidecar_others_can_write_is_not_read(tmp_path: Path, kind: str) -> None:
    path, files = _sidecars(tmp_path)
    os.chmod(files[kind], 0o666)
    with pytest.warns(
        ArtifactWarning, match=r"not trusted: the index file is writable by other users \(mode 666\)"
    ):
        _open_all(tmp_path, path)
    if kind in ("bad lines", "schema", "token lengths"):  # recomputed and saved again, as this user's
        assert os.stat(files[kind]).st_mode & 0o777 == 0o644


@pytest.mark.parametrize("kind", ["bad lines", "schema", "gzip points"])
def test_a_sidecar_of_another_user_or_behind_a_link_is_not_read(tmp_path: Path, kind: str) -> None:
    path, files = _sidecars(tmp_path)
    os.replace(files[kind], files[kind] + ".real")
    os.symlink(files[kind] + ".real", files[kind])
    with pytest.warns(ArtifactWarning, match="cannot be opened as a regular file"):
        _open_all(tmp_path, path)
    if os.geteuid() == 0:  # root can hand a file to another user: then it is that user's, not trusted
        os.unlink(files[kind])
        os.replace(files[kind] + ".real", files[kind])
        os.chown(files[kind], 65534, 65534)
        with pytest.warns(ArtifactWarning, match="belongs to another user"):
            _open_all(tmp_path, path)


def test_every_sidecar_starts_with_its_magic(tmp_path: Path) -> None:
    _path, files = _sidecars(tmp_path)
    heads = {kind: Path(f).read_bytes()[:8] for kind, f in files.items()}
    assert heads == {
        "bad lines": BADLINES_MAGIC,
        "schema": SCHEMA_MAGIC,
        "token lengths": TOKENS_MAGIC,
        "gzip points": seekpoints.GZIP_SEEK_MAGIC,
        "bzip2 blocks": seekpoints.BZIP2_SEEK_MAGIC,
    }
    assert set(heads.values()) | {store.PACKED_MAGIC, LEAVES_MAGIC, MANIFEST_MAGIC} == set(ARTIFACT_MAGICS)
    assert all(m.startswith(b"SJSONL") and len(m) == 8 for m in ARTIFACT_MAGICS)
    index = Path(str(JSONLDataset(tmp_path / "d.jsonl").index_paths[0])).read_bytes()
    assert index[-8:] == INDEX_TRAILER_MAGIC == store.TRAILER_MAGIC


def _forge_bad_lines(ds: JSONLDataset, records: list[int], lines: list[int]) -> None:
    """A .badlines file with these contents and a valid checksum and key (as a person with a tool could)."""
    f = ds._files[0]
    key = {**index_key(f, CACHE_VERSION, skipped=False), "allow_nan": f.allow_nan}
    body = (struct.pack("<QQ", len(records), len(lines)), np.array(records + lines, "<i8"))
    assert write_sidecar(badlines_path(f.index_path), BADLINES_MAGIC, key, *body)


@pytest.mark.parametrize(
    ("records", "lines"),
    [
        ([0, 1], [1, 2]),  # a good record (0) listed as bad: it parses
        ([1, 1], [2, 2]),  # not unique
        ([1, 9], [2, 10]),  # beyond the records
        ([1], [1]),  # a line number below its record's
        ([1], [2, 3]),  # more line numbers than records
    ],
)
def test_edited_bad_lines_with_a_recomputed_checksum_are_refused(
    tmp_path: Path, records: list[int], lines: list[int]
) -> None:
    path = _data(tmp_path)
    ds = JSONLDataset(path, on_bad_lines="skip")
    _forge_bad_lines(ds, records, lines)
    with pytest.warns(ArtifactWarning, match="ignoring .*badlines"):
        again = JSONLDataset(path, on_bad_lines="skip")
    assert again[:] == GOOD and [b.line for b in again.bad_lines] == [2]


def _forge_schema(ds: JSONLDataset, edit) -> None:
    f = ds._files[0]
    saved = read_sidecar(schema_cache_path(f.index_path), SCHEMA_MAGIC, index_key(f, SCHEMA_VERSION))
    d = orjson.loads(saved)
    edit(d)
    assert write_sidecar(
        schema_cache_path(f.index_path), SCHEMA_MAGIC, index_key(f, SCHEMA_VERSION), orjson.dumps(d)
    )


def _drop(name: str):
    return lambda d: d.__setitem__("columns", [c for c in d["columns"] if c[0] != name])


def _retype(name: str, kind: str):
    return lambda d: [c.__setitem__(1, [kind, 0]) for c in d["columns"] if c[0] == name]


@pytest.mark.parametrize(
    "edit",
    [
        _drop("s"),  # a column dropped
        _retype("f", "int64"),  # a float column declared int
        _retype("i", "str"),  # another type
        lambda d: d.__setitem__("rows", d["rows"] + 1),  # not this file's count
        lambda d: d["columns"][0].__setitem__(2, 99),  # more values than rows
        lambda d: d["columns"][0].__setitem__(1, ["null", 0]),  # a type inference never makes
    ],
)
def test_edited_schema_with_a_recomputed_checksum_is_refused(tmp_path: Path, edit) -> None:
    path = _data(tmp_path)
    ds = JSONLDataset(path, on_bad_lines="skip")
    reference = infer_schema(ds)
    _forge_schema(ds, edit)
    again = JSONLDataset(path, on_bad_lines="skip")
    with pytest.warns(ArtifactWarning, match="ignoring .*schema"):
        assert infer_schema(again) == reference


def test_a_schema_edited_in_place_fails_its_checksum(tmp_path: Path) -> None:
    path = _data(tmp_path)
    ds = JSONLDataset(path, on_bad_lines="skip")
    reference = infer_schema(ds)
    side = schema_cache_path(ds.index_paths[0])
    blob = bytearray(Path(side).read_bytes())
    at = blob.index(b'"int64"')
    blob[at : at + 7] = (
        b'"float"'  # an int column declared float (every value fits: only the checksum sees it)
    )
    Path(side).write_bytes(bytes(blob))
    with pytest.warns(ArtifactWarning, match="checksum does not match"):
        assert infer_schema(JSONLDataset(path, on_bad_lines="skip")) == reference
