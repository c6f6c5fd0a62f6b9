"""Early start without MindSpore: sjsonl.mindspore.early.EarlySource streams rows while the index is built,
then reads through it; a file replaced during the streamed pass raises; a forked child opens the index
itself. Through real MindSpore pipelines: tests/test_mindspore_early.py."""

from __future__ import annotations

import json
import os
import threading

import pytest

from sjsonl import JSONLDataset
from sjsonl.data.streaming import JSONLStream
from sjsonl.errors import StaleDataError
from sjsonl.mindspore import make_schema
from sjsonl.mindspore.early import EarlySource, EarlyStart

N = 257


def write(path, n=N, row=None):
    row = row or (lambda i: {"id": i, "text": "é" * (i % 5), "ids": list(range(i % 4)), "ok": i % 2 == 0})
    path.write_text("".join(json.dumps(row(i), ensure_ascii=False) + "\n" for i in range(n)))
    return path


def gated(path, index_dir):
    """An early start whose index opens only once ``gate`` is set: (gate, early start, its source)."""
    gate = threading.Event()

    def open_when_let():
        assert gate.wait(30)
        return JSONLDataset(path, index_dir=index_dir)

    early = EarlyStart(JSONLStream(path), open_when_let)
    return gate, early, EarlySource(early, make_schema([{"id": 0}]))


def test_rows_flow_before_the_index_is_ready(tmp_path):
    path = write(tmp_path / "d.jsonl")
    gate, early, source = gated(path, tmp_path / "idx")
    it = iter(source)
    first = [int(next(it)[0]) for _ in range(10)]
    assert first == list(range(10)) and not early.ready()  # ten rows out, the index not there yet
    gate.set()
    assert [int(r[0]) for r in it] == list(range(10, N))
    assert early.ready()
    # a pass that starts now reads through the index: the same rows
    assert [int(r[0]) for r in source] == list(range(N)) and source._indexed is not None


def test_a_file_replaced_during_the_streamed_pass_raises(tmp_path):
    path = write(tmp_path / "d.jsonl")
    gate, _, source = gated(path, tmp_path / "idx")
    it = iter(source)
    assert int(next(it)[0]) == 0  # the stream has the file open
    os.replace(write(tmp_path / "new.jsonl", n=N + 1), path)  # the test's own file, replaced
    gate.set()
    with pytest.raises(StaleDataError, match=f"read {N} records.*holds {N + 1}"):
        list(it)


def test_a_forked_child_opens_the_index_itself(tmp_path):
    import multiprocessing

    path = write(tmp_path / "d.jsonl")
    gate, early, source = gated(path, tmp_path / "idx")  # the parent's open waits: the child must not

    def child() -> None:
        gate.set()  # the child's own open may go; the parent's thread, still waiting, is not in the child
        assert [int(r[0]) for r in source] == list(range(N))  # streamed, then counted against its own open
        assert early.ready() and len(early.dataset()) == N
        os._exit(0)

    proc = multiprocessing.get_context("fork").Process(target=child)
    proc.start()
    proc.join(60)
    gate.set()
    assert proc.exitcode == 0
