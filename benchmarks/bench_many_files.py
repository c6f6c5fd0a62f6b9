"""Many small files: the first open, a reopen, and a pass over every file, against indexing the same records
in one file and against reading every file once.

N files of 20 short records each (``sjsonl.sample.write_corpus``, cut into files of 20 lines; N = 10,000 and
100,000; ``--quick``: 500 and 2,000) in one directory, and the same records concatenated in one file. Each
measurement is ``JSONLDataset(sorted(paths))`` in a fresh process (its module state starts empty; the data
is in the page cache; its private cache, where the corpus manifest goes, a directory of the run's own):

- the first open, with no manifest (deleted before each run): each small file scanned once, its offsets
  kept in the manifest (``sjsonl.data.manifest``, ``sjsonl.index.adopted``) — no index file a file;
- a reopen that finds the manifest: one ``stat`` a file, no file opened;
- a reopen, then the first record of every file read (``ds[0::20]``): each file opened at its first read,
  its offsets adopted after the CRC-32 of its bytes matched — the per-file cost a reopen defers to the reads;
- the baselines: the first open of the one file (its index deleted before each run), and ``cat`` of all the
  files into ``wc -l`` (one read of each file, in C: the floor of any first open that reads them).

They take turns in each round, so drift hits them alike. The issue's goals (#31): a first open within 2x of
indexing the same records in one file; a reopen of 100,000 files in <= 1 s. The figures of the releases
before the manifest (an index file written, then found, a file) are in git history: 10,000 files opened
first in 13.7 s and reopened in 2.6 s, 100,000 in 111 s and 23.7 s.

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
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import REPEATS, bench_main, figure
from sjsonl.sample import write_corpus

COLUMNS = ["benchmark", "variant", "median", "per file", "ratio", "note"]
PER_FILE = 20

#: Run in a fresh process: open the files (or the one file) named on the command line's pattern.
_OPEN = """
import glob, json, sys, time
from sjsonl import JSONLDataset
paths = sorted(glob.glob(sys.argv[1]))
t0 = time.perf_counter()
ds = JSONLDataset(paths if len(paths) > 1 else paths[0])
if sys.argv[2:] == ["every-file"]:
    firsts = ds[0 : len(ds) : int(sys.argv[3]) if len(sys.argv) > 3 else 20]
    assert len(firsts) == len(paths)
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "records": len(ds), "last": ds[len(ds) - 1]}))
"""


def _open(pattern: str, cache: str, *extra: str) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    done = subprocess.run([sys.executable, "-c", _OPEN, pattern, *extra], capture_output=True, text=True,
                          check=True, env=env)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cat_wc(directory: str) -> float:
    """Seconds for ``cat`` of every file of ``directory`` into ``wc -l`` (checked to count lines)."""
    t0 = time.perf_counter()
    done = subprocess.run(f"find {directory} -name '*.jsonl' -print0 | sort -z | xargs -0 cat | wc -l",
                          shell=True, capture_output=True, text=True, check=True)  # fmt: skip
    seconds = time.perf_counter() - t0
    assert int(done.stdout) > 0
    return seconds


def _drop(directory: str, pattern: str = "*.index.*") -> None:
    for path in glob.glob(os.path.join(directory, pattern)):
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
        with open(os.path.join(many, f"part-{k:06d}.jsonl"), "wb") as out:
            out.writelines(lines[k * PER_FILE : (k + 1) * PER_FILE])
    return many, whole, json.loads(lines[-1])


def _one(work: str, files: int, runs: int) -> list[dict]:
    many, whole, last = _write(work, files)
    cache = os.path.join(work, "cache")
    manifests = os.path.join(cache, "sjsonl", "corpora")
    pattern = os.path.join(many, "*.jsonl")
    times: dict[str, list[float]] = {k: [] for k in ("one", "one_reopen", "cat", "first", "reopen", "every")}
    for _ in range(runs):
        _drop(os.path.dirname(whole))
        times["one"].append(_open(whole, cache)["seconds"])
        times["one_reopen"].append(_open(whole, cache)["seconds"])
        times["cat"].append(_cat_wc(many))
        _drop(manifests, "*")
        for key in ("first", "reopen", "every"):
            got = _open(pattern, cache, *(("every-file",) if key == "every" else ()))
            assert got["records"] == files * PER_FILE and got["last"] == last, "wrong records"
            times[key].append(got["seconds"])
    assert not glob.glob(os.path.join(many, "*.index.*")), "an index file beside a small file"
    assert not glob.glob(os.path.join(many, "*.tmp"))
    med = {k: statistics.median(v) for k, v in times.items()}
    shutil.rmtree(many)
    n = f"{files:,} files x {PER_FILE} records"
    figure(
        f"many_first_open_{files}",
        med["first"],
        "s",
        what=f"first open of {n} (each file scanned once, the manifest written; fresh process)",
        median_of=runs,
        baseline="indexing the same records in one file",
        baseline_value=med["one"],
    )
    figure(
        f"many_reopen_{files}",
        med["reopen"],
        "s",
        what=f"reopen of {n}, with its corpus manifest (fresh process)",
        median_of=runs,
    )
    note = f"{files * PER_FILE:,} records; fresh process; {runs} runs"

    def per(key: str) -> str:
        return f"{med[key] / files * 1e3:.3f} ms"

    def ratio(key: str) -> str:
        return f"{med[key] / med['one']:.0f}x"

    return [
        {"benchmark": n, "variant": "one file of the same records: first open (baseline)",
         "median": f"{med['one'] * 1e3:.1f} ms", "per file": "", "ratio": "1x", "note": note},
        {"benchmark": n, "variant": "cat of every file into wc -l (one read of each)",
         "median": f"{med['cat']:.3f} s", "per file": per("cat"), "ratio": ratio("cat"),
         "note": "processes started included"},
        {"benchmark": n, "variant": "first open (each file scanned, the manifest written)",
         "median": f"{med['first']:.3f} s", "per file": per("first"), "ratio": ratio("first"), "note": note},
        {"benchmark": n, "variant": "reopen (a stat a file; no file opened)",
         "median": f"{med['reopen']:.3f} s", "per file": per("reopen"), "ratio": ratio("reopen"),
         "note": f"one file's reopen: {med['one_reopen'] * 1e3:.1f} ms"},
        {"benchmark": n, "variant": "reopen, then the first record of every file",
         "median": f"{med['every']:.3f} s", "per file": per("every"), "ratio": ratio("every"),
         "note": "each file opened at its first read"},
    ]  # fmt: skip


def run(quick: bool = False) -> list[dict]:
    work = tempfile.mkdtemp(prefix="sjsonl-bench-many-")
    sizes = ((500, REPEATS), (2_000, REPEATS)) if quick else ((10_000, REPEATS), (100_000, 3))
    try:
        return [row for files, runs in sizes for row in _one(work, files, runs)]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    bench_main(__doc__, run, COLUMNS, "500 and 2,000 files")


if __name__ == "__main__":
    main()
