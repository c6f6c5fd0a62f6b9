"""Data larger than RAM: random ``ds[i]`` and shuffled iteration with the data out of the page cache.

Before every cold run the data file's pages are dropped with ``posix_fadvise(POSIX_FADV_DONTNEED)`` (a
fresh dataset each run: pages still mapped by a process are not dropped) and ``mincore`` confirms that
none is left resident; the index stays in memory, as it would in training. Each corpus is a private copy
of the cached benchmark corpus, so evicting it never slows another benchmark reading the shared one.
Medians of several runs; ratios against the warm, no-read-ahead run of the same corpus in this process.

    python benchmarks/bench_cold.py [--quick]
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import mmap
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import DATA_DIR, REPEATS, bench_main, corpus, figure, markdown_table
from sjsonl import JSONLDataset
from sjsonl.sampling import BlockShuffle, Permutation

COLUMNS = ["corpus", "access", "variant", "cache", "median", "vs warm baseline", "vs cold, no read-ahead"]
RUNS = REPEATS
READAHEAD = 1024  # records hinted ahead (the default of ds.readahead())
BLOCK, WINDOW = 256, 64  # block_shuffle defaults
_LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def private_copy(kind: str, nbytes: int) -> Path:
    """The cached corpus copied to a directory of its own (flushed: dirty pages cannot be dropped)."""
    source = corpus(kind, nbytes)
    target = DATA_DIR / "cold" / source.name
    if not target.exists() or target.stat().st_size != source.stat().st_size:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        with open(target, "rb+") as f:
            os.fsync(f.fileno())
    return target


def evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(16 << 20):
            pass


def resident(path: Path) -> float:
    """Fraction of the file's pages in the page cache (``mincore`` on a fresh map of it)."""
    size = path.stat().st_size
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pages = -(-size // mmap.PAGESIZE)
        vec = (ctypes.c_ubyte * pages)()
        view = np.frombuffer(mm, dtype=np.uint8)  # an address for a read-only map
        addr = view.ctypes.data
        _LIBC.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        if _LIBC.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore failed")
        del view
        return float(np.frombuffer(vec, dtype=np.uint8).__and__(1).mean())


def madvise_random(path: Path) -> None:
    """``madvise(MADV_RANDOM)`` on every map of ``path`` in this process, found in ``/proc/self/maps``
    (the guarded map the default read path uses does not expose its address)."""
    target = str(path.resolve())
    _LIBC.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    advised = 0
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].rstrip("\n") == target:
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                if _LIBC.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), mmap.MADV_RANDOM) != 0:
                    raise OSError(ctypes.get_errno(), f"madvise failed on the map of {path}")
                advised += 1
    if not advised:
        raise RuntimeError(f"{path} is not mapped in this process: nothing to advise")


def timed(path: Path, cold: bool, random_map: bool, body: Callable[[JSONLDataset], object]) -> float:
    """Seconds ``body`` takes on a fresh dataset, after evicting (cold) or reading (warm) the data.

    ``random_map``: ``madvise(MADV_RANDOM)`` on the dataset's map, which turns off the kernel's fault
    read-around — what the kernel does by itself when the data is larger than RAM (after 100 page faults
    that find nothing cached) and close to what a small ``read_ahead_kb`` gives."""
    gc.collect()  # unmap the previous run's dataset: mapped pages are not evicted
    (evict if cold else warm)(path)
    if cold and resident(path) > 0.001:
        raise RuntimeError(f"{path} is still in the page cache after POSIX_FADV_DONTNEED")
    ds = JSONLDataset(path)
    if random_map:
        ds._files[0].storage.buffer()  # mapped now, so that the advice reaches the map the reads use
        madvise_random(path)
    t0 = time.perf_counter()
    body(ds)
    seconds = time.perf_counter() - t0
    del ds
    return seconds


def drain(it) -> None:
    for _ in it:
        pass


def bench_corpus(kind: str, nbytes: int, label: str) -> list[dict]:
    path = private_copy(kind, nbytes)
    n = len(JSONLDataset(path))  # builds the index once, outside the timings
    picks = np.random.default_rng(0).integers(0, n, 4000 if kind == "short" else 2000).tolist()

    def random_access(ds: JSONLDataset) -> None:
        for i in picks:
            ds[i]

    ra = f"`ds.readahead({READAHEAD})"
    off = ", read-around off"
    # (access, variant, body, MADV_RANDOM, measured warm too)
    cases: list[tuple[str, str, Callable[[JSONLDataset], object], bool, bool]] = [
        ("random `ds[i]`", "`ds[i]`", random_access, False, True),
        ("random `ds[i]`", "`ds[i]`" + off, random_access, True, False),
        ("shuffled pass", "`ds.shuffle(0)`", lambda ds: drain(ds.shuffle(0)), False, True),
        (
            "shuffled pass",
            ra + ".shuffle(0)`",
            lambda ds: drain(ds.readahead(READAHEAD).shuffle(0)),
            False,
            True,
        ),
        ("shuffled pass", "`ds.shuffle(0)`" + off, lambda ds: drain(ds.shuffle(0)), True, False),
        (
            "shuffled pass",
            ra + ".shuffle(0)`" + off,
            lambda ds: drain(ds.readahead(READAHEAD).shuffle(0)),
            True,
            False,
        ),
        ("shuffled pass", "`ds.block_shuffle(0)`", lambda ds: drain(ds.block_shuffle(0)), False, True),
        ("shuffled pass", "`ds.block_shuffle(0)`" + off, lambda ds: drain(ds.block_shuffle(0)), True, False),
        (
            "shuffled pass",
            ra + ".block_shuffle(0)`" + off,
            lambda ds: drain(ds.readahead(READAHEAD).block_shuffle(0)),
            True,
            False,
        ),
    ]
    rows, baseline, cold_plain = [], {}, {}
    for access, variant, body, random_map, with_warm in cases:
        for cold in (False, True) if with_warm else (True,):
            seconds = statistics.median(timed(path, cold, random_map, body) for _ in range(RUNS))
            count = len(picks) if access.startswith("random") else n
            if not cold:
                baseline.setdefault(access, seconds)
            if cold:
                cold_plain.setdefault((access, random_map), seconds)
            if access.startswith("random"):
                median = f"{seconds / count * 1e6:,.1f} µs/rec"
            else:
                median = f"{count / seconds / 1e3:,.0f} k rec/s"
            rows.append(
                {
                    "corpus": label,
                    "access": access,
                    "variant": variant,
                    "cache": "cold" if cold else "warm",
                    "median": median,
                    "vs warm baseline": f"{baseline[access] / seconds:.2f}× speed",
                    "vs cold, no read-ahead": f"{cold_plain[(access, random_map)] / seconds:.2f}×"
                    if cold
                    else "",
                }
            )
            print(rows[-1], file=sys.stderr, flush=True)
            if access.startswith("random") and cold and not random_map:
                figure(
                    f"get_{kind}_cold",
                    seconds / count * 1e6,
                    "µs",
                    median_of=RUNS,
                    what=f"random `ds[i]`, cold page cache, {label}",
                    baseline="the same reads, page-cached",
                    baseline_value=baseline[access] / count * 1e6,
                )
            if variant == ra + ".shuffle(0)`" + off:
                figure(
                    f"readahead_{kind}",
                    count / seconds,
                    "rec/s",
                    median_of=RUNS,
                    what=f"cold shuffled pass, read-around off, `ds.readahead({READAHEAD})`, {label}",
                    baseline="the same pass without read-ahead",
                    baseline_value=count / cold_plain[(access, random_map)],
                )
    return rows


def order_quality(order: np.ndarray, span: int) -> dict[str, float]:
    """Of one order (judged by the window ``span`` = B·W): mean |displacement| / n, how often records
    adjacent in the file end up ≤ ``span`` and ≤ 1024 apart, and how many distinct 256-record stretches of
    the file a batch of 32 draws."""
    n = len(order)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    gaps = np.abs(np.diff(position))  # output distance of records i and i+1 of the file
    batches = order[: n - n % 32].reshape(-1, 32) // 256
    return {
        "displacement": float(np.abs(position - np.arange(n)).mean() / n),
        "near_span": float((gaps <= span).mean()),
        "near_1024": float((gaps <= 1024).mean()),
        "stretches": float(np.mean([len(np.unique(b)) for b in batches[:4000]])),
    }


def shuffle_quality(orders: dict[str, tuple[np.ndarray, int]]) -> list[dict]:
    rows = []
    for name, (order, span) in orders.items():
        q = order_quality(order, span)
        rows.append(
            {
                "order": name,
                "mean abs(displacement) / n": f"{q['displacement']:.3f}",
                "P(file neighbours ≤ B·W apart)": f"{q['near_span']:.3f} (B·W = {span})",
                "P(≤ 1024 apart)": f"{q['near_1024']:.3f}",
                "distinct 256-record stretches per batch of 32": f"{q['stretches']:.1f}",
            }
        )
    return rows


def quality_orders(n: int) -> dict[str, tuple[np.ndarray, int]]:
    pos = np.arange(n, dtype=np.int64)
    orders = {"exact `shuffle`": (Permutation(n, seed=0).take(pos), BLOCK * WINDOW)}
    for block, window in ((BLOCK, WINDOW), (64, 16), (1024, 64)):
        name = f"block_shuffle(block_size={block}, window={window})"
        orders[name] = (BlockShuffle(n, block, window).take(pos), block * window)
    return orders


def quality_rows(n: int = 1_000_000) -> list[dict]:
    return shuffle_quality(quality_orders(n))


def quality_figures(n: int = 1_000_000) -> None:
    """Block shuffle at its defaults against the exact shuffle (deterministic: no timing)."""
    orders = quality_orders(n)
    exact = order_quality(*orders["exact `shuffle`"])
    block = order_quality(*orders[f"block_shuffle(block_size={BLOCK}, window={WINDOW})"])
    name = f"`block_shuffle(0)` (B={BLOCK}, W={WINDOW}), n = {n:,}"
    figure(
        "block_neighbours",
        block["near_span"],
        "P",
        median_of=1,
        what=f"{name}: records adjacent in the file ending ≤ B·W apart",
        baseline="exact shuffle",
        baseline_value=exact["near_span"],
    )
    figure(
        "block_stretches",
        block["stretches"],
        "stretches",
        median_of=1,
        what=f"{name}: distinct 256-record stretches of the file in a batch of 32",
        baseline="exact shuffle",
        baseline_value=exact["stretches"],
    )


def run(quick: bool) -> list[dict]:
    nbytes = (64 if quick else 256) << 20
    rows = []
    for kind in ("short", "long"):
        rows += bench_corpus(kind, nbytes, f"{kind}, {nbytes >> 20} MiB")
    quality_figures()
    return rows


def main() -> None:
    bench_main(__doc__, run, COLUMNS, "64 MiB corpora instead of 256 MiB")
    print()
    quality = quality_rows()
    print(markdown_table(quality, list(quality[0])))


if __name__ == "__main__":
    main()
