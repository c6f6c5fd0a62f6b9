"""Findings against the sjsonl command line, each checked on the real console script in a subprocess."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from sjsonl.cli.main import EXIT_SIGPIPE, build_parser, clean, human_bytes, plural

from .test_cli import SCRIPT, cli


def lines(path, n):
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(n)))
    return path


def ids(out):
    return [json.loads(line)["i"] for line in out.splitlines()]


@pytest.mark.parametrize("module", [False, True])
def test_broken_pipe_is_quiet(tmp_path, module):
    # a real pipe: head exits after one line while sjsonl still has ~1 MB to write
    f = lines(tmp_path / "f.jsonl", 100_000)
    cmd = "python -m sjsonl" if module else '"$0"'
    script = f'{cmd} head -n 100000 "$1" | head -1; echo "status=${{PIPESTATUS[0]}}"'
    exe = SCRIPT.with_name("python") if module else SCRIPT
    out = subprocess.run(
        ["bash", "-c", script.replace("python", str(exe)), str(SCRIPT), str(f)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stderr == ""
    assert out.stdout.splitlines() == ['{"i": 0}', f"status={EXIT_SIGPIPE}"]


def test_index_goes_on_past_a_bad_file(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n{"a": \n')
    good = lines(tmp_path / "good.jsonl", 3)
    out = cli("index", "--check", bad, tmp_path / "missing.jsonl", good)
    assert out.returncode == 1
    assert f"{good}: 3 records, " in out.stdout and str(bad) not in out.stdout
    err = out.stderr.splitlines()
    assert len(err) == 3 and f"{bad}:2:" in err[0] and "missing.jsonl" in err[1]
    assert err[2] == "sjsonl: error: 2 of 3 files failed"


@pytest.mark.parametrize("value", ["-3", "0", "many"])
def test_workers_must_be_positive(tmp_path, value):
    out = cli("index", lines(tmp_path / "f.jsonl", 2), "--workers", value)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "argument --workers:" in out.stderr and "positive integer" in out.stderr


def test_index_dir_naming_a_file(tmp_path):
    taken = tmp_path / "afile"
    taken.write_text("")
    out = cli("index", lines(tmp_path / "f.jsonl", 2), "--index-dir", taken)
    assert out.returncode == 2 and "Errno" not in out.stderr
    assert f"argument --index-dir: {taken} exists and is not a directory" in out.stderr


def test_head_negative_is_all_but_the_last(tmp_path):
    f = lines(tmp_path / "f.jsonl", 10)
    assert ids(cli("head", f, "-n", "-3").stdout) == list(range(7))
    out = cli("head", f, "-n", "-30")
    assert out.returncode == 0 and out.stdout == ""
    assert ids(cli("head", f, "-n", "0").stdout) == []
    assert "all but the last K" in cli("head", "--help").stdout


@pytest.mark.parametrize(
    "specs, expected",
    [
        (["0:3"], [0, 1, 2]),
        (["-2:"], [8, 9]),
        (["::4"], [0, 4, 8]),
        (["7:2:-2"], [7, 5, 3]),
        (["1", "5:7", "-1"], [1, 5, 6, 9]),
        (["20:30"], []),
    ],
)
def test_get_slices_and_several_indices(tmp_path, specs, expected):
    out = cli("get", lines(tmp_path / "f.jsonl", 10), *specs, "--compact")
    assert out.returncode == 0, out.stderr
    assert ids(out.stdout) == expected


def test_get_refuses_a_bad_slice(tmp_path):
    out = cli("get", lines(tmp_path / "f.jsonl", 10), "1:2:0")
    assert out.returncode == 2 and "expected N, A:B or A:B:C" in out.stderr


def test_get_pretty_by_default(tmp_path):
    out = cli("get", lines(tmp_path / "f.jsonl", 3), "0:2").stdout
    assert out == '{\n  "i": 0\n}\n{\n  "i": 1\n}\n'


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
def test_help_has_defaults_and_examples():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, type(parser._subparsers._group_actions[0])))
    for name, p in sub.choices.items():
        out = cli(name, "--help")
        assert out.returncode == 0 and "examples:" in out.stdout and f"  sjsonl {name}" in out.stdout
        fmt = p._get_formatter()
        for action in p._actions:
            if action.option_strings and action.dest != "help" and not action.required:
                assert "default" in fmt._expand_help(action), (name, action.dest)
    main = cli("--help")
    assert main.returncode == 0 and "examples:" in main.stdout and "exit status" in main.stdout
    assert "(default: all cores)" in cli("index", "--help").stdout
    assert "(default: 10)" in cli("head", "--help").stdout


def test_plurals_and_human_sizes(tmp_path):
    out = cli("index", lines(tmp_path / "one.jsonl", 1)).stdout
    assert re.search(r": 1 record, 9 B in [\d.]+ ms -> ", out), out
    assert "MB" not in out and "records" not in out
    info = cli("info", tmp_path / "one.jsonl").stdout
    assert "bytes:    9 (9 B)" in info and "mean 9 B" in info
    assert [plural(1, "record"), plural(0, "record"), plural(1234, "record")] == [
        "1 record",
        "0 records",
        "1,234 records",
    ]
    sizes = [0, 999, 1000, 1234, 45_600_000, 789e9, 1.5e15]
    assert [human_bytes(n) for n in sizes] == [
        "0 B",
        "999 B",
        "1.00 kB",
        "1.23 kB",
        "45.6 MB",
        "789 GB",
        "1500 TB",
    ]


def test_several_files_are_named_never_a_repr(tmp_path):
    a, b = lines(tmp_path / "a.jsonl", 2), lines(tmp_path / "b.jsonl", 1)
    for args in (["index", a, b], ["verify", a, b]):
        out = cli(*args)
        assert out.returncode == 0 and "JSONLDataset(" not in out.stdout + out.stderr
        assert str(a) in out.stdout and str(b) in out.stdout


def test_out_of_range_names_file_and_range(tmp_path):
    lines(tmp_path / "f.jsonl", 3)
    for i in ("7", "-4"):
        out = cli("get", "f.jsonl", "0", i, cwd=tmp_path)
        assert out.returncode == 1 and out.stdout == ""  # nothing printed before the check
        valid = "(valid: 0..2 or -3..-1)"
        assert out.stderr == f"sjsonl: error: f.jsonl has 3 records: index {i} is out of range {valid}\n"
    (tmp_path / "e.jsonl").write_text("")
    out = cli("get", "e.jsonl", "0", cwd=tmp_path)
    assert "e.jsonl has 0 records: index 0 is out of range (it is empty)" in out.stderr


def test_decode_position_reads_as_inside_the_record(tmp_path):
    f = tmp_path / "f.jsonl"
    f.write_text('{"a": 1}\n{"a": \n[1, 2,, 3]\n')
    for args in (["get", f, 1], ["get", f, 2], ["verify", f], ["index", "--check", f]):
        out = cli(*args)
        text = out.stdout + out.stderr
        assert out.returncode == 1 and f"{f}:" in text and not re.search(r"line \d+ column", text), text
    # the parsers' own "line L column C (char N)" becomes a column of the record
    assert clean("Expecting value: line 2 column 1 (char 7)") == "Expecting value at column 8 of the record"
