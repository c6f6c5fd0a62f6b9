"""Opening one file checks its index on a thread (sjsonl.index.background): the open does O(1) work, the
first read waits for the check, a corrupt index is rebuilt then and never read, a fork waits for the check,
copies check for themselves, and a script that exits while a check runs exits cleanly."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from sjsonl import JSONLDataset
from sjsonl.errors import ArtifactWarning, IndexFileError
from sjsonl.index import background, store
from sjsonl.index.background import BackgroundCheck
from sjsonl.index.store import read_index


def corpus(tmp_path, n=20_000, name="d.jsonl"):
    path = tmp_path / name
    path.write_bytes(b"".join(b'{"id": %d}\n' % i for i in range(n)))
    JSONLDataset(path)  # the index, built and saved
    store._VERIFIED.clear()  # as in a new process: the index this one wrote counts as checked here
    return path


def test_the_open_leaves_the_checks_to_a_thread_and_the_first_read_waits(tmp_path):
    path = corpus(tmp_path)
    ds = JSONLDataset(path)
    f = ds._files[0]
    assert f.index_origin == "found" and f._offsets is None and isinstance(f._check, BackgroundCheck)
    assert len(ds) == 20_000  # the length needs no check
    assert ds[19_999] == {"id": 19_999}
    assert f._check is None and f._offsets is not None
    assert read_index(f.index_path, verify=False).verified  # the thread made the checks


def test_a_corrupt_index_is_rebuilt_on_first_use_never_read(tmp_path):
    path = corpus(tmp_path)
    index = JSONLDataset(path).index_paths[0]
    found = read_index(index)
    offsets = found.offsets.copy()
    offsets[100], offsets[101] = offsets[101], offsets[100]  # two records swapped: each starts a line
    raw = bytearray(Path(index).read_bytes())
    # the swapped offsets over the old ones, leaving the (now wrong) checksum in the trailer
    start = raw.index(found.offsets.tobytes())
    raw[start : start + offsets.nbytes] = offsets.tobytes()
    Path(index).write_bytes(bytes(raw))
    ds = JSONLDataset(path)
    assert ds._files[0]._check is not None
    with pytest.warns(ArtifactWarning, match="checksum"):
        assert ds[100] == {"id": 100} and ds[101] == {"id": 101}
    assert ds._files[0].index_origin == "built"
    assert list(ds) == [{"id": i} for i in range(20_000)]


def test_without_builds_an_unusable_index_is_an_error_at_open(tmp_path):
    path = corpus(tmp_path)
    index = JSONLDataset(path).index_paths[0]
    raw = bytearray(Path(index).read_bytes())
    raw[200] ^= 0x01
    Path(index).write_bytes(bytes(raw))
    with pytest.raises(IndexFileError, match="checksum"):
        JSONLDataset(path, build_index_on_load=False)


def test_copies_check_for_themselves(tmp_path):
    path = corpus(tmp_path)
    ds = JSONLDataset(path)
    clone = pickle.loads(pickle.dumps(ds))
    assert clone._files[0]._check is None
    assert clone[5] == {"id": 5} and ds[5] == {"id": 5}


def test_a_fork_waits_for_the_check_and_the_child_reads_right_records(tmp_path):
    path = corpus(tmp_path, n=200_000)
    for _ in range(5):
        ds = JSONLDataset(path)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: the check finished before the fork, or the child makes it itself
            try:
                got = [ds[i]["id"] for i in (0, 123_456, 199_999)]
                os.write(write, repr(got).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            assert pipe.read() == "[0, 123456, 199999]"
        assert os.waitpid(pid, 0)[1] == 0
        assert not background._RUNNING  # the fork waited for every check under way
        assert ds[7] == {"id": 7}


def test_a_script_that_exits_while_the_check_runs_exits_cleanly(tmp_path):
    path = corpus(tmp_path, n=300_000)
    script = textwrap.dedent(
        f"""
        import sjsonl
        ds = sjsonl.JSONLDataset({str(path)!r})
        print(len(ds))
        """
    )
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.strip() == "300000", done.stderr


def test_the_check_reports_what_read_index_raises(tmp_path):
    missing = str(tmp_path / "none.index.npy")
    with pytest.raises(FileNotFoundError):
        BackgroundCheck(missing).result()
    np.save(tmp_path / "plain.npy", np.arange(3))
    with pytest.raises(IndexFileError):
        BackgroundCheck(str(tmp_path / "plain.npy")).result()
