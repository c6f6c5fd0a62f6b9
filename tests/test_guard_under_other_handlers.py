"""The SIGBUS guard of memory-mapped reads (sjsonl/storage/_guarded.c) stays in force when another library
installs a SIGBUS handler after it — MindSpore does when a pipeline starts, with a handler that ends the
process ("Unexpected bus error ... /dev/shm") — and a fault outside a guarded copy still reaches the
handler that was there before ours, without ever looping between two handlers.

Each scenario runs in a subprocess: a failure here is a process killed by a signal.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from sjsonl.storage.local import CHECK_SECONDS, GUARDED

from .conftest import missing

_PRELUDE = """
import ctypes, json, mmap, os, signal, sys, time
import numpy as np
from sjsonl import JSONLDataset, StaleDataError
path = sys.argv[1]

def handler_now():
    # the address of the current SIGBUS handler (struct sigaction begins with it on Linux)
    buf = ctypes.create_string_buffer(256)
    assert ctypes.CDLL(None).sigaction(signal.SIGBUS, None, buf) == 0
    return ctypes.c_void_p.from_buffer(buf).value

def cut_and_read(ds, where):
    ds[0]                                   # a version check now: the next one is CHECK_SECONDS away
    os.truncate(where, 100)                 # `> train.jsonl`: the pages behind the last records go
    try:
        ds[len(ds) - 1]                     # copied from a page with no bytes: SIGBUS under the guard
    except StaleDataError as exc:
        assert "truncated" in str(exc), exc
        return "stale"
    return "READ"
"""

_MINDSPORE = _PRELUDE + textwrap.dedent(
    """
    import mindspore.dataset as msd
    from sjsonl.mindspore import to_generator_dataset
    before = JSONLDataset(path)                 # mapped before MindSpore takes SIGBUS over
    before[1]
    ours = handler_now()
    other = msd.GeneratorDataset([(np.array(k),) for k in range(8)], ["k"], python_multiprocessing=False)
    assert len(list(other.create_tuple_iterator(num_epochs=1))) == 8
    assert handler_now() != ours, "MindSpore did not install its handler"
    time.sleep(CHECK)
    print(cut_and_read(before, path))           # the map's next check put ours back first
    # and a file cut while a MindSpore pipeline reads it: an error from the pipeline, not the end of it
    with open(path, "wb") as f:
        f.write(b"".join(b'{"i": %d, "pad": "%s"}\\n' % (i, b"x" * 40) for i in range(4000)))
    rows = to_generator_dataset(JSONLDataset(path), python_multiprocessing=False)
    it = rows.create_tuple_iterator(num_epochs=1, output_numpy=True)
    next(it)
    os.truncate(path, 100)
    try:
        rest = list(it)                         # the rows after the cut: never all of them
    except Exception as exc:
        assert "truncated" in str(exc), exc
        print("pipeline-error")
    else:
        print("pipeline-READ", len(rest))
    """
)


def _corpus(tmp_path) -> str:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"".join(b'{"i": %d, "pad": "%s"}\n' % (i, b"x" * 40) for i in range(4000)))
    return str(path)


def _run(script: str, path: str, timeout: int = 300) -> subprocess.CompletedProcess:
    script = script.replace("CHECK)", f"{CHECK_SECONDS * 2})")
    return subprocess.run(
        [sys.executable, "-c", script, path], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(autouse=True)
def _needs_guard():
    if GUARDED is None:
        missing("the compiled guard (sjsonl.storage._guarded) was not built", "SJSONL_REQUIRE_NATIVE")


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
def test_a_mindspore_pipeline_does_not_take_the_guard_away(tmp_path):
    run = _run(_MINDSPORE, _corpus(tmp_path))
    assert run.returncode == 0, (run.returncode, run.stdout[-1000:], run.stderr[-3000:])
    assert run.stdout.split()[-2:] == ["stale", "pipeline-error"], run.stdout


_LATER_HANDLER = _PRELUDE + textwrap.dedent(
    """
    ds = JSONLDataset(path)
    ds[1]
    # a handler installed after ours that ends the process, as MindSpore's does
    lib = ctypes.CDLL(None)
    HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)
    exit_ = HANDLER(lambda sig: os._exit(41))
    lib.signal(signal.SIGBUS, exit_)
    assert handler_now() == ctypes.cast(exit_, ctypes.c_void_p).value
    time.sleep(CHECK)
    print(cut_and_read(ds, path), flush=True)   # guarded again: an error, not the other handler's exit
    lib.signal(signal.SIGBUS, exit_)
    fresh = JSONLDataset(path + ".b")           # a map made now puts ours back at once
    fresh[1]
    print(cut_and_read(fresh, path + ".b"), flush=True)
    # a fault outside any guarded copy still goes to the handler that was there before ours
    with open(path + ".c", "rb") as f:
        raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    os.truncate(path + ".c", 0)
    raw[len(raw) - 1]
    print("not reached")
    """
)


def test_a_handler_installed_after_ours_neither_disarms_the_guard_nor_loses_its_own_faults(tmp_path):
    path = _corpus(tmp_path)
    for suffix in (".b", ".c"):
        with open(path, "rb") as src, open(path + suffix, "wb") as dst:
            dst.write(src.read())
    run = _run(_LATER_HANDLER, path)
    assert run.stdout.split() == ["stale", "stale"], (run.stdout, run.stderr[-3000:])
    assert run.returncode == 41, (run.returncode, run.stderr[-3000:])  # the other handler's own exit


_FAULTHANDLER = _PRELUDE + textwrap.dedent(
    """
    import faulthandler
    ds = JSONLDataset(path)
    ds[1]
    faulthandler.enable()                       # installed after ours, and hands faults back to ours
    time.sleep(CHECK)
    print(cut_and_read(ds, path), flush=True)   # ours again in front: no traceback dump, an error
    with open(path + ".c", "rb") as f:
        raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    os.truncate(path + ".c", 0)
    raw[len(raw) - 1]                           # unguarded: faulthandler, back to ours, then the end
    print("not reached")
    """
)


def test_two_handlers_that_hand_faults_to_each_other_end_the_process_instead_of_looping(tmp_path):
    path = _corpus(tmp_path)
    with open(path, "rb") as src, open(path + ".c", "wb") as dst:
        dst.write(src.read())
    run = _run(_FAULTHANDLER, path, timeout=120)  # a loop would be a timeout
    assert run.stdout.split() == ["stale"], (run.stdout, run.stderr[-3000:])
    assert run.returncode == -7, (run.returncode, run.stderr[-3000:])  # SIGBUS: the default action
    assert "Fatal Python error: Bus error" in run.stderr  # faulthandler did get its fault
