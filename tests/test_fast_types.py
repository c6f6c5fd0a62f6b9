"""The compiled type pass (sjsonl/records/_types.c, records/fast_types.py) against the Python rules of
records/schema.py, which are the definition: every file in ../shared/data, the JSONTestSuite, generated
records (nested and ragged lists, integers at the int64 boundary, floats in every spelling, escaped, unicode
and repeated keys, nulls, NaN, invalid lines); the pass on threads and in a plain script; and a cache that an
interrupted writer leaves behind is never trusted."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sjsonl import JSONLDataset, RecordDecodeError
from sjsonl.errors import ArtifactWarning, StaleDataError
from sjsonl.records import chunks, fast_types
from sjsonl.records import schema as schema_mod
from sjsonl.records.decode import loads
from sjsonl.records.schema import RecordSchema, infer_schema, schema_cache_path, schema_of_records
from sjsonl.runtime.parallel import worker_count

from .conftest import missing
from .test_real_files import _settled, _suite, shared_data_files

SRC = Path(__file__).resolve().parents[1] / "src"
INT64 = 2**63


@pytest.fixture(autouse=True)
def compiled() -> None:
    """Every test here is about the compiled pass: skip where it was not built (CI requires it)."""
    if fast_types.NATIVE is None:
        missing("the compiled type pass (sjsonl.records._types) is not built here", "SJSONL_REQUIRE_NATIVE")


def _bounds(lines: list[bytes]) -> tuple[bytes, np.ndarray]:
    data = b"".join(line + b"\n" for line in lines)
    return data, np.cumsum([0] + [len(line) + 1 for line in lines]).astype(np.int64)


def _parse(line: bytes):
    """The decoder's value — or _REFUSED when it refuses the line, or the rules cannot type it (a list nested
    past Python's recursion limit: the Python pass raises RecursionError, today as before)."""
    try:
        value = loads(line)
        schema_of_records([value])
    except (ValueError, RecursionError):
        return _REFUSED
    return value


_REFUSED = object()


def _ways_here() -> tuple[str, ...]:
    """The ways of reading string bodies in C that this CPU has: the SSE2/scalar loop always, AVX2 and
    AVX-512 where it has them (a way it lacks is never taken here, so there is nothing of it to test)."""
    native = fast_types.NATIVE
    if native is None:
        return ("sse2",)
    widest = native.string_way("avx512")
    try:
        return tuple(way for way in ("sse2", "avx2", "avx512") if native.string_way(way) == way)
    finally:
        native.string_way(widest)


WAYS = _ways_here()


@contextlib.contextmanager
def reading_strings(way: str) -> Iterator[None]:
    """String bodies are read ``way`` within the block (one of :data:`WAYS`), the widest again after it."""
    native = fast_types.NATIVE
    assert native is not None
    widest = native.string_way("avx512")
    try:
        assert native.string_way(way) == way
        yield
    finally:
        native.string_way(widest)


def check_lines(lines: list[bytes]) -> list[int]:
    """The compiled pass over ``lines`` equals the rules over the decoder's values, each record it hands
    back typed by the rules; a record the decoder refuses is one it handed back — on every way of reading
    strings the CPU has (:data:`WAYS`), which hand back the same records. Those records."""
    handed = {}
    for way in WAYS:
        with reading_strings(way):
            handed[way] = _check_lines(lines)
    assert all(h == handed[WAYS[0]] for h in handed.values()), (lines, handed)
    return handed[WAYS[0]]


def _check_lines(lines: list[bytes]) -> list[int]:
    data, bounds = _bounds(lines)
    handed: list[int] = []
    got = RecordSchema()
    for part in fast_types.scan_parts(data, bounds, 0, len(lines)):
        if isinstance(part, int):
            handed.append(part)
            value = _parse(lines[part])
            got = got if value is _REFUSED else got.merge(schema_of_records([value]))
        else:
            got = got.merge(RecordSchema(*part))
    values = [_parse(line) for line in lines]
    assert all(k in handed for k, v in enumerate(values) if v is _REFUSED), lines
    want = schema_of_records(v for v in values if v is not _REFUSED)
    assert got == want and got.column_names == want.column_names, (lines, got, want)
    return handed


def _handbacks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The ranges the Python pass types from now on (a record handed back: one record)."""
    seen: list[tuple[int, int]] = []
    python = schema_mod._chunk_schema
    monkeypatch.setattr(
        schema_mod, "_chunk_schema", lambda f, lo, hi: seen.append((lo, hi)) or python(f, lo, hi)
    )
    return seen


def _recomputed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files whose schema is computed from now on (not read from a cache)."""
    seen: list[str] = []
    compute = schema_mod._file_schema
    monkeypatch.setattr(schema_mod, "_file_schema", lambda f, *a: seen.append(f.path) or compute(f, *a))
    return seen


# ------------------------------------------------------------------------------------------ real files
def test_every_shared_file_types_as_the_rules(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every record of every real file, in chunks of ~4 KiB on two threads: the rules over json.loads of each
    line — and the compiled pass typed them all (nothing handed back but what it must)."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 4096)
    handed = _handbacks(monkeypatch)
    files = shared_data_files(shared_data)
    for path in files:
        raw = path.read_bytes()
        want = schema_of_records(json.loads(line) for line in raw.split(b"\n") if line.strip(b" \t\r"))
        ds = JSONLDataset(path)
        assert all(fast_types.usable(f) for f in ds._files), path
        got = infer_schema(ds, cache=False, workers=2)
        assert got == want and got.column_names == want.column_names, path
    assert handed == []


def test_json_test_suite_cases_as_records(shared_data: Path) -> None:
    """Each y_/i_/n_ case's bytes as one record: what the compiled pass types, the decoder reads, with the
    same types; every n_ case is handed back (the Python pass raises its located error)."""
    typed = 0
    for src in _suite(shared_data, ""):
        raw = src.read_bytes()
        handed = check_lines([raw])
        typed += not handed
        if src.name.startswith("n_"):
            assert handed == [0], src.name
    assert typed >= 80  # most y_ cases are typed in C


def test_json_test_suite_files_as_the_python_pass(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each case as a JSON Lines file: infer_schema gives what the Python pass gives — or the same located
    error (a line that is not JSON), or, under on_bad_lines="skip", the schema of the other lines."""
    for src in _suite(shared_data, "y_") + _suite(shared_data, "n_") + _suite(shared_data, "i_"):
        path = _settled(tmp_path / (src.stem + ".jsonl"), src.read_bytes())
        for skip in (False, True):
            answers = []
            for native in (fast_types.NATIVE, None):
                monkeypatch.setattr(fast_types, "NATIVE", native)
                try:
                    ds = JSONLDataset(path, on_bad_lines="skip") if skip else JSONLDataset(path)
                    answers.append(infer_schema(ds, cache=False).to_dict())
                except RecordDecodeError as exc:
                    answers.append(str(exc))
                except RecursionError:  # a list nested past the interpreter's limit: the rules cannot type it
                    answers.append("RecursionError")
            assert answers[0] == answers[1], src.name


# ------------------------------------------------------------------------------------------ generated
_KEYS = ['"a"', '"b"', '"\\u0061"', '"é"', '"\\u00e9"', '"数据"', '""', '"a b"', '"\\n"', '"🚀"']
_EDGES = [INT64 - 1, INT64, -INT64, -INT64 - 1, 2**64, -(2**64), 10**18, 10**19, 0]
_ints = st.one_of(st.integers(-(10**6), 10**6), st.sampled_from(_EDGES), st.integers(-(2**80), 2**80)).map(
    str
)
_numbers = st.one_of(
    _ints,
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.from_regex(r"-?(0|[1-9][0-9]{0,21})(\.[0-9]{1,3})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
    st.sampled_from(["-0", "1.0", "1e5", "1E+5", "-0.0e-0", "1e400", "NaN", "-Infinity", "Infinity"]),
)
_strings = st.one_of(
    st.text(max_size=8).map(json.dumps),
    st.text(max_size=8).map(lambda s: json.dumps(s, ensure_ascii=False)),
    st.sampled_from(['"\\ud800"', '"\\/"', '"tab\\t"', '"\\u0000"']),
)
_scalars = st.one_of(_numbers, _strings, st.sampled_from(["true", "false", "null"]))
_ragged = ["[[1], [2, 3]]", "[[1], 2]", "[1, [2]]", "[[], [1]]", "[[[]], [[1]]]", "[[], 1]", "[null]", "[{}]"]


@st.composite
def _rectangular(draw) -> str:
    shape = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    leaf = draw(st.sampled_from([_ints, _numbers, _strings, st.sampled_from(["true", "false"]), _scalars]))

    def build(dims: list[int]) -> str:
        if not dims:
            return draw(leaf)
        return "[" + ", ".join(build(dims[1:]) for _ in range(dims[0])) + "]"

    return build(shape)


_values = st.recursive(
    st.one_of(_scalars, _rectangular(), st.sampled_from(_ragged)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(st.sampled_from(_KEYS), inner), max_size=3).map(
            lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"
        ),
    ),
    max_leaves=8,
)
_objects = st.lists(st.tuples(st.sampled_from(_KEYS), _values), max_size=5).map(
    lambda kv: "{" + ",".join(f"{k}:{v}" for k, v in kv) + "}"
)
_records = st.one_of(_objects, _objects, _objects, _values).map(str.encode)
_spaced = st.tuples(st.sampled_from(["", " ", "\t"]), _records, st.sampled_from(["", " ", "\r", " \r"]))
_lines = st.lists(_spaced.map(lambda t: t[0].encode() + t[1] + t[2].encode()), min_size=1, max_size=12)
_broken = st.sampled_from([b'{"a": 1,}', b'{"a": 01}', b'{"a": "\x01"}', b'{"a": "\xff"}', b"[1", b'{"a" 1}'])


# records of two columns of scalars and lists, where kinds meet often (int and float, [] and [[1]] …)
_flat = st.lists(
    st.tuples(st.sampled_from(['"a"', '"b"']), st.one_of(_scalars, _rectangular(), st.sampled_from(_ragged))),
    max_size=2,
).map(lambda kv: ("{" + ",".join(f"{k}:{v}" for k, v in kv) + "}").encode())


@given(st.lists(_flat, min_size=1, max_size=6))
def test_generated_columns_merge_as_the_rules(lines: list[bytes]) -> None:
    check_lines(lines)


@given(_lines, st.lists(st.tuples(st.integers(0, 12), _broken), max_size=2))
def test_generated_records_type_as_the_rules(lines: list[bytes], broken: list[tuple[int, bytes]]) -> None:
    for at, line in broken:
        lines.insert(min(at, len(lines)), line)
    check_lines(lines)


def test_the_edges_one_by_one() -> None:
    """What each rule turns on, typed in C (nothing handed back) and equal to the rules."""
    edges = [
        *(b'{"n": %d}' % i for i in _EDGES),
        *(b'{"n": [%d, 1]}' % i for i in _EDGES),
        *(b'{"n": [%d, 1.5]}' % i for i in _EDGES),  # (int and float: float64, whatever the ints' size)
        b'{"n": 1.0}',
        b'{"n": 1e5}',
        b'{"n": -0}',
        b'{"n": 1' + b"0" * 639 + b"}",  # 640 digits: json, decided in C
        b'{"n": []}',
        b'{"n": [[], []]}',
        b'{"n": [[[]], [[]]]}',
        *(b'{"n": %s}' % r.encode() for r in _ragged),
        b'{"a": null, "b": [1]}',
        b'{"b": [[1, 2]], "a": "x"}',
        b'{"b": [], "c": [true, false]}',
        b'["x", "y"]',
        b"null",
        b'"just a string"',
    ]
    for line in edges:
        assert check_lines([line]) == [], line
    assert check_lines(edges) == []


def test_what_is_handed_back() -> None:
    """Records the compiled pass leaves to Python: escaped or repeated keys, NaN, very long integers, deep
    nesting, a BOM, anything not JSON — whatever precedes and follows them."""
    unsure = [
        b'{"\\u0061": 1}',
        b'{"a": 1, "a": "x"}',
        b'{"a": NaN}',
        b'{"a": -Infinity}',
        b'{"a": 1' + b"0" * 640 + b"}",
        b'{"a": ' + b"[" * 200 + b"]" * 200 + b"}",
        b'\xef\xbb\xbf{"a": 1}',
        b'{"a": 1} {"a": 2}',
        b'{"a": "\xed\xa0\x80"}',
    ]
    for line in unsure:
        assert check_lines([b'{"a": 2, "z": [1]}', line, b'{"b": 3}']) == [1], line


def test_long_strings_with_escapes_and_text_type_as_the_rules() -> None:
    """Strings of hundreds of characters — text in many scripts, escapes among them, keys after them (every
    way of reading them: check_lines)."""
    rng = np.random.default_rng(7)
    words = ["data", "café", "训练", "テキスト", "🎮", "\\n", '\\"', "\\u00e9", "x" * 40, "✓", " "]
    lines = []
    for i in range(300):
        text = "".join(rng.choice(words, size=int(rng.integers(0, 200))))
        lines.append(f'{{"id": {i}, "text": "{text}", "n": [{i}, 1.5]}}'.encode())
    assert check_lines(lines) == []


# ------------------------------------------------------------------------------------------ files
def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_threads_take_the_chunks_and_merge_them_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [json.dumps({"i": i, "v": [i, i]}) for i in range(5000)]
    lines[1234] = '{"x": NaN, "i": 1}'  # handed back, in the middle of a chunk
    lines[4999] = '{"late": [[1.5]], "i": 2}'
    ds = JSONLDataset(_write(tmp_path / "d.jsonl", lines))
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 3000)
    monkeypatch.setattr(fast_types, "READ_BYTES", 1000)  # a chunk read in blocks
    names: set[str] = set()
    scan = fast_types.chunk_parts
    monkeypatch.setattr(
        fast_types, "chunk_parts", lambda *a: names.add(threading.current_thread().name) or scan(*a)
    )
    handed = _handbacks(monkeypatch)
    got = infer_schema(ds, cache=False, workers=2)
    assert got == schema_of_records(map(json.loads, lines)) and got.column_names == ["i", "v", "x", "late"]
    assert handed == [(1234, 1235)] and names and all(n.startswith("sjsonl-chunks") for n in names)
    names.clear()
    assert infer_schema(ds, cache=False, workers=1) == got and names == {threading.current_thread().name}


def test_workers_1_types_in_the_callers_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_dataset(workers=1): no thread is started. num_proc=1 (🤗's count of processes, whose pyarrow
    reader uses every core) starts them as the default does (sjsonl.hf.load.index_workers)."""
    from sjsonl import load_dataset

    path = _write(tmp_path / "d.jsonl", [json.dumps({"i": i}) for i in range(3000)])
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 3000)
    names: set[str] = set()
    scan = fast_types.chunk_parts
    spy = lambda *a: names.add(threading.current_thread().name) or scan(*a)  # noqa: E731
    monkeypatch.setattr(fast_types, "chunk_parts", spy)
    assert load_dataset("json", data_files=str(path), split="train", workers=1).column_names == ["i"]
    assert names == {threading.current_thread().name}
    threads = worker_count() > 1  # (on a machine of one core, the default starts none either)
    one_proc = lambda d: load_dataset("json", data_files=str(path), split="train", num_proc=1, index_dir=d)  # noqa: E731
    for k, opened in enumerate([one_proc, lambda d: JSONLDataset(path, index_dir=d)]):
        names.clear()
        assert opened(str(tmp_path / f"other{k}")).column_names == ["i"]
        assert names and all(n.startswith("sjsonl-chunks") == threads for n in names)


def test_bad_lines_raise_or_are_left_out_as_in_python(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", ['{"a": 1}', '{"a": broken', '{"a": "x"}'])
    with pytest.raises(RecordDecodeError, match=r"d.jsonl:2: invalid JSON record at byte offset 9"):
        infer_schema(JSONLDataset(path), cache=False)
    with pytest.warns(UserWarning):
        ds = JSONLDataset(path, on_bad_lines="warn")
    assert infer_schema(ds, cache=False) == schema_of_records([{"a": 1}, {"a": "x"}])


def test_allow_nan_false_refuses_what_the_pass_hands_back(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", ['{"a": 1}', '{"a": NaN}'])
    assert infer_schema(JSONLDataset(path), cache=False)["a"].kind == "float64"
    with pytest.raises(RecordDecodeError, match="NaN"):
        infer_schema(JSONLDataset(path, allow_nan=False), cache=False)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_file_cut_short_under_the_pass_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers
) -> None:
    """Truncated in place after it was indexed: a StaleDataError naming it, never SIGBUS (the chunks are
    read from the map under its guard), from the caller's thread or the pass's."""
    path = _write(tmp_path / "d.jsonl", [json.dumps({"i": i, "t": "x" * 50}) for i in range(20_000)])
    ds = JSONLDataset(path)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 50_000)
    os.truncate(path, path.stat().st_size // 2)
    with pytest.raises(StaleDataError, match="truncated"):
        infer_schema(ds, cache=False, workers=workers)


def test_a_map_is_typed_in_place_and_a_cut_under_it_raises(tmp_path: Path) -> None:
    """A guarded map is typed where it lies, as its bytes are; cut short under the pass, the pages past
    the end fault and the guard turns that into an error (no check given: the map's own I/O error)."""
    guarded = pytest.importorskip("sjsonl.storage._guarded")
    lines = [json.dumps({"i": i, "t": "数据 " * (i % 40)}, ensure_ascii=False).encode() for i in range(3000)]
    data, bounds = _bounds(lines)
    path = tmp_path / "d.jsonl"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        m = guarded.GuardedMap(fd, len(data))
        native = fast_types.NATIVE
        assert native is not None
        assert native.scan(m, bounds, 0, len(lines)) == native.scan(data, bounds, 0, len(lines))
        assert native.scan(m, bounds, 10, 20)[0] == 20
        with pytest.raises(IndexError):
            native.scan(m, bounds + 1, 0, len(lines))  # past the map's end
        os.truncate(path, 4096)
        with pytest.raises(OSError, match="could not read bytes"):
            native.scan(m, bounds, 0, len(lines))
    finally:
        os.close(fd)


def test_a_file_cut_short_in_place_under_the_map_raises_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dataset's map made before the file is cut, and no version check due before the pass reads it:
    the fault in the pass is a StaleDataError naming the truncation."""
    from sjsonl.storage import local

    monkeypatch.setattr(local, "CHECK_SECONDS", 3600.0)
    path = _write(tmp_path / "d.jsonl", [json.dumps({"i": i, "t": "x" * 50}) for i in range(20_000)])
    ds = JSONLDataset(path)
    ds._files[0].storage.buffer()  # mapped now, at the full size
    os.truncate(path, path.stat().st_size // 2)
    with pytest.raises(StaleDataError, match="truncated"):
        infer_schema(ds, cache=False, workers=1)


def test_compressed_files_are_typed_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip

    lines = [json.dumps({"i": i, "s": "x" * (i % 7)}) for i in range(3000)] + ['{"i": 0.5}']
    path = tmp_path / "d.jsonl.gz"
    path.write_bytes(gzip.compress("".join(line + "\n" for line in lines).encode()))
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 5000)
    got = infer_schema(JSONLDataset(path), cache=False, workers=2)
    assert got == schema_of_records(map(json.loads, lines))


# ------------------------------------------------------------------------------------------ as users run it
_SCRIPT = """
import json, sys
sys.path.insert(0, {src!r})
from sjsonl import JSONLDataset, load_dataset
from sjsonl.records.schema import infer_schema
with open({ran!r}, "a") as fh:
    fh.write("x")
path = {path!r}
with open(path, "w") as fh:
    for i in range(120_000):
        fh.write(json.dumps({{"id": i, "text": "t" * (i % 30), "score": i / 2}}) + "\\n")
    fh.write('{{"id": 1, "late": [1, 2]}}\\n')
print(json.dumps([load_dataset("json", data_files=path, split="train").column_names,
                  infer_schema(JSONLDataset(path, workers=2)).to_dict()]))
"""


@pytest.mark.slow  # (a subprocess writing and typing 120,000 records: the slow tier, with test_user_scripts)
def test_a_plain_script_without_a_main_guard(tmp_path: Path) -> None:
    """A script with no ``if __name__ == "__main__":`` types a file of many chunks (on threads) once."""
    ran = tmp_path / "ran.txt"
    script = tmp_path / "script.py"
    path = tmp_path / "d.jsonl"
    script.write_text(textwrap.dedent(_SCRIPT.format(src=str(SRC), ran=str(ran), path=str(path))))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    names, schema = json.loads(out.stdout)
    assert ran.read_text() == "x"
    assert names == ["id", "text", "score", "late"]
    want = schema_of_records(json.loads(line) for line in path.read_text().splitlines())
    assert RecordSchema.from_dict(schema) == want


# ------------------------------------------------------------------------------------------ the cache
_KILLED = """
import os, signal, sys
sys.path.insert(0, {src!r})
from sjsonl import JSONLDataset
from sjsonl.records import chunks, fast_types
from sjsonl.records.schema import infer_schema
chunks.CHUNK_BYTES = 2000
where = {where!r}
if where == "pass":  # killed while the chunks are typed
    scan, seen = fast_types.chunk_parts, []
    def dying(*args):
        seen.append(1)
        if len(seen) == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return scan(*args)
    fast_types.chunk_parts = dying
else:  # killed once the cache's bytes are written, before they are moved into place
    real = os.replace
    def dying(src, dst, *a, **k):
        if str(dst).endswith(".schema"):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(src, dst, *a, **k)
    os.replace = dying
infer_schema(JSONLDataset({path!r}))
"""


@pytest.mark.parametrize("where", ["pass", "write"])
def test_a_killed_writer_leaves_no_cache_that_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    lines = [json.dumps({"i": i}) for i in range(2000)] + ['{"i": "last"}']
    path = _write(tmp_path / "d.jsonl", lines)
    JSONLDataset(path)  # the index, written before
    script = _KILLED.format(src=str(SRC), where=where, path=str(path))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == -signal.SIGKILL, out.stderr
    ds = JSONLDataset(path)
    cache = schema_cache_path(ds.index_paths[0])
    assert not os.path.exists(cache)  # (a temp file of the write may be left: never read)
    computed = _recomputed(monkeypatch)
    assert infer_schema(ds)["i"].kind == "json" and computed == [str(path)]  # "last" counted
    assert os.path.exists(cache)


def test_a_torn_or_flipped_cache_is_recomputed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache cut short or with a byte changed (a writer that was not atomic, a disk): never used."""
    path = _write(tmp_path / "d.jsonl", [json.dumps({"i": i}) for i in range(100)] + ['{"i": 0.5}'])
    ds = JSONLDataset(path)
    want = infer_schema(ds)
    cache = Path(schema_cache_path(ds.index_paths[0]))
    whole = cache.read_bytes()
    lying = whole.replace(b'"float64"', b'"int64"  ')  # the same length: only the checksum tells
    assert lying != whole
    for damaged in (whole[: len(whole) // 2], lying):
        cache.write_bytes(damaged)
        computed = _recomputed(monkeypatch)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ArtifactWarning)  # (said once per file version and process)
            assert infer_schema(JSONLDataset(path)) == want
        assert computed == [str(path)] and cache.read_bytes() == whole  # and written again
        monkeypatch.undo()
