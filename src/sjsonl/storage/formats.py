"""Compressed formats told by their first bytes, so a file under the wrong name gets a clear error.

JSON text starts with whitespace, a BOM, ``{``, ``[``, ``"``, a digit, ``-``, ``t``, ``f`` or ``n``; every
compression format below starts with a fixed *magic* number that is none of those. A ``.gz`` saved as
``.jsonl`` would otherwise be scanned as text and fail much later, with a decode error on compressed bytes.

Example:
    >>> import gzip
    >>> sniff(gzip.compress(b"{}")), sniff(b'{"a": 1}'), sniff(b"")
    ('gzip', None, None)
"""

from __future__ import annotations

import errno
import os

from sjsonl.errors import DataFileError

#: format -> (magic bytes, suffixes sjsonl reads it under; empty: not read in place)
MAGIC: dict[str, tuple[bytes, tuple[str, ...]]] = {
    "gzip": (b"\x1f\x8b", (".gz", ".gzip")),
    "zstd": (b"\x28\xb5\x2f\xfd", (".zst", ".zstd")),
    "bzip2": (b"BZh", (".bz2",)),
    "xz": (b"\xfd7zXZ\x00", (".xz",)),
    "zip": (b"PK\x03\x04", (".zip",)),
    "lz4": (b"\x04\x22\x4d\x18", ()),
    "7z": (b"7z\xbc\xaf\x27\x1c", ()),
    "lzma": (b"\x5d\x00\x00", ()),  # the legacy .lzma header (lc/lp/pb byte 0x5d, dictionary size)
}
#: the command that decompresses each format to stdout
_DECOMPRESS = {
    "gzip": "gzip -dc",
    "zstd": "zstd -dc",
    "bzip2": "bzip2 -dc",
    "xz": "xz -dc",
    "zip": "unzip -p",
    "lz4": "lz4 -dc",
    "7z": "7z e -so",
    "lzma": "xz --format=lzma -dc",
}
#: bytes :func:`check_format` reads from the start of a file
HEAD_BYTES = 8


def sniff(head: bytes) -> str | None:
    """The compression format whose magic number ``head`` starts with, or ``None`` (text, or empty).

    Example:
        >>> sniff(b"BZh91AY&SY"), sniff(b"\\xfd7zXZ\\x00\\x00"), sniff(b"PK\\x03\\x04"), sniff(b"[1]")
        ('bzip2', 'xz', 'zip', None)
    """
    for name, (magic, _suffixes) in MAGIC.items():
        if head.startswith(magic):
            if name == "bzip2" and (len(head) < 4 or head[3:4] not in b"123456789"):
                continue  # "BZh" and a block-size digit 1-9
            return name
    return None


def format_of_name(path: str) -> str | None:
    """The compression format ``path``'s suffix names, or ``None`` for a text name.

    Example:
        >>> format_of_name("/d/x.jsonl.GZ".lower()), format_of_name("x.jsonl")
        ('gzip', None)
    """
    for name, (_magic, suffixes) in MAGIC.items():
        if suffixes and path.endswith(suffixes):
            return name
    return None


def check_format(path: str, name: str, head: bytes) -> None:
    """Raise :class:`~sjsonl.errors.DataFileError` when ``head`` (the first bytes of the file at ``path``,
    whose lower-cased name is ``name``) is in another format than the name says — compressed bytes under a
    text name, or one compression under another's suffix.

    Example:
        >>> import gzip
        >>> try:
        ...     check_format("/d/x.jsonl", "/d/x.jsonl", gzip.compress(b"{}")[:8])
        ... except DataFileError as exc:
        ...     print(str(exc).replace(": ", ":\\n"))
        /d/x.jsonl holds gzip-compressed data, not text:
        rename it to /d/x.jsonl.gz (sjsonl reads gzip in place), or decompress it:
        gzip -dc /d/x.jsonl > x.jsonl
        >>> check_format("/d/x.jsonl", "/d/x.jsonl", b'{"a": 1}')   # text under a text name: fine
    """
    found = sniff(head)
    named = format_of_name(name)
    if found is None or found == named:
        return  # text (a text name, or a compressed name over text: its decompressor says so), or as named
    suffixes = MAGIC[found][1]
    base = os.path.basename(path)
    stem, ext = os.path.splitext(base)
    plain = stem if named is not None else base
    decompress = f"{_DECOMPRESS[found]} {path} > {plain}"
    if suffixes:
        target = (path[: -len(ext)] if named is not None else path) + suffixes[0]
        fix = f"rename it to {target} (sjsonl reads {found} in place), or decompress it: {decompress}"
    else:
        fix = f"sjsonl does not read {found}: decompress it: {decompress}"
    what = "not text" if named is None else f"not {named} as its name says"
    raise DataFileError(errno.EINVAL, f"{path} holds {found}-compressed data, {what}: {fix}")
