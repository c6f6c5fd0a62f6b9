"""Compressed bytes under a wrong name are told by their magic number: one clear error naming the format and
the fix, never an index of compressed bytes as text. zstd, and plain (single-frame) ``.zst`` streams:
tests/test_storage_zstd.py."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
import xxhash

from sjsonl import DataFileError, JSONLDataset, load_dataset
from sjsonl.data.streaming import JSONLStream
from sjsonl.storage.formats import sniff

ROWS = b'{"a": 1}\n{"a": 2}\n'


def _zip(data: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("train.jsonl", data)
    return buf.getvalue()


def _lz4_frame(data: bytes) -> bytes:
    """A valid LZ4 frame (the frame format spec): its magic, a descriptor with the header checksum
    (xxh32 of the descriptor, second byte), one block stored uncompressed (high bit set), the end mark."""
    descriptor = bytes([0x60, 0x40])  # version 01, blocks independent; 64 KiB max block size
    checksum = (xxhash.xxh32_intdigest(descriptor) >> 8) & 0xFF
    block = struct.pack("<I", len(data) | 0x80000000) + data
    return b"\x04\x22\x4d\x18" + descriptor + bytes([checksum]) + block + b"\x00\x00\x00\x00"


def _empty_7z() -> bytes:
    """A valid empty 7z archive (the 7z format's signature header: magic, version 0.4, the CRC-32 of the
    next-header fields, which for an empty archive are all zero)."""
    fields = bytes(20)
    return b"7z\xbc\xaf\x27\x1c\x00\x04" + struct.pack("<I", zlib.crc32(fields)) + fields


def _compressed() -> dict[str, bytes]:
    """ROWS in each format the standard library writes (zstd: tests/test_storage_zstd.py)."""
    return {
        "gzip": gzip.compress(ROWS),
        "bzip2": bz2.compress(ROWS),
        "xz": lzma.compress(ROWS),
        "zip": _zip(ROWS),
        "lzma": lzma.compress(ROWS, format=lzma.FORMAT_ALONE),
        "lz4": _lz4_frame(ROWS),
        "7z": _empty_7z(),
    }


NAMES = ["train.jsonl", "train.json", "train", "train.ndjson"]


@pytest.mark.parametrize("name", NAMES)
def test_compressed_bytes_under_a_text_name_are_refused_by_format(tmp_path: Path, name: str) -> None:
    for fmt, data in _compressed().items():
        check_refused(tmp_path / fmt / name, data, fmt)


def check_refused(path: Path, data: bytes, fmt: str) -> None:
    """``data`` (compressed as ``fmt``) under a text name: one clear error on every path, nothing indexed."""
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    assert sniff(data[:8]) == fmt
    with pytest.raises(DataFileError, match=f"holds {fmt}-compressed data, not text") as info:
        JSONLDataset(path)
    assert "\n" not in str(info.value) and ("rename it" in str(info.value) or "decompress" in str(info.value))
    with pytest.raises(DataFileError, match=f"holds {fmt}-compressed data"):
        list(JSONLStream(path))
    with pytest.raises(DataFileError, match=f"holds {fmt}-compressed data"):
        load_dataset(str(path), split="train")
    assert not list(path.parent.glob("*.index.*"))  # nothing was indexed


def test_the_fix_it_names_works(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(gzip.compress(ROWS))
    with pytest.raises(DataFileError) as info:
        JSONLDataset(path)
    assert f"rename it to {path}.gz" in str(info.value)
    path.rename(f"{path}.gz")
    assert list(JSONLDataset(f"{path}.gz")) == [{"a": 1}, {"a": 2}]


def test_one_codec_under_another_codecs_suffix(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl.gz"
    path.write_bytes(bz2.compress(ROWS))
    with pytest.raises(DataFileError, match="holds bzip2-compressed data, not gzip as its name says"):
        JSONLDataset(path)


def test_text_that_looks_like_nothing_compressed_still_reads(tmp_path: Path) -> None:
    """Every byte a JSON text can start with is none of the magic numbers."""
    for head in [b'{"a": 1}\n', b"[1]\n", b'"BZh9"\n', b"7\n", b"\xef\xbb\xbf{}\n", b"  \r\n{}\n", b"null\n"]:
        assert sniff(head) is None
        path = tmp_path / "t.jsonl"
        path.write_bytes(head)
        assert len(JSONLDataset(path)) == 1
