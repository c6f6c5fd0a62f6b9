"""Batched delivery to MindSpore (to_generator_dataset(batch_size=)): per epoch the multiset of records
equals per-row delivery; exact per-epoch shuffles; shards disjoint and complete; ragged columns padded
with lengths; resume mid-epoch. Real MindSpore (CPU)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("mindspore")

import sjsonl.mindspore
from sjsonl import JSONLDataset
from sjsonl.mindspore import make_schema, to_generator_dataset
from sjsonl.mindspore.batches import BatchSource

N, BATCH = 103, 8


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    path = tmp_path_factory.mktemp("msb") / "d.jsonl"
    rows = []
    for i in range(N):
        row = {"id": i, "text": "é" * (i % 7), "ids": list(range(i % 5)), "score": i / 4}
        if i % 3 == 0:
            row["messages"] = [{"role": "user", "content": f"q{i}"}]
        rows.append(json.dumps(row))
    path.write_text("\n".join(rows) + "\n")
    return JSONLDataset(path)


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


def test_padding_and_lengths(ds):
    schema = make_schema(ds)
    batch = next(iter(BatchSource(ds, schema, batch_size=5)))
    cols = dict(zip([*schema.column_names, "ids_lengths"], batch))
    assert cols["id"].tolist() == [0, 1, 2, 3, 4] and cols["id"].dtype == np.int64
    assert cols["ids"].tolist() == [[0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 2, 0], [0, 1, 2, 3]]
    assert cols["ids_lengths"].tolist() == [[0], [1], [2], [3], [4]]
    assert cols["text"].tolist() == ["", "é", "éé", "ééé", "éééé"] and cols["messages"].dtype.kind == "U"


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


@pytest.mark.parametrize("k", [0, 1, 6, 13])
def test_resume_mid_epoch(ds, k):
    schema = make_schema(ds)
    src = BatchSource(ds, schema, batch_size=BATCH, shuffle=True, seed=11)
    src.set_epoch(2)
    full = [tuple(a.tolist() for a in b) for b in src]
    src.set_epoch(2)
    it = iter(src)
    head = [tuple(a.tolist() for a in next(it)) for _ in range(k)]
    state = src.state_dict()
    again = BatchSource(ds, schema, batch_size=BATCH, shuffle=True, seed=11)
    again.load_state_dict(state)
    rest = [tuple(a.tolist() for a in b) for b in again]
    if k < len(full):
        assert head + rest == full
    else:  # saved with the epoch used up: the resume starts the next epoch
        fresh = BatchSource(ds, schema, batch_size=BATCH, shuffle=True, seed=11)
        fresh.set_epoch(3)
        assert rest == [tuple(a.tolist() for a in b) for b in fresh]
    with pytest.raises(ValueError, match="cannot resume"):
        BatchSource(ds, schema, batch_size=4, shuffle=True, seed=11).load_state_dict(state)


def test_load_dataset_passes_batch_size_and_streams_are_refused(ds):
    gd = sjsonl.mindspore.load_dataset("json", data_files=ds.files[0], split="train", batch_size=16)
    assert gd.get_dataset_size() == -(-N // 16)
    first = next(gd.create_dict_iterator(output_numpy=True, num_epochs=1))
    assert first["id"].tolist() == list(range(16))
    with pytest.raises(ValueError, match="random-access"):
        to_generator_dataset(sjsonl.streaming.JSONLStream(ds.files[0]), batch_size=4)


def test_unseeded_shards_are_still_disjoint(ds):
    schema = make_schema(ds)
    got = []
    for shard in range(2):
        gd = to_generator_dataset(ds, batch_size=BATCH, shuffle=True, num_shards=2, shard_id=shard)
        got.append(
            rows_of(gd.create_tuple_iterator(output_numpy=True, num_epochs=1), gd.get_col_names(), schema)
        )
    assert not set(got[0]) & set(got[1]) and Counter(got[0] + got[1]) == per_row(ds, schema)


def test_epochs_advance_per_finished_pass_and_resume_after_a_whole_epoch(ds):
    schema = make_schema(ds)
    src = BatchSource(ds, schema, batch_size=BATCH, shuffle=True, seed=5)
    iter(src)  # what MindSpore does when it builds the pipeline: no pass starts
    probe = next(iter(src))  # a shape probe: a partial pass does not move the epoch
    epoch0 = [b[0].tolist() for b in src]
    assert probe[0].tolist() == epoch0[0]
    epoch1 = [b[0].tolist() for b in src]
    assert epoch1 != epoch0
    saved = src.state_dict()  # epoch 1 complete
    again = BatchSource(ds, schema, batch_size=BATCH, shuffle=True, seed=5)
    again.load_state_dict(saved)
    epoch2 = [b[0].tolist() for b in again]
    src_epoch2 = [b[0].tolist() for b in src]
    assert epoch2 == src_epoch2 and epoch2 not in (epoch0, epoch1)
    later = BatchSource(ds, schema, batch_size=BATCH, shuffle=True, seed=5)
    later.resume_at(epoch=1, batches_done=4)
    assert [b[0].tolist() for b in later] == epoch1[4:]


def test_no_batches_is_an_empty_dataset(ds):
    gd = to_generator_dataset(ds.take(5), batch_size=BATCH, drop_remainder=True)
    assert list(gd.create_tuple_iterator(output_numpy=True, num_epochs=1)) == []


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"yielded": "5"}, r"yielded='5' \(str\)"),
        ({"yielded": 2.5}, r"yielded=2\.5 \(float\)"),
        ({"yielded": True}, r"yielded=True \(bool\)"),
        ({"epoch": -1}, r"epoch=-1, outside the range"),
        ({"rows": None}, r"rows=None but this object has rows="),
        ({"extra": 0}, r"unknown key 'extra'"),
    ],
)
def test_a_bad_saved_state_is_refused_naming_the_key(ds, change, says):
    schema = make_schema(ds)
    src = BatchSource(ds, schema, batch_size=BATCH, shuffle=True, seed=5)
    it = iter(src)
    next(it)
    state = src.state_dict()
    with pytest.raises(ValueError, match="^cannot resume: saved state has .*" + says):
        BatchSource(ds, schema, batch_size=BATCH, shuffle=True, seed=5).load_state_dict({**state, **change})
    for key in state:  # every layout key must be there, also for an epoch saved complete
        for yielded in (1, len(src)):
            partial = {k: v for k, v in {**state, "yielded": yielded}.items() if k != key}
            with pytest.raises(ValueError, match=f"saved state has no '{key}'"):
                BatchSource(ds, schema, batch_size=BATCH, shuffle=True, seed=5).load_state_dict(partial)
