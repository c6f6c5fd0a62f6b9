"""HTTP servers with and without range support, read through fsspec's HTTP filesystem (aiohttp): a
server that ignores ``Range`` is refused at open, saying so — never an error that blames the data or
the index (``sjsonl.storage.remote``). Real servers: ``http.server`` on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sjsonl import DataFileError, JSONLDataset
from sjsonl.storage.remote import RemoteFile

ROWS = b"".join(b'{"id": %d, "text": "%s"}\n' % (i, b"x" * (i % 50)) for i in range(3000))


class IgnoresRange(http.server.SimpleHTTPRequestHandler):
    """Python's file server: answers every GET with 200 and the whole file, whatever ``Range`` says."""

    def log_message(self, *args: object) -> None:
        """Log nothing: the handler's default writes every request to stderr."""


class HonoursRange(IgnoresRange):
    """Answers ``Range: bytes=a-b`` with 206 and exactly those bytes."""

    def honour(self, first: int, last: int) -> bool:
        return True

    def do_GET(self) -> None:
        match = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        path = self.translate_path(self.path)
        if match is None or not self.honour(int(match[1]), int(match[2])):
            return super().do_GET()
        with open(path, "rb") as f:
            data = f.read()
        first, last = int(match[1]), min(int(match[2]), len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
        self.send_header("Content-Length", str(last - first + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.wfile.write(data[first : last + 1])


class HonoursOnlyTinyRanges(HonoursRange):
    """Honours a range of a byte or two (the open-time probe) and ignores longer ones — as a cache in
    front of a server might."""

    def honour(self, first: int, last: int) -> bool:
        return last - first < 2


def _serve(root: Path, handler: type) -> Iterator[str]:
    class Handler(handler):  # type: ignore[valid-type, misc]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "www"
    folder.mkdir()
    (folder / "d.jsonl").write_bytes(ROWS)
    return folder


@pytest.fixture
def honouring(root: Path) -> Iterator[str]:
    yield from _serve(root, HonoursRange)


@pytest.fixture
def ignoring(root: Path) -> Iterator[str]:
    yield from _serve(root, IgnoresRange)


@pytest.fixture
def partial(root: Path) -> Iterator[str]:
    yield from _serve(root, HonoursOnlyTinyRanges)


def test_a_server_with_ranges_serves_every_record(honouring: str, tmp_path: Path) -> None:
    url = f"{honouring}/d.jsonl"
    ds = JSONLDataset(url, index_dir=tmp_path / "ix")
    lines = ROWS.splitlines()
    assert len(ds) == 3000
    assert [ds[i] for i in (0, 1234, 2999)] == [json.loads(lines[i]) for i in (0, 1234, 2999)]
    assert ds[[5, 2500, 7]] == [json.loads(lines[i]) for i in (5, 2500, 7)]
    assert JSONLDataset(url, index_dir=tmp_path / "ix", build_index_on_load=False)[42] == json.loads(
        lines[42]
    )


def test_a_server_that_ignores_range_is_refused_at_open(ignoring: str, tmp_path: Path) -> None:
    url = f"{ignoring}/d.jsonl"
    for opener in (lambda: RemoteFile(url), lambda: JSONLDataset(url, index_dir=tmp_path / "ix")):
        with pytest.raises(DataFileError, match="the server ignored the Range header") as err:
            opener()
        message = str(err.value)
        assert "\n" not in message and url in message and "range support" in message
    assert not (tmp_path / "ix").exists() or not list((tmp_path / "ix").iterdir())  # no index written


def test_a_server_that_ignores_longer_ranges_is_named_when_read(partial: str, tmp_path: Path) -> None:
    url = f"{partial}/d.jsonl"
    storage = RemoteFile(url)  # the probe passes
    with pytest.raises(DataFileError, match=r"ignored the Range header \(asked for 100 bytes, it sent 1"):
        storage.read(0, 100)
    with pytest.raises(DataFileError, match="ignored the Range header"):
        JSONLDataset(url, index_dir=tmp_path / "ix")
