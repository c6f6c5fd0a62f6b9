"""A data-loading worker forked by torch's DataLoader or by MindSpore's dataset engine freezes the objects it
inherited (:func:`gc.freeze`), so that its garbage collector never walks them.

Why: a child's first full collection writes to the header of every object it inherited, and each page
holding one is then copied (copy-on-write) — in each worker at once. Whether a worker's first collections
include a full one depends on where the parent's counters stood when it forked, so the cost comes and goes;
it is largest in the first DataLoader of a process. Measured on the 2-core machine of ``benchmarks/``: a
script reading an S3 object (s3fs and botocore loaded, ~236k objects) through a DataLoader with 4 workers
got its first batch in 0.50–0.79 s without the freeze, 0.26–0.47 s with it (8 runs each); with moto's server
in the same process (millions of objects) the first DataLoader's workers started 1.5 s late, 0.03 s with it.

What a worker allocates is collected as before; only garbage cycles among the inherited objects stay (they
are shared pages, and their finalizers do not run in the worker). Other forks are left alone — a user's
process pool or prefork server keeps its collector as it was: the fork is a worker's when the stack it was
made from runs through ``torch/utils/data/`` or ``mindspore/dataset/``. Not on free-threaded CPython, whose
``gc.freeze()`` writes to every object (the copying it is meant to avoid). ``SJSONL_FREEZE_INHERITED=0``
turns it off (read at each fork).

Example:
    >>> freezes_inherited({}), freezes_inherited({"SJSONL_FREEZE_INHERITED": "0"})
    (True, False)
    >>> made_by_a_data_loader(["/venv/lib/torch/utils/data/dataloader.py", "/app/train.py"])
    True
    >>> made_by_a_data_loader(["/usr/lib/python3.11/multiprocessing/pool.py"])
    False
"""

from __future__ import annotations

import gc
import os
import sys
import sysconfig
from collections.abc import Iterable, Mapping

#: The environment variable that turns the freeze off (``0``, ``off``, ``false`` or ``no``).
ENV = "SJSONL_FREEZE_INHERITED"
#: Where the code that starts data-loading workers lives (a path fragment of a frame's file).
LOADERS = ("torch/utils/data/", "mindspore/dataset/")
_FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def freezes_inherited(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a data-loading worker forked now freezes what it inherits (the default; off by
    ``$SJSONL_FREEZE_INHERITED``). See the module's example."""
    return environ.get(ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def made_by_a_data_loader(files: Iterable[str]) -> bool:
    """Whether a stack whose frames run these ``files`` (innermost first) is a data loader starting a worker.
    See the module's example."""
    return any(marker in path.replace(os.sep, "/") for path in files for marker in LOADERS)


def _stack_files() -> Iterable[str]:
    frame = sys._getframe(1)
    while frame is not None:
        yield frame.f_code.co_filename
        frame = frame.f_back  # type: ignore[assignment]


def _freeze_in_child() -> None:
    # (the child's stack is the parent's at the fork: the DataLoader's frames are still on it)
    if not _FREE_THREADED and freezes_inherited() and made_by_a_data_loader(_stack_files()):
        gc.freeze()


if hasattr(os, "register_at_fork"):  # (POSIX; Windows has no fork)
    os.register_at_fork(after_in_child=_freeze_in_child)
