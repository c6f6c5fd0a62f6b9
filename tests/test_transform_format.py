"""sjsonl.transforms.format: with_format and 🤗's batch with_transform — compared with 🤗."""

from __future__ import annotations

import numpy as np
import pytest

from tests._hf_pair import pair

pytest.importorskip("datasets")
torch = pytest.importorskip("torch")


def test_formats_like_hf(tmp_path):
    hf, ds, _ = pair(tmp_path)
    for kind in ("numpy", "torch"):
        ours, theirs = ds.with_format(kind), hf.with_format(kind)
        assert ours.format["type"] == theirs.format["type"] == kind
        a, b = ours[3], theirs[3]
        assert type(a["ids"]) is type(b["ids"]) and np.array_equal(np.asarray(a["ids"]), np.asarray(b["ids"]))
        assert a["text"] == b["text"]
    assert ds.with_format("torch").with_format(None).format["type"] is None


def test_with_transform_takes_batches_like_hf(tmp_path):
    hf, ds, _ = pair(tmp_path)
    seen = []

    def upper(batch):
        seen.append(len(batch["text"]))
        return {"t": [t.upper() for t in batch["text"]]}

    ours, theirs = ds.with_transform(upper), hf.with_transform(upper)
    assert ours.format["type"] == theirs.format["type"] == "custom"
    assert ours[2] == theirs[2]
    seen.clear()
    assert ours.__getitems__([1, 5, 9]) == theirs.__getitems__([1, 5, 9])  # what a DataLoader calls
    assert seen == [3, 3]  # one call per batch, for each library
    ds.set_transform(upper)
    assert ds.format["type"] == "custom" and ds[0] == {"t": "T0 "}
