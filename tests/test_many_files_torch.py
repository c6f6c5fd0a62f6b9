"""The torch DistributedSampler over a corpus of many files (see tests/test_many_files.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from sjsonl import JSONLDataset
from sjsonl.torch import DistributedSampler

from ._reference_order import reference_order
from .test_many_files import expected, write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory)


def test_the_torch_sampler_over_many_files(corpus):
    ds = JSONLDataset(corpus)
    indices = list(DistributedSampler(ds, num_replicas=4, rank=2, seed=1))
    assert len(indices) == len(ds) // 4 and len(set(indices)) == len(indices)
    assert indices[:500] == reference_order(len(ds), seed=1, positions=range(2, 2002, 4))  # rank 2 of 4
    assert [ds[i] for i in indices[:500]] == expected(indices[:500])
