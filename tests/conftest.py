"""Shared fixtures: the real-data folder beside the checkout, offline 🤗, temp index caches."""

from __future__ import annotations

import atexit
import multiprocessing.util
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import settings

# 🤗 must never reach the network, and must not write into the user's home.
_HF_HOME = tempfile.mkdtemp(prefix="sjsonl-hf-")
atexit.register(shutil.rmtree, _HF_HOME, ignore_errors=True)  # a run leaves nothing behind in /tmp
os.environ.setdefault("HF_HOME", _HF_HOME)
os.environ.setdefault("HF_DATASETS_CACHE", os.path.join(_HF_HOME, "datasets"))
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("GLOG_v", "3")  # keep MindSpore quiet
# Libraries' own scratch places under the same removed directory, not the temp dir: Dask's LocalCluster
# (its workers read the variable too) and torch's inductor cache (made by an import in the trainer tests).
os.environ.setdefault("DASK_TEMPORARY_DIRECTORY", os.path.join(_HF_HOME, "dask"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(_HF_HOME, "torchinductor"))
# multiprocessing's scratch directory (pymp-*), made once here and removed at this process's exit: a forked
# worker (a DataLoader's, MindSpore's) inherits it instead of making its own, which a worker terminated by
# its loader leaves behind (a CI run found one in the temp dir).
multiprocessing.util.get_temp_dir()

# Hypothesis: a profile per tier — "fast" for the README's test command, "ci" for the slow tier in CI
# (more examples, no deadline: a loaded machine must not fail a property). HYPOTHESIS_PROFILE picks one.
settings.register_profile("fast", max_examples=40, deadline=None)
settings.register_profile("ci", max_examples=150, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("SJSONL_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``: real public JSONL files.

    Skips on a user's clone; fails in CI, where .ci/run sets SJSONL_REQUIRE_SHARED=1."""
    if not (SHARED_DATA / "jsonl").is_dir():
        missing(
            f"real test data not found at {SHARED_DATA} (it sits beside the checkout as ../shared/data)",
            "SJSONL_REQUIRE_SHARED",
        )
    return SHARED_DATA


def gsm8k_lines(shared_data: Path, n: int) -> list[str]:
    """The first ``n`` lines of ../shared's GSM8K training file."""
    return (shared_data / "jsonl/gsm8k/train.jsonl").read_text().splitlines()[:n]


@pytest.fixture(scope="module")
def tok(shared_data, tmp_path_factory):
    """The byte-level BPE the trainer tests train on GSM8K problems (tests/test_trainers.py): the packing
    tests' tokenizer (modules that train models define their own)."""
    from .test_trainers import make_tokenizer, write_qa_file

    return make_tokenizer(write_qa_file(shared_data, tmp_path_factory))


@pytest.fixture
def qa(shared_data, tmp_path) -> Path:
    """600 GSM8K problems as a JSON Lines file."""
    path = tmp_path / "qa.jsonl"
    path.write_text("\n".join(gsm8k_lines(shared_data, 600)) + "\n")
    return path


def missing(msg: str, required_by: str) -> None:
    """Something a test needs is absent: skip with ``msg`` on a user's clone, fail where the environment
    variable ``required_by`` is 1 (``.ci/run`` sets each one), so CI never passes by skipping."""
    if os.environ.get(required_by) == "1":
        pytest.fail(f"{msg} and {required_by}=1")
    pytest.skip(msg)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """The private index cache (``$XDG_CACHE_HOME/sjsonl``) is a temp dir per test, never ~/.cache. No
    index directory is set: indexes go where they go for users — beside the data, or to the cache when
    that place is read-only (../shared/data is, even for root: sjsonl honours the mode bits)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="session")
def file_past_4_gib(tmp_path_factory):
    """A sparse data file grown past 4 GiB and its datasets (tests/_large_file.py), built once per session
    for tests/test_large_files*.py, removed after."""
    from ._large_file import build

    root = tmp_path_factory.mktemp("big")
    try:
        yield build(root)
    finally:
        (root / "big.jsonl").unlink(missing_ok=True)


@pytest.fixture
def small_fs(tmp_path):
    """A tmpfs of 256 KiB, mounted for the test (root in CI): a disk that fills up for real."""
    where = tmp_path / "fs"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs", str(where)], capture_output=True
    )
    if done.returncode != 0:
        missing(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}", "SJSONL_REQUIRE_MOUNT")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill_up(where: Path, leave: int) -> None:
    """Fill the filesystem at ``where`` up to ``leave`` bytes of free space."""
    st = os.statvfs(where)
    with open(where / "filler", "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))


def write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def run_unprivileged(code: str, *args: str, env: dict | None = None):
    """Run ``python -c code`` without the power to bypass file permissions.

    CI runs as root, which reads and writes whatever the permission bits say; dropping the
    DAC-override capabilities (util-linux ``setpriv``) makes permission checks real again."""
    import sys

    cmd = [sys.executable, "-c", code, *args]
    if os.geteuid() == 0:
        drop = "-dac_override,-dac_read_search"
        cmd = ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}", *cmd]
    full_env = {**os.environ, **(env or {})}
    full_env = {k: v for k, v in full_env.items() if v is not None}
    return subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=120)


_SKIPPED: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped:
        why = report.longrepr[-1] if isinstance(report.longrepr, tuple) else ""
        _SKIPPED.append(f"{report.nodeid}: {why}")


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if any test was skipped where nothing may be (SJSONL_NO_SKIPS=1: .ci/run, where every
    extra and the shared data are installed), or left an index (or anything else of ours) inside
    ../shared/data."""
    if _SKIPPED and os.environ.get("SJSONL_NO_SKIPS") == "1":
        print(f"\nERROR: {len(_SKIPPED)} test(s) skipped and SJSONL_NO_SKIPS=1:")
        for line in _SKIPPED[:20]:
            print("  " + line)
        session.exitstatus = 1
    if not SHARED_DATA.is_dir():
        return
    stray = [p for p in SHARED_DATA.rglob("*") if p.name.endswith((".index.npy", ".meta.json", ".tmp"))]
    if stray:
        print(f"\nERROR: tests wrote into {SHARED_DATA} (it is read-only input): {stray[:5]}")
        session.exitstatus = 1


# ---- a real S3 protocol for tests: moto's server on 127.0.0.1 (fixtures ``s3`` and ``bucket``)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3():
    import boto3
    from moto.server import ThreadedMotoServer

    saved = {k: os.environ.get(k) for k in ("NO_PROXY", "no_proxy")}
    for k in saved:  # a proxy configured for the machine must not see requests to 127.0.0.1
        os.environ[k] = ",".join(filter(None, [saved[k], "127.0.0.1", "localhost"]))
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1"
    )
    region = {"region_name": "us-east-1"}
    options = {"endpoint_url": endpoint, "key": "x", "secret": "x", "client_kwargs": region}
    try:
        yield SimpleNamespace(client=client, options=options)
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def bucket(s3):
    name = f"sjsonl-{uuid.uuid4().hex[:12]}"
    s3.client.create_bucket(Bucket=name)

    def put(key: str, body: bytes) -> str:
        s3.client.put_object(Bucket=name, Key=key, Body=body)
        return f"s3://{name}/{key}"

    def keys() -> list[str]:
        return sorted(o["Key"] for o in s3.client.list_objects_v2(Bucket=name).get("Contents", []))

    return SimpleNamespace(name=name, put=put, keys=keys, options=s3.options)
