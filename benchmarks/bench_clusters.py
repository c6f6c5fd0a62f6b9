"""Cluster engines over one big file: Ray Data and Dask with their own JSON readers vs sjsonl's adapters.

- **Ray** (``ray.init(num_cpus=2)``): one 1 GiB JSONL file (the "short" corpus; ``--quick``: 64 MiB) through
  ``ray.data.read_json(lines=True)`` and through ``sjsonl.ray.read_jsonl``: how many read tasks ran, the
  time to ``count()`` and to a full ``map_batches`` pass (each on a fresh Dataset), and the peak memory
  while doing so — RSS of this process and every process under it (Ray's raylet, object store and
  workers), and the object store's bytes in use. Ray's reader gives a file to one read task; sjsonl's cuts
  it into balanced record ranges from the index (built once before, timed apart: "index build").
- **Dask** (a ``LocalCluster`` of 2 worker processes): the same records gzipped (about 230 MiB of ``.gz``;
  ``--quick``: 14 MiB) through ``dask.dataframe.read_json(lines=True, blocksize=None)`` — Dask cannot split a
  compressed file, so it is one partition — and through ``sjsonl.dask.read_jsonl`` (one partition per 64 MiB
  of records; ``--quick``: 16 MiB): time to ``len(df)`` and to a full pass (the length of every ``text``,
  summed).

Every time is the median of the runs (3; ``--quick``: 1), the two readers taking turns; the data is in the
page cache. The machine's 2 cores are shared by Ray's or Dask's workers and the driver.

    python benchmarks/bench_clusters.py [--quick]
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import psutil

sys.path.insert(0, os.path.dirname(__file__))
from common import DATA_DIR, bench_main, corpus, figure

COLUMNS = ["benchmark", "reader", "read tasks", "first", "median", "ratio", "peak RSS", "peak object store"]
MiB = 1 << 20


class Peak:
    """The largest RSS of this process tree (and object store use, when ``store`` is given) seen while
    inside the block, sampled every 50 ms."""

    def __init__(self, store: Callable[[], float] | None = None) -> None:
        self.store, self.rss, self.bytes = store, 0.0, 0.0
        self._stop = threading.Event()

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            rss = 0
            for p in [me, *me.children(recursive=True)]:
                try:
                    rss += p.memory_info().rss
                except psutil.Error:
                    pass
            self.rss = max(self.rss, rss)
            if self.store is not None:
                try:
                    self.bytes = max(self.bytes, self.store())
                except Exception:
                    pass
            self._stop.wait(0.05)

    def __enter__(self) -> Peak:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _tasks(stats: str) -> int:
    """Read tasks a Dataset ran, from ``ds.stats()`` (the first operator: the read)."""
    found = re.findall(r"(\d+) tasks executed", stats)
    return int(found[0]) if found else 0


def _ray(path: str, runs: int) -> list[dict]:
    import ray

    from sjsonl import build_indexes
    from sjsonl.ray import read_jsonl

    def store_used() -> float:
        total = ray.cluster_resources().get("object_store_memory", 0.0)
        return total - ray.available_resources().get("object_store_memory", total)

    def count_rows(batch):
        return {"n": [batch.num_rows]}

    readers = {
        "ray.data.read_json": lambda: ray.data.read_json(path, lines=True),
        "sjsonl.ray.read_jsonl": lambda: read_jsonl(path),
    }
    for p in (f"{path}.index.npy", os.path.splitext(path)[0] + ".index.npy"):
        if os.path.exists(p):
            os.unlink(p)
    build, _ = _timed(lambda: build_indexes([path]))
    times: dict[str, dict[str, list[float]]] = {k: {"count": [], "pass": []} for k in readers}
    rss: dict[str, float] = dict.fromkeys(readers, 0.0)
    store: dict[str, float] = dict.fromkeys(readers, 0.0)
    tasks: dict[str, int] = {}
    rows: dict[str, int] = {}
    for _ in range(runs):
        for name, make in readers.items():
            with Peak(store_used) as peak:
                t, n = _timed(lambda make=make: make().count())
                times[name]["count"].append(t)
                t, done = _timed(
                    lambda make=make: make().map_batches(count_rows, batch_format="pyarrow").materialize()
                )
                times[name]["pass"].append(t)
            total = done.sum("n")
            tasks[name] = _tasks(done.stats())
            assert n == total, (name, n, total)
            rows[name] = int(n)
            rss[name], store[name] = max(rss[name], peak.rss), max(store[name], peak.bytes)
    assert len(set(rows.values())) == 1, f"the readers disagree on the row count: {rows}"
    size = os.path.getsize(path)
    med = {k: {m: statistics.median(v) for m, v in t.items()} for k, t in times.items()}
    ray_name, ours = "ray.data.read_json", "sjsonl.ray.read_jsonl"
    what = f"{size / MiB:,.0f} MiB JSONL ({rows[ours]:,} records), 2 CPUs"
    figure("ray_count", med[ours]["count"], "s", what=f"count() of {what}", median_of=runs,
           baseline="ray.data.read_json", baseline_value=med[ray_name]["count"])  # fmt: skip
    figure("ray_pass", med[ours]["pass"], "s", what=f"a full map_batches pass over {what}", median_of=runs,
           baseline="ray.data.read_json", baseline_value=med[ray_name]["pass"])  # fmt: skip
    figure("ray_peak_rss", rss[ours] / MiB, "MiB", what=f"peak RSS of the process tree, {what}",
           median_of=runs, baseline="ray.data.read_json", baseline_value=rss[ray_name] / MiB)  # fmt: skip
    out = [{"benchmark": f"Ray: {what}", "reader": "sjsonl index build (once)", "first": f"{build:.2f} s"}]
    for name in readers:
        for m, label in (("count", "count()"), ("pass", "map_batches pass")):
            base = med[ray_name][m]
            out.append({
                "benchmark": f"Ray: {label}", "reader": name, "read tasks": str(tasks[name]),
                "first": f"{times[name][m][0]:.2f} s", "median": f"{med[name][m]:.2f} s",
                "ratio": f"{med[name][m] / base:.2f}x", "peak RSS": f"{rss[name] / MiB:,.0f} MiB",
                "peak object store": f"{store[name] / MiB:,.0f} MiB",
            })  # fmt: skip
    return out


def _dask(path: str, runs: int, blocksize: int) -> list[dict]:
    import dask.dataframe as dd
    import distributed

    from sjsonl.dask import read_jsonl

    readers = {
        "dask.dataframe.read_json": lambda: dd.read_json(
            path, lines=True, blocksize=None, compression="gzip"
        ),
        "sjsonl.dask.read_jsonl": lambda: read_jsonl(path, blocksize=blocksize),
    }
    times: dict[str, dict[str, list[float]]] = {k: {"len": [], "pass": []} for k in readers}
    parts: dict[str, int] = {}
    peaks: dict[str, float] = dict.fromkeys(readers, 0.0)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as c,
        distributed.Client(c),
    ):
        build, _ = _timed(lambda: read_jsonl(path))  # the gzip index (seek points) and the record index
        results: dict[str, set] = {k: set() for k in readers}
        failed: dict[str, str] = {}  # a reader whose run failed: not tried again
        for _ in range(runs):
            for name, make in readers.items():
                if name in failed:
                    continue
                with Peak() as peak:
                    try:
                        df = make()
                        parts[name] = df.npartitions
                        t, n = _timed(lambda df=df: len(df))
                        times[name]["len"].append(t)
                        t, chars = _timed(lambda df=df: int(df["text"].str.len().sum().compute()))
                        times[name]["pass"].append(t)
                    except (distributed.scheduler.KilledWorker, MemoryError) as exc:
                        if name != "dask.dataframe.read_json":
                            raise
                        # one partition of the whole file in one worker: on this machine its workers are
                        # killed at their memory limit — a result, recorded as such
                        failed[name] = f"failed: {type(exc).__name__} (its workers died reading it)"
                peaks[name] = max(peaks[name], peak.rss)
                if name not in failed:
                    results[name].add((n, chars))
    base_name, ours = "dask.dataframe.read_json", "sjsonl.dask.read_jsonl"
    if base_name not in failed:
        assert results[base_name] == results[ours], results
    n, _ = next(iter(results[ours]))
    med = {k: {m: statistics.median(v) for m, v in t.items() if v} for k, t in times.items()}
    what = f"{os.path.getsize(path) / MiB:,.0f} MiB .gz ({n:,} records), 2 worker processes"
    if base_name in failed:
        killed = "(dask.dataframe.read_json's one partition: its workers were killed)"
        figure("dask_gz_pass", med[ours]["pass"], "s", what=f"a full pass over {what} {killed}",
               median_of=runs)  # fmt: skip
    else:
        figure(
            "dask_gz_pass", med[ours]["pass"], "s", what=f"a full pass over {what}", median_of=runs,
            baseline="dask.dataframe.read_json (one partition)", baseline_value=med[base_name]["pass"],
        )  # fmt: skip
    out = [{"benchmark": f"Dask: {what}", "reader": "sjsonl index build (once)", "first": f"{build:.2f} s"}]
    for name in readers:
        if name in failed:
            out.append({"benchmark": "Dask: len(df) and full pass", "reader": name,
                        "read tasks": "1 partition", "first": failed[name],
                        "peak RSS": f"{peaks[name] / MiB:,.0f} MiB"})  # fmt: skip
            continue
        for m, label in (("len", "len(df)"), ("pass", "full pass")):
            base = med[base_name][m] if base_name not in failed else None
            out.append({
                "benchmark": f"Dask: {label}", "reader": name, "read tasks": f"{parts[name]} partitions",
                "first": f"{times[name][m][0]:.2f} s", "median": f"{med[name][m]:.2f} s",
                "ratio": f"{med[name][m] / base:.2f}x" if base else "",
                "peak RSS": f"{peaks[name] / MiB:,.0f} MiB",
            })  # fmt: skip
    return out


def run(quick: bool = False) -> list[dict]:
    runs = 1 if quick else 3
    work = tempfile.mkdtemp(prefix="sjsonl-bench-clusters-")
    ray_tmp = tempfile.mkdtemp(prefix="ray-")  # Ray's sessions (short: its socket paths must be)
    try:
        src = corpus("short", (64 if quick else 1024) * MiB)
        path = os.path.join(work, "big.jsonl")
        os.link(src, path) if os.stat(src).st_dev == os.stat(work).st_dev else shutil.copy(src, path)
        import ray

        os.environ["RAY_TMPDIR"] = ray_tmp
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            rows = _ray(path, runs)
        finally:
            ray.shutdown()
        cached = DATA_DIR / f"{src.name}.gz"  # the same records, gzipped (once; kept beside the corpus)
        if not cached.exists():
            with open(src, "rb") as f, gzip.open(f"{cached}.tmp", "wb", compresslevel=6) as out:
                shutil.copyfileobj(f, out, 16 * MiB)
            os.replace(f"{cached}.tmp", cached)
        gz = os.path.join(work, "big.jsonl.gz")
        shutil.copy(cached, gz)
        return rows + _dask(gz, runs, (16 if quick else 64) * MiB)
    finally:
        os.environ.pop("RAY_TMPDIR", None)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def main() -> None:
    bench_main(__doc__, run, COLUMNS, "64 MiB of JSONL (and its .gz), one run each")


if __name__ == "__main__":
    main()
