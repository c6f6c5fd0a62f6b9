"""Many small files: the first open (every index built and written) and a reopen, against indexing the same
records in one file.

N files of 20 short records each (``sjsonl.sample.write_corpus``, cut into files of 20 lines; N = 2,000 and
10,000; ``--quick``: 500 and 2,000) in one directory, and the same records concatenated in one file. Each
measurement is ``JSONLDataset(sorted(paths))`` in a fresh process (its module state — indexes checked,
directories swept — starts empty; the data is in the page cache): the first open with no index on disk
(the indexes deleted before each run), then a reopen that finds them all; the baseline is the first
open of the one file (its index deleted before each run). The four take turns in each round, so drift
hits them alike. The issue's goal (#31): a first open within 2x of indexing the same records in one file.
A file's open has a fixed cost (open, stat, check the index's place, write it) that one large file pays
once — the ratio says how far the per-file cost is from that.

    python benchmarks/bench_many_files.py [--quick]
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from common import REPEATS, bench_main, figure
from sjsonl.sample import write_corpus

COLUMNS = ["benchmark", "variant", "median", "per file", "ratio", "note"]
RUNS = REPEATS
PER_FILE = 20

#: Run in a fresh process: open the files (or the one file) named on the command line's pattern.
_OPEN = """
import glob, json, sys, time
from sjsonl import JSONLDataset
paths = sorted(glob.glob(sys.argv[1]))
t0 = time.perf_counter()
ds = JSONLDataset(paths if len(paths) > 1 else paths[0])
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "records": len(ds), "last": ds[len(ds) - 1]}))
"""


def _open(pattern: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _OPEN, pattern], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _drop_indexes(directory: str) -> None:
    for path in glob.glob(os.path.join(directory, "*.index.*")):
        os.unlink(path)


def _write(work: str, files: int) -> tuple[str, str, dict]:
    """The directory of ``files`` files, the one file of the same records, and its last record."""
    many, one = os.path.join(work, f"many-{files}"), os.path.join(work, f"one-{files}")
    os.makedirs(many)
    os.makedirs(one)
    whole = os.path.join(one, "all.jsonl")
    write_corpus(whole, files * PER_FILE)
    with open(whole, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    for k in range(files):
        with open(os.path.join(many, f"part-{k:05d}.jsonl"), "wb") as out:
            out.writelines(lines[k * PER_FILE : (k + 1) * PER_FILE])
    return many, whole, json.loads(lines[-1])


def _one(work: str, files: int) -> list[dict]:
    many, whole, last = _write(work, files)
    pattern = os.path.join(many, "*.jsonl")
    times: dict[str, list[float]] = {"one": [], "first": [], "reopen": [], "one_reopen": []}
    for _ in range(RUNS):
        _drop_indexes(os.path.dirname(whole))
        times["one"].append(_open(whole)["seconds"])
        times["one_reopen"].append(_open(whole)["seconds"])
        _drop_indexes(many)
        for key in ("first", "reopen"):
            got = _open(pattern)
            assert got["records"] == files * PER_FILE and got["last"] == last, "wrong records"
            times[key].append(got["seconds"])
    assert len(glob.glob(os.path.join(many, "*.index.npy"))) == files
    assert not glob.glob(os.path.join(many, "*.tmp"))
    med = {k: statistics.median(v) for k, v in times.items()}
    shutil.rmtree(many)
    n = f"{files:,} files x {PER_FILE} records"
    figure(
        f"many_first_open_{files}",
        med["first"],
        "s",
        what=f"first open of {n} (every index built and written; fresh process)",
        median_of=RUNS,
        baseline="indexing the same records in one file",
        baseline_value=med["one"],
    )
    figure(
        f"many_reopen_{files}",
        med["reopen"],
        "s",
        what=f"reopen of {n}, indexed (fresh process)",
        median_of=RUNS,
    )
    note = f"{files * PER_FILE:,} records; fresh process; {RUNS} runs"
    return [
        {"benchmark": n, "variant": "one file of the same records: first open (baseline)",
         "median": f"{med['one'] * 1e3:.1f} ms", "per file": "", "ratio": "1x", "note": note},
        {"benchmark": n, "variant": "first open (indexes built and written)",
         "median": f"{med['first']:.3f} s", "per file": f"{med['first'] / files * 1e3:.3f} ms",
         "ratio": f"{med['first'] / med['one']:.0f}x", "note": note},
        {"benchmark": n, "variant": "reopen (indexes found)", "median": f"{med['reopen']:.3f} s",
         "per file": f"{med['reopen'] / files * 1e3:.3f} ms", "ratio": f"{med['reopen'] / med['one']:.0f}x",
         "note": f"one file's reopen: {med['one_reopen'] * 1e3:.1f} ms"},
    ]  # fmt: skip


def run(quick: bool = False) -> list[dict]:
    work = tempfile.mkdtemp(prefix="sjsonl-bench-many-")
    try:
        return [row for files in ((500, 2_000) if quick else (2_000, 10_000)) for row in _one(work, files)]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    bench_main(__doc__, run, COLUMNS, "500 and 2,000 files")


if __name__ == "__main__":
    main()
