"""A billion records in a thousand files: open time, resident memory, random reads and a shuffled view.

The corpus (cached in ``benchmarks/.data/billion-<files>x<records>/``; ~5 GB of data and 4 GB of indexes at
full size) has tiny records, ``"dddd\\n"``: ``1000 + (7919 k + j) mod 9000`` for record ``j`` of file
``k`` — so every read can be checked against the generator, and a record from the wrong file or place
shows. Its indexes are built once, by ``sjsonl.build_indexes`` (a real scan). Then, in a fresh process:
open the dataset of every file (its indexes' O(records) checks are deferred to each file's first read),
resident memory before and after (``RssAnon``: memory the process allocated; ``RssFile``: pages of the
mapped data and index files, which the kernel reclaims at will), 10,000 random ``ds[i]`` (each of which
may be the first read of its file, so they include checking those indexes), the first 10,000 records of
``ds.shuffle(0)``, a DistributedSampler's first indices, and ``ds.locate``.

    python benchmarks/bench_billion.py [--quick]      # quick: 100 files x 10^5 records
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import DATA_DIR, REPEATS, bench_main, figure

COLUMNS = ["benchmark", "median", "note"]


def value_of(k: int | np.ndarray, j: int | np.ndarray):
    """The generator: the value of record ``j`` of file ``k`` (four digits, no leading zero)."""
    return (7919 * k + j) % 9000 + 1000


def write_corpus(root: str, files: int, records: int) -> list[str]:
    """``files`` files of ``records`` records each (written once), and their indexes (built once)."""
    os.makedirs(root, exist_ok=True)
    paths = [os.path.join(root, f"part-{k:05d}.jsonl") for k in range(files)]
    j = np.arange(records, dtype=np.int64)
    for k, path in enumerate(paths):
        if os.path.exists(path):
            continue
        v = value_of(k, j)
        digits = np.stack([v // 1000 % 10, v // 100 % 10, v // 10 % 10, v % 10], axis=1) + ord("0")
        rows = np.concatenate([digits, np.full((records, 1), ord("\n"))], axis=1).astype(np.uint8)
        with open(path + ".tmp", "wb") as f:
            f.write(rows.tobytes())
        os.replace(path + ".tmp", path)
    from sjsonl import build_indexes

    build_indexes(paths, progress=False)  # reuses the indexes that are already current
    return paths


def _rss_mib() -> dict[str, float]:
    """Resident MiB: allocated (anonymous) and mapped from files."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("RssAnon", "RssFile"):
                out[key] = int(line.split()[1]) / 1024
    return out


def measure(root: str, files: int, records: int) -> dict[str, float]:
    """Run in a fresh process (its page cache aside, nothing of the corpus is in memory)."""
    from sjsonl import JSONLDataset
    from sjsonl.sampling import Permutation

    paths = [os.path.join(root, f"part-{k:05d}.jsonl") for k in range(files)]
    out: dict[str, float] = {f"before_{k}": v for k, v in _rss_mib().items()}
    t0 = time.perf_counter()
    ds = JSONLDataset(paths)
    out["open_s"] = time.perf_counter() - t0
    out.update({f"open_{k}": v for k, v in _rss_mib().items()})
    n = files * records
    assert len(ds) == n, (len(ds), n)
    rng = np.random.default_rng(0)
    picks = rng.integers(0, n, 10_000)
    t0 = time.perf_counter()
    got = [ds[int(i)] for i in picks]
    out["random_us"] = (time.perf_counter() - t0) / len(picks) * 1e6
    assert got == value_of(picks // records, picks % records).tolist(), "a random read is wrong"
    t0 = time.perf_counter()
    view = ds.shuffle(seed=0)
    first = [r for _, r in zip(range(10_000), view)]
    out["shuffled_s"] = time.perf_counter() - t0
    base = Permutation(n, 0).take(np.arange(10_000))  # the positions the shuffle reads
    assert first == value_of(base // records, base % records).tolist(), "the shuffled view is wrong"
    out.update({f"after_{k}": v for k, v in _rss_mib().items()})
    from sjsonl.torch import DistributedSampler

    t0 = time.perf_counter()
    sampler = iter(DistributedSampler(ds, num_replicas=8, rank=3, seed=1))
    [next(sampler) for _ in range(256)]
    out["sampler_ms"] = (time.perf_counter() - t0) * 1e3
    i = n - 1
    assert ds.locate(i) == (paths[-1], records), ds.locate(i)
    return out


def run(quick: bool = False) -> list[dict]:
    files, records = (100, 100_000) if quick else (1000, 1_000_000)
    root = str(DATA_DIR / f"billion-{files}x{records}")
    t0 = time.perf_counter()
    write_corpus(root, files, records)
    prepared = time.perf_counter() - t0
    runs = []
    for _ in range(
        REPEATS
    ):  # fresh processes: the module state (e.g. which indexes were checked) starts empty
        code = f"import bench_billion as b, json; print(json.dumps(b.measure({root!r}, {files}, {records})))"
        here = os.path.dirname(os.path.abspath(__file__))
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=here, capture_output=True, text=True, check=True
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    med = {k: float(np.median([r[k] for r in runs])) for k in runs[0]}
    n = f"{files * records:,} records in {files:,} files"
    for key, value, unit, what in [
        ("open", med["open_s"], "s", f"open a dataset of {n} (fresh process)"),
        (
            "open_allocated",
            med["open_RssAnon"] - med["before_RssAnon"],
            "MiB",
            f"memory allocated by opening {n} (RssAnon)",
        ),
        (
            "random_get",
            med["random_us"],
            "µs",
            f"random `ds[i]` over {n}, first 10,000 (checks on first read)",
        ),
        ("sampler_first", med["sampler_ms"], "ms", f"DistributedSampler over {n}: first 256 indices"),
    ]:
        figure(key, value, unit, what=what, median_of=REPEATS)
    return [
        {"benchmark": "open the dataset", "median": f"{med['open_s']:.3f} s", "note": n},
        {"benchmark": "resident memory added by opening", "median":
         f"+{med['open_RssAnon'] - med['before_RssAnon']:.0f} MiB allocated, "
         f"+{med['open_RssFile'] - med['before_RssFile']:.0f} MiB mapped",
         "note": f"{med['open_RssAnon'] + med['open_RssFile']:.0f} MiB in all, Python and numpy included"},
        {"benchmark": "random ds[i], first 10,000", "median": f"{med['random_us']:.1f} µs/record",
         "note": "each may be its file's first read: its index is checked then"},
        {"benchmark": "ds.shuffle(0): first 10,000 records", "median": f"{med['shuffled_s']:.3f} s",
         "note": "exact shuffle of 10⁹ positions, O(1) memory"},
        {"benchmark": "resident memory after the reads", "median":
         f"{med['after_RssAnon']:.0f} MiB allocated, {med['after_RssFile']:.0f} MiB mapped",
         "note": "mapped: the index files checked on first read, and the data pages read"},
        {"benchmark": "DistributedSampler: first 256 indices", "median": f"{med['sampler_ms']:.2f} ms",
         "note": "8 replicas, shuffled"},
        {"benchmark": "corpus written and indexed (once, cached)", "median": f"{prepared:.0f} s",
         "note": root},
    ]  # fmt: skip


def main() -> None:
    bench_main(__doc__, run, COLUMNS, "100 files x 10^5 records")


if __name__ == "__main__":
    main()
