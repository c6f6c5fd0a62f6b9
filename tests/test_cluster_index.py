"""Indexing a corpus on an executor: a real Dask ``LocalCluster`` of worker processes, a stdlib
``ProcessPoolExecutor``, and ``sjsonl index --executor`` in a subprocess. Each build must equal a local
one byte for byte, and the datasets opened on it must read every record right."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from distributed import Client, LocalCluster, get_task_stream

from sjsonl import JSONLDataset, build_indexes
from sjsonl.cli.executors import parse_executor
from sjsonl.data.corpus import IndexBuildError, IndexReport, index_files

N_FILES = 24


@pytest.fixture(scope="module")
def client():
    """Two worker processes, one thread each: started once for the module (it takes seconds)."""
    cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None)
    dask_client = Client(cluster)
    dask_client.wait_for_workers(2)
    yield dask_client
    dask_client.close()
    cluster.close()


def write_corpus(root: Path) -> tuple[list[str], dict[str, list]]:
    """``N_FILES`` small files of every shape a record file takes, and the records each holds."""
    root.mkdir()
    files: list[str] = []
    expected: dict[str, list] = {}

    def add(name: str, data: bytes, records: list) -> None:
        path = root / name
        path.write_bytes(data)
        files.append(str(path))
        expected[str(path)] = records

    for i in range(N_FILES - 4):
        records = [{"file": i, "n": n, "text": "é" * (n % 5)} for n in range(i * 7 % 23 + 1)]
        lines = [json.dumps(r, ensure_ascii=False).encode() for r in records]
        ending = b"\r\n" if i % 3 == 0 else b"\n"
        if i % 4 == 1:  # blank and whitespace-only lines are not records
            lines = [x for line in lines for x in (line, b"", b"  \t")]
        data = ending.join(lines) + (b"" if i % 5 == 2 else ending)  # some have no final newline
        add(f"part-{i:02d}.jsonl", data, records)
    add("empty.jsonl", b"", [])
    add("only-blank.jsonl", b"\n\n  \n", [])
    add("bom.jsonl", b'\xef\xbb\xbf{"bom": 1}\n{"bom": 2}\n', [{"bom": 1}, {"bom": 2}])
    add("array.json", b'[{"a": 1}, {"a": [2, 3]}]', [{"a": 1}, {"a": [2, 3]}])  # a document's elements
    return files, expected


def local_index(path: str, index_dir: Path) -> bytes:
    """The index file a plain local ``JSONLDataset`` builds for ``path``."""
    (written,) = JSONLDataset(path, index_dir=index_dir).index_paths
    assert written is not None and Path(written).parent == index_dir
    return Path(written).read_bytes()


def assert_equals_local_build(files, expected, written, index_dir: Path, tmp_path: Path) -> None:
    assert len(written) == len(files)
    for path, index in zip(files, written):
        assert Path(index).parent == index_dir
        reference = local_index(path, tmp_path / "local-indexes")
        # the same file, the same bytes: offsets, metadata and checksum all equal a local build
        assert Path(index).read_bytes() == reference, path
        assert np.load(index).tolist() == np.load(tmp_path / "local-indexes" / Path(index).name).tolist()
    ds = JSONLDataset(files, index_dir=index_dir, build_index_on_load=False)  # the built indexes only
    assert list(ds) == [r for f in files for r in expected[f]]
    for path in files:
        one = JSONLDataset(path, index_dir=index_dir, build_index_on_load=False)
        assert [one[i] for i in reversed(range(len(one)))] == expected[path][::-1]  # random access


def test_dask_cluster_build_equals_local_build(client, tmp_path):
    files, expected = write_corpus(tmp_path / "data")
    assert len(files) >= 20
    index_dir = tmp_path / "cluster-indexes"
    reports = dict(index_files(files, executor=client.get_executor(), index_dir=str(index_dir)))
    assert all(isinstance(r, IndexReport) for r in reports.values()), reports
    here = f"{os.uname().nodename}:{os.getpid()}"
    workers = {r.worker for r in reports.values()}  # type: ignore[union-attr]
    assert len(workers) == 2 and here not in workers  # both worker processes took files; none ran here
    assert all(r.built for r in reports.values())  # type: ignore[union-attr]
    written = build_indexes(files, executor=client.get_executor(), index_dir=index_dir)
    assert_equals_local_build(files, expected, written, index_dir, tmp_path)
    again = dict(index_files(files, executor=client.get_executor(), index_dir=str(index_dir)))
    assert not any(r.built for r in again.values())  # type: ignore[union-attr]  # fresh: kept, not rebuilt


def test_dask_cluster_names_the_bad_files_and_indexes_the_others(client, tmp_path):
    files, _ = write_corpus(tmp_path / "data")
    directory, missing = tmp_path / "data" / "a-directory.jsonl", tmp_path / "data" / "missing.jsonl"
    directory.mkdir()
    index_dir = tmp_path / "indexes"
    with pytest.raises(IndexBuildError) as caught:
        build_indexes(
            [*files[:5], directory, *files[5:], missing], executor=client.get_executor(), index_dir=index_dir
        )
    exc = caught.value
    assert set(exc.failures) == {str(directory), str(missing)}
    assert str(directory) in str(exc) and str(missing) in str(exc) and "2 of 26 files" in str(exc)
    assert sorted(exc.index_paths) == sorted(files)  # every good file was indexed all the same
    assert all(os.path.exists(p) for p in exc.index_paths.values())


def test_dask_cluster_finds_bad_lines(client, tmp_path):
    files, _ = write_corpus(tmp_path / "data")
    bad = tmp_path / "data" / "bad.jsonl"
    bad.write_bytes(b'{"a": 1}\n{oops\n{"a": 3}\n')
    index_dir = tmp_path / "indexes"
    build_indexes([*files, bad], executor=client.get_executor(), index_dir=index_dir, on_bad_lines="skip")
    # the bad lines were saved beside the index on the worker: the dataset reads them from there
    ds = JSONLDataset(bad, index_dir=index_dir, build_index_on_load=False, on_bad_lines="skip")
    assert ds[:] == [{"a": 1}, {"a": 3}] and [b.line for b in ds.bad_lines] == [2]
    with pytest.raises(IndexBuildError) as caught:
        build_indexes(
            [bad, files[0]], executor=client.get_executor(), index_dir=index_dir, on_bad_lines="error"
        )
    assert list(caught.value.failures) == [str(bad)] and f"{bad}:2:" in str(caught.value)


def test_dataset_builds_its_missing_indexes_on_the_cluster(client, tmp_path):
    files, expected = write_corpus(tmp_path / "data")
    index_dir = tmp_path / "indexes"
    with get_task_stream(client) as stream:
        ds = JSONLDataset(files, index_dir=index_dir, executor=client.get_executor())
    tasks = [t for t in stream.data if str(t["key"]).startswith("index_file")]
    assert len(tasks) == len(files)  # one task per file ran on the workers
    assert list(ds) == [r for f in files for r in expected[f]]
    assert all(Path(p).parent == index_dir for p in ds.index_paths)


def test_process_pool_build_equals_local_build(tmp_path):
    files, expected = write_corpus(tmp_path / "data")
    index_dir = tmp_path / "pool-indexes"
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        written = build_indexes(files, executor=pool, index_dir=index_dir, rebuild=True)
        with pytest.raises(IndexBuildError) as caught:
            build_indexes([files[0], tmp_path / "nope.jsonl"], executor=pool, index_dir=index_dir)
    assert_equals_local_build(files, expected, written, index_dir, tmp_path)
    assert list(caught.value.failures) == [str(tmp_path / "nope.jsonl")]


def test_no_executor_builds_here_in_order(tmp_path):
    files, expected = write_corpus(tmp_path / "data")
    index_dir = tmp_path / "indexes"
    written = build_indexes(files, index_dir=index_dir)
    assert_equals_local_build(files, expected, written, index_dir, tmp_path)


def cli(*args: object) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "sjsonl", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # starts a dask LocalCluster of processes
def test_cli_dask_local(tmp_path):
    files, expected = write_corpus(tmp_path / "data")
    index_dir = tmp_path / "cli-indexes"
    out = cli("index", "--executor", "dask-local:2", "--index-dir", index_dir, *files)
    assert out.returncode == 0, out.stderr
    printed = out.stdout.splitlines()
    assert len(printed) == len(files) and sorted(line.split(": ")[0] for line in printed) == sorted(files)
    where = dict(line.split(": ", 1)[0:1] + line.rsplit(" -> ", 1)[1:] for line in printed)
    written = [where[f] for f in files]  # printed in the order the tasks finished
    assert_equals_local_build(files, expected, written, index_dir, tmp_path)
    # a bad file is named, the others indexed, and the run fails at the end
    out = cli("index", "--executor", "dask-local:2", "--index-dir", index_dir, files[0], tmp_path, files[1])
    assert out.returncode == 1 and len(out.stdout.splitlines()) == 2
    assert str(tmp_path) in out.stderr and out.stderr.endswith("sjsonl: error: 1 of 3 files failed\n")


def test_cli_running_scheduler_one_progress_bar(client, tmp_path):
    files, _ = write_corpus(tmp_path / "data")
    address = client.scheduler.address.replace("tcp://", "dask://")  # the module's running cluster
    index_dir = tmp_path / "indexes"
    out = cli("index", "--executor", address, "--index-dir", index_dir, "--progress", *files)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == len(files)
    assert f"indexing {len(files)} files" in out.stderr and "indexing part-" not in out.stderr  # one bar
    JSONLDataset(files, index_dir=index_dir, build_index_on_load=False)  # every index is there


def test_cli_processes_and_bad_lines(tmp_path):
    f = tmp_path / "f.jsonl"
    f.write_text('{"a": 1}\n{oops\n')
    out = cli("index", "--executor", "processes:2", "--on-bad-lines", "warn", f)
    assert out.returncode == 0 and f"{f}: 2 records (1 bad line skipped), " in out.stdout
    assert out.stderr.startswith(f"sjsonl: warning: {f}:2: ")
    out = cli("index", "--executor", "processes", "--check", f)
    assert out.returncode == 1 and f"{f}:2:" in out.stderr and out.stdout == ""


@pytest.mark.parametrize(
    "value, says",
    [
        ("threads", "unknown executor 'threads'"),
        ("dask-local:0", "1 or more"),
        ("processes:x", "1 or more"),
        ("dask://no-port", "dask://HOST:8786"),
    ],
)
def test_cli_refuses_a_bad_executor(tmp_path, value, says):
    out = cli("index", "--executor", value, tmp_path / "f.jsonl")
    assert out.returncode == 2 and says in out.stderr and "--executor" in out.stderr


def test_executor_names():
    assert parse_executor("dask-local").local_processes == (os.cpu_count() or 1)
    assert parse_executor("dask-local:3").local_processes == 3
    assert parse_executor("tls://10.0.0.1:8786").address == "tls://10.0.0.1:8786"
    assert parse_executor("dask://10.0.0.1:8786").local_processes is None
