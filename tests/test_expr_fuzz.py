"""The filter language never crashes: every expression either compiles and then runs on any record
without a Python exception, or is refused when compiled with :class:`~sjsonl.cli.expr.ExprError` (exit 2 and
one error line in the CLI). Expressions are drawn from the language's grammar (and beyond it) by
hypothesis; records are any JSON values, deep ones included."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sjsonl.cli.expr import MAX_DEPTH, STRING_METHODS, ExprError, compile_expr

from .test_cli import cli

NAMES = ["a", "b", "text", "tags", "meta", "_", "len", "x__y", "__class__", "open"]

constants = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(
        ["0", "-0", "1e308", "1e999", "-1.5", "0.0", "True", "False", "None", "...", "b'x'", "1j"]
    ),
    st.text(max_size=6).map(repr),
)
slice_part = st.one_of(st.just(""), st.integers(-5, 5).map(str), st.sampled_from(["'a'", "1.5", "None", "x"]))


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    args = st.lists(inner, max_size=3).map(", ".join)
    return st.one_of(
        st.tuples(
            inner, st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in", "not in", "is", "is not"]), inner
        ).map(" ".join),
        st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(" ".join),
        inner.map(lambda e: f"not {e}"),
        inner.map(lambda e: f"-{e}"),
        inner.map(lambda e: f"({e})"),
        st.tuples(inner, st.sampled_from(NAMES)).map(lambda t: f"{t[0]}.{t[1]}"),
        st.tuples(inner, st.one_of(constants, inner)).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(inner, slice_part, slice_part, slice_part).map(lambda t: f"{t[0]}[{t[1]}:{t[2]}:{t[3]}]"),
        args.map(lambda a: f"len({a})"),
        st.tuples(inner, st.sampled_from([*sorted(STRING_METHODS), "format", "join", "__len__"]), args).map(
            lambda t: f"{t[0]}.{t[1]}({t[2]})"
        ),
        args.map(lambda a: f"[{a}]"),
        args.map(lambda a: f"({a},)"),
        st.tuples(inner, inner).map(lambda t: f"{t[0]} + {t[1]}"),
        inner.map(lambda e: f"lambda: {e}"),
    )


expressions = st.recursive(st.one_of(st.sampled_from(NAMES), constants), _extend, max_leaves=12)

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from([*NAMES, "k"]), inner, max_size=4)
    ),
    max_leaves=20,
)


def _runs_or_is_refused(source: str, records: list) -> None:
    try:
        match = compile_expr(source)
    except ExprError as exc:
        assert "\n" not in str(exc)
        return
    for record in records:
        assert match(record) in (True, False)


def _deep(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


#: a record where every name the grammar uses has a value of another type
RICH = {
    "a": "abc",
    "b": [1, "x", None],
    "text": "hello",
    "tags": ["t", 2.5],
    "meta": {"a": {"b": 1}},
    "x__y": 0,
}
DEEP_RECORDS = [_deep(5000), {"a": _deep(5000), "b": _deep(5000)}]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions, st.lists(json_values, min_size=1, max_size=4))
def test_grammar_expressions_never_raise_anything_but_expr_error(source: str, records: list) -> None:
    _runs_or_is_refused(source, [*records, RICH])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab_.[]():,'\"-=<>!notandrlesif 019\\\x00", max_size=40))
def test_any_text_is_compiled_or_refused(source: str) -> None:
    _runs_or_is_refused(source, [{"a": "x", "b": [1]}, None, "s"])


@pytest.mark.parametrize(
    "source",
    [
        "not " * 600 + "a",
        "-" * 600 + "1",
        "a" + ".b" * 600,
        "a" + "[0]" * 600,
        "a" + ".lower()" * 600,
        "[" * 99 + "a" + "]" * 99 + " == a",
        "a and " * 5000 + "b",
        "a == " * 5000 + "b",
        "not " * 100000 + "a",
    ],
)
def test_deep_and_long_expressions(source: str) -> None:
    _runs_or_is_refused(source, [{"a": "x", "b": 1}, *DEEP_RECORDS])


def test_the_depth_limit_and_the_zero_step_are_refused_when_compiled() -> None:
    assert compile_expr("not " * (MAX_DEPTH - 2) + "a")({"a": 0}) in (True, False)
    with pytest.raises(ExprError, match=f"nested more than {MAX_DEPTH} levels deep"):
        compile_expr("not " * 600 + "a")
    with pytest.raises(ExprError, match="slice step cannot be zero"):
        compile_expr("text[::0]")
    assert compile_expr("text[::-1] == 'cba'")({"text": "abc"})


def test_comparing_records_nested_past_the_recursion_limit_is_false_not_a_crash() -> None:
    assert compile_expr("a == b")(DEEP_RECORDS[1]) in (True, False)
    assert compile_expr("a in [b]")(DEEP_RECORDS[1]) in (True, False)


@pytest.mark.parametrize("expr", ["not " * 600 + "a", "text[::0]", "text[0:1:0]"])
def test_the_cli_refuses_with_exit_2_and_no_traceback(tmp_path, expr: str) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"text": "abc", "a": 1}) + "\n")
    out = cli("filter", data, expr, "-o", tmp_path / "out.jsonl")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("sjsonl: error: invalid filter expression: ")
    assert "Traceback" not in out.stderr and len(out.stderr.splitlines()[0]) < 2000
    assert not (tmp_path / "out.jsonl").exists()
