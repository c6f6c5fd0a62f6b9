"""``sjsonl verify`` and ``sjsonl index --on-bad-lines``, on the real console script."""

from __future__ import annotations

import json

import pytest

from .test_cli import cli

BAD = {17: '{"a": ', 500: '{"a": 1} trailing', 1000: "{'single': 'quotes'}"}


@pytest.fixture
def thousand(tmp_path):
    """1,000 lines, exactly 3 of them bad (lines 17, 500 and 1000); the expected byte offsets."""
    rows = [BAD.get(n, json.dumps({"n": n, "text": "é" * (n % 7)})) for n in range(1, 1001)]
    path = tmp_path / "thousand.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    data = path.read_bytes()
    starts = [0, *[i + 1 for i, b in enumerate(data) if b == 0x0A][:-1]]
    return path, {n: starts[n - 1] for n in BAD}


def test_verify_reports_exactly_the_bad_lines(thousand):
    path, offsets = thousand
    out = cli("verify", path)
    assert out.returncode == 1 and out.stderr == ""
    reported = [line for line in out.stdout.splitlines() if line.startswith(f"{path}:")][:-1]
    assert [int(line.split(":")[1]) for line in reported] == [17, 500, 1000]
    for line, n in zip(reported, BAD):
        assert f"byte offset {offsets[n]}: " in line and "line starts" in line
    assert out.stdout.splitlines()[-1] == f"{path}: 1,000 records, 3 bad lines (lines 17, 500, 1000)"


def test_verify_json(thousand):
    path, offsets = thousand
    out = cli("verify", "--json", path)
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert doc["ok"] is False and doc["records"] == 1000 and doc["bad_lines"] == 3
    (f,) = doc["files"]
    assert f["path"] == str(path) and f["records"] == 1000 and f["error"] is None
    assert [(b["line"], b["offset"]) for b in f["bad_lines"]] == [(n, offsets[n]) for n in BAD]
    assert all(b["reason"] for b in f["bad_lines"])


def test_verify_clean_files_exit_0(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"x": 1}\n\n{"x": 2}\n')
    b.write_text("[1]\n")
    out = cli("verify", a, b)
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.splitlines() == [f"{a}: 2 records, all valid", f"{b}: 1 record, all valid"]
    doc = json.loads(cli("verify", "--json", a, b).stdout)
    assert doc["ok"] is True and [f["bad_lines"] for f in doc["files"]] == [[], []]


def test_verify_unreadable_file_fails_but_others_are_checked(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text("{}\n")
    missing = tmp_path / "missing.jsonl"
    out = cli("verify", good, missing)
    assert out.returncode == 1 and f"{good}: 1 record, all valid" in out.stdout
    assert out.stderr == f"sjsonl: error: no such data file: {missing}\n"
    doc = json.loads(cli("verify", "--json", missing, good).stdout)
    assert doc["ok"] is False and "no such data file" in doc["files"][0]["error"]
    assert doc["files"][1]["error"] is None


def test_verify_files_in_parallel_match_one_at_a_time(tmp_path, thousand):
    path, _ = thousand
    other = tmp_path / "other.jsonl"
    other.write_text('{"ok": 1}\nnope\n')
    serial = cli("verify", "--json", path, other, "--workers", "1")
    parallel = cli("verify", "--json", path, other, "--workers", "2")
    assert parallel.returncode == serial.returncode == 1
    assert json.loads(parallel.stdout) == json.loads(serial.stdout)
    assert [b["line"] for b in json.loads(parallel.stdout)["files"][1]["bad_lines"]] == [2]


def test_verify_progress_bar_on_request(thousand):
    path, _ = thousand
    out = cli("verify", "--progress", path)
    assert out.returncode == 1 and "checking thousand.jsonl" in out.stderr
    assert out.stdout == cli("verify", "--no-progress", path).stdout


def test_index_on_bad_lines(thousand):
    path, _ = thousand
    skip = cli("index", "--on-bad-lines", "skip", path)
    assert skip.returncode == 0 and skip.stderr == ""
    assert f"{path}: 1,000 records (3 bad lines skipped), " in skip.stdout
    warn = cli("index", "--on-bad-lines", "warn", path)
    assert warn.returncode == 0 and "(3 bad lines skipped)" in warn.stdout
    warned = warn.stderr.splitlines()
    assert [w.split(":")[3] for w in warned] == ["17", "500", "1000"]
    assert all(w.startswith(f"sjsonl: warning: {path}:") for w in warned)
    error = cli("index", "--on-bad-lines", "error", path)
    assert error.returncode == 1 and "3 invalid records in " in error.stderr and error.stdout == ""
    both = cli("index", "--check", "--on-bad-lines", "skip", path)
    assert both.returncode == 2 and "--check" in both.stderr


def test_index_on_bad_lines_clean_file(tmp_path):
    f = tmp_path / "f.jsonl"
    f.write_text("{}\n{}\n")
    out = cli("index", "--on-bad-lines", "warn", f)
    assert out.returncode == 0 and out.stderr == "" and "2 records (no bad lines)" in out.stdout
