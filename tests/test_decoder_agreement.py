"""Every access path returns exactly ``json.loads`` of the record, or raises the located decode error:
``ds[i]``, iteration, index lists (batches), shuffled views, ``batch()`` (plain and shuffled),
``select_columns``, ``fields=``, streaming — over the real files in ../shared/data, the JSONTestSuite ``y_``
cases and generated records (big integers, float limits, escapes, deep nesting, unicode). The expected
records come from the file's bytes split here on ``\n`` and the orders from the shuffle's specification
(tests/_reference_order.py), never from sjsonl."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sjsonl import JSONLDataset, RecordDecodeError
from sjsonl.data.streaming import JSONLStream

from ._reference_order import reference_order


def same(a, b) -> bool:
    """Equal values of the same types — bool is not int, int is not float, -0.0 is not 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def expected_records(path: Path) -> list:
    """``json.loads`` of each record of a JSON Lines file, its lines split here: every non-blank line (a
    UTF-8 BOM at the start, ``\r\n`` endings and a last line without ``\n`` allowed)."""
    data = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    return [json.loads(line) for line in data.split(b"\n") if line.strip(b" \t\r")]


def hf_batch(rows: list) -> dict[str, list]:
    """Rows as 🤗's batch: a dict of columns, the keys in order of first appearance, ``None`` where a row
    lacks one; a row that is not an object is ``{"value": row}``."""
    rows = [r if isinstance(r, dict) else {"value": r} for r in rows]
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return {k: [r.get(k) for r in rows] for k in keys}


# ----------------------------------------------------------------------------- real files
def _shared_files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.suffix in (".jsonl", ".json", ".ndjson") and "JSONTestSuite" not in p.parts
    )


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
def test_real_files_every_access_path(shared_data):
    files = _shared_files(shared_data)
    assert len(files) >= 20
    for path in files:  # every one is JSON Lines whose every line json.loads reads (see SOURCES.md)
        check_every_path_loose(path, expected_records(path))


def check_every_path_loose(path: Path, expected: list) -> None:
    ds = JSONLDataset(path)
    n = len(ds)
    assert n == len(expected), f"{path.name}: {n} records, the file has {len(expected)} lines"
    shuffled = [expected[i] for i in reference_order(n, seed=1)]
    for name, (got, want) in {
        "ds[i]": ([ds[i] for i in range(n)], expected),
        "iteration": (list(ds), expected),
        "index list": (ds[list(range(n))], expected),
        "stream": (list(JSONLStream(str(path))), expected),
        "mmap=False": (list(JSONLDataset(path, mmap=False)), expected),
        "shuffled": (list(ds.shuffle(seed=1)), shuffled),
        "shuffled index list": (ds.shuffle(seed=1)[list(range(n))], shuffled),
        "shuffled, mmap=False": (list(JSONLDataset(path, mmap=False).shuffle(seed=1)), shuffled),
    }.items():
        bad = [i for i, (g, e) in enumerate(zip(got, want)) if not same(g, e)]
        assert len(got) == n and not bad, f"{path.name}: {name} differs at record {bad[:3]}"
    # batches: 🤗's shape, dicts of columns; batch() of a shuffled view, and a shuffle of the batches
    size = 7
    batches = [hf_batch(expected[lo : lo + size]) for lo in range(0, n, size)]
    for name, (got, want) in {
        "batch()": (list(ds.batch(size)), batches),
        "shuffled batch()": (
            list(ds.shuffle(seed=1).batch(size)),
            [hf_batch(shuffled[lo : lo + size]) for lo in range(0, n, size)],
        ),
        "batch().shuffle()": (
            list(ds.batch(size).shuffle(seed=4)),
            [batches[b] for b in reference_order(len(batches), seed=4)],
        ),
    }.items():
        bad = [b for b, (g, e) in enumerate(zip(got, want)) if not same(g, e)]
        assert len(got) == len(want) and not bad, f"{path.name}: {name} differs at batch {bad[:3]}"
    objects = [i for i, r in enumerate(expected) if isinstance(r, dict)]
    if objects:
        keys = list(dict.fromkeys(k for i in objects[:50] for k in expected[i]))[:3]
        cols = ds.select_columns(keys)[objects]
        assert all(same(c, {k: expected[i].get(k) for k in keys}) for c, i in zip(cols, objects)), path.name
        sub = JSONLDataset(path, fields=[(k,) for k in keys])[objects]  # tuples: keys may hold dots
        want = [{k: expected[i][k] for k in keys if k in expected[i]} for i in objects]
        assert all(same(a, b) for a, b in zip(sub, want)), path.name


# ----------------------------------------------------------------------------- JSONTestSuite
def test_json_test_suite_y_cases_every_access_path(shared_data, tmp_path):
    root = shared_data / "JSONTestSuite" / "test_parsing"
    lines = []
    for src in sorted(root.glob("y_*.json")):
        raw = src.read_bytes().strip(b" \t\r\n")
        if b"\n" in raw or b"\r" in raw or raw.startswith(b"\xef\xbb\xbf") or not raw:
            continue  # one record per line here; multi-line documents are test_real_files' business
        lines.append(raw)
    assert len(lines) >= 90
    path = tmp_path / "y.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    expected = [json.loads(raw) for raw in lines]
    check_every_path_loose(path, expected)


# ----------------------------------------------------------------------------- generated records
big_ints = st.one_of(
    st.integers(),
    st.integers(min_value=2**63 - 2, max_value=2**64 + 2),
    st.integers(min_value=-(2**63) - 2, max_value=-(2**63) + 2),
    st.integers(min_value=10**30, max_value=10**60),
)
floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1.7976931348623157e308, 5e-324, -0.0, 2.2250738585072014e-308, 1e-300, 0.1]),
)
texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=20) | st.sampled_from(
    ["\ud800", "\udfff x", "\u2028\u2029", '"\\/\b\f\n\r\t', "é中😀", "\x00\x1f"]
)
scalars = st.none() | st.booleans() | big_ints | floats | texts
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=25,
)


def _dumps(record, ascii_only: bool) -> str:
    text = json.dumps(record, ensure_ascii=ascii_only)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form: only its \\u escape is JSON
        text = json.dumps(record)
    return text


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(values, min_size=1, max_size=12), ascii_only=st.booleans())
def test_generated_records_every_access_path(tmp_path_factory, records, ascii_only):
    path = tmp_path_factory.mktemp("gen") / "g.jsonl"
    lines = [_dumps(r, ascii_only) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    check_every_path_loose(path, [json.loads(line) for line in lines])


def test_float_limits_and_deep_nesting(tmp_path):
    lines = [
        "1e400",
        "-1e400",
        "[1e-400]",
        '{"a": 123456789012345678901234567890}',
        nested(300),
        '{"x": ' + nested(250) + "}",
    ]
    path = tmp_path / "edge.jsonl"
    path.write_text("\n".join(lines) + "\n")
    check_every_path_loose(path, [json.loads(line) for line in lines])


@pytest.mark.parametrize(
    "line, reason",
    [
        (b"nan", ""),  # json.loads reads NaN and Infinity (tests/test_json_loads_rules.py), not these
        (b'{"a": +Infinity}', ""),
        (b"[-NaN, Infinity1]", ""),
        (b'{"a": NaN, "b": tru}', "Expecting value at byte 16"),  # json's reason: NaN is no fault
        (b'{"a": 1, "b": "\xff"}', "UTF-8"),
        (b"1" * 5000, ""),  # json refuses integers of more than 4300 digits
        (nested(3000).encode(), ""),
    ],
)
def test_what_json_refuses_raises_on_every_path(tmp_path, line, reason):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"a": 0}\n' + line + b"\n")
    ds = JSONLDataset(path)
    if line.startswith(b"[[") and _json_accepts(line):  # depth limits follow sys.getrecursionlimit()
        assert same(ds[1], json.loads(line))
        return
    calls = {
        "ds[i]": lambda: ds[1],
        "iteration": lambda: list(ds),
        "index list": lambda: ds[[0, 1]],
        "select_columns": lambda: ds.select_columns(["a"])[1],
        "fields=": lambda: JSONLDataset(path, fields=["a"])[1],
    }
    for name, call in calls.items():
        with pytest.raises(RecordDecodeError, match=r"bad.jsonl:2: .*byte offset 9") as info:
            call()
        assert reason in str(info.value), name
    with pytest.raises(ValueError):
        list(JSONLStream(str(path)))


def _json_accepts(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return True


def test_big_integers_are_exact(tmp_path):
    path = tmp_path / "ids.jsonl"
    path.write_text('{"id": 18446744073709551616, "h": -9223372036854775809}\n')
    ds = JSONLDataset(path)
    assert ds[0] == {"id": 2**64, "h": -(2**63) - 1} and type(ds[0]["id"]) is int
    assert ds.select_columns(["id"])[0] == {"id": 2**64} == JSONLDataset(path, fields=["id"])[0]


@pytest.mark.parametrize("line", [b'{"a": 1,}', b'{"a" 1}', b"[1, 2", b'{"a": "\\ud800", "b": tru}'])
def test_a_position_in_the_record_never_reads_like_a_file_line(tmp_path, line):
    path = tmp_path / "pos.jsonl"
    path.write_bytes(b'{"ok": 1}\n\n' + line + b"\n")
    with pytest.raises(RecordDecodeError) as info:
        JSONLDataset(path)[1]
    message = str(info.value)
    assert message.startswith(f"{path}:3: invalid JSON record at byte offset 11: ")
    reason = info.value.reason or ""
    assert "of the record" in reason or "ends too early" in reason
    assert "line 1" not in message and "column" not in message
