"""A real 🤗 ``datasets.IterableDataset`` backed by sjsonl — no Arrow copy — for code that checks types
and trains from iterables: ``len()``, exact shuffles reseeded by ``set_epoch``, record-level sharding.

``JSONLDataset.to_iterable_dataset()`` returns a :class:`JSONLIterableDataset`: an instance of
``datasets.IterableDataset`` (so TRL's ``isinstance`` gate and accelerate's 🤗 code paths take it), whose
examples come from the :class:`~sjsonl.data.dataset.JSONLDataset` through the index. Unlike 🤗's own iterables
it

- has ``len()`` (so ``Trainer`` computes its steps per epoch without ``max_steps``);
- ``shuffle(seed=)`` is sjsonl's exact permutation (every record once per epoch, O(1) memory), not a buffer,
  and ``set_epoch(e)`` — which ``Trainer``/accelerate call every epoch — makes epoch ``e``'s order exactly
  ``ds.shuffle(seed, epoch=e)``;
- ``shard(n, i)`` (what accelerate calls with the process count and rank) splits the records of each
  epoch's order, so processes are disjoint and complete every epoch (sizes differ by at most one);
- ``n_shards`` (default up to 64) are slices of the order that DataLoader workers split among them;
- ``map``, ``filter``, ``remove_columns``, ``rename_column(s)``, ``select_columns``, ``with_format`` run on
  the JSONLDataset (lazy map, sub-index filter) and keep all of the above. Other 🤗 methods work as 🤗's,
  on a plain ``datasets.IterableDataset`` (no ``len``, and ``set_epoch`` no longer reorders).

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write("".join(f'{{"n": {i}}}\\n' for i in range(6)))
    >>> it = JSONLDataset(path).to_iterable_dataset().shuffle(seed=0)
    >>> import datasets; isinstance(it, datasets.IterableDataset), len(it)
    (True, 6)
    >>> it.set_epoch(1); [r["n"] for r in it] == [r["n"] for r in JSONLDataset(path).shuffle(0, epoch=1)]
    True
    >>> sorted(r["n"] for k in range(2) for r in it.shard(2, k))
    [0, 1, 2, 3, 4, 5]
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import datasets
import numpy as np
from datasets.iterable_dataset import _BaseExamplesIterable

from sjsonl.data.transforms.protocol import RecordDataset
from sjsonl.errors import InvalidArgumentError
from sjsonl.sampling.distributed import check_count, shard_block

#: Virtual shards (slices of the order) when ``num_shards`` is not given, capped at the record count.
DEFAULT_SHARDS = 64


class SJSONLExamplesIterable(_BaseExamplesIterable):
    """🤗's example source over a JSONLDataset: ``(seed, epoch)`` order, record-level shards, then the
    virtual shards this copy holds."""

    def __init__(
        self,
        ds: RecordDataset,
        seed: int | None = None,
        epoch: int = 0,
        shards: tuple[tuple[int, int, bool], ...] = (),
        num_shards: int | None = None,
        picks: tuple[int, ...] | None = None,
    ) -> None:
        super().__init__()
        self.ds, self.seed, self.epoch, self.shards = ds, seed, epoch, shards
        self.total = max(1, min(len(ds), DEFAULT_SHARDS if num_shards is None else num_shards))
        self.picks = picks

    def replace(self, **changes: Any) -> SJSONLExamplesIterable:
        new = copy.copy(self)
        new.__dict__.update(changes)
        return new

    def view(self) -> RecordDataset:
        """This epoch's records, in order, for the record-level shards taken."""
        v = self.ds if self.seed is None else self.ds.shuffle(self.seed, epoch=self.epoch)
        for k, i, contiguous in self.shards:
            v = v.shard(k, i, contiguous)
        return v

    def positions(self, n: int) -> np.ndarray:
        if self.picks is None:
            return np.arange(n, dtype=np.int64)
        edges = np.linspace(0, n, self.total + 1).astype(np.int64)
        return np.concatenate(
            [np.arange(edges[j], edges[j + 1]) for j in self.picks] or [np.zeros(0, np.int64)]
        )

    def __len__(self) -> int:
        return len(self.positions(len(self.view())))

    def layout(self) -> dict[str, Any]:
        """What a saved position counts in: the records, the seed, the record-level shards taken and the
        virtual shard count (the DataLoader worker split is 🤗's, and torchdata refuses another one)."""
        seed = None if self.seed is None else int(self.seed)
        shards = [[int(k), int(i), bool(c)] for k, i, c in self.shards]
        return {"n": len(self.ds), "seed": seed, "shards": shards, "num_shards": self.total}

    def _init_state_dict(self) -> dict:
        self._state_dict: dict[str, Any] = {"position": 0, "type": type(self).__name__, **self.layout()}
        return self._state_dict

    def check_state(self, state: Any, length: int) -> int:
        """The position of a saved state, checked as :func:`~sjsonl.sampling.check_state` checks the
        samplers' (a one-line :class:`~sjsonl.InvalidArgumentError` naming the key): ``position`` an
        integer in ``[0, length]``, the layout the same as this one's. A state saved before the layout
        was recorded (``position`` and ``type`` only) loads as before."""
        if not isinstance(state, dict):
            raise InvalidArgumentError(f"cannot resume: a saved state is a dict, not {type(state).__name__}")
        layout = self.layout()
        expected = (
            ["position", "type", *layout] if set(state) - {"position", "type"} else ["position", "type"]
        )
        missing = [k for k in expected if k not in state]
        if missing:
            raise InvalidArgumentError(
                f"cannot resume: saved state has no {missing[0]!r} (expected the keys {', '.join(expected)})"
            )
        unknown = [k for k in state if k not in expected]
        if unknown:
            raise InvalidArgumentError(
                f"cannot resume: saved state has an unknown key {unknown[0]!r} "
                f"(expected only {', '.join(expected)})"
            )
        mine = {"type": type(self).__name__, **layout}
        for key in expected[1:]:
            got = (
                [list(s) for s in state[key]]
                if key == "shards" and isinstance(state[key], list)
                else state[key]
            )
            if got != mine[key] or isinstance(got, bool) != isinstance(mine[key], bool):
                raise InvalidArgumentError(
                    f"cannot resume: saved state has {key}={state[key]!r} "
                    f"but this object has {key}={mine[key]!r}"
                )
        return check_count("position", state["position"], upper=length)

    def load_state_dict(self, state_dict: dict) -> dict:
        position = self.check_state(state_dict, len(self))
        self._init_state_dict()
        self._state_dict["position"] = position
        return self._state_dict

    def __iter__(self) -> Iterator[tuple[str, dict]]:
        view = self.view()
        pos = self.positions(len(view))
        state = self._state_dict
        start = state["position"] if state else 0
        for k, rec in enumerate(view.iter_positions(pos[start:]), start):
            if state:
                state["position"] = k + 1
            yield str(k), rec if type(rec) is dict else {"value": rec}

    def shuffle_data_sources(self, generator: np.random.Generator) -> SJSONLExamplesIterable:
        return self  # the order is (seed, epoch)'s permutation; JSONLIterableDataset passes the epoch

    @property
    def num_shards(self) -> int:
        return self.total if self.picks is None else len(self.picks)

    def shard_data_sources(
        self, num_shards: int, index: int, contiguous: bool = True
    ) -> SJSONLExamplesIterable:
        mine = list(range(self.total)) if self.picks is None else list(self.picks)
        if contiguous:
            lo, hi = shard_block(len(mine), num_shards, index)
            chosen = mine[lo:hi]
        else:
            chosen = mine[index::num_shards]
        return self.replace(picks=tuple(chosen))

    def reshard_data_sources(self) -> SJSONLExamplesIterable:
        return self


class JSONLIterableDataset(datasets.IterableDataset):
    """A ``datasets.IterableDataset`` over a JSONLDataset (see the module docstring)."""

    @property
    def source(self) -> SJSONLExamplesIterable:
        return self._ex_iterable  # type: ignore[return-value]

    def _new(self, **changes: Any) -> JSONLIterableDataset:
        out = JSONLIterableDataset(self.source.replace(**changes), info=self._info.copy(), split=self._split)
        out.set_epoch(self.epoch)
        return out

    def _on(self, ds: RecordDataset) -> JSONLIterableDataset:
        return self._new(ds=ds)

    def _prepare_ex_iterable_for_iteration(self, *args: Any, **kwargs: Any):  # type: ignore[override]
        # 🤗 reseeds shuffles by the epoch through shuffle_data_sources; ours is keyed by the epoch itself.
        if self.source.epoch != self.epoch:
            self._ex_iterable = self.source.replace(epoch=self.epoch)
        return super()._prepare_ex_iterable_for_iteration(*args, **kwargs)

    def __len__(self) -> int:
        return len(self.source)

    def load_state_dict(self, state_dict: dict) -> None:
        """🤗's ``load_state_dict`` (the next pass of the saved epoch continues after the saved example; a
        state of another epoch is not applied), with the state checked here and now: a state that is not
        what ``state_dict()`` writes for this dataset, seed and shards raises a one-line
        :class:`~sjsonl.InvalidArgumentError` naming the key, and the dataset is left as it was."""
        if not isinstance(state_dict, dict):
            raise InvalidArgumentError(
                f"cannot resume: a saved state is a dict, not {type(state_dict).__name__}"
            )
        expected = ["examples_iterable", "epoch"]
        missing = [k for k in expected if k not in state_dict]
        unknown = [k for k in state_dict if k not in expected]
        if missing:
            raise InvalidArgumentError(
                f"cannot resume: saved state has no {missing[0]!r} (expected the keys {', '.join(expected)})"
            )
        if unknown:
            raise InvalidArgumentError(
                f"cannot resume: saved state has an unknown key {unknown[0]!r} "
                f"(expected only {', '.join(expected)})"
            )
        check_count("epoch", state_dict["epoch"])
        # every DataLoader worker's share is part of this length: the exact bound is checked at iteration
        self.source.check_state(state_dict["examples_iterable"], len(self.source.view()))
        super().load_state_dict(state_dict)

    @property
    def column_names(self) -> list[str]:  # type: ignore[override]
        # features stay None (as 🤗's after a map): set, 🤗 would re-encode every example through them
        return self.source.ds.column_names

    def shuffle(  # type: ignore[override]
        self, seed: int | None = None, generator: np.random.Generator | None = None, **_: Any
    ) -> JSONLIterableDataset:
        """Exact shuffle keyed by ``seed`` (a ``generator`` gives one); buffer options are not needed."""
        if seed is None:
            seed = int((generator or np.random.default_rng()).integers(2**62))
        return self._new(seed=seed)

    def shard(self, num_shards: int, index: int, contiguous: bool = True) -> JSONLIterableDataset:  # type: ignore[override]
        """Shard ``index`` of ``num_shards`` of every epoch's records (as 🤗 ``Dataset.shard``)."""
        if num_shards < 1 or not 0 <= index < num_shards:
            raise InvalidArgumentError(f"shard index {index} must lie in [0, {num_shards})")
        return self._new(shards=(*self.source.shards, (num_shards, index, contiguous)))

    def map(self, function: Callable | None = None, **kwargs: Any) -> JSONLIterableDataset:  # type: ignore[override]
        return self._on(self.source.ds.map(function, **kwargs))

    def filter(self, function: Callable | None = None, **kwargs: Any) -> JSONLIterableDataset:  # type: ignore[override]
        return self._on(self.source.ds.filter(function, **kwargs))

    def remove_columns(self, column_names: Any) -> JSONLIterableDataset:  # type: ignore[override]
        return self._on(self.source.ds.remove_columns(column_names))

    def rename_column(self, original_column_name: str, new_column_name: str) -> JSONLIterableDataset:  # type: ignore[override]
        return self._on(self.source.ds.rename_column(original_column_name, new_column_name))

    def rename_columns(self, column_mapping: dict[str, str]) -> JSONLIterableDataset:  # type: ignore[override]
        return self._on(self.source.ds.rename_columns(column_mapping))

    def select_columns(self, column_names: Any) -> JSONLIterableDataset:  # type: ignore[override]
        return self._on(self.source.ds.select_columns(column_names))

    def with_format(self, type: str | None = None, **kwargs: Any) -> JSONLIterableDataset:  # type: ignore[override]
        return self._on(self.source.ds.with_format(type, **kwargs))


def to_iterable_dataset(ds: RecordDataset, num_shards: int | None = None) -> JSONLIterableDataset:
    """``ds`` as a :class:`JSONLIterableDataset` in file order (``.shuffle(seed=)`` for training).

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write('{"a": 1}\\n[2]\\n')
        >>> list(to_iterable_dataset(JSONLDataset(path))), to_iterable_dataset(JSONLDataset(path), 1).n_shards
        ([{'a': 1}, {'value': [2]}], 1)
    """
    return JSONLIterableDataset(SJSONLExamplesIterable(ds, num_shards=num_shards))
