"""``sjsonl filter`` and its safe expression language (:mod:`sjsonl.cli.expr`)."""

from __future__ import annotations

import json

import pytest

from sjsonl.cli.expr import ExprError, compile_expr
from sjsonl.index.layout import is_index_artifact

from .test_cli import cli

# spacing, escapes and key order as written: the output must keep these bytes exactly
LINES = [
    '{"id": 0, "meta": {"lang": "en", "src": "web"}, "tags": ["a", "b"], "text": "Hello"}',
    '{"id":1,"meta":{"lang":"fr"},"tags":[],"text":"caf\\u00e9"}',
    '{"id": 2,   "tags": ["b"], "text": "# heading", "score": 0.5}',
    '{"id": 3, "meta": {"lang": "en"}, "tags": ["c", "a", "x"], "text": "How to", "score": 2}',
    '{"id": 4, "meta": null, "text": null}',
]


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(("\n".join(LINES) + "\n").encode())
    return path


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("meta.lang == 'en'", [0, 3]),
        ("meta.lang != 'en'", [1, 2, 4]),  # a missing path is None, and None != 'en'
        ("meta.lang == 'en' and len(tags) > 1", [0, 3]),
        ("'a' in tags or text.startswith('#')", [0, 2, 3]),
        ("tags[0] in ['b', 'c']", [2, 3]),
        ("tags[-1] == 'x'", [3]),
        ("meta['src'] == 'web'", [0]),
        ("score >= 0.5", [2, 3]),  # None >= 0.5 cannot be compared: false
        ("not score", [0, 1, 4]),
        ("missing == None and meta is not None", [0, 1, 3]),
        ("0 < id <= 2", [1, 2]),
        ("text.lower().startswith('how')", [3]),
        ("text[:3] == 'caf'", [1]),
        ("'é' in text", [1]),
        ("_['id'] == 4", [4]),
        ("len(text) == 5", [0]),
    ],
)
def test_filter_expressions(tmp_path, data, expr, expected):
    out_path = tmp_path / "out.jsonl"
    out = cli("filter", data, expr, "-o", out_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{len(expected)} of 5 records matched -> {out_path}\n"
    assert out_path.read_bytes() == b"".join(LINES[i].encode() + b"\n" for i in expected)


@pytest.mark.parametrize(
    "expr, says",
    [
        ("__import__('os')", "calling __import__() is not allowed"),
        ("__import__('os').system('touch pwned')", "calling the method .system() is not allowed"),
        ("text.__class__", "names starting with '__' are not allowed"),
        ("().__class__.__bases__", "names starting with '__' are not allowed"),
        ("lambda: 1", "lambda is not allowed"),
        ("open('x')", "calling open() is not allowed"),
        ("exec('1')", "calling exec() is not allowed"),
        ("eval('1')", "calling eval() is not allowed"),
        ("[x for x in tags]", "a comprehension is not allowed"),
        ("id * 10 ** 100", "arithmetic is not allowed"),
        ("text.format(1)", "calling the method .format() is not allowed"),
        ("tags[id]", "a subscript must be a constant"),
        ("id ==", "syntax error"),
        ("(x := 1)", "assignment (:=) is not allowed"),
    ],
)
def test_filter_refuses_unsafe_expressions(tmp_path, data, expr, says):
    out_path = tmp_path / "out.jsonl"
    out = cli("filter", data, expr, "-o", out_path, cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("sjsonl: error: invalid filter expression: ") and says in out.stderr
    assert "^" in out.stderr.splitlines()[-1]  # points at the offending part
    assert not out_path.exists() and not (tmp_path / "pwned").exists()


def test_pointer_marks_the_offending_part():
    with pytest.raises(ExprError) as info:
        compile_expr("meta.lang == 'en' and open('f')")
    assert info.value.pointer() == "  meta.lang == 'en' and open('f')\n                        ^^^^^^^^^"


def test_semantics_in_process():
    assert compile_expr("a.b.c == None")({"a": 1})
    assert not compile_expr("len(a) > 0")({"a": 3})  # len of an int is None; None > 0 is false
    assert not compile_expr("a.startswith('x')")({"a": 5})
    assert compile_expr("a.count('l') == 2")({"a": "hello"})
    assert compile_expr("-a < 0")({"a": 1})
    assert compile_expr("_ == [1, 2]")([1, 2]) and not compile_expr("a == 1")([1, 2])


def test_filter_replaces_atomically(tmp_path, data):
    out_path = tmp_path / "out.jsonl"
    out_path.write_text("old\n")
    assert cli("filter", data, "id > 2", "-o", out_path, "--force").returncode == 0
    assert [json.loads(line)["id"] for line in out_path.read_text().splitlines()] == [3, 4]
    # a bad line stops the filter: the previous output stays whole, no temp file is left
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 9}\n{"id": \n')
    out = cli("filter", bad, "id > 0", "-o", out_path, "--force")
    assert out.returncode == 1 and f"{bad}:2:" in out.stderr
    assert [json.loads(line)["id"] for line in out_path.read_text().splitlines()] == [3, 4]
    left = sorted(p.name for p in tmp_path.iterdir() if not is_index_artifact(p))
    assert left == ["bad.jsonl", "in.jsonl", "out.jsonl"]
    skipped = cli("filter", bad, "id > 0", "-o", out_path, "--on-bad-lines", "skip", "--force")
    assert skipped.returncode == 0 and out_path.read_text() == '{"id": 9}\n'
