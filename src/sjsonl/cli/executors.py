"""Executors named by a short string, for ``sjsonl index --executor`` (and scripts that want the same).

- ``processes[:N]`` — a :class:`sjsonl.runtime.parallel.ProcessPool` of N processes on this machine (default:
  one per core), which never re-runs the calling script (safe without a main guard);
- ``dask-local[:N]`` — a ``dask.distributed.LocalCluster`` of N worker processes, one thread each,
  started here and closed after (``pip install 'sjsonl[cluster]'``);
- ``dask://HOST:PORT`` — a running Dask scheduler (``dask scheduler`` + ``dask worker`` on the nodes);
  ``tcp://``, ``tls://`` and ``ucx://`` addresses are passed to Dask as they are.

Example:
    >>> parse_executor("processes:2")
    ExecutorSpec(kind='processes', processes=2, address='')
    >>> parse_executor("dask://scheduler:8786").address
    'tcp://scheduler:8786'
    >>> with open_executor(parse_executor("processes:1")) as pool:
    ...     pool.submit(abs, -3).result()
    3
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from concurrent.futures import Executor
from dataclasses import dataclass

from sjsonl.errors import InvalidArgumentError, require
from sjsonl.runtime.parallel import ProcessPool

__all__ = ["EXECUTOR_FORMS", "ExecutorSpec", "open_executor", "parse_executor"]

#: What ``--executor`` accepts, for help and error messages.
EXECUTOR_FORMS = "processes[:N], dask-local[:N] or dask://HOST:PORT"
_DASK_SCHEMES = ("tcp://", "tls://", "ucx://")


@dataclass(frozen=True)
class ExecutorSpec:
    """A parsed executor name: ``kind`` is ``processes``, ``dask-local`` or ``dask``."""

    kind: str
    processes: int | None = None  #: local kinds: how many processes (None: one per core)
    address: str = ""  #: ``dask``: the scheduler's address

    @property
    def local_processes(self) -> int | None:
        """Processes this machine runs for it (None for a remote cluster): each task's scan threads
        are then best the cores divided among them."""
        if self.kind == "dask":
            return None
        return self.processes or os.cpu_count() or 1


def parse_executor(text: str) -> ExecutorSpec:
    """Parse ``processes[:N]``, ``dask-local[:N]`` or ``dask://HOST:PORT``; raise
    :class:`~sjsonl.errors.InvalidArgumentError` saying what is accepted."""
    value = text.strip()
    if value.startswith("dask://") or value.startswith(_DASK_SCHEMES):
        rest = value.split("://", 1)[1]
        host, _, port = rest.rpartition(":")
        if not host or not port.isdigit():
            raise InvalidArgumentError(f"expected a scheduler address like dask://HOST:8786, got {text!r}")
        scheme = "tcp://" if value.startswith("dask://") else value.split("://", 1)[0] + "://"
        return ExecutorSpec("dask", address=scheme + rest)
    kind, sep, count = value.partition(":")
    if kind in ("processes", "dask-local"):
        if not sep:
            return ExecutorSpec(kind)
        if count.isdigit() and int(count) >= 1:
            return ExecutorSpec(kind, processes=int(count))
        raise InvalidArgumentError(f"{kind}:N needs a number of processes of 1 or more, got {text!r}")
    raise InvalidArgumentError(f"unknown executor {text!r}: expected {EXECUTOR_FORMS}")


@contextlib.contextmanager
def open_executor(spec: ExecutorSpec) -> Iterator[Executor]:
    """The executor ``spec`` names, shut down (and a cluster started for it closed) on exit."""
    if spec.kind == "processes":
        # sjsonl's own pool: no fork (the caller's threads, tqdm's or a Dask client's, may hold locks), and
        # unlike spawn it never re-runs the calling script, which may have no main guard
        with ProcessPool(spec.local_processes or 1) as pool:
            yield pool
        return
    distributed = require("distributed", "cluster")
    with contextlib.ExitStack() as stack:
        if spec.kind == "dask-local":
            cluster = distributed.LocalCluster(
                n_workers=spec.local_processes,
                threads_per_worker=1,  # one file at a time per process; its scan has its own threads
                processes=True,
                dashboard_address=None,  # no web server (and no port taken) for a one-off run
            )
            stack.enter_context(cluster)
            client = stack.enter_context(distributed.Client(cluster))
        else:
            client = stack.enter_context(distributed.Client(spec.address))
        # pure=False: a file indexed again (after it changed) is a new task, not the cached old result
        yield client.get_executor(pure=False)
