"""Batches for MindSpore without MindSpore: sjsonl.mindspore.batches.BatchSource pads ragged columns with
their lengths, resumes mid-epoch, advances its epoch per finished pass and refuses a bad saved state. The
same batches through a real MindSpore pipeline: tests/test_mindspore_batches.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sjsonl import JSONLDataset
from sjsonl.mindspore import make_schema
from sjsonl.mindspore.batches import BatchSource

N, BATCH = 103, 8


def write_rows(tmp_path_factory) -> JSONLDataset:
    """N rows with ragged lists, non-ASCII text and a chat column in every third."""
    path = tmp_path_factory.mktemp("msb") / "d.jsonl"
    rows = []
    for i in range(N):
        row = {"id": i, "text": "é" * (i % 7), "ids": list(range(i % 5)), "score": i / 4}
        if i % 3 == 0:
            row["messages"] = [{"role": "user", "content": f"q{i}"}]
        rows.append(json.dumps(row))
    path.write_text("\n".join(rows) + "\n")
    return JSONLDataset(path)


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return write_rows(tmp_path_factory)


def test_padding_and_lengths(ds):
    schema = make_schema(ds)
    batch = next(iter(BatchSource(ds, schema, batch_size=5)))
    cols = dict(zip([*schema.column_names, "ids_lengths"], batch))
    assert cols["id"].tolist() == [0, 1, 2, 3, 4] and cols["id"].dtype == np.int64
    assert cols["ids"].tolist() == [[0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 2, 0], [0, 1, 2, 3]]
    assert cols["ids_lengths"].tolist() == [[0], [1], [2], [3], [4]]
    assert cols["text"].tolist() == ["", "é", "éé", "ééé", "éééé"] and cols["messages"].dtype.kind == "U"


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
