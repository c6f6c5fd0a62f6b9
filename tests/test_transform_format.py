"""sjsonl.data.transforms.format: with_format (numpy, torch) — compared with 🤗 (🤗's batch with_transform:
tests/test_transform_map.py)."""

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
