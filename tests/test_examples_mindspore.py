"""examples/mindspore_mixture.py runs as documented: stopped mid-epoch and resumed, it trains on exactly
the epoch's records, and its losses match an uninterrupted run's (helpers: tests/_examples.py)."""

from __future__ import annotations

import sys
from collections import Counter

import pytest

pytest.importorskip("mindspore")

from ._examples import EXAMPLES, real_sources, stop_and_resume

pytestmark = pytest.mark.slow  # a full training run and a stopped-and-resumed one: a minute or more


def test_mindspore_epoch_records_are_the_expected_multiset(shared_data, tmp_path):
    sources = real_sources(shared_data)
    sys.path.insert(0, str(EXAMPLES))
    try:
        import mindspore_mixture as example
    finally:
        sys.path.remove(str(EXAMPLES))
    data = example.mixture(sources)
    per_epoch = len(data) // example.BATCH
    full, resumed = stop_and_resume("mindspore_mixture.py", sources, tmp_path, steps=per_epoch + 10, stop=150)
    assert full["steps_per_epoch"] == per_epoch and per_epoch > 150
    batch = example.BATCH
    epoch0 = Counter(resumed["records"][: per_epoch * batch])
    # what epoch 0 must hold: every record of the mixture, less the < BATCH dropped by drop_remainder
    dropped = Counter(example.digest(r["text"]) for r in data.shuffle(seed=0, epoch=0)[per_epoch * batch :])
    expected = Counter(example.digest(r["text"]) for r in data)
    assert epoch0 + dropped == expected and sum(dropped.values()) < batch
    assert resumed["records"] == full["records"] and resumed["losses"] == full["losses"]
