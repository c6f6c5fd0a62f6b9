"""sjsonl.runtime.forks: a forked child freezes what it inherited, still collects what it makes, and the
environment variable turns it off."""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable

import pytest

import sjsonl  # noqa: F401  (registers the hook)
from sjsonl.runtime import forks


def _in_child(fn: Callable[[], object]) -> object:
    """``fn()`` run in a forked child, its JSON result read back through a pipe."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.write(write, json.dumps(fn()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        out = f.read()
    os.waitpid(pid, 0)
    return json.loads(out)


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_child_freezes_what_it_inherited_and_collects_what_it_makes() -> None:
    inherited = [_Cycle() for _ in range(100)]  # (alive in the parent: in the child's frozen heap)

    def child() -> dict:
        frozen = gc.get_freeze_count()
        for _ in range(50):
            _Cycle()  # garbage cycles made in the child
        return {"frozen": frozen, "collected": gc.collect()}

    got = _in_child(child)
    assert isinstance(got, dict)
    assert got["frozen"] >= len(inherited)
    assert got["collected"] >= 50
    assert gc.get_freeze_count() == 0  # the parent is untouched


@pytest.mark.parametrize("value", ["0", "off"])
def test_the_environment_variable_turns_it_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(forks.ENV, value)
    assert not forks.freezes_inherited()
    assert _in_child(gc.get_freeze_count) == 0


def test_a_dataloader_worker_starts_frozen() -> None:
    torch = pytest.importorskip("torch")

    class FreezeCount(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 2

        def __getitem__(self, i: int) -> int:
            return gc.get_freeze_count()

    loader = torch.utils.data.DataLoader(
        FreezeCount(), batch_size=None, num_workers=1, multiprocessing_context="fork"
    )
    assert all(int(n) > 0 for n in loader)
