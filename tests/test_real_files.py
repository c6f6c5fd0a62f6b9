"""Real public files from ../shared/data: every record equals json.loads of its line; JSONTestSuite."""

from __future__ import annotations

import json

import pytest

from sjsonl import JSONLDataset, RecordDecodeError

DATA_SUFFIXES = (".jsonl", ".json", ".ndjson")


def _data_files(root):
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.suffix in DATA_SUFFIXES and "JSONTestSuite" not in p.parts
    )


def test_every_record_of_every_shared_file(shared_data):
    files = (
        _data_files(shared_data / "jsonl")
        + _data_files(shared_data / "jsonlines_org")
        + _data_files(shared_data / "ndjson_spec")
    )
    assert len(files) >= 20
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
    dst = tmp_path / (src.stem + ".jsonl")
    dst.write_bytes(src.read_bytes())
    return dst


def test_json_test_suite_accepts_y(shared_data, tmp_path):
    cases = [p for p in _suite(shared_data, "y_") if b"\n" not in p.read_bytes().rstrip(b"\n")]
    assert len(cases) >= 90
    for src in cases:
        ds = JSONLDataset(_as_jsonl(tmp_path, src))
        expected = json.loads(src.read_bytes())
        assert len(ds) == 1 and ds[0] == expected, src.name


# n_ cases whose bytes hold no record once read as JSON Lines: empty, whitespace or a lone BOM.
NO_RECORD = {"n_structure_no_data.json", "n_single_space.json", "n_structure_UTF8_BOM_no_data.json"}


def test_json_test_suite_rejects_n(shared_data, tmp_path):
    cases = _suite(shared_data, "n_")
    assert len(cases) >= 180 and {p.name for p in cases} >= NO_RECORD
    for src in cases:
        ds = JSONLDataset(_as_jsonl(tmp_path, src))
        if src.name in NO_RECORD:
            assert len(ds) == 0, src.name
            continue
        with pytest.raises(RecordDecodeError):
            list(ds)
        assert any(_raises(ds, i) for i in range(len(ds))), src.name


def _raises(ds, i):
    try:
        ds[i]
    except RecordDecodeError:
        return True
    return False


def test_whitespace_only_files_have_no_records(tmp_path):
    for i, data in enumerate([b"", b" ", b"\n", b"\r\n\r\n", b" \t \n\t\n", b"\xef\xbb\xbf\n  \n"]):
        path = tmp_path / f"ws{i}.jsonl"
        path.write_bytes(data)
        assert len(JSONLDataset(path)) == 0


def test_json_test_suite_i_cases_read_or_raise_cleanly(shared_data, tmp_path):
    """Implementation-defined cases: a value or a located RecordDecodeError, never another exception."""
    for src in _suite(shared_data, "i_"):
        ds = JSONLDataset(_as_jsonl(tmp_path, src))
        for i in range(len(ds)):
            try:
                ds[i]
            except RecordDecodeError as exc:
                assert exc.line >= 1 and str(src.stem) in exc.path
