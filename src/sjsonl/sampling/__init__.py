"""Sampling layer: the order records are visited in — views, permutations, shards, resumable state."""

from .maps import ArrayMap, ComposedMap, IdentityMap, IndexMap, RangeMap

__all__ = ["ArrayMap", "ComposedMap", "IdentityMap", "IndexMap", "RangeMap"]
