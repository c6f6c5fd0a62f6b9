"""Which source each draw of a mixture comes from: exact proportions at every prefix, random access.

A mixture of ``K`` sources with probabilities ``p`` is a sequence of draws; draw ``t`` takes the next
record of one source. 🤗 ``interleave_datasets`` picks each source independently at random, so a prefix
of ``t`` draws holds source ``k`` about ``t·p_k ± √t`` times — the proportions wander. Here the draws
follow a stride schedule instead: source ``k``'s ``j``-th draw is placed at virtual time
``(j + φ_k) / p_k`` and the draws are taken in time order (ties by source). Every prefix then holds
source ``k`` within about two draws of ``t·p_k``, at every length: no drift.

The probabilities become integer weights ``w`` with total ``W`` (exact when they are fractions with
small denominators — 0.7/0.2/0.1 is 7:2:1 — else rounded to 2⁻²⁰), and the schedule repeats every ``W``
draws, so one period (``W`` small integers) is all that is stored: memory does not grow with the
number of draws, and draw ``t`` → ``(source, j)`` is two array lookups. The seed sets the phases
``φ``; equal weights with zero phases are a round robin.

Example:
    >>> s = InterleaveSchedule.from_probabilities([0.5, 0.25, 0.25])
    >>> s.weights.tolist(), s.period
    ([2, 1, 1], 4)
    >>> k, j = s.route(np.arange(8))
    >>> k.tolist(), j.tolist()
    ([0, 1, 2, 0, 0, 1, 2, 0], [0, 0, 0, 1, 2, 1, 1, 3])
    >>> s.position_of(0, 3)
    7
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from sjsonl.errors import InvalidArgumentError

#: Resolution of probabilities that are not fractions with small denominators.
MAX_PERIOD = 1 << 20
_EXACT_DENOMINATOR = 1 << 16


def weights_of(probabilities: Sequence[float]) -> np.ndarray:
    """Integer weights proportional to ``probabilities``: exact for fractions with denominators up to
    65,536 whose common denominator is at most 2²⁰, else the largest-remainder rounding to 2²⁰.

    Example:
        >>> weights_of([0.7, 0.2, 0.1]).tolist(), weights_of([1, 1, 2]).tolist()
        ([7, 2, 1], [1, 1, 2])
    """
    p = np.asarray(probabilities, dtype=np.float64)
    if p.ndim != 1 or not p.size:
        raise InvalidArgumentError("probabilities must be a non-empty list of numbers")
    if not np.isfinite(p).all() or (p < 0).any() or p.sum() <= 0:
        raise InvalidArgumentError(f"probabilities must be non-negative and not all zero, got {p.tolist()}")
    p = p / p.sum()
    fractions = [Fraction(float(x)).limit_denominator(_EXACT_DENOMINATOR) for x in p]
    common = math.lcm(*(f.denominator for f in fractions))
    close = all(abs(float(f) - x) <= 1e-12 for f, x in zip(fractions, p))
    if close and sum(fractions) == 1 and common <= MAX_PERIOD:
        w = np.array([f.numerator * (common // f.denominator) for f in fractions], dtype=np.int64)
        return w // math.gcd(*w.tolist())
    scaled = p * MAX_PERIOD
    w = np.floor(scaled).astype(np.int64)
    short = MAX_PERIOD - int(w.sum())
    w[np.argsort(-(scaled - w), kind="stable")[:short]] += 1  # largest remainders get the rest
    tiny = (p > 0) & (w == 0)  # a source asked for is drawn: at least once a period
    if tiny.any():
        w[tiny] = 1
        w[int(np.argmax(w))] -= int(tiny.sum())
    return w


class InterleaveSchedule:
    """Draw ``t`` → (source, that source's draw number), for integer ``weights`` and ``phases`` in [0, 1).

    ``route`` and ``position_of`` are inverse; both are O(1) per draw and vectorised.
    """

    def __init__(
        self, weights: Sequence[int] | np.ndarray, phases: Sequence[float] | np.ndarray | None = None
    ) -> None:
        w = np.asarray(weights, dtype=np.int64)
        if w.ndim != 1 or not w.size or (w < 0).any() or w.sum() < 1:
            raise InvalidArgumentError(f"weights must be non-negative integers, not all zero: {w.tolist()}")
        phi = np.zeros(len(w)) if phases is None else np.asarray(phases, dtype=np.float64)
        if phi.shape != w.shape or (phi < 0).any() or (phi >= 1).any():
            raise InvalidArgumentError("phases must be one number in [0, 1) per source")
        self.weights, self.phases, self.period = w, phi, int(w.sum())
        source = np.repeat(np.arange(len(w)), w)
        rank = np.concatenate([np.arange(x) for x in w.tolist()])
        time = (rank + phi[source]) / w[source]  # in periods: every draw of one period lies in [0, 1)
        order = np.lexsort((source, time))
        self._source = source[order].astype(np.min_scalar_type(len(w) - 1))  # period position → source
        self._rank = rank[order].astype(np.int64)  # period position → that source's draw in the period
        self._at = np.empty(self.period, dtype=np.int64)  # (source, rank) → period position
        self._at[order] = np.arange(self.period)
        self._first = np.concatenate([[0], np.cumsum(w)[:-1]])  # where each source's block starts

    @classmethod
    def from_probabilities(
        cls, probabilities: Sequence[float], seed: int | None = None
    ) -> InterleaveSchedule:
        """The schedule for ``probabilities``; ``seed`` draws the phases (``None``: all zero)."""
        w = weights_of(probabilities)
        phases = None if seed is None else np.random.default_rng([int(seed), 0x5EED]).random(len(w))
        return cls(w, phases)

    def route(self, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(source, j)`` of each draw: draw ``t`` takes the ``j``-th draw of ``source``."""
        q, r = np.divmod(np.asarray(draws, dtype=np.int64), self.period)
        source = self._source[r].astype(np.int64)
        return source, q * self.weights[source] + self._rank[r]

    def route_one(self, draw: int) -> tuple[int, int]:
        """``route`` for one draw, in plain Python (the ``ds[i]`` path)."""
        q, r = divmod(draw, self.period)
        source = int(self._source[r])
        return source, q * int(self.weights[source]) + int(self._rank[r])

    def position_of(self, source: int, j: int) -> int:
        """The draw at which ``source`` takes its ``j``-th draw."""
        w = int(self.weights[source])
        if w == 0:
            raise InvalidArgumentError(f"source {source} has probability 0: it is never drawn")
        q, r = divmod(int(j), w)
        return q * self.period + int(self._at[self._first[source] + r])

    def __getstate__(self) -> dict:
        return {"weights": self.weights, "phases": self.phases}  # the period is rebuilt, not pickled

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["weights"], state["phases"])  # type: ignore[misc]
