"""``sjsonl stats``, ``sjsonl sample`` and ``python -m sjsonl``, on the real console script."""

from __future__ import annotations

import json
import struct

import pytest

from ._reference_order import reference_order
from .test_cli import cli


@pytest.fixture
def mixed(tmp_path):
    path = tmp_path / "mixed.jsonl"
    rows = [{"a": 1, "b": "xy"}, {"a": 2.5, "b": None}, {"a": True, "c": [1, 2, 3]}, {"a": "s", "c": []}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_stats_fields_types_lengths_histogram(mixed):
    out = cli("stats", mixed)
    assert out.returncode == 0 and out.stderr == ""
    text = out.stdout
    size = mixed.stat().st_size
    assert "records:  4\n" in text and f"bytes:    {size} ({size} B)" in text and "fields (all):" in text
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ") and "%" in line}
    assert "100.0%" in rows["a"] and all(f"{t} 1" in rows["a"] for t in ("int", "float", "bool", "str"))
    assert "50.0%" in rows["b"] and "str 1" in rows["b"] and "null 1" in rows["b"]
    assert "str len 2 / 2.0 / 2" in rows["b"]
    assert "50.0%" in rows["c"] and "list 2" in rows["c"] and "list len 0 / 1.5 / 3" in rows["c"]
    hist = text[text.index("record size histogram") :].splitlines()[1:]
    assert len(hist) == 12 and sum(int(h.rsplit("│", 1)[1]) for h in hist) == 4 and "█" in text


def test_stats_sample_and_non_objects(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"i": i} if i % 2 else [i]) + "\n" for i in range(10)))
    out = cli("stats", path, "--sample", 5)
    assert out.returncode == 0 and "fields (5 evenly spaced records of 10):" in out.stdout
    assert "records that are not JSON objects: " in out.stdout
    assert cli("stats", path, "--sample", 0).returncode == 2


def test_stats_plot_without_matplotlib(mixed, tmp_path):
    # matplotlib is installed here (the test extra): a module that fails to import shadows it
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "matplotlib.py").write_text("raise ImportError(\"No module named 'matplotlib'\")\n")
    png = tmp_path / "s.png"
    out = cli("stats", mixed, "--plot", png, env={"PYTHONPATH": str(shadow)})
    assert out.returncode == 1 and out.stdout == "" and not png.exists()
    assert (
        out.stderr
        == "sjsonl: error: --plot needs matplotlib, which is not installed (pip install matplotlib)\n"
    )


def test_stats_plot(mixed, tmp_path):
    png = tmp_path / "s.png"
    out = cli("stats", mixed, "--plot", png)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert out.stdout.endswith(f"\nplot -> {png}\n") and "record size histogram" in out.stdout
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"  # the PNG signature
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > height >= 200  # the 12 x 4.5 inch figure, two panels side by side
    assert len(data) > 10_000  # axes, bars and labels, not an empty canvas


def test_stats_of_100k_records(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text(
        "".join(f'{{"id": {i}, "text": "{"x" * (i % 50)}", "tags": [1]}}\n' for i in range(100_000))
    )
    cli("index", path)
    out = cli("stats", path)
    assert out.returncode == 0 and out.stderr == ""
    assert "records:  100,000" in out.stdout and "fields (all):" in out.stdout
    rows = {
        line.split()[0]: line for line in out.stdout.splitlines() if line.startswith("  ") and "%" in line
    }
    assert set(rows) == {"id", "text", "tags"} and all("100.0%" in row for row in rows.values())
    assert "str len 0 / 24.5 / 49" in rows["text"] and "list len 1 / 1.0 / 1" in rows["tags"]


def test_sample_is_exact_and_deterministic(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(100)))
    first = cli("sample", path, "-n", 10, "--seed", 3)
    assert first.returncode == 0 and first.stderr == ""
    drawn = [json.loads(line) for line in first.stdout.splitlines()]
    # the first 10 positions of the seed-3 order, from the order's specification (not from sjsonl)
    assert drawn == [{"i": i} for i in reference_order(100, seed=3, positions=range(10))]
    assert [r["i"] for r in drawn[:4]] == [12, 7, 90, 4]  # the pinned start of that order
    assert cli("sample", path, "-n", 10, "--seed", 3).stdout == first.stdout
    assert cli("sample", path, "-n", 10, "--seed", 4).stdout != first.stdout
    whole = cli("sample", path, "-n", 100).stdout.splitlines()
    assert [json.loads(line)["i"] for line in whole] == reference_order(100, seed=0)


def test_sample_more_than_there_are(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("1\n2\n3\n")
    out = cli("sample", "d.jsonl", "-n", 5, cwd=tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == "sjsonl: error: d.jsonl has 3 records: cannot draw 5 without replacement\n"
    assert cli("sample", path, "-n", 0).returncode == 2


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["info", "{f}"],
        ["head", "{f}", "-n", "2"],
        ["get", "{f}", "9", "-1"],
        ["verify", "{f}"],
        [],
        ["nope"],
    ],
)
def test_python_m_sjsonl_is_the_script(tmp_path, args):
    path = tmp_path / "d.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n')
    cli("index", path)
    args = [a.format(f=path) for a in args]
    script, module = cli(*args), cli(*args, module=True)
    assert (module.returncode, module.stdout, module.stderr) == (
        script.returncode,
        script.stdout,
        script.stderr,
    )


def test_stats_plot_of_an_empty_file(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    png = tmp_path / "e.png"
    out = cli("stats", empty, "--plot", png)
    assert out.returncode == 0 and out.stderr == "" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
