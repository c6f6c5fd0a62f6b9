"""The torch DistributedSampler over more than 2**32 records (see tests/test_huge_lengths.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from sjsonl.torch import DistributedSampler

from ._reference_order import reference_order
from .test_huge_lengths import N, Sized


def test_the_torch_sampler_splits_more_than_2_to_the_32():
    firsts = []
    for rank in range(4):
        sampler = DistributedSampler(Sized(), num_replicas=4, rank=rank, seed=1)
        assert len(sampler) == -(-N // 4)
        it = iter(sampler)
        mine = [next(it) for _ in range(3)]
        assert mine == reference_order(N, seed=1, positions=[rank, rank + 4, rank + 8])  # strided, as torch
        firsts += mine
    assert len(set(firsts)) == 12 and max(firsts) > 2**32  # the draws reach past 2**32
