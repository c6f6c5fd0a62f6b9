"""sjsonl's own process pool: parallel passes that never run the user's script again.

Every internal parallel pass (the schema pass, the bad-line pass, ``sjsonl verify`` of many files,
``filter(num_proc=)``, the ``processes`` executor) runs through :func:`map_in_order` or :class:`ProcessPool`.
Why not :mod:`multiprocessing`: its *spawn* and *forkserver* children re-import the main script
(``multiprocessing.spawn.get_preparation_data`` → ``_fixup_main_from_path``), so a plain script without
``if __name__ == "__main__":`` runs its top-level code again in every child and the pool breaks; *fork* copies
the locks other threads hold at that instant (torch, MindSpore, tqdm, OpenBLAS, sjsonl's prefetch and
early-start threads, native decompressors) into a child that may then hang. A worker here is a fresh
interpreter, ``python -c "<import sjsonl.runtime.parallel; serve>"`` with the parent's ``sys.path``, that
never imports ``__main__``: tasks arrive as pickles on its stdin, results leave on its stdout. Work units
pickle by path (:class:`~sjsonl.data.source.IndexedFile`), so a task is small.

Functions that cannot be imported by name in a worker — lambdas, closures, functions of the user's script or
notebook — travel by value (their code, the globals they use, their closure: :mod:`sjsonl.runtime.shipping`),
so ``ds.filter(lambda r: ..., num_proc=2)`` works; a class defined in the script cannot, and raises
:class:`ShippingError` before any work starts (callers then run in-process, saying why).

The pool is not used where it cannot pay off: one worker, a daemonic process (a DataLoader or MindSpore
worker, a Dask worker: already one of many) or one of this pool's own workers — there the work runs in the
calling process. With a pool, the calling process works through the items too, from the moment its
workers start. A worker costs 0.3-0.5 s of CPU to start (importing numpy and sjsonl), so callers use a pool
only above a size threshold measured for their pass (``benchmarks/bench_parallel.py``).

Example:
    >>> list(map_in_order(divmod, [(7, 2), (9, 4)], workers=2))    # small work: no pool needed
    [(3, 1), (2, 1)]
    >>> with ProcessPool(1) as pool:                                  # a real worker process
    ...     pool.submit(lambda x: x * 3, 14).result()
    42
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import IO, Any

from sjsonl.errors import SJSONLError
from sjsonl.runtime.shipping import ShippingError, dumps

__all__ = [
    "ProcessPool",
    "ShippingError",
    "WorkerError",
    "WorkerStartError",
    "dumps",
    "map_in_order",
    "pool_allowed",
    "worker_count",
]

_in_worker = False  # set in this pool's worker processes: a pass there runs in-process, never nests a pool
_HEADER = struct.Struct("<cQ")  # frame: kind (T task, S shared object, R reply), payload length
_NO_SHARED = object()


class WorkerError(SJSONLError):
    """A worker process died while running a task (or could not start: :class:`WorkerStartError`)."""


class WorkerStartError(WorkerError):
    """A worker process could not start (its interpreter or sjsonl failed to load there)."""


class _RemoteTraceback(Exception):
    def __init__(self, text: str) -> None:
        super().__init__(text)

    def __str__(self) -> str:
        return "\n" + str(self.args[0])


def worker_count(requested: int | None = None) -> int:
    """``requested``, or by default this process's CPUs, at most 8.

    Example:
        >>> worker_count(3), 1 <= worker_count() <= 8
        (3, True)
    """
    if requested is not None:
        return max(1, int(requested))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(8, cpus or 1)


def pool_allowed() -> bool:
    """Whether this process starts worker processes for a pass: not in a daemonic process (a DataLoader or
    MindSpore worker, a Dask worker) nor in one of this pool's own workers, where the pass runs in-process.

    Example:
        >>> pool_allowed()
        True
    """
    return not _in_worker and not multiprocessing.current_process().daemon and bool(sys.executable)


# ------------------------------------------------------------------------------------------ frames
def _send(stream: IO[bytes], kind: bytes, payload: bytes) -> None:
    stream.write(_HEADER.pack(kind, len(payload)))
    stream.write(payload)
    stream.flush()


def _receive(stream: IO[bytes]) -> tuple[bytes, bytes] | None:
    """The next frame, or None at the end of the stream (the other side is gone)."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    kind, size = _HEADER.unpack(head)
    payload = stream.read(size)
    return None if len(payload) < size else (kind, payload)


# ------------------------------------------------------------------------------------------ worker side
def serve() -> None:
    """The loop of a worker process: run each task frame from stdin, reply on stdout, until stdin ends."""
    global _in_worker
    _in_worker = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it ends the workers
    tasks, replies = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # user code in a task reading stdin or printing never touches the frames
    os.dup2(2, 1)
    _send(replies, b"R", b"ready")
    shared: Any = None
    while (frame := _receive(tasks)) is not None:
        kind, payload = frame
        if kind == b"S":  # the pool's shared object, once, before this worker's first task
            try:
                shared = pickle.loads(payload)
            except Exception as exc:  # e.g. it names something of the main script: said at the first task
                shared = ShippingError(f"cannot rebuild the tasks' data in a worker process: {exc}")
            continue
        try:
            fn, args, kwargs, with_shared = pickle.loads(payload)
        except Exception as exc:
            reply: tuple = (False, ShippingError(f"cannot rebuild a task in a worker process: {exc}"), "")
        else:
            try:
                if with_shared and isinstance(shared, ShippingError):
                    raise shared
                reply = (True, fn(shared, *args, **kwargs) if with_shared else fn(*args, **kwargs), "")
            except BaseException as exc:
                reply = (False, exc, traceback.format_exc())
        try:
            data = pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            what = "its result" if reply[0] else f"its error ({type(reply[1]).__name__}: {reply[1]})"
            data = pickle.dumps(
                (False, WorkerError(f"a task ran, but {what} cannot be sent back: {exc}"), reply[2])
            )
        _send(replies, b"R", data)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown to wait for: the parent has every reply


# ------------------------------------------------------------------------------------------ parent side
def _command() -> list[str]:
    # -c, not -m: the bootstrap installs the parent's sys.path before importing anything, whatever the
    # flags (-I, -E) say about PYTHONPATH; the interpreter flags (-X, -W, -O) are the parent's.
    path = [p for p in sys.path if isinstance(p, str)]
    boot = f"import sys; sys.path[:] = {path!r}; from sjsonl.runtime.parallel import serve; serve()"
    return [sys.executable, *subprocess._args_from_interpreter_flags(), "-c", boot]  # type: ignore[attr-defined]


# One BLAS/OpenMP thread per worker unless the user chose: the workers already fill the cores, and each
# thread pool starting in every worker at once (OpenBLAS spins) more than doubled the start-up measured.
_ONE_THREAD = {k: "1" for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}


class _Worker:
    """One worker process and the pipes to it; used by one dispatching thread at a time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            _command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_ONE_THREAD | dict(os.environ)
        )
        self.started = False
        self.has_shared = False

    def wait_ready(self) -> None:
        """Return once the worker has started (imported sjsonl); raise :class:`WorkerStartError` if it could
        not."""
        assert self.proc.stdout is not None
        if not self.started:
            if _receive(self.proc.stdout) is None:
                raise WorkerStartError(f"a worker process could not start (exit status {self.proc.wait()})")
            self.started = True

    def call(self, task: bytes, shared: bytes | None) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wait_ready()
        try:
            if shared is not None and not self.has_shared:
                _send(self.proc.stdin, b"S", shared)
                self.has_shared = True
            _send(self.proc.stdin, b"T", task)
        except (BrokenPipeError, OSError):
            pass  # it died: the reply below is missing and says so
        frame = _receive(self.proc.stdout)
        if frame is None:
            raise WorkerError(f"a worker process died while running a task (exit status {self.proc.wait()})")
        try:
            ok, value, text = pickle.loads(frame[1])
        except Exception as exc:  # e.g. an exception class that cannot be rebuilt from its args
            raise WorkerError(f"a worker's reply cannot be read here: {exc}") from None
        if ok:
            return value
        if text:
            value.__cause__ = _RemoteTraceback(text)
        raise value

    def end(self, kill: bool) -> None:
        """Tell the worker to stop (closing its stdin ends its loop), or kill it."""
        if kill:
            self.proc.kill()  # nothing of its state is needed: its replies are in, or abandoned
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass

    def reap(self) -> None:
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class ProcessPool(Executor):
    """An :class:`~concurrent.futures.Executor` of ``processes`` worker processes that never import the
    caller's ``__main__`` (see the module docstring). With ``shared``, every task's function gets that object
    as its first argument; it is sent to each worker once.

    Example:
        >>> with ProcessPool(2, shared={"base": 100}) as pool:
        ...     [f.result() for f in [pool.submit(lambda s, x: s["base"] + x, x) for x in (1, 2)]]
        [101, 102]
    """

    def __init__(self, processes: int, *, shared: Any = _NO_SHARED) -> None:
        self._shared = None if shared is _NO_SHARED else dumps(shared)
        self._workers: list[_Worker] = []
        try:
            for _ in range(max(1, processes)):  # all start now: their imports overlap
                self._workers.append(_Worker())
        except OSError as exc:  # no interpreter to run, no process to be had (limits)
            for w in self._workers:
                w.end(kill=True)
                w.reap()
            raise WorkerStartError(f"cannot start a worker process: {exc}") from None
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        for w in self._workers:
            self._idle.put(w)
        self._threads = ThreadPoolExecutor(len(self._workers), thread_name_prefix="sjsonl-pool")

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        task = dumps((fn, args, kwargs, self._shared is not None))  # a ShippingError is raised here, now
        return self._threads.submit(self._run, task)

    def _run(self, task: bytes) -> Any:
        worker = self._idle.get()
        try:
            return worker.call(task, self._shared)
        finally:
            self._idle.put(worker)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """As :meth:`Executor.shutdown`; ``cancel_futures=True`` also ends the tasks already running (their
        workers are killed: a worker holds nothing that needs saving)."""
        if cancel_futures:  # the threads waiting on those workers are freed by it
            for w in self._workers:
                w.end(kill=True)
        self._threads.shutdown(wait=wait, cancel_futures=cancel_futures)
        if wait:
            self._close()
        else:  # the tasks running finish, then their workers end
            threading.Thread(target=self._close, name="sjsonl-pool-close", daemon=True).start()

    def _close(self) -> None:
        self._threads.shutdown(wait=True)
        for w in self._workers:
            w.end(kill=False)
        for w in self._workers:  # all told first: they exit together
            w.reap()


def map_in_order(
    fn: Callable[..., Any], items: Iterable[tuple], workers: int, *, shared: Any = _NO_SHARED
) -> Generator[Any, None, None]:
    """``fn(*item)`` (``fn(shared, *item)`` with ``shared``) for each item, results in order, ``workers`` at
    a time: this process and ``workers - 1`` worker processes take the next item as each finishes one (so a
    pool on 2 cores starts one process, whose start overlaps this process's first items). In this process
    alone when ``workers`` is 1, there is one item, or :func:`pool_allowed` says no. A worker that could not
    start leaves its share to the others and this process (a :class:`RuntimeWarning` says so); a task's
    exception is raised here, in order.

    Example:
        >>> list(map_in_order(pow, [(2, 5), (3, 2)], workers=1))
        [32, 9]
    """
    items = list(items)
    n = len(items)
    prefix = () if shared is _NO_SHARED else (shared,)
    helpers = min(workers, n) - 1
    pool = None
    if helpers >= 1 and pool_allowed():
        try:
            pool = ProcessPool(helpers, shared=shared)  # a ShippingError is raised here, before any work
        except WorkerStartError as exc:
            warnings.warn(f"sjsonl: {exc}; working in this process", RuntimeWarning, stacklevel=2)
    if pool is None:
        for item in items:
            yield fn(*prefix, *item)
        return
    results: list[Future] = [Future() for _ in items]
    lock = threading.Lock()
    next_item = 0

    def claim() -> int:
        nonlocal next_item
        with lock:
            i, next_item = next_item, next_item + 1
        return i

    def run(i: int, worker: _Worker | None) -> bool:
        try:
            if worker is None:
                results[i].set_result(fn(*prefix, *items[i]))
            else:
                results[i].set_result(worker.call(dumps((fn, items[i], {}, bool(prefix))), pool._shared))
        except Exception as exc:
            results[i].set_exception(exc)
            return not isinstance(exc, WorkerError)  # that worker is gone: the others take the rest
        return True

    not_started: list[WorkerStartError] = []
    finished = threading.Event()

    def feed(worker: _Worker) -> None:
        try:
            worker.wait_ready()  # claim nothing before: this process works meanwhile
        except WorkerStartError as exc:
            if not finished.is_set():  # (ended on purpose, the work done, is no failure)
                not_started.append(exc)
            return
        while (i := claim()) < n and run(i, worker):
            pass

    try:
        for w in pool._workers:
            pool._threads.submit(feed, w)
        for i in range(n):
            while not results[i].done() and (j := claim()) < n:
                run(j, None)  # work here while item i is still running
            yield results[i].result()
    except BaseException:  # an error, Ctrl-C or an abandoned generator: stop the workers now
        with lock:
            next_item = n
        pool.shutdown(cancel_futures=True)
        raise
    finished.set()
    pool.shutdown(cancel_futures=True)  # every result is in: end the workers now, even one still starting
    if not_started:  # the work was done all the same, here
        warnings.warn(f"sjsonl: {not_started[0]}; worked in this process", RuntimeWarning, stacklevel=2)
