"""As users run it: plain scripts without a main guard, a notebook kernel, DataLoader and MindSpore workers.

Every internal parallel pass (schema, bad lines, ``find_bad_lines``, ``sjsonl verify``, ``filter(num_proc=)``,
the ``processes`` executor) on files above every parallel threshold, from a script written to ``tmp_path`` and
run as a subprocess — no ``if __name__ == "__main__":``, no ``SJSONL_INDEX_DIR``: the index goes beside the
data. Each script appends one ``x`` to ``ran.txt`` at top level: a pool that re-ran the script (spawn,
forkserver) would append more, or break. Results are compared with what ``json.loads`` over the file says.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

from sjsonl.cli import stats as cli_stats
from sjsonl.records import badlines, chunks, schema

SRC = Path(__file__).resolve().parents[1] / "src"
#: records in each test file: above the schema and bad-line thresholds (and several chunks of work)
RECORDS = max(schema.PARALLEL_MIN_RECORDS, badlines.PARALLEL_MIN_RECORDS) + 3 * chunks._CHUNK_RECORDS

pytestmark = pytest.mark.slow  # each runs a whole pass over a million-record file, some in MindSpore


def _write(path: Path, bad_every: int | None, records: int = RECORDS) -> Path:
    """``{"id", "text"}`` rows; a ``score`` column from the middle on, a ``late`` one in the last row, and
    with ``bad_every`` a line that is not JSON every so often."""
    with open(path, "w") as fh:
        lines = []
        for i in range(records):
            if bad_every and i % bad_every == bad_every // 2:
                lines.append(f'{{"id": {i}, "text": broken\n')
            elif i == records - 1:
                lines.append(f'{{"id": {i}, "late": [1.5]}}\n')
            elif i >= records // 2:
                lines.append(f'{{"id": {i}, "text": "{"r" * (i % 40)}", "score": {i}.5}}\n')
            else:
                lines.append(f'{{"id": {i}, "text": "{"r" * (i % 40)}"}}\n')
            if len(lines) == 100_000:
                fh.write("".join(lines))
                lines = []
        fh.write("".join(lines))
    return path


def _expected(path: Path) -> dict:
    """What a reader that calls json.loads on every line finds: no sjsonl code involved."""
    columns: dict[str, None] = {}
    good, bad, offset, filtered = [], [], 0, []
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, 1):
            try:
                row = json.loads(line)
            except ValueError:
                bad.append([number, offset])
            else:
                good.append(row["id"])
                columns.update(dict.fromkeys(row))
                if row["id"] % 7 == 0 and len(row.get("text", "")) > 3:  # the filter test's predicate
                    filtered.append(row["id"])
            offset += len(line)
    return {"columns": list(columns), "records": len(good), "bad": bad, "ids": good, "filtered": filtered}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    where = tmp_path_factory.mktemp("big")
    files = {
        "clean": _write(where / "clean.jsonl", None),
        "dirty": _write(where / "dirty.jsonl", 250_000),
        "small": _write(where / "small.jsonl", None, 20_000),  # for what has no size threshold
    }
    return {name: (path, _expected(path)) for name, path in files.items()}


def _copy(made: dict, name: str, to: Path, as_name: str | None = None) -> tuple[Path, dict]:
    """A fresh copy (no index, no cached schema or bad lines beside it) and its expectation."""
    path, expected = made[name]
    return Path(shutil.copy(path, to / (as_name or path.name))), expected


def _pythonpath(env: Mapping[str, str]) -> str:
    return os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)


def run_script(tmp_path: Path, body: str) -> dict:
    """Run ``body`` as a plain script (after a top-level side effect) in ``tmp_path``; return the JSON it
    prints last, after checking the side effect happened exactly once."""
    script = tmp_path / "user_script.py"
    script.write_text('import json\nopen("ran.txt", "a").write("x")\n' + textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if k != "SJSONL_INDEX_DIR"}
    env["PYTHONPATH"] = _pythonpath(env)
    proc = subprocess.run(
        [sys.executable, script.name], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "ran.txt").read_text() == "x", "the script's top level ran again"
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "stderr": proc.stderr}


def test_column_names_through_load_dataset(made, tmp_path: Path) -> None:
    path, expected = _copy(made, "clean", tmp_path)
    out = run_script(tmp_path, f"""
        import sjsonl
        ds = sjsonl.load_dataset("json", data_files={path.name!r}, split="train")
        print(json.dumps({{"columns": ds.column_names, "records": len(ds)}}))
    """)  # fmt: skip
    assert out["columns"] == expected["columns"] == ["id", "text", "score", "late"]
    assert out["records"] == expected["records"]


@pytest.mark.parametrize("num_proc", [1, 2])
def test_mindspore_load_dataset(made, tmp_path: Path, num_proc: int) -> None:
    path, expected = _copy(made, "clean", tmp_path)
    out = run_script(tmp_path, f"""
        import sjsonl.mindspore
        gd = sjsonl.mindspore.load_dataset("json", data_files={path.name!r}, split="train",
                                           num_proc={num_proc})
        print(json.dumps({{"columns": gd.get_col_names(), "records": gd.get_dataset_size()}}))
    """)  # fmt: skip
    assert out["columns"] == expected["columns"]
    assert out["records"] == expected["records"]


def test_skipping_bad_lines(made, tmp_path: Path) -> None:
    path, expected = _copy(made, "dirty", tmp_path)
    assert expected["bad"]
    out = run_script(tmp_path, f"""
        import sjsonl
        ds = sjsonl.JSONLDataset({path.name!r}, on_bad_lines="skip")
        print(json.dumps({{"records": len(ds), "bad": [[b.line, b.offset] for b in ds.bad_lines],
                           "columns": ds.column_names, "last": ds[-1]["id"]}}))
    """)  # fmt: skip
    assert out["records"] == expected["records"]
    assert out["bad"] == expected["bad"]
    assert out["columns"] == expected["columns"]
    assert out["last"] == expected["ids"][-1]


def test_find_bad_lines(made, tmp_path: Path) -> None:
    path, expected = _copy(made, "dirty", tmp_path)
    out = run_script(tmp_path, f"""
        from sjsonl.data.corpus import find_bad_lines
        print(json.dumps({{"bad": [[b.line, b.offset] for b in find_bad_lines({path.name!r})]}}))
    """)  # fmt: skip
    assert out["bad"] == expected["bad"]


def test_filter_with_a_lambda_in_processes(made, tmp_path: Path) -> None:
    path, expected = _copy(made, "clean", tmp_path)
    (tmp_path / "pids").mkdir()
    out = run_script(tmp_path, f"""
        import os
        import sjsonl
        STEP = 7  # a global of the script: the lambda takes it along to the workers
        def here():  # notes each process that evaluates the predicate
            open(os.path.join("pids", str(os.getpid())), "w").close()
            return True
        ds = sjsonl.JSONLDataset({path.name!r})
        kept = ds.filter(lambda r: r["id"] % STEP == 0 and len(r.get("text", "")) > 3 and here(), num_proc=2)
        print(json.dumps({{"ids": [r["id"] for r in kept]}}))
    """)  # fmt: skip
    assert out["ids"] == expected["filtered"]
    evaluated_in = {int(p.name) for p in (tmp_path / "pids").iterdir()}
    assert len(evaluated_in) >= 2  # in more than one process: the lambda went to a worker


def test_filter_with_a_class_of_the_script_runs_here_and_says_so(made, tmp_path: Path) -> None:
    path, expected = _copy(made, "small", tmp_path)
    out = run_script(tmp_path, f"""
        import sjsonl
        class Every:  # defined in the script, which workers never import: it cannot go to them
            def __init__(self, n):
                self.n = n
            def __call__(self, row):
                return row["id"] % self.n == 0
        kept = sjsonl.JSONLDataset({path.name!r}).filter(Every(1_000), num_proc=2)
        print(json.dumps({{"ids": [r["id"] for r in kept]}}))
    """)  # fmt: skip
    assert out["ids"] == [i for i in expected["ids"] if i % 1_000 == 0]
    assert "filter(num_proc=2) runs in this process" in out["stderr"] and "Every" in out["stderr"]


def test_verify_several_big_files(made, tmp_path: Path) -> None:
    size = os.path.getsize(made["clean"][0])
    copies = max(2, math.ceil(cli_stats.PARALLEL_FILES_MIN_BYTES / size))  # together above the threshold
    files = [_copy(made, "clean", tmp_path, f"part{k}.jsonl") for k in range(copies - 1)]
    files.append(_copy(made, "dirty", tmp_path, "dirty.jsonl"))
    out = run_script(tmp_path, f"""
        import contextlib, io
        from sjsonl.cli import main
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            status = main(["verify", "--json", *{[p.name for p, _ in files]!r}])
        print(json.dumps({{"status": status, "report": json.loads(text.getvalue())}}))
    """)  # fmt: skip
    assert out["status"] == 1  # the dirty file
    got = out["report"]["files"]
    assert [r["records"] for r in got] == [len(e["ids"]) + len(e["bad"]) for _, e in files]
    assert [[[b["line"], b["offset"]] for b in r["bad_lines"]] for r in got] == [e["bad"] for _, e in files]


def test_processes_executor_from_a_script(made, tmp_path: Path) -> None:
    a, expected = _copy(made, "small", tmp_path, "a.jsonl")  # (the executor has no size threshold)
    b, _ = _copy(made, "small", tmp_path, "b.jsonl")
    out = run_script(tmp_path, f"""
        import numpy as np
        import sjsonl
        from sjsonl.cli.executors import open_executor, parse_executor
        with open_executor(parse_executor("processes:2")) as pool:
            written = sjsonl.build_indexes([{a.name!r}, {b.name!r}], executor=pool)
        print(json.dumps({{"indexes": [len(np.load(p)) for p in written]}}))
    """)  # fmt: skip
    assert out["indexes"] == [expected["records"]] * 2


def test_passes_inside_dataloader_workers(made, tmp_path: Path) -> None:
    """A DataLoader worker is daemonic: the passes run in it, in-process (no crash, no hang)."""
    files = [_copy(made, "dirty", tmp_path, f"w{k}.jsonl") for k in range(2)]
    out = run_script(tmp_path, f"""
        import sjsonl
        from sjsonl.data.corpus import find_bad_lines
        from torch.utils.data import DataLoader, Dataset, get_worker_info

        class Passes(Dataset):
            def __len__(self):
                return 2
            def __getitem__(self, k):
                path = {[p.name for p, _ in files]!r}[k]
                ds = sjsonl.JSONLDataset(path, on_bad_lines="skip")
                found = find_bad_lines(path)
                return {{"worker": get_worker_info() is not None, "columns": ds.column_names,
                         "records": len(ds), "bad": [[b.line, b.offset] for b in found]}}

        print(json.dumps({{"items": list(DataLoader(Passes(), batch_size=None, num_workers=2))}}))
    """)  # fmt: skip
    for item, (_, expected) in zip(out["items"], files):
        assert item == {"worker": True, "columns": expected["columns"], "records": expected["records"],
                        "bad": expected["bad"]}  # fmt: skip


def test_passes_inside_mindspore_workers(made, tmp_path: Path) -> None:
    """MindSpore's GeneratorDataset worker processes (python_multiprocessing=True) are daemonic too."""
    files = [_copy(made, "dirty", tmp_path, f"m{k}.jsonl") for k in range(2)]
    out = run_script(tmp_path, f"""
        import os
        import numpy as np
        import mindspore.dataset as msd
        import sjsonl
        from sjsonl.data.corpus import find_bad_lines
        HERE = os.getpid()

        class Passes:
            def __len__(self):
                return 2
            def __getitem__(self, k):
                path = {[p.name for p, _ in files]!r}[k]
                ds = sjsonl.JSONLDataset(path, on_bad_lines="skip")
                found = find_bad_lines(path)
                info = {{"worker": os.getpid() != HERE, "columns": ds.column_names, "records": len(ds),
                         "bad": [[b.line, b.offset] for b in found]}}
                return (np.array(json.dumps(info)),)

        gd = msd.GeneratorDataset(Passes(), column_names=["info"], shuffle=False, num_parallel_workers=2,
                                  python_multiprocessing=True)
        rows = gd.create_tuple_iterator(output_numpy=True, num_epochs=1)
        print(json.dumps({{"items": [json.loads(str(row[0])) for row in rows]}}))
    """)  # fmt: skip
    for item, (_, expected) in zip(out["items"], files):
        assert item == {"worker": True, "columns": expected["columns"], "records": expected["records"],
                        "bad": expected["bad"]}  # fmt: skip


def test_a_notebook_kernel(made, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nbformat
    from nbclient import NotebookClient

    path, expected = _copy(made, "dirty", tmp_path)
    monkeypatch.delenv("SJSONL_INDEX_DIR", raising=False)  # the kernel gets this process's environment
    monkeypatch.setenv("PYTHONPATH", _pythonpath(os.environ))
    cell = textwrap.dedent(f"""
        import json
        import sjsonl
        open("ran.txt", "a").write("x")
        ds = sjsonl.JSONLDataset({path.name!r}, on_bad_lines="skip")
        print(json.dumps({{"columns": ds.column_names, "records": len(ds),
                           "bad": [[b.line, b.offset] for b in ds.bad_lines]}}))
    """)  # fmt: skip
    # a function defined in the notebook, run by the processes executor: it travels by value
    executor_cell = textwrap.dedent("""
        from sjsonl.cli.executors import open_executor, parse_executor
        def triple(x):
            return 3 * x
        with open_executor(parse_executor("processes:2")) as pool:
            print(json.dumps({"tripled": list(pool.map(triple, range(5)))}))
    """)
    cells = [nbformat.v4.new_code_cell(cell), nbformat.v4.new_code_cell(executor_cell)]
    nb = nbformat.v4.new_notebook(cells=cells)
    where = {"metadata": {"path": str(tmp_path)}}  # the kernel's working directory
    NotebookClient(nb, kernel_name="python3", timeout=900, resources=where).execute()
    out = {}
    for done in nb.cells:
        text = "".join(o.get("text", "") for o in done.outputs if o["output_type"] == "stream")
        out.update(json.loads([line for line in text.splitlines() if line.startswith("{")][-1]))
    assert out == {"columns": expected["columns"], "records": expected["records"], "bad": expected["bad"],
                   "tripled": [0, 3, 6, 9, 12]}  # fmt: skip
    assert (tmp_path / "ran.txt").read_text() == "x"
