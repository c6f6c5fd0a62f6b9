"""The row functions a dataset applies to every record it returns, in order: a :class:`Pipeline`.

A dataset reads records (bytes → JSON), then runs its pipeline over them. Each stage maps a list of rows to a
list of the **same length** — that is what keeps a transformed dataset random-access, with the length of its
source — and is told the rows' *base indices* (their places in the underlying files), which
``map(with_indices=True)`` needs. Rows requested together (``ds[list]``, a DataLoader batch, a block of an
iteration) go through a stage together, so batched 🤗 functions get real batches.

The last stage may be an *output* stage (``with_format`` / 🤗 ``with_transform``): a later ``with_format``
replaces it, as in 🤗, where format and transform share one slot.

Example:
    >>> import numpy as np
    >>> p = Pipeline().then(RecordFn(lambda r: r + 1)).then(RecordFn(lambda r: r * 10))
    >>> p.apply([1, 2], np.array([0, 1])), p(5)
    ([20, 30], 60)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import numpy as np

#: Rows per block when a pipeline runs over an iteration (raised to a batched stage's batch size).
STREAM_BLOCK = 64


class Stage(Protocol):
    def apply(self, rows: list[Any], base: np.ndarray | None) -> list[Any]: ...


class RecordFn:
    """A per-record function (the ``record_transform=`` of :class:`~sjsonl.data.dataset.JSONLDataset`).

    Example:
        >>> RecordFn(str).apply([1, 2], None)
        ['1', '2']
    """

    batch_size = 1

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def apply(self, rows: list[Any], base: np.ndarray | None) -> list[Any]:
        fn = self.fn
        return [fn(r) for r in rows]


class Pipeline:
    """Stages applied in order, then an optional output stage (format or 🤗 batch transform).

    Immutable: :meth:`then` and :meth:`with_output` return new pipelines, so views share them safely.

    Example:
        >>> p = Pipeline([RecordFn(abs)])
        >>> p.with_output(RecordFn(str)).apply([-1], None), p.apply([-1], None)
        (['1'], [1])
    """

    def __init__(self, stages: Iterable[Any] = (), output: Any = None) -> None:
        self.stages = tuple(stages)
        self.output = output

    @classmethod
    def of(cls, transform: Callable[[Any], Any] | Pipeline | None) -> Pipeline:
        """The pipeline of a dataset's ``_transform`` (a per-record function, a pipeline, or None).

        Example:
            >>> len(Pipeline.of(None).stages), len(Pipeline.of(abs).stages)
            (0, 1)
        """
        if isinstance(transform, Pipeline):
            return transform
        return cls([] if transform is None else [RecordFn(transform)])

    def then(self, stage: Any) -> Pipeline:
        """This pipeline with ``stage`` added before the output stage."""
        return Pipeline((*self.stages, stage), self.output)

    def with_output(self, output: Any) -> Pipeline:
        """This pipeline with its output stage replaced (``None`` removes it)."""
        return Pipeline(self.stages, output)

    @property
    def all_stages(self) -> tuple[Any, ...]:
        return self.stages if self.output is None else (*self.stages, self.output)

    @property
    def block(self) -> int:
        """Rows to gather before running the pipeline over an iteration."""
        return max([STREAM_BLOCK] + [s.batch_size or 0 for s in self.all_stages])

    def apply(self, rows: list[Any], base: np.ndarray | None) -> list[Any]:
        for stage in self.all_stages:
            rows = stage.apply(rows, base)
        return rows

    def __call__(self, row: Any) -> Any:
        return self.apply([row], None)[0]

    def stream(self, rows: Iterator[Any], base: Iterator[int]) -> Iterator[Any]:
        """Run over an iteration in blocks (lazily: a block is read only when the previous one is used)."""
        block = self.block
        while True:
            chunk = [r for _, r in zip(range(block), rows)]
            if not chunk:
                return
            idx = np.fromiter((b for _, b in zip(range(len(chunk)), base)), dtype=np.int64, count=len(chunk))
            yield from self.apply(chunk, idx)
