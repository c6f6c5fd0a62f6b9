"""Batched delivery to MindSpore: each source item is a whole batch, so MindSpore's per-row cost
(≈ 70 µs per row in ``GeneratorDataset`` on this machine) is paid once per batch.

:class:`BatchSource` draws the epoch's order itself — an exact shuffle of the records
(``Permutation(n, seed, epoch)``) or file order — takes this shard's records (``shard_id``,
``shard_id + num_shards``, …: disjoint and together complete), and cuts them into batches of
``batch_size``. Each batch is one vectorised read and one conversion per column:

- a scalar column (string, number, bool, JSON text — see :mod:`sjsonl.mindspore.columns`) becomes a
  1-d array of ``batch_size`` values;
- a list column becomes an array padded to the batch's largest shape (with the column's fill: ``0``,
  ``""``, ``False``, ``NaN``), plus a ``<column>_lengths`` column of int64 giving each row's shape.

It is iterable, so MindSpore neither shuffles nor shards it — the source does both, at record level; each
pass that runs to its end moves to the next epoch's order. Without ``seed=`` (and without
``mindspore.dataset.config.set_seed``) the seed is 0, so every rank draws the same order and the shards
stay disjoint. ``resume_point(steps)`` is where the epoch stands after ``steps`` batches on every shard
(a place in the epoch's order, whatever the layout); ``to_generator_dataset(..., resume_from=point)``
delivers the rest of that epoch at any ``num_shards``/``shard_id``/``batch_size``, and resuming again works
the same (:mod:`sjsonl.sampling.elastic` has the lockstep rule). ``resume_at(epoch, batches_done)`` and
``state_dict()`` / ``load_state_dict()`` resume at the same layout (but MindSpore reads ahead, so the
batches it handed out can exceed the steps taken, and it fixes a dataset's size when it is made: resume
before the ``GeneratorDataset`` is made, as ``resume_from=`` does). One source worker does the reading
(a batch is one vectorised read), whatever ``num_parallel_workers`` says.

Example:
    >>> from sjsonl.mindspore import make_schema
    >>> rows = [{"q": f"r{i}", "ids": list(range(i % 3))} for i in range(5)]
    >>> src = BatchSource(rows, make_schema(rows), batch_size=2)
    >>> src.column_names
    ['q', 'ids', 'ids_lengths']
    >>> q, ids, lengths = next(iter(src))
    >>> q.tolist(), ids.tolist(), lengths.tolist()
    (['r0', 'r1'], [[0], [0]], [[0], [1]])
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from sjsonl.data.views import read_positions
from sjsonl.errors import InvalidArgumentError
from sjsonl.mindspore.columns import _FILL, Schema
from sjsonl.mindspore.context import check_shard, configured_seed
from sjsonl.sampling.distributed import Cursor, check_count, check_state, epoch_order, is_int
from sjsonl.sampling.maps import RangeMap


class BatchSource:
    """Batches of ``data`` (random access) converted by ``schema`` for a ``GeneratorDataset``."""

    def __init__(
        self,
        data: Any,
        schema: Schema,
        batch_size: int,
        *,
        drop_remainder: bool = False,
        shuffle: bool = False,
        seed: int | None = None,
        num_shards: int | None = None,
        shard_id: int | None = None,
    ) -> None:
        if int(batch_size) < 1:
            raise InvalidArgumentError(f"batch_size must be at least 1, got {batch_size}")
        self.data, self.schema, self.batch_size = data, schema, int(batch_size)
        self.drop_remainder, self.shuffle = bool(drop_remainder), bool(shuffle)
        self.seed = seed
        self.step, self.first = check_shard(num_shards, shard_id)
        self.rows = self._rows_after(0)  # this shard's records per epoch
        self._cursor = Cursor()
        self._active = False  # a pass has taken its first batch and not reached its end
        self._begun = False  # a pass has taken its first batch (resume_point refers to the latest)
        self.column_names = batch_column_names(schema)

    @property
    def ds(self) -> Any:
        """The underlying dataset — MindNLP's ``gd.source.ds``."""
        return self.data

    def __len__(self) -> int:
        """Batches the next pass delivers: an epoch's, or after :meth:`resume_at` / :meth:`resume_from`
        what is left of the epoch (MindSpore reads it once, when the ``GeneratorDataset`` is made, and
        checks every epoch against it)."""
        pending = self._cursor.pending
        if pending is None:
            return self._batch_count(self.rows)
        return max(0, self._batch_count(self._rows_after(self._cursor.next_done[0])) - pending[1])

    def _rows_after(self, consumed: int) -> int:
        """This shard's records of an epoch's order after its first ``consumed``."""
        return len(range(consumed + self.first, len(self.data), self.step))

    def _batch_count(self, rows: int) -> int:
        full, rest = divmod(rows, self.batch_size)
        return full + (1 if rest and not self.drop_remainder else 0)

    def _mine(self, epoch: int, consumed: int) -> RangeMap:
        """This shard's records of epoch ``epoch`` after the first ``consumed`` of its order."""
        order = epoch_order(len(self.data), self.shuffle, self._base_seed(), epoch)
        return RangeMap(order, consumed + self.first, len(self.data), self.step)

    def set_epoch(self, epoch: int) -> None:
        """Use epoch ``epoch``'s order from the next pass on."""
        self._cursor.set_epoch(epoch)

    def __iter__(self) -> Iterator[tuple[np.ndarray, ...]]:
        # Lazy: MindSpore calls iter() when it builds the pipeline and may pull a batch to probe shapes;
        # the pass (and a pending resume) starts at the first batch taken, and only a pass that runs to
        # its end moves on to the next epoch.
        return self._batches()

    def _base_seed(self) -> int:
        """``seed=``, else MindSpore's ``config.set_seed`` when it was called, else 0 — never a random
        one: every rank must draw the same order for the shards to be disjoint."""
        if self.seed is not None or not self.shuffle:
            return int(self.seed or 0)
        configured = configured_seed()
        return 0 if configured is None else configured

    def _batches(self) -> Iterator[tuple[np.ndarray, ...]]:
        consumed = self._cursor.next_done[0]  # nonzero after resume_from: the rest of an epoch
        pass_rows = self._rows_after(consumed)
        # held: MindSpore may take a batch to probe shapes and start again; the resume is for the pass it
        # runs, and a pass run to its end moves the epoch on (which drops it)
        start = self._cursor.begin(self._batch_count(pass_rows), hold=True)
        epoch, self._active, self._begun = self._cursor.pass_epoch, True, True
        mine = self._mine(epoch, consumed)
        for b in range(start, self._batch_count(pass_rows)):
            lo = b * self.batch_size
            positions = np.arange(lo, min(lo + self.batch_size, pass_rows), dtype=np.int64)
            rows = [self.schema.convert(r) for r in read_positions(self.data, mine.take(positions))]
            self._cursor.yielded += 1
            yield batch_columns(self.schema, rows)
        self._active = False
        self._cursor.set_epoch(epoch + 1)  # a whole pass: the next one reshuffles

    def state_dict(self) -> dict[str, Any]:
        """``{"epoch", "yielded"}`` plus the layout, checked on load. ``yielded`` counts the batches handed
        to MindSpore, which reads ahead: for a resume at the step your loop reached, use
        :meth:`resume_at` with that step instead."""
        if self._active:
            state = self._cursor.state_dict(**self._identity())
            consumed = self._cursor.consumed
        else:  # between passes: where the next one will start (a pending resume, else batch 0 of its epoch)
            epoch, start = self._cursor.pending or (self._cursor.epoch, 0)
            state = {"epoch": epoch, "yielded": start, **self._identity()}
            consumed = self._cursor.next_done[0]
        # a pass that continues an epoch begun at another layout (resume_from) says where it began
        return {**state, "consumed": consumed} if consumed else state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the saved epoch after its last yielded batch on the next pass — or, for an epoch saved
        complete, start the one after it."""
        state = dict(state) if isinstance(state, dict) else state
        consumed = check_count(
            "consumed", state.pop("consumed", 0) if isinstance(state, dict) else 0, len(self.data)
        )
        length = self._batch_count(self._rows_after(consumed))
        epoch, yielded = check_state(state, length, self._identity())
        if yielded >= length:
            self._cursor.set_epoch(epoch + 1)  # a fresh next epoch
            self._cursor.resume_at(epoch + 1, 0)
            return
        self._cursor.resume_at(epoch, yielded, consumed)

    def resume_at(self, epoch: int, batches_done: int) -> None:
        """Start the next pass at batch ``batches_done`` of epoch ``epoch`` (what a training loop that
        counts its steps knows), whatever MindSpore had read ahead."""
        self.load_state_dict({"epoch": int(epoch), "yielded": int(batches_done), **self._identity()})

    def resume_point(self, batches_done: int) -> dict[str, Any]:
        """Where the epoch of the current (or last) pass stands once every shard has taken
        ``batches_done`` batches of it — a place in the epoch's order, not in this layout, so that
        :meth:`resume_from` continues it at another ``num_shards``, ``shard_id`` or ``batch_size``.

        Shards move in lockstep, so after ``b`` batches the first ``b × batch_size × num_shards``
        records of the pass are done (all of it, near its end). ``batches_done`` counts the batches of the
        current pass: after :meth:`resume_from`, from the resumed pass's first batch; otherwise from the
        epoch's. Save the point with your checkpoint."""
        if not is_int(batches_done) or batches_done < 0:
            raise InvalidArgumentError(f"batches_done must be a non-negative integer, got {batches_done!r}")
        cursor = self._cursor
        if self._begun:  # the latest pass MindSpore began (it may have read it to its end already)
            epoch, consumed = cursor.pass_epoch, cursor.consumed
        else:  # none yet: the pass the next iteration will make
            epoch, consumed = (cursor.pending or (cursor.epoch, 0))[0], cursor.next_done[0]
        n = len(self.data)
        done = consumed + min(int(batches_done) * self.batch_size * self.step, n - consumed)
        return {"epoch": epoch, "records_done": done, **self._order_identity()}

    def resume_from(self, point: dict[str, Any]) -> None:
        """Make the next pass the rest of the point's epoch — the records no shard had taken — split
        across this source's shards and cut into its batches; the pass after it is the next epoch.
        Resuming again works the same: take a new :meth:`resume_point` during the resumed pass.
        Another dataset, ``shuffle`` or seed is refused naming it."""
        if not isinstance(point, dict):
            raise InvalidArgumentError(f"cannot resume: a resume point is a dict, not {type(point).__name__}")
        saved = {**point, "yielded": 0, "epoch": point.get("epoch")}
        done = saved.pop("records_done", None)
        n = len(self.data)
        epoch, _ = check_state(saved, 0, self._order_identity())
        if not is_int(done) or not 0 <= done <= n:
            raise InvalidArgumentError(
                f"cannot resume: the point has records_done={done!r}; expected an integer in [0, {n}]"
            )
        self._cursor.resume_at(epoch, 0, int(done))  # the epoch done: an empty pass, then the next

    def _order_identity(self) -> dict[str, Any]:
        return {"n": len(self.data), "shuffle": self.shuffle, "seed": self._base_seed()}

    def _identity(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "batch_size": self.batch_size,
            "shuffle": self.shuffle,
            "seed": self._base_seed(),
            "num_shards": self.step,
            "shard_id": self.first,
        }


def batch_column_names(schema: Schema) -> list[str]:
    """The columns of a batch: the schema's, then ``<column>_lengths`` for each padded (list) column."""
    return list(schema.column_names) + [f"{c.name}_lengths" for c in schema.columns if c.ndim > 0]


def batch_columns(schema: Schema, rows: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    """Converted ``rows`` as one batch: a stacked array per scalar column; per list column an array padded
    to the batch's largest shape (with the column's fill), and at the end each list column's shapes."""
    out, lengths = [], []
    for k, column in enumerate(schema.columns):
        values = [r[k] for r in rows]
        if column.ndim == 0:
            out.append(np.stack(values))
            continue
        shapes = np.array([v.shape for v in values], dtype=np.int64)
        dtype = np.result_type(*values)  # strings: the longest one's width
        batch = np.full((len(values), *shapes.max(axis=0)), _FILL[column.kind], dtype=dtype)
        for i, v in enumerate(values):
            where: tuple[int | slice, ...] = (i, *[slice(0, s) for s in v.shape])
            batch[where] = v
        out.append(batch)
        lengths.append(shapes)
    return (*out, *lengths)
