"""sjsonl.runtime.forks: a DataLoader worker freezes what it inherited and still collects what it makes; a
plain fork is left alone; the environment variable turns it off."""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable

import numpy as np
import pytest

import sjsonl  # noqa: F401  (registers the hook)
from sjsonl.runtime import forks

torch = pytest.importorskip("torch")  # (the torch extra: make test installs it)


class _Cycle:
    def __init__(self) -> None:
        self.me = self


class _InWorker(torch.utils.data.Dataset):
    """Two items, each what ``probe()`` returns inside a DataLoader worker."""

    def __init__(self, probe: Callable[[], int]) -> None:
        self.probe = probe

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> int:
        return self.probe()


def _in_worker(probe: Callable[[], int]) -> list[int]:
    loader = torch.utils.data.DataLoader(
        _InWorker(probe), batch_size=None, num_workers=1, multiprocessing_context="fork"
    )
    got = [int(n) for n in loader]
    assert len(got) == 2
    return got


def _collects_its_own() -> int:
    for _ in range(50):
        _Cycle()  # garbage cycles made in the worker
    return gc.collect()


def test_a_dataloader_worker_freezes_what_it_inherited_and_collects_what_it_makes() -> None:
    inherited = [_Cycle() for _ in range(100)]  # (alive in the parent: in the worker's frozen heap)
    assert all(n >= len(inherited) for n in _in_worker(gc.get_freeze_count))
    assert all(n >= 50 for n in _in_worker(_collects_its_own))
    assert gc.get_freeze_count() == 0  # the parent is untouched


def test_a_plain_fork_is_left_alone() -> None:
    """A fork that is not a data loader's (a process pool, a prefork server) keeps its collector as it was."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.write(write, json.dumps(gc.get_freeze_count()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        out = f.read()
    os.waitpid(pid, 0)
    assert json.loads(out) == 0


@pytest.mark.parametrize("value", ["0", "off"])
def test_the_environment_variable_turns_it_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(forks.ENV, value)
    assert not forks.freezes_inherited()
    assert _in_worker(gc.get_freeze_count) == [0, 0]


def test_a_mindspore_worker_freezes_what_it_inherited() -> None:
    """MindSpore's Python multiprocessing workers (python_multiprocessing=True) are forked from
    mindspore/dataset/: frozen as well."""
    msd = pytest.importorskip("mindspore.dataset")  # (the mindspore extra: make test installs it)

    class FreezeCount:
        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> tuple:
            return (np.array(gc.get_freeze_count()),)

    ds = msd.GeneratorDataset(
        FreezeCount(), ["n"], shuffle=False, num_parallel_workers=2, python_multiprocessing=True
    )
    got = [int(n) for (n,) in ds.create_tuple_iterator(output_numpy=True, num_epochs=1)]
    assert len(got) == 4 and all(n > 0 for n in got)
