"""Records past 4 GiB through a MindSpore GeneratorDataset (see tests/test_large_files.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("mindspore")

from sjsonl.mindspore import to_generator_dataset

from ._large_file import beyond

pytestmark = pytest.mark.slow  # the >4 GiB file takes 10-20 s to build (tests/_large_file.py)


def test_mindspore_reads_records_past_4_gib(file_past_4_gib):
    _, _, ds, _ = file_past_4_gib
    tail = ds.select(beyond())
    # the types from these rows: every row of the file includes the NUL line, which is no JSON
    gd = to_generator_dataset(tail, column_names=["i"], infer_rows=len(tail))
    assert [int(r[0]) for r in gd.create_tuple_iterator(output_numpy=True, num_epochs=1)] == beyond()
