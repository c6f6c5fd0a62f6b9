"""sjsonl.runtime.parallel: the process pool behind every internal parallel pass (see also
test_user_scripts.py)."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import warnings
from pathlib import Path

import pytest

from sjsonl import JSONLDataset
from sjsonl.records import chunks, fast_types
from sjsonl.records import schema as schema_mod
from sjsonl.runtime import parallel
from sjsonl.runtime.parallel import ProcessPool, ShippingError, WorkerError, dumps, map_in_order

SCALE = 3


def _fail_on(bad: int, x: int) -> int:
    if x == bad:
        raise ValueError(f"item {x} is bad")
    return x * 10


def _pid_and_main(_: object = None) -> tuple[int, str | None]:
    main = sys.modules["__main__"]
    return os.getpid(), getattr(main, "__file__", None)


def _no_pool(*args, **kwargs):
    raise AssertionError("a pool was started")


def test_workers_are_fresh_interpreters_that_never_import_main() -> None:
    with ProcessPool(2) as pool:
        answers = [pool.submit(_pid_and_main).result() for _ in range(4)]
    assert all(pid != os.getpid() for pid, _ in answers)
    assert {main for _, main in answers} == {None}  # `python -c` bootstrap: no script was run


def test_functions_travel_by_value_with_their_globals_closures_and_recursion() -> None:
    offset = 4

    def fact(n: int) -> int:  # a local function that calls itself through its closure
        return 1 if n <= 1 else n * fact(n - 1)

    with ProcessPool(1) as pool:
        assert pool.submit(lambda x: x * SCALE + offset, 10).result() == 34
        assert pool.submit(fact, 5).result() == 120
        assert pool.submit(lambda xs: [json.dumps(x) for x in xs], [1, "a"]).result() == ["1", '"a"']


def test_a_class_of_the_main_script_cannot_travel_and_says_why() -> None:
    class Keep:
        """A class as a user's script defines it (its module is set to __main__ below)."""

    Keep.__module__ = "__main__"  # as a class defined in a user's script is
    with pytest.raises(ShippingError, match=r"class .*Keep is defined in __main__"):
        dumps(Keep())
    assert pickle.loads(dumps(SCALE)) == SCALE


def test_results_in_order_and_a_task_error_raised_with_the_workers_traceback() -> None:
    assert list(map_in_order(_fail_on, [(-1, x) for x in range(40)], 2)) == [x * 10 for x in range(40)]
    with ProcessPool(1) as pool, pytest.raises(ValueError, match="item 3 is bad") as caught:
        pool.submit(_fail_on, 3, 3).result()
    assert "_fail_on" in str(caught.value.__cause__)  # the worker's traceback, as its cause
    with pytest.raises(ValueError, match="item 7 is bad"):
        list(map_in_order(_fail_on, [(7, x) for x in range(40)], 2))


def test_a_task_printing_does_not_disturb_the_replies() -> None:
    with ProcessPool(1) as pool:
        assert pool.submit(print, "x" * 100_000).result() is None
        assert pool.submit(abs, -5).result() == 5


@pytest.mark.parametrize("how", ["exit", "signal"])
def test_a_dying_worker_is_an_error_not_a_hang(how: str) -> None:
    with ProcessPool(1) as pool:
        if how == "exit":
            task = pool.submit(os._exit, 3)
        else:  # killed from outside while idle between tasks
            assert pool.submit(abs, -1).result() == 1
            os.kill(pool._workers[0].proc.pid, signal.SIGKILL)
            task = pool.submit(abs, -2)
        with pytest.raises(WorkerError, match="died while running a task"):
            task.result()


def test_workers_that_cannot_start_leave_the_work_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "_command", lambda: [sys.executable, "-c", "raise SystemExit(3)"])
    failed = threading.Event()
    wait_ready = parallel._Worker.wait_ready

    def noted(self) -> None:
        try:
            wait_ready(self)
        finally:
            failed.set()

    def pow_after_the_failure(a: int, b: int) -> int:  # the work outlasts the workers' failed start
        assert failed.wait(60)
        return a**b

    monkeypatch.setattr(parallel._Worker, "wait_ready", noted)
    with pytest.warns(RuntimeWarning, match="could not start"):
        got = list(map_in_order(pow_after_the_failure, [(2, k) for k in range(10)], 3))
    assert got == [2**k for k in range(10)]


def test_no_process_to_be_had_leaves_the_work_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "_command", lambda: ["/no/such/python"])
    with pytest.warns(RuntimeWarning, match="cannot start a worker process"):
        assert list(map_in_order(pow, [(3, k) for k in range(5)], 2)) == [3**k for k in range(5)]


class _NeedsTwo(Exception):
    def __init__(self, a: str, b: str) -> None:  # pickles, but cannot be rebuilt from its one message
        super().__init__(a + b)


def _raise_needs_two() -> None:
    raise _NeedsTwo("a", "b")


def test_a_reply_that_cannot_be_read_is_named() -> None:
    with ProcessPool(1) as pool, pytest.raises(WorkerError, match="reply cannot be read"):
        pool.submit(_raise_needs_two).result()


def test_an_abandoned_pass_ends_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    pools: list[ProcessPool] = []

    class Recorded(ProcessPool):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            pools.append(self)

    monkeypatch.setattr(parallel, "ProcessPool", Recorded)
    results = map_in_order(_fail_on, [(-1, x) for x in range(1000)], 3)
    assert next(results) == 0
    results.close()
    assert [w.proc.returncode is not None for w in pools[0]._workers] == [True, True]  # ended and reaped


def test_one_worker_runs_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "ProcessPool", _no_pool)
    assert list(map_in_order(divmod, [(7, 2), (9, 4)], 1)) == [(3, 1), (2, 1)]
    assert list(map_in_order(divmod, [(7, 2)], 4)) == [(3, 1)]


def _in_daemon(out: multiprocessing.Queue) -> None:
    parallel.ProcessPool = _no_pool  # type: ignore[misc]  (this forked child only)
    out.put((parallel.pool_allowed(), list(map_in_order(divmod, [(7, 2), (9, 4)], 2))))


def test_a_daemonic_process_runs_in_process() -> None:
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_in_daemon, args=(out,), daemon=True)
    child.start()
    allowed, results = out.get(timeout=60)
    child.join(60)
    assert (allowed, results) == (False, [(3, 1), (2, 1)])


def test_the_pools_own_workers_never_nest_a_pool() -> None:
    with ProcessPool(1) as pool:
        assert pool.submit(parallel.pool_allowed).result() is False


def _write(path: Path, n: int) -> str:
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(n)))
    return str(path)


def test_the_schema_pass_takes_the_datasets_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_dataset(workers=1) → JSONLDataset(workers=1): the schema pass runs in-process (the Python pass,
    where the compiled one is not built; that one's threads: tests/test_fast_types.py)."""
    from sjsonl import load_dataset

    monkeypatch.setattr(fast_types, "NATIVE", None)
    monkeypatch.setattr(schema_mod, "PARALLEL_MIN_RECORDS", 10)
    monkeypatch.setattr(chunks, "_CHUNK_RECORDS", 100)
    path = _write(tmp_path / "d.jsonl", 1000)
    started = []
    monkeypatch.setattr(parallel, "ProcessPool", lambda *a, **k: started.append(a) or _no_pool())
    assert load_dataset("json", data_files=path, split="train", workers=1).column_names == ["i"]
    assert not started
    with pytest.raises(AssertionError, match="a pool was started"):  # the control: 2 would use one
        JSONLDataset(path, workers=2, index_dir=str(tmp_path / "other")).column_names  # noqa: B018


def test_mindspore_workers_1_types_in_process(tmp_path, monkeypatch) -> None:
    """sjsonl.mindspore.load_dataset(workers=1): no pool, whatever num_proc says (the Python type pass here);
    data that goes to 🤗 refuses workers= rather than drop it."""
    import sjsonl.mindspore
    from sjsonl.errors import UnsupportedArgumentError

    monkeypatch.setattr(fast_types, "NATIVE", None)
    monkeypatch.setattr(schema_mod, "PARALLEL_MIN_RECORDS", 10)
    monkeypatch.setattr(chunks, "_CHUNK_RECORDS", 100)
    monkeypatch.setattr(parallel, "ProcessPool", _no_pool)
    path = _write(tmp_path / "d.jsonl", 1000)
    gd = sjsonl.mindspore.load_dataset(
        "json", data_files=path, split="train", num_proc=2, workers=1, num_parallel_workers=1
    )
    assert gd.get_col_names() == ["i"] and gd.get_dataset_size() == 1000
    (tmp_path / "d.csv").write_text("i\n1\n")
    with pytest.raises(UnsupportedArgumentError, match="workers="):
        sjsonl.mindspore.load_dataset("csv", data_files=str(tmp_path / "d.csv"), split="train", workers=1)


def test_mindspore_num_proc_1_types_on_every_core(tmp_path, monkeypatch) -> None:
    """sjsonl.mindspore.load_dataset(num_proc=1): 🤗's one process, whose reader uses every core — so the
    Python type pass (the compiled one not built) runs in the pool, as by default (hf.load.index_workers):
    this process and a worker process a core."""
    import sjsonl.mindspore

    monkeypatch.setattr(fast_types, "NATIVE", None)
    monkeypatch.setattr(schema_mod, "PARALLEL_MIN_RECORDS", 10)
    monkeypatch.setattr(chunks, "_CHUNK_RECORDS", 100)
    pools: list[int] = []
    real = parallel.ProcessPool
    monkeypatch.setattr(parallel, "ProcessPool", lambda n, *a, **k: pools.append(n) or real(n, *a, **k))
    path = _write(tmp_path / "d.jsonl", 1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        gd = sjsonl.mindspore.load_dataset("json", data_files=path, split="train", num_proc=1)
    cores = parallel.worker_count()
    assert gd.get_col_names() == ["i"] and gd.get_dataset_size() == 1000
    assert pools == ([cores - 1] if cores > 1 else [])
