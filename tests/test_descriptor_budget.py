"""Thousands of files under a small ``ulimit -n``: a bounded set of descriptors, reopened on demand and
pinned to the same version (sjsonl.storage.descriptors)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from sjsonl import JSONLDataset, StaleDataError
from sjsonl.storage import LocalFile
from sjsonl.storage.descriptors import BUDGET, DescriptorBudget

_SCRIPT = textwrap.dedent(
    """
    import json, os, pickle, random, resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    import sjsonl
    root, n_files, mmap = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    paths = [os.path.join(root, f"part-{k:04d}.jsonl") for k in range(n_files)]
    open_fds = lambda: len(os.listdir("/proc/self/fd"))
    ds = sjsonl.JSONLDataset(paths, mmap=mmap)
    peak = open_fds()
    rng = random.Random(0)
    wrong = 0
    for _ in range(3000):
        i = rng.randrange(len(ds))
        wrong += ds[i] != {"file": i // 5, "j": i % 5}
        peak = max(peak, open_fds())
    for i, rec in enumerate(ds.shuffle(seed=1).take(2000)):
        peak = max(peak, open_fds())
    copy = pickle.loads(pickle.dumps(ds))
    wrong += copy[:] != [{"file": i // 5, "j": i % 5} for i in range(len(ds))]
    peak = max(peak, open_fds())
    print(json.dumps({"n": len(ds), "wrong": wrong, "peak_fds": peak}))
    """
)


@pytest.mark.parametrize("mmap", [True, False], ids=["mapped", "pread"])
def test_a_thousand_files_under_ulimit_n_256(tmp_path, mmap):
    n_files = 1000
    for k in range(n_files):
        (tmp_path / f"part-{k:04d}.jsonl").write_text(
            "".join(json.dumps({"file": k, "j": j}) + "\n" for j in range(5))
        )
    run = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path), str(n_files), "1" if mmap else "0"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out == {"n": 5 * n_files, "wrong": 0, "peak_fds": out["peak_fds"]}
    assert out["peak_fds"] < 256


def test_the_budget_takes_the_least_recently_used_descriptor_and_the_file_reopens(tmp_path, monkeypatch):
    monkeypatch.setattr(BUDGET, "_limit", 2)
    paths = []
    for k in range(4):
        paths.append(tmp_path / f"{k}.jsonl")
        paths[-1].write_text(f'{{"k": {k}}}\n')
    files = [LocalFile(p) for p in paths]
    assert [f._fd is not None for f in files] == [False, False, True, True]
    assert files[0].read(0, 8) == b'{"k": 0}'  # reopened: now the newest, the oldest open one gives way
    assert [f._fd is not None for f in files] == [True, False, False, True]
    with files[1].holding():  # held: the budget never takes a descriptor in use
        for f in files[2:]:
            f.read(0, 1)
        assert files[1]._fd is not None


def test_a_file_replaced_after_its_descriptor_was_taken_is_stale_not_misread(tmp_path, monkeypatch):
    monkeypatch.setattr(BUDGET, "_limit", 1)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"v": 1}\n')
    b.write_text('{"v": 2}\n')
    ds = JSONLDataset([a, b], mmap=False)
    assert ds[:] == [{"v": 1}, {"v": 2}]  # reading b took a's descriptor
    os.replace(tmp_path / "a.jsonl", tmp_path / "old.jsonl")
    a.write_text('{"v": 9}\n')
    with pytest.raises(StaleDataError, match="replaced"):
        ds[0]


def test_default_limit_follows_the_soft_rlimit():
    assert DescriptorBudget(limit=5).limit == 5
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert DescriptorBudget().limit == max(8, min(4096, soft // 4))


def test_a_close_from_a_finalizer_inside_the_budgets_own_section_neither_deadlocks_nor_mutates_it():
    """A garbage collection can start at any allocation — inside the budget's critical section too — and
    finalize a LocalFile whose __del__ calls ``closed()`` on the same thread. With a plain lock that hung a
    test worker for good (py-spy: opened -> LocalFile.__del__ -> closed, waiting on its own lock). The lock
    is re-entrant now, and such a close is applied when the section ends."""
    import threading

    from sjsonl.storage.descriptors import DescriptorBudget

    class Held:
        def give_up_descriptor(self) -> bool:
            return True

    budget, held = DescriptorBudget(limit=4), Held()
    budget.opened(held)
    result: list[int] = []

    def inside() -> None:
        with budget._section():  # where a collection inside opened() or used() would run the finalizer
            budget.closed(held)
            result.append(len(budget))  # not yet: the section's own view of the dict does not change
        result.append(len(budget))

    worker = threading.Thread(target=inside, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "closed() deadlocked inside the budget's own section"
    assert result == [1, 0]
