"""Shared fixtures: the real-data folder beside the checkout, offline 🤗, temp index caches."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# 🤗 must never reach the network, and must not write into the user's home.
_HF_HOME = tempfile.mkdtemp(prefix="sjsonl-hf-")
os.environ.setdefault("HF_HOME", _HF_HOME)
os.environ.setdefault("HF_DATASETS_CACHE", os.path.join(_HF_HOME, "datasets"))
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("GLOG_v", "3")  # keep MindSpore quiet

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("SJSONL_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``: real public JSONL files.

    Skips on a user's clone; fails in CI, where .ci/run sets SJSONL_REQUIRE_SHARED=1."""
    if not (SHARED_DATA / "jsonl").is_dir():
        msg = f"real test data not found at {SHARED_DATA} (it sits beside the checkout as ../shared/data)"
        if os.environ.get("SJSONL_REQUIRE_SHARED") == "1":
            pytest.fail(msg + " and SJSONL_REQUIRE_SHARED=1")
        pytest.skip(msg)
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _isolated_index_cache(tmp_path_factory, monkeypatch):
    """Every index goes to a temp dir by default: never into ~/.cache, and never into ../shared/data
    (CI runs as root, which may write even where the permission bits say no). Tests of the default
    placement beside the data call ``monkeypatch.delenv("SJSONL_INDEX_DIR")`` themselves."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("SJSONL_INDEX_DIR", str(tmp_path_factory.mktemp("index")))


def write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def run_unprivileged(code: str, *args: str, env: dict | None = None):
    """Run ``python -c code`` without the power to bypass file permissions.

    CI runs as root, which reads and writes whatever the permission bits say; dropping the
    DAC-override capabilities (util-linux ``setpriv``) makes permission checks real again."""
    import subprocess
    import sys

    cmd = [sys.executable, "-c", code, *args]
    if os.geteuid() == 0:
        drop = "-dac_override,-dac_read_search"
        cmd = ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}", *cmd]
    full_env = {**os.environ, **(env or {})}
    full_env = {k: v for k, v in full_env.items() if v is not None}
    return subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=120)


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if any test left an index (or anything else of ours) inside ../shared/data."""
    if not SHARED_DATA.is_dir():
        return
    stray = [p for p in SHARED_DATA.rglob("*") if p.name.endswith((".index.npy", ".meta.json", ".tmp"))]
    if stray:
        print(f"\nERROR: tests wrote into {SHARED_DATA} (it is read-only input): {stray[:5]}")
        session.exitstatus = 1
