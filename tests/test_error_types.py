"""Every sjsonl error is an SJSONLError and the matching built-in, and keeps its type across worker processes
(torch's DataLoader and MindSpore rebuild a worker's error in the parent as ``exc_type(message)``)."""

from __future__ import annotations

import errno
import inspect
import os
from pathlib import Path

import pytest
import torch

import sjsonl.errors as errors_mod
from sjsonl import JSONLDataset, load_dataset
from sjsonl.errors import (
    ColumnNotFoundError,
    DataFileError,
    DataFileIsADirectoryError,
    DataFileNotFoundError,
    RecordDecodeError,
    SJSONLError,
    SplitError,
    UnsupportedArgumentError,
)
from sjsonl.mindspore.columns import SchemaMismatchError
from sjsonl.records.conform import FeaturesMismatchError
from sjsonl.records.schema import schema_of_records
from sjsonl.storage.base import data_file_error
from tests.conftest import run_unprivileged


def _all_error_classes() -> list[type]:
    found = [c for _, c in inspect.getmembers(errors_mod, inspect.isclass) if issubclass(c, SJSONLError)]
    return [*found, SchemaMismatchError, FeaturesMismatchError]


@pytest.mark.parametrize("cls", _all_error_classes(), ids=lambda c: c.__name__)
def test_every_error_class_is_built_from_one_string(cls: type) -> None:
    message = "Caught X in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n  ..."
    for exc in (cls(message), cls(message=message)):  # torch's way, MindSpore DataLoader's way
        assert isinstance(exc, SJSONLError) and str(exc) == message  # a relayed traceback keeps its lines


def test_missing_file_types(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        JSONLDataset(tmp_path / "missing.jsonl")
    assert type(info.value) is DataFileNotFoundError and isinstance(info.value, DataFileError)
    assert info.value.errno == errno.ENOENT
    with pytest.raises(IsADirectoryError) as info:
        JSONLDataset(tmp_path)
    assert type(info.value) is DataFileIsADirectoryError
    with pytest.raises(FileNotFoundError) as info:
        load_dataset(str(tmp_path / "missing.jsonl"))
    assert isinstance(info.value, SJSONLError)
    with pytest.raises(DataFileNotFoundError, match="Hub dataset"):
        load_dataset("stanfordnlp/imdb")
    assert isinstance(data_file_error(errno.EACCES, "/x"), PermissionError)


def test_unreadable_file_is_a_permission_error(tmp_path: Path) -> None:
    path = tmp_path / "secret.jsonl"
    path.write_text('{"a": 1}\n')
    os.chmod(path, 0)
    code = (
        "import sys\nfrom sjsonl import JSONLDataset\n"
        "try:\n    JSONLDataset(sys.argv[1], index_dir=sys.argv[2])\n"
        "except PermissionError as exc:\n"
        "    print(type(exc).__name__, isinstance(exc, __import__('sjsonl').SJSONLError))\n"
    )
    done = run_unprivileged(code, str(path), str(tmp_path / "idx"))
    assert done.stdout.strip() == "DataFilePermissionError True", done.stderr


def test_value_and_key_errors(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"a": 1}\n')
    with pytest.raises(ValueError) as info:
        load_dataset(str(path), split="train[:101%]")
    assert type(info.value) is SplitError
    with pytest.raises(KeyError) as info:
        schema_of_records([{"a": 1}])["b"]
    assert type(info.value) is ColumnNotFoundError and str(info.value).startswith("no column 'b'")
    with pytest.raises(TypeError) as info:
        load_dataset(str(path), keep_in_memory=True)
    assert type(info.value) is UnsupportedArgumentError and "reads in place" in str(info.value)
    with pytest.raises(ValueError, match="no top-level key 'data'"):  # field= of a file that has none
        load_dataset(str(path), field="data")


def test_record_decode_error_keeps_fields_through_pickle_and_accepts_one_string() -> None:
    import pickle

    exc = RecordDecodeError("/d.jsonl", 3, 10, "'{'", "unexpected end")
    back = pickle.loads(pickle.dumps(exc))
    assert (back.path, back.line, back.offset, str(back)) == ("/d.jsonl", 3, 10, str(exc))
    one = pickle.loads(pickle.dumps(RecordDecodeError("relayed message")))
    assert str(one) == "relayed message" and one.line is None


@pytest.fixture
def bad_file(tmp_path: Path) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(20)) + '{"i": \n')
    return path


GOOD = [{"i": i} for i in range(20)]  # the records of bad_file before its bad last line


def test_dataloader_workers_raise_record_decode_error_by_type(bad_file: Path) -> None:
    ds = JSONLDataset(bad_file)
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=lambda b: b)
    got: list = []
    with pytest.raises(RecordDecodeError) as info:
        for batch in loader:
            got.extend(batch)
    assert "bad.jsonl:21" in str(info.value) and "DataLoader worker" in str(info.value)
    assert got == GOOD  # in order, every good batch before the bad one, nothing from the wrong place


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
def test_mindspore_dataloader_reports_the_type_in_its_runtime_error(bad_file: Path) -> None:
    """MindSpore's DataLoader rebuilds a worker's error as exc_type(message=...) — which our errors accept —
    but raises it inside its own ``try: ... except Exception: raise RuntimeError(msg)``, so every worker
    error arrives as RuntimeError (a ValueError too). The message keeps the type and ours."""
    from mindspore.dataset.dataloader import DataLoader

    loader = DataLoader(JSONLDataset(bad_file), batch_size=4, num_workers=2, collate_fn=lambda b: b)
    got: list = []
    with pytest.raises(RuntimeError) as info:
        for batch in loader:
            got.extend(batch)
    assert "caught RecordDecodeError" in str(info.value) and "bad.jsonl:21" in str(info.value)
    assert all(r in GOOD for r in got)  # whatever arrived before the error is right


def test_generator_dataset_reports_the_type_in_its_runtime_error(bad_file: Path) -> None:
    """MindSpore's C++ pipeline turns any error of a GeneratorDataset source into a RuntimeError (for
    ValueError as for ours); the message keeps the type and our one-line message. Documented in the README."""
    import sjsonl.mindspore as sms

    source_ds = JSONLDataset(bad_file)
    with pytest.raises(RecordDecodeError):  # the schema pass meets the bad line before any epoch starts
        sms.make_schema(source_ds)
    schema = sms.make_schema(source_ds.take(20), infer_rows=20)  # so that a worker meets the bad line
    gd = sms.to_generator_dataset(source_ds, schema=schema, num_parallel_workers=2)
    got: list[int] = []
    with pytest.raises(RuntimeError) as info:
        for (i,) in gd.create_tuple_iterator(num_epochs=1, output_numpy=True):
            got.append(int(i))
    assert "sjsonl.errors.RecordDecodeError" in str(info.value) and "bad.jsonl:21" in str(info.value)
    assert set(got) <= set(range(20))  # whatever arrived before the error is right
