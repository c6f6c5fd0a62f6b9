"""A forked child freezes the objects it inherited (:func:`gc.freeze`), so that its garbage collector never
walks them.

Why: a child's first full collection writes to the header of every object it inherited, and each page
holding one is then copied (copy-on-write) — in each DataLoader or MindSpore worker at once. Whether a
worker's first collections include a full one depends on where the parent's counters stood when it forked,
so the cost comes and goes; it is largest in the first DataLoader of a process. Measured on the 2-core
machine of ``benchmarks/``: a script reading an S3 object (s3fs and botocore loaded, ~236k objects) through a
DataLoader with 4 workers got its first batch in 0.50–0.79 s without the freeze, 0.26–0.47 s with it (8 runs
each); with moto's server in the same process (millions of objects) the first DataLoader's workers started
1.5 s late, 0.03 s with it.

This is what the documentation of :func:`gc.freeze` advises for a process that forks without ``exec``. What
a child allocates is collected as before; only garbage cycles among the inherited objects stay (they are
shared pages, and their finalizers do not run in the child). ``SJSONL_FREEZE_INHERITED=0`` turns it off;
it is read at each fork.

Example:
    >>> import gc, os
    >>> read, write = os.pipe()
    >>> pid = os.fork()
    >>> if pid == 0:  # the child: what it inherited is frozen
    ...     os.write(write, b"1" if gc.get_freeze_count() > 0 else b"0")
    ...     os._exit(0)
    >>> _ = os.waitpid(pid, 0)
    >>> os.read(read, 1)
    b'1'
    >>> os.close(read), os.close(write)
    (None, None)
"""

from __future__ import annotations

import gc
import os

#: The environment variable that turns the freeze off (``0``, ``off`` or ``false``).
ENV = "SJSONL_FREEZE_INHERITED"


def freezes_inherited() -> bool:
    """Whether a child forked now freezes what it inherits (the default; off by ``$SJSONL_FREEZE_INHERITED``).

    Example:
        >>> freezes_inherited()
        True
    """
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def _freeze_in_child() -> None:
    if freezes_inherited():
        gc.freeze()


if hasattr(os, "register_at_fork"):  # (POSIX; Windows has no fork)
    os.register_at_fork(after_in_child=_freeze_in_child)
