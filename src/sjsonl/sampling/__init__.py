"""Sampling layer: the order records are visited in — views, permutations, shards, resumable state.

Example:
    >>> import numpy as np
    >>> from sjsonl.sampling import Permutation, shard_order
    >>> p = Permutation(8, seed=1)
    >>> sorted(p.take(shard_order(8, num_replicas=2, rank=0).take(np.arange(4))).tolist() +
    ...        p.take(shard_order(8, num_replicas=2, rank=1).take(np.arange(4))).tolist())
    [0, 1, 2, 3, 4, 5, 6, 7]
"""

from sjsonl.sampling.block import BlockShuffle
from sjsonl.sampling.distributed import (
    Cursor,
    PaddedMap,
    check_state,
    epoch_order,
    iter_blocks,
    per_rank,
    shard_order,
)
from sjsonl.sampling.elastic import carry_over, remaining, shard_rest
from sjsonl.sampling.maps import ArrayMap, ComposedMap, IdentityMap, IndexMap, RangeMap, RangesMap, SkipMap
from sjsonl.sampling.permutation import Permutation

__all__ = [
    "ArrayMap",
    "BlockShuffle",
    "ComposedMap",
    "Cursor",
    "IdentityMap",
    "IndexMap",
    "PaddedMap",
    "Permutation",
    "RangeMap",
    "RangesMap",
    "SkipMap",
    "carry_over",
    "check_state",
    "epoch_order",
    "iter_blocks",
    "per_rank",
    "remaining",
    "shard_order",
    "shard_rest",
]
