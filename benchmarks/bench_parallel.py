"""The schema pass and the bad-line pass: in this process vs sjsonl's process pool
(``sjsonl.runtime.parallel``).

Each pass over the same file, same run: one process, then ``workers=2`` (this process and one worker
process; the worker's start-up included: a pass pays it every time). What decides
``schema.PARALLEL_MIN_RECORDS`` and ``badlines.PARALLEL_MIN_RECORDS``: the pool is used only where it beats
one process.

    python benchmarks/bench_parallel.py [--quick]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from common import REPEATS, bench_main, figure, median_seconds
from sjsonl import JSONLDataset
from sjsonl.records.badlines import _chunk as _bad_chunk
from sjsonl.records.schema import _chunk_schema, map_record_chunks
from sjsonl.runtime.parallel import ProcessPool

COLUMNS = ["file", "records", "pass", "1 process s", "2 workers s", "speed-up", "worker start s"]


def _start_one_worker() -> None:
    with ProcessPool(1) as pool:
        pool.submit(abs, -1).result()


def _write(path: Path, n: int, wide: bool) -> Path:
    with open(path, "w") as fh:
        for i in range(n):
            row: dict = {"id": i, "text": "r" * (i % 40)}  # the shape of issue #18's check
            if wide:
                row.update(score=i / 7, tags=["a", "b"][: i % 3], meta={"src": "x", "n": i}, flag=i % 2 == 0)
            fh.write(json.dumps(row) + "\n")
    return path


def run(quick: bool) -> list[dict]:
    rows = []
    sizes = [100_000] if quick else [400_000, 1_000_000]
    start = median_seconds(_start_one_worker)
    figure("worker_start", start, "s", what="start one pool worker and run one task", median_of=REPEATS)
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            for wide in (False, True):
                path = _write(Path(tmp) / f"{n}-{'wide' if wide else 'narrow'}.jsonl", n, wide)
                f = JSONLDataset(str(path))._files[0]
                for name, fn in (("schema", _chunk_schema), ("bad lines", _bad_chunk)):

                    def one_pass(workers: int, fn=fn, f=f, name=name) -> None:
                        list(map_record_chunks(f, fn, workers, False, name, min_records=0))

                    serial = median_seconds(lambda: one_pass(1), warmup=0)
                    pooled = median_seconds(lambda: one_pass(2), warmup=0)
                    if n == sizes[-1]:
                        shape = "wide" if wide else "narrow"
                        key = f"{name.replace(' ', '')}_{shape}"
                        what = f"{name} pass, {n:,} {shape} records, `workers=2` (this process + 1 worker)"
                        figure(
                            key,
                            pooled,
                            "s",
                            what=what,
                            median_of=REPEATS,
                            baseline="one process",
                            baseline_value=serial,
                        )
                    rows.append({
                        "file": f"{os.path.getsize(path) / n:.0f} B/record",
                        "records": f"{n:,}",
                        "pass": name,
                        "1 process s": f"{serial:.3f}",
                        "2 workers s": f"{pooled:.3f}",
                        "speed-up": f"{serial / pooled:.2f}×",
                        "worker start s": f"{start:.3f}",
                    })  # fmt: skip
                    print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    bench_main(__doc__, run, COLUMNS, "100,000 records only")
