"""Real public files from ../shared/data: every record equals json.loads of its line; JSONTestSuite."""

from __future__ import annotations

import json
import os
import time

from sjsonl import JSONLDataset, RecordDecodeError

DATA_SUFFIXES = (".jsonl", ".json", ".ndjson")


def _data_files(root):
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.suffix in DATA_SUFFIXES and "JSONTestSuite" not in p.parts
    )


def shared_data_files(shared_data):
    """Every JSON Lines file of ../shared/data (the JSONTestSuite aside), at least 20."""
    files = (
        _data_files(shared_data / "jsonl")
        + _data_files(shared_data / "jsonlines_org")
        + _data_files(shared_data / "ndjson_spec")
    )
    assert len(files) >= 20
    return files


def test_every_record_of_every_shared_file(shared_data):
    files = shared_data_files(shared_data)
    for path in files:
        raw = path.read_bytes()
        expected = [json.loads(line) for line in raw.split(b"\n") if line.strip(b" \t\r")]
        ds = JSONLDataset(path)
        assert len(ds) == len(expected), path
        assert list(ds) == expected, path
        assert [ds[i] for i in range(len(ds) - 1, -1, -1)] == expected[::-1], path


def test_edge_case_counts_from_sources(shared_data):
    counts = {
        "jsonl/clue/cluener_ner_predict.json": 1343,  # no final newline
        "jsonl/clue/fewclue_bustm_test_public.json": 1772,  # CRLF
        "jsonl/llama_factory/v1_multimodal_demo.jsonl": 24,  # trailing blank line
        "jsonl/jglue/jsquad_valid-v1.3.json": 1,  # one 2 MB line
        "jsonl/xtuner/openai_sft.jsonl": 128,  # arrays per line, no final newline
        "jsonl/gsm8k/train.jsonl": 7473,
    }
    for rel, n in counts.items():
        assert len(JSONLDataset(shared_data / rel)) == n, rel


def _suite(shared_data, prefix):
    root = shared_data / "JSONTestSuite" / "test_parsing"
    return sorted(root.glob(prefix + "*.json"))


def _as_jsonl(tmp_path, src):
    return _settled(tmp_path / (src.stem + ".jsonl"), src.read_bytes())


def _settled(path, data: bytes):
    """``data`` written to ``path`` as a finished file: its mtime a minute back, so a last line without a
    line ending is a record, not a line a writer is still at (sjsonl.index.append.complete_lines)."""
    path.write_bytes(data)
    past = time.time() - 60
    os.utime(path, (past, past))
    return path


# n_ cases whose bytes hold no record once read as JSON Lines: empty, whitespace or a lone BOM.
NO_RECORD = {"n_structure_no_data.json", "n_single_space.json", "n_structure_UTF8_BOM_no_data.json"}
# Cases where sjsonl's answer differs from json.loads of the file's bytes, on purpose (each must differ).
NOT_JSON_LOADS = {
    # JSON Lines are UTF-8 (RFC 8259 §8.1); json.loads of bytes also detects UTF-16 and UTF-32
    "i_string_UTF-16LE_with_BOM.json": "UTF-16",
    "i_string_utf16BE_no_BOM.json": "UTF-16",
    "i_string_utf16LE_no_BOM.json": "UTF-16",
    # a surrogate encoded as UTF-8 bytes is not UTF-8; json.loads of bytes decodes with "surrogatepass"
    "i_string_UTF8_surrogate_U+D800.json": "CESU-8",
    # a record is one line: a value spread over lines is read as lines (as a .json document, it is one)
    "y_array_with_1_and_newline.json": "multi-line",
    "y_object_with_newlines.json": "multi-line",
}
_REFUSED = "<refused>"


def _json_loads(data: bytes, **kw):
    try:
        return json.loads(data, **kw)
    except (ValueError, RecursionError):
        return _REFUSED


def same(a, b) -> bool:
    """Equal JSON values of the same types (nan equals nan); repr also handles the deepest nesting."""
    return repr(a) == repr(b)


def _line_loads(line: bytes, **kw):
    """json.loads of a line's UTF-8 text: what a JSON Lines record is."""
    try:
        return json.loads(line.decode("utf-8"), **kw)
    except (ValueError, RecursionError):
        return _REFUSED


def _record(ds: JSONLDataset, i: int):
    """Record ``i``, or :data:`_REFUSED` for the located error (never another exception)."""
    try:
        return ds[i]
    except RecordDecodeError as exc:
        assert exc.path == ds.files[0] and exc.line >= 1 and exc.offset >= 0
        return _REFUSED


def _read(call):
    try:
        return call()
    except ValueError:  # RecordDecodeError; DocumentError for a document
        return _REFUSED


def _refuse(name):
    raise ValueError(name)


def test_json_test_suite_reads_as_json_loads(shared_data, tmp_path):
    """Every ``y_``, ``n_`` and ``i_`` case read as JSON Lines: exactly what ``json.loads`` returns for the
    file, or a located RecordDecodeError where it raises (NaN/Infinity are floats, as json.loads reads
    them) — but for :data:`NOT_JSON_LOADS`; and every record is json.loads of its line's UTF-8 text.
    With ``allow_nan=False`` every ``n_`` case is refused (strict RFC 8259)."""
    cases = _suite(shared_data, "y_") + _suite(shared_data, "n_") + _suite(shared_data, "i_")
    assert len(cases) >= 300
    differs = set()
    for src in cases:
        raw = src.read_bytes()
        ds = JSONLDataset(_as_jsonl(tmp_path, src))
        records = [_record(ds, i) for i in range(len(ds))]
        lines = [line for line in raw.removeprefix(b"\xef\xbb\xbf").split(b"\n") if line.strip(b" \t\r")]
        by_line = [_line_loads(line) for line in lines]
        assert len(records) == len(by_line) and all(map(same, records, by_line)), src.name
        if src.name in NO_RECORD:
            assert records == [], src.name
            continue
        got = records[0] if len(records) == 1 else _REFUSED if _REFUSED in records else records
        if not same(got, _json_loads(raw)):
            differs.add(src.name)
        strict = JSONLDataset(_as_jsonl(tmp_path, src), allow_nan=False)
        strict_got = [_record(strict, i) for i in range(len(strict))]
        if src.name.startswith("n_"):
            assert _REFUSED in strict_got, src.name
        assert all(map(same, strict_got, [_line_loads(line, parse_constant=_refuse) for line in lines]))
    assert differs == set(NOT_JSON_LOADS)


def test_json_test_suite_arrays_as_json_documents(shared_data, tmp_path):
    """Each case that opens with ``[``, read as a ``.json`` document: its elements are the rows, exactly
    json.loads's list — or it raises where json.loads does (a trailing comma included)."""
    checked = 0
    for src in _suite(shared_data, ""):
        raw = src.read_bytes()
        encoding = NOT_JSON_LOADS.get(src.name) in ("UTF-16", "CESU-8")
        if raw.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")[:1] != b"[" or encoding:
            continue
        doc = _settled(tmp_path / src.name, raw)
        want = _json_loads(raw)
        got = _read(lambda doc=doc: list(JSONLDataset(doc)))
        assert same(got, want), src.name
        checked += 1
    assert checked >= 200


def test_whitespace_only_files_have_no_records(tmp_path):
    for i, data in enumerate([b"", b" ", b"\n", b"\r\n\r\n", b" \t \n\t\n", b"\xef\xbb\xbf\n  \n"]):
        path = tmp_path / f"ws{i}.jsonl"
        path.write_bytes(data)
        assert len(JSONLDataset(path)) == 0
