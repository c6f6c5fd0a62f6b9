"""A :class:`~sjsonl.data.dataset.JSONLDataset` that is also a ``datasets.Dataset``: for code that checks
types.

TRL's trainers refuse anything but a ``datasets.Dataset`` or ``IterableDataset`` (an ``isinstance`` gate no
set of methods passes), and ``transformers.Trainer`` drops unused columns only from a ``datasets.Dataset``.
:class:`HFDataset` passes those checks and is still sjsonl underneath: records read in place through the
index, no Arrow table, no copy. Every method is :class:`~sjsonl.data.dataset.JSONLDataset`'s (it comes first
in the method order), and every view or transformation of an :class:`HFDataset` is one too. A 🤗 method that
needs an Arrow table (``sort``, ``add_column``, ``save_to_disk`` …) raises ``AttributeError`` naming
:func:`sjsonl.hf.convert.to_hf`, which makes the Arrow copy — never a silently wrong result.

As a map-style dataset it keeps random access, ``len()`` and the seed's semantics, and a ``Trainer`` samples
it exactly as it samples 🤗's ``Dataset`` (same sampler, same seed, same order: same losses).

Example:
    >>> import os, tempfile, datasets
    >>> from sjsonl import JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"q": "a"}\\n{"q": "b"}\\n')
    >>> ds = as_hf(JSONLDataset(path))
    >>> isinstance(ds, datasets.Dataset), isinstance(ds.shuffle(seed=1), datasets.Dataset), ds[1]
    (True, True, {'q': 'b'})
"""

from __future__ import annotations

import copy
from typing import Any

import datasets

from sjsonl.data.dataset import JSONLDataset


class HFDataset(JSONLDataset, datasets.Dataset):
    """A JSONLDataset typed as a ``datasets.Dataset`` (see the module docstring)."""

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes neither class sets: 🤗's Arrow internals (_data, _indices, …).
        raise AttributeError(
            f"{name!r}: an sjsonl dataset reads JSON Lines in place and has no Arrow table, so this 🤗 "
            "feature is not available on it; sjsonl.hf.convert.to_hf(ds) makes an Arrow copy that has it"
        )

    @property
    def cache_files(self) -> list[dict[str, str]]:  # type: ignore[override]
        """No Arrow cache files: the records are read from the data files in place."""
        return []

    def __del__(self) -> None:  # 🤗's closes Arrow tables; there are none
        pass


def as_hf(ds: JSONLDataset) -> HFDataset:
    """``ds`` (a view: no copy) typed as a ``datasets.Dataset``.

    Example:
        >>> import os, tempfile
        >>> from sjsonl import JSONLDataset
        >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
        >>> _ = open(path, "w").write('{"q": "a"}\\n')
        >>> type(as_hf(JSONLDataset(path))).__name__, as_hf(JSONLDataset(path)).format["type"]
        ('HFDataset', None)
    """
    if isinstance(ds, HFDataset):
        return ds
    view = copy.copy(ds)
    view.__class__ = HFDataset
    view.__dict__.update(_info=datasets.DatasetInfo(), _split=None)
    return view  # type: ignore[return-value]
