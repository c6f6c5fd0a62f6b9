"""The sjsonl command line, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sjsonl.sample import write_corpus


def sjsonl(*args, check=True):
    out = subprocess.run(
        [sys.executable, "-m", "sjsonl.cli", *map(str, args)], capture_output=True, text=True
    )
    if check:
        assert out.returncode == 0, out.stderr
    return out


def test_index_info_get_head(tmp_path):
    path = tmp_path / "d.jsonl"
    write_corpus(path, 1000, kind="short", seed=2)
    out = sjsonl("index", path).stdout
    assert "1,000 records, " in out and " kB in " in out and ".index.npy" in out
    info = sjsonl("info", path).stdout
    assert "records:  1,000" in info and "status:   fresh" in info and "mean" in info
    got = json.loads(sjsonl("get", path, 999).stdout)
    assert got["id"] == 999
    assert [json.loads(line)["id"] for line in sjsonl("head", path, "-n", 3).stdout.splitlines()] == [0, 1, 2]
    two = sjsonl("get", path, 0, -1).stdout
    assert two.count('"id"') == 2


def test_index_check_reports_bad_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"a": \n')
    out = sjsonl("index", "--check", path, check=False)
    assert out.returncode == 1 and f"{path}:2:" in out.stderr and out.stderr.count("\n") == 1


def test_clear_errors(tmp_path):
    out = sjsonl("get", tmp_path / "nope.jsonl", 0, check=False)
    assert (
        out.returncode == 1
        and out.stderr.strip() == f"sjsonl: error: no such data file: {tmp_path / 'nope.jsonl'}"
    )
    path = tmp_path / "d.jsonl"
    path.write_text("1\n")
    out = sjsonl("get", path, 5, check=False)
    assert out.returncode == 1 and "out of range" in out.stderr
    other = tmp_path / "never_indexed.jsonl"
    other.write_text("1\n")
    out = sjsonl("info", other, "--no-build", check=False)
    assert out.returncode == 1 and "no index" in out.stderr


def test_demo_runs(tmp_path, monkeypatch):
    out = sjsonl("demo", "--dir", tmp_path, "--records", 3000).stdout
    assert "3,000 records" in out and "µs per record" in out and (tmp_path / "sample.index.npy").exists()


SCRIPT = Path(sys.executable).with_name("sjsonl")  # the real console script of this environment


def cli(*args, cwd=None, module=False, timeout=120, env=None):
    """Run ``sjsonl ARGS`` (or ``python -m sjsonl ARGS``) in a subprocess; the CompletedProcess.

    ``env``: variables to set (on top of this process's environment) for that run."""
    cmd = [sys.executable, "-m", "sjsonl"] if module else [str(SCRIPT)]
    full_env = {**os.environ, **env} if env else None
    return subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=full_env
    )


def test_info_shows_the_index_format_size_and_how_it_was_brought_up_to_date(tmp_path):
    path = tmp_path / "d.jsonl"
    write_corpus(path, 1000, kind="short", seed=2)
    first = sjsonl("info", path).stdout
    index = next(line.split(None, 1)[1] for line in first.splitlines() if line.startswith("index:"))
    per_record = os.path.getsize(index) / 1000
    assert "status:   missing (built now)" in first
    assert f"format:   plain .npy, uint32 offsets, {per_record:.2f} bytes/record" in first
    with open(path, "a") as f:
        f.write('{"id": 1000}\n')
    grown = sjsonl("info", path).stdout
    assert "records:  1,001" in grown and "appended to" in grown and "(extended now" in grown
    with open(path, "r+b") as f:  # rewritten in place: not an append
        f.write(b"[")
    assert "(built now)" in sjsonl("info", path, check=False).stdout
