"""Zip archives read as carefully as ``unzip`` reads them: CRC-32s checked, duplicate names, encrypted and
unsupported members refused with a message that says so, and hostile member names that leave the other
members readable (``sjsonl.storage.zip``)."""

from __future__ import annotations

import json
import struct
import warnings
import zipfile
from pathlib import Path

import pytest

from sjsonl import DataFileError, JSONLDataset
from sjsonl.storage.local import LocalFile
from sjsonl.storage.zip import ZipMemberFile, zip_members

ROWS = b"".join(b'{"id": %d, "text": "row %05d"}\n' % (i, i) for i in range(2000))


def write_zip(path: Path, members: list[tuple[str, bytes]], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about a duplicate name: that is the point
        with zipfile.ZipFile(path, "w", method) as archive:
            for name, data in members:
                archive.writestr(name, data)
    return path


def _headers(raw: bytes, name: str) -> tuple[int, int]:
    """Offsets of ``name``'s local header and central directory entry."""
    encoded = name.encode()
    local = next(k for k in _all(raw, b"PK\x03\x04") if raw[k + 30 : k + 30 + len(encoded)] == encoded)
    central = next(k for k in _all(raw, b"PK\x01\x02") if raw[k + 46 : k + 46 + len(encoded)] == encoded)
    return local, central


def _all(raw: bytes, sig: bytes) -> list[int]:
    out, k = [], raw.find(sig)
    while k >= 0:
        out.append(k)
        k = raw.find(sig, k + 1)
    return out


def _patch(path: Path, name: str, local_at: int, central_at: int, fmt: str, value: int) -> None:
    """Write ``value`` at field offset ``local_at`` of the local header and ``central_at`` of the
    central directory entry of member ``name``."""
    raw = bytearray(path.read_bytes())
    local, central = _headers(bytes(raw), name)
    struct.pack_into(fmt, raw, local + local_at, value)
    struct.pack_into(fmt, raw, central + central_at, value)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_member_whose_crc_does_not_match_is_refused_when_indexed(tmp_path: Path, method: int) -> None:
    path = write_zip(tmp_path / "d.zip", [("t.jsonl", ROWS), ("ok.jsonl", b'{"a": 1}\n')], method)
    if method == zipfile.ZIP_STORED:  # a flipped byte that is still valid JSON: only the CRC can tell
        raw = bytearray(path.read_bytes())
        at = raw.index(b'"row 01234"')
        raw[at + 5] = ord("9")
        path.write_bytes(bytes(raw))
    else:  # deflated: the stream is intact, the recorded CRC-32 is not the data's
        crc = zipfile.ZipFile(path).getinfo("t.jsonl").CRC
        _patch(path, "t.jsonl", 14, 16, "<L", crc ^ 0x10)
    with pytest.raises(DataFileError) as err:
        JSONLDataset(path)
    message = str(err.value)
    assert "\n" not in message and f"{path}::t.jsonl" in message and "CRC-32 mismatch" in message
    assert JSONLDataset(f"{path}::ok.jsonl")[0] == {"a": 1}  # the other member is unharmed
    whole = ZipMemberFile(LocalFile(str(path)), "t.jsonl")
    if method == zipfile.ZIP_STORED:
        assert whole.read(0, 100) == ROWS[:100]  # a part of a stored member: no verdict yet
    with pytest.raises(DataFileError, match="CRC-32 mismatch"):
        whole.read(0, len(ROWS))  # the whole member decompressed: checked


def test_an_intact_member_read_whole_twice_passes(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "d.zip", [("t.jsonl", ROWS)])
    member = ZipMemberFile(LocalFile(str(path)), "t.jsonl")
    assert member.read(0, len(ROWS)) == ROWS and member.read(0, len(ROWS)) == ROWS
    assert member.read(len(ROWS) - 10, len(ROWS)) == ROWS[-10:]


def test_duplicate_member_names_are_refused_not_merged(tmp_path: Path) -> None:
    path = write_zip(
        tmp_path / "d.zip",
        [("t.jsonl", b'{"v": 1}\n' * 10), ("t.jsonl", b'{"v": 2}\n' * 20), ("u.jsonl", b'{"v": 3}\n')],
    )
    for opener in (
        lambda: JSONLDataset(path),
        lambda: zip_members(path),
        lambda: JSONLDataset(f"{path}::t.jsonl"),
    ):
        with pytest.raises(DataFileError, match=r"holds 2 members named 't\.jsonl'.*distinct") as err:
            opener()
        assert "\n" not in str(err.value)
    assert JSONLDataset(f"{path}::u.jsonl")[:] == [{"v": 3}]  # a distinct name still reads


def test_an_encrypted_member_is_refused_as_encrypted(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "d.zip", [("secret.jsonl", ROWS), ("open.jsonl", b'{"a": 1}\n')])
    flags = zipfile.ZipFile(path).getinfo("secret.jsonl").flag_bits
    _patch(path, "secret.jsonl", 6, 8, "<H", flags | 0x1)  # the "encrypted" bit, as zip -e sets it
    with zipfile.ZipFile(path) as archive, pytest.raises(RuntimeError, match="encrypted"):
        archive.read("secret.jsonl")  # Python's own zipfile agrees it is encrypted
    with pytest.raises(DataFileError, match=r"secret\.jsonl' of .*d\.zip is encrypted.*unzip"):
        JSONLDataset(path)
    assert JSONLDataset(f"{path}::open.jsonl")[0] == {"a": 1}


@pytest.mark.parametrize(("method", "what"), [(zipfile.ZIP_LZMA, "lzma"), (zipfile.ZIP_BZIP2, "bzip2")])
def test_an_unsupported_method_is_named(tmp_path: Path, method: int, what: str) -> None:
    path = write_zip(tmp_path / "d.zip", [("t.jsonl", ROWS)], method)
    with pytest.raises(DataFileError, match=rf"compression method {method} \({what}\).*unzip -p"):
        JSONLDataset(path)


def test_a_local_header_that_names_another_file_is_refused(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "d.zip", [("t.jsonl", ROWS)])
    raw = bytearray(path.read_bytes())
    local, _ = _headers(bytes(raw), "t.jsonl")
    raw[local + 30] = ord("x")  # the local header now says x.jsonl
    path.write_bytes(bytes(raw))
    with pytest.raises(DataFileError, match="names another file"):
        JSONLDataset(path)


def test_hostile_member_names_leave_the_others_readable(tmp_path: Path) -> None:
    hostile = [
        ("n" * 300 + ".jsonl", b'{"m": "long"}\n'),
        ("a%b/t.jsonl", b'{"m": "percent"}\n'),
        ("a/b/t.jsonl", b'{"m": "slash"}\n'),
        ("a%2Fb/t.jsonl", b'{"m": "escaped"}\n'),
        ("x.zip::y.jsonl", b'{"m": "separator"}\n'),
        ("../../up.jsonl", b'{"m": "dotdot"}\n'),  # a ".." part is not hidden: read
        ("new\nline.jsonl", b'{"m": "newline"}\n'),
        ("t.json", b'{"m": "json"}\n'),
        ("t.jsonl", b'{"m": "jsonl"}\n'),
    ]
    path = write_zip(tmp_path / "d.zip", hostile)
    listed = sorted(json.loads(data)["m"] for name, data in hostile)
    ds = JSONLDataset(path)
    assert sorted(r["m"] for r in ds[:]) == listed
    assert len(set(ds.index_paths)) == len(listed)
    for name, data in hostile:  # each by its own name, and again from its saved index
        assert JSONLDataset(f"{path}::{name}")[:] == JSONLDataset(f"{path}::{name}")[:] == [json.loads(data)]
    assert sorted(r["m"] for r in JSONLDataset(path)[:]) == listed
