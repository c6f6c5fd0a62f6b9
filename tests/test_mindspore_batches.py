"""Batched delivery to MindSpore (to_generator_dataset(batch_size=)): per epoch the multiset of records
equals per-row delivery; exact per-epoch shuffles; shards disjoint and complete; ragged columns padded
with lengths. Real MindSpore (CPU); the batch source alone (padding, resume, epochs, saved states):
tests/test_mindspore_batch_source.py."""

from __future__ import annotations

import json
from collections import Counter

import pytest

pytest.importorskip("mindspore")

import sjsonl.mindspore
from sjsonl.mindspore import make_schema, to_generator_dataset

from .test_mindspore_batch_source import BATCH, N, write_rows


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return write_rows(tmp_path_factory)


def rows_of(batches, names: list[str], schema) -> list[str]:
    """Each batch back to per-row values (unpadded by the lengths columns), as canonical JSON."""
    out = []
    padded = [c.name for c in schema.columns if c.ndim > 0]
    for batch in batches:
        cols = dict(zip(names, batch))
        for i in range(len(cols[names[0]])):
            values = []
            for c in schema.columns:
                v = cols[c.name][i]
                if c.name in padded:
                    shape = cols[f"{c.name}_lengths"][i]
                    v = v[tuple(slice(0, s) for s in shape)]
                values.append(v)
            out.append(json.dumps(schema.to_python(values), sort_keys=True, ensure_ascii=False))
    return out


def per_row(ds, schema) -> Counter:
    return Counter(
        json.dumps(schema.to_python(schema.convert(r)), sort_keys=True, ensure_ascii=False) for r in ds
    )


def test_an_epoch_of_batches_is_the_records(ds):
    schema = make_schema(ds)
    gd = to_generator_dataset(ds, batch_size=BATCH, shuffle=True, seed=7)
    names = gd.get_col_names()
    assert names == [*schema.column_names, "ids_lengths"]
    epochs = []
    it = gd.create_tuple_iterator(output_numpy=True, num_epochs=2)
    for _ in range(2):
        epochs.append(list(it))  # MindSpore's iterator ends each epoch with StopIteration
    assert gd.get_dataset_size() == -(-N // BATCH)
    first, second = (rows_of(e, names, schema) for e in epochs)
    assert Counter(first) == Counter(second) == per_row(ds, schema)  # the same records per epoch
    assert first != second  # reshuffled between epochs
    plain = rows_of(
        to_generator_dataset(ds, batch_size=BATCH).create_tuple_iterator(output_numpy=True, num_epochs=1),
        names,
        schema,
    )
    assert plain == [
        json.dumps(schema.to_python(schema.convert(r)), sort_keys=True, ensure_ascii=False) for r in ds
    ]


@pytest.mark.parametrize("drop", [False, True])
def test_shards_are_disjoint_and_complete(ds, drop):
    schema = make_schema(ds)
    got = []
    for shard in range(2):
        gd = to_generator_dataset(
            ds, batch_size=BATCH, shuffle=True, seed=3, num_shards=2, shard_id=shard, drop_remainder=drop
        )
        got.append(
            rows_of(gd.create_tuple_iterator(output_numpy=True, num_epochs=1), gd.get_col_names(), schema)
        )
    assert not set(got[0]) & set(got[1])
    if not drop:
        assert Counter(got[0] + got[1]) == per_row(ds, schema)
    else:
        assert all(len(g) % BATCH == 0 for g in got) and len(got[0]) == 48


def test_load_dataset_passes_batch_size_and_streams_are_refused(ds):
    gd = sjsonl.mindspore.load_dataset("json", data_files=ds.files[0], split="train", batch_size=16)
    assert gd.get_dataset_size() == -(-N // 16)
    first = next(gd.create_dict_iterator(output_numpy=True, num_epochs=1))
    assert first["id"].tolist() == list(range(16))
    with pytest.raises(ValueError, match="random-access"):
        to_generator_dataset(sjsonl.data.streaming.JSONLStream(ds.files[0]), batch_size=4)


def test_unseeded_shards_are_still_disjoint(ds):
    schema = make_schema(ds)
    got = []
    for shard in range(2):
        gd = to_generator_dataset(ds, batch_size=BATCH, shuffle=True, num_shards=2, shard_id=shard)
        got.append(
            rows_of(gd.create_tuple_iterator(output_numpy=True, num_epochs=1), gd.get_col_names(), schema)
        )
    assert not set(got[0]) & set(got[1]) and Counter(got[0] + got[1]) == per_row(ds, schema)


def test_no_batches_is_an_empty_dataset(ds):
    gd = to_generator_dataset(ds.take(5), batch_size=BATCH, drop_remainder=True)
    assert list(gd.create_tuple_iterator(output_numpy=True, num_epochs=1)) == []
