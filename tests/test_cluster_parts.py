"""Balanced record ranges (sjsonl.sampling.ranges), the corpus parts both cluster adapters read
(sjsonl.data.parts), and the Dask adapter on Dask's threaded scheduler: row-exact against JSONLDataset over
plain, .gz, .zst and several files. The Ray adapter and a Dask LocalCluster: tests/test_ray.py,
tests/test_dask_cluster.py (slow tier)."""

from __future__ import annotations

import os

import dask
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sjsonl import JSONLDataset
from sjsonl.dask import partition_rows, read_jsonl, read_jsonl_bag
from sjsonl.data.parts import as_columns, expand_paths, open_corpus
from sjsonl.errors import DataFileNotFoundError, InvalidArgumentError
from sjsonl.sampling.ranges import record_ranges

from ._cluster_data import lines, write_corpus


@given(st.lists(st.integers(0, 40), max_size=8), st.integers(1, 50))
def test_ranges_cover_every_record_once_in_order_and_differ_by_at_most_one(counts, k):
    ranges = record_ranges(counts, k)
    total = sum(counts)
    assert len(ranges) == min(k, total)
    seen = [(f, j) for r in ranges for f, lo, hi in r.pieces for j in range(lo, hi)]
    assert seen == [(f, j) for f, c in enumerate(counts) for j in range(c)]  # each record once, in order
    sizes = [len(r) for r in ranges]
    assert not sizes or max(sizes) - min(sizes) <= 1
    assert all(sum(hi - lo for _, lo, hi in r.pieces) == len(r) for r in ranges)
    assert [r.start for r in ranges] == [sum(sizes[:i]) for i in range(len(sizes))]
    assert all(lo < hi for r in ranges for _, lo, hi in r.pieces)  # no empty piece (empty files own none)


def test_ranges_refuse_a_zero_count():
    with pytest.raises(InvalidArgumentError):
        record_ranges([3], 0)


@pytest.fixture
def corpus_files(tmp_path):
    """Four files of different sizes and kinds (plain, .gz, an empty one, .zst), 250 records in all."""
    return write_corpus(tmp_path)


def test_a_directory_is_its_json_files_and_parts_are_exact(corpus_files):
    paths = expand_paths(corpus_files)
    assert [os.path.basename(p) for p in paths] == ["a.jsonl", "b.jsonl.gz", "c.jsonl", "d.jsonl.zst"]
    corpus = open_corpus(corpus_files)
    expected = list(JSONLDataset(paths))
    assert len(corpus) == 250
    for k in (1, 3, 7, 250, 400):
        parts = corpus.parts(k)
        assert [r for p in parts for r in p.read()] == expected
        assert max(p.rows for p in parts) - min(p.rows for p in parts) <= 1
        sizes = [len(lines([r])) for r in expected]  # json.dumps wrote each line: its bytes, exactly
        assert [p.nbytes for p in parts] == [sum(sizes[p.start : p.start + p.rows]) for p in parts]


def test_a_part_pickles_with_only_its_files(corpus_files):
    import pickle

    parts = open_corpus(corpus_files).parts(3)
    assert [os.path.basename(p) for p in parts[0].paths] == ["a.jsonl"]
    assert [os.path.basename(p) for p in parts[1].paths] == ["a.jsonl", "b.jsonl.gz"]
    assert pickle.loads(pickle.dumps(parts[1])).read() == parts[1].read()


def test_globs_and_missing_paths(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"a": 1}\n')
    (tmp_path / "y.txt").write_text("no\n")
    JSONLDataset(tmp_path / "x.jsonl")  # its index (beside it) is not data
    assert expand_paths(str(tmp_path / "*")) == [str(tmp_path / "x.jsonl"), str(tmp_path / "y.txt")]
    with pytest.raises(DataFileNotFoundError):
        expand_paths(str(tmp_path / "*.ndjson"))
    with pytest.raises(DataFileNotFoundError):
        open_corpus(tmp_path / "nope.jsonl")


def test_columns_follow_the_hf_rules():
    assert as_columns([{"a": 1}, [2], {}]) == {"a": [1, None, None], "value": [None, [2], None]}


def test_bad_lines_skipped_are_left_out_of_every_part(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{oops\n{"a": 2}\n{"a": 3}\n')
    parts = open_corpus(path, on_bad_lines="skip").parts(2)
    assert [p.read() for p in parts] == [[{"a": 1}, {"a": 2}], [{"a": 3}]]
    assert [p.nbytes for p in parts] == [18, 9]


@pytest.mark.parametrize("k", [1, 4, 9])
def test_dask_dataframe_rows_equal_the_dataset_with_known_divisions(corpus_files, k):
    expected = list(JSONLDataset(expand_paths(corpus_files)))
    with dask.config.set(scheduler="threads"):
        df = read_jsonl(corpus_files, npartitions=k)
        assert df.known_divisions and df.npartitions == k
        assert partition_rows(df) == [len(p) for p in record_ranges([100, 70, 0, 80], k)]
        assert [len(df.get_partition(i)) for i in range(k)] == partition_rows(df)
        pdf = df.compute()
    assert pdf.index.tolist() == list(range(250))
    assert pdf.to_dict("records") == expected  # big ints exact (object column), strings as strings
    assert df.loc[171].compute().to_dict("records") == [expected[171]]


def test_dask_bag_holds_the_records_themselves(corpus_files):
    expected = list(JSONLDataset(expand_paths(corpus_files)))
    bag = read_jsonl_bag(corpus_files, npartitions=4)
    assert bag.npartitions == 4
    assert bag.compute(scheduler="threads") == expected


def test_dask_columns_and_a_column_missed_by_the_sample(tmp_path):
    rows = [{"a": i} for i in range(2000)] + [{"a": 1, "late": "x"}]
    (tmp_path / "d.jsonl").write_bytes(lines(rows))
    df = read_jsonl(tmp_path / "d.jsonl", npartitions=2, columns=["late"])
    late = df["late"].compute(scheduler="sync")
    assert late.isna().sum() == 2000 and late.iloc[-1] == "x"
    with pytest.raises(Exception, match="late"):  # never dropped in silence
        read_jsonl(tmp_path / "d.jsonl", npartitions=2).compute(scheduler="sync")


class Row(msgspec.Struct):
    i: int
    text: str


def test_the_dataset_options_reach_the_rows(corpus_files, tmp_path):
    """``schema=`` (typed records become their fields), ``fields=`` and ``on_bad_lines`` as the dataset has
    them, through the Dask adapter (the Ray adapter's: tests/test_ray.py)."""
    files = expand_paths(corpus_files)
    typed = read_jsonl(corpus_files, npartitions=3, schema=Row).compute(scheduler="sync")
    assert typed.to_dict("records") == [{"i": r["i"], "text": r["text"]} for r in JSONLDataset(files)]
    picked = read_jsonl_bag(corpus_files, npartitions=2, fields=["big"]).compute(scheduler="sync")
    assert picked == [{"big": r["big"]} for r in JSONLDataset(files)]
    (tmp_path / "bad.jsonl").write_text('{"i": 1}\n{oops\n{"i": 2}\n')
    skipped = read_jsonl(tmp_path / "bad.jsonl", npartitions=2, on_bad_lines="skip")
    assert skipped["i"].compute(scheduler="sync").tolist() == [1, 2] and skipped.divisions == (0, 1, 1)
