"""The gates for what a test needs and a clone may lack (``../shared/data``, the compiled scan). First
the ``shared_data`` fixture's gate: on a user's clone (no ``../shared``) tests that need it skip with a
reason; with ``SJSONL_REQUIRE_SHARED=1`` (what ``.ci/run`` sets) the same absence fails the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NODE = "tests/test_storage_zip.py::test_human_eval_zipped"  # a test that takes shared_data


def _env(**extra: str) -> dict[str, str]:
    """The nested run's environment: .ci/run's requirements removed (these runs exist to show a skip),
    then ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in _CI_RULES}
    return {**env, **extra}


_CI_RULES = ("SJSONL_REQUIRE_SHARED", "SJSONL_REQUIRE_NATIVE", "SJSONL_NO_SKIPS")


def _run(tmp_path: Path, require: bool) -> subprocess.CompletedProcess:
    env = _env(SJSONL_SHARED_DATA=str(tmp_path / "no-such-shared" / "data"))
    if require:
        env["SJSONL_REQUIRE_SHARED"] = "1"
    args = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--no-header", NODE]
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # runs pytest twice in subprocesses
def test_missing_shared_data_skips_on_a_clone_and_fails_in_ci(tmp_path: Path) -> None:
    clone = _run(tmp_path, require=False)
    assert clone.returncode == 0, clone.stdout + clone.stderr
    assert "1 skipped" in clone.stdout and "real test data not found" in clone.stdout
    ci = _run(tmp_path, require=True)
    assert ci.returncode == 1, ci.stdout + ci.stderr
    assert "1 error" in ci.stdout and "SJSONL_REQUIRE_SHARED=1" in ci.stdout


@pytest.mark.slow  # runs pytest twice in subprocesses
def test_a_missing_compiled_scan_skips_on_a_clone_and_fails_in_ci(tmp_path: Path) -> None:
    """The same gate for the compiled scan: $SJSONL_SCAN=numpy stands in for a machine without a compiler."""
    node = "tests/test_scan_native.py::test_the_extension_itself"

    def run(require: bool) -> subprocess.CompletedProcess:
        env = _env(SJSONL_SCAN="numpy")
        if require:
            env["SJSONL_REQUIRE_NATIVE"] = "1"
        args = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--no-header", node]
        return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)

    clone = run(require=False)
    assert clone.returncode == 0 and "1 skipped" in clone.stdout and "compiled scan" in clone.stdout, (
        clone.stdout
    )
    ci = run(require=True)
    assert ci.returncode == 1 and "1 error" in ci.stdout and "SJSONL_REQUIRE_NATIVE=1" in ci.stdout, ci.stdout
