"""More than 2**32 records on the paths that only do arithmetic on positions: exact and block shuffles,
mixtures and their views (the torch DistributedSampler: tests/test_huge_lengths_torch.py) — with
n = 2**33 + 11 (no data: the sequences are ranges, so every value can be checked)."""

from __future__ import annotations

import numpy as np
import pytest

from sjsonl import concatenate_datasets, interleave_datasets
from sjsonl.sampling import Permutation
from sjsonl.sampling.block import BlockShuffle

N = 2**33 + 11
AROUND = np.array([0, 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1, N - 2, N - 1], dtype=np.int64)


class Sized:
    """Only a length, as a sampler needs."""

    def __len__(self) -> int:
        return N


@pytest.mark.parametrize("order", [Permutation(N, 3), BlockShuffle(N, 256, 64, 0, 0)], ids=["exact", "block"])
def test_shuffles_of_more_than_2_to_the_32(order):
    got = order.take(AROUND)
    assert got.dtype == np.int64 and len(set(got.tolist())) == len(AROUND)
    assert all(0 <= int(x) < N for x in got)
    assert [order[int(i)] for i in AROUND] == got.tolist()  # the scalar and the vector paths agree
    assert order[-1] == got[-1]


def test_mixtures_and_their_views_past_2_to_the_32():
    big = range(2**32 + 5)
    m = concatenate_datasets([big, range(10)])
    assert len(m) == 2**32 + 15 and m[2**32 + 6] == 1 and m.source_of(2**32 + 6) == (1, 1)
    assert m.skip(2**32).take(3)[0] == 2**32 and m.shard(3, 2)[0] == (len(m) // 3) * 2 + min(2, len(m) % 3)
    shuffled = m.shuffle(seed=1)
    assert sorted({shuffled[0], shuffled[len(m) - 1]}) == sorted({shuffled[0], shuffled[-1]})
    mixed = interleave_datasets([big, range(2**32 + 9)], probabilities=[0.5, 0.5], seed=0)
    # weights 1:1, so the draws alternate between the sources, in the order seed 0 gives (source 1 first):
    # draw 2t + r takes record t of source [1, 0][r]
    assert [mixed.source_of(i) for i in range(4)] == [(1, 0), (0, 0), (1, 1), (0, 1)]
    assert mixed.source_of(2**33) == (1, 2**32) and mixed.source_of(2**33 + 1) == (0, 2**32)
    assert mixed[2**33] == 2**32 and mixed[2**33 + 3] == 2**32 + 1
    # first_exhausted: it ends with the last record of the shorter source, source 0
    assert len(mixed) == 2 * (2**32 + 5) and mixed.source_of(-1) == (0, 2**32 + 4)
