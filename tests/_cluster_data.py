"""A small corpus for the cluster adapters' tests (tests/test_cluster_parts.py, test_ray.py,
test_dask_cluster.py): plain, ``.gz``, empty and seekable ``.zst`` files, records with big integers and
non-ASCII text, and Ray's short temp directory."""

from __future__ import annotations

import contextlib
import gzip
import importlib.util
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from sjsonl.storage.compressed import to_seekable_zstd

from .conftest import missing

#: The records of each file of :func:`write_corpus`, in order (250 in all).
COUNTS = {"a.jsonl": 100, "b.jsonl.gz": 70, "c.jsonl": 0, "d.jsonl.zst": 80}


def rows(n: int, start: int = 0) -> list[dict]:
    """Records ``start … start + n - 1``: every fifth holds an integer beyond 64 bits."""
    return [
        {"i": i, "text": "é" * (i % 7), "big": 2**64 + i if i % 5 == 0 else i}
        for i in range(start, start + n)
    ]


def lines(records: list) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def write_corpus(root: Path) -> Path:
    """The four files of :data:`COUNTS` in ``root`` (no indexes yet); returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    at = 0
    for name, n in COUNTS.items():
        data = lines(rows(n, at))
        at += n
        if name.endswith(".gz"):
            (root / name).write_bytes(gzip.compress(data))
        elif name.endswith(".zst"):
            (root / "plain").write_bytes(data)
            to_seekable_zstd(str(root / "plain"), str(root / name))
            (root / "plain").unlink()
        else:
            (root / name).write_bytes(data)
    return root


def need_ray() -> None:
    if importlib.util.find_spec("ray") is None:
        missing(
            "Ray is not installed (pip install 'sjsonl[ray]'; make test-slow installs it)",
            "SJSONL_REQUIRE_RAY",
        )


@contextlib.contextmanager
def ray_temp_dir() -> Iterator[str]:
    """A short directory for Ray's sessions (its unix sockets' paths must stay under 108 bytes, so not under
    pytest's tmp_path), removed after: Ray leaves nothing in the temp directory."""
    path = tempfile.mkdtemp(prefix="ray-")
    try:
        yield path
    finally:
        _wait_for_ray_processes(path)  # Ray's daemons outlive the driver a little, writing as they go
        shutil.rmtree(path, ignore_errors=True)


def _wait_for_ray_processes(path: str, limit: float = 60.0) -> None:
    """Until no process started with ``path`` on its command line is left (up to ``limit`` seconds)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not any(path in arg for p in psutil.process_iter(["cmdline"]) for arg in p.info["cmdline"] or ()):
            return
        time.sleep(0.2)
