"""gzip backends: rapidgzip against indexed_gzip for the index build and for random ``ds[i]``.

Baselines in the same run: ``gzip -dc f | wc -l`` (reading the bytes once), indexed_gzip's bare full pass
(what sjsonl's indexed_gzip build costs before scanning), rapidgzip's bare pass on 1 and 2 threads (with
its seek points), and bare random reads through each decompressor (seek, read the record, orjson.loads)
from the same seek points. Before timing anything the run checks that rapidgzip's points, imported into
indexed_gzip, read the same bytes as the plain file at random offsets, and that both builds give the same
offsets.

    python benchmarks/bench_gzip.py [--quick]
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import orjson

sys.path.insert(0, os.path.dirname(__file__))
from common import DATA_DIR, REPEATS, bench_main, corpus, environ, figure, median_seconds
from sjsonl import JSONLDataset, JSONLIndexer
from sjsonl.storage import gzip_build
from sjsonl.storage.compressed import GZIP_SPACING

COLUMNS = ["benchmark", "variant", "median", "ratio", "note"]
BACKENDS = ("indexed_gzip", "rapidgzip")


def _gzip_copy(path) -> str:
    """``path``.gz as bench_storage makes it (Python's gzip, level 6), cached beside the corpus."""
    gz = str(path) + ".gz"
    if not os.path.exists(gz):
        with open(path, "rb") as src, gzip.open(gz + ".tmp", "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(gz + ".tmp", gz)
    return gz


def _igz_pass(gz: str) -> int:
    import indexed_gzip

    with indexed_gzip.IndexedGzipFile(gz, spacing=GZIP_SPACING, drop_handles=False) as f:
        pos = 0
        while data := f.raw.pread(4 << 20, pos):
            pos += len(data)
        return f.raw.npoints


def _rapidgzip_pass(gz: str, threads: int) -> bytes:
    with open(gz, "rb") as f:
        build = gzip_build.ParallelPass(f, GZIP_SPACING, threads=threads)
        for _ in build.chunks(4 << 20):
            pass
    assert build.points is not None
    return build.points


def _shell(cmd: str) -> None:
    subprocess.run(cmd, shell=True, check=True, capture_output=True)


def _with_backend(backend: str, fn: Callable[[], object]) -> Callable[[], object]:
    def run():
        with environ(gzip_build.BUILD_ENV, backend):
            return fn()

    return run


def _verify(gz: str, plain: str, points: bytes) -> int:
    """rapidgzip's points in indexed_gzip read what the plain file holds, at 300 random offsets and
    around every point; return how many points."""
    import indexed_gzip

    raw = np.memmap(plain, dtype=np.uint8, mode="r")
    with indexed_gzip.IndexedGzipFile(gz, drop_handles=False) as f:
        f.import_index(fileobj=io.BytesIO(points))
        rng = np.random.default_rng(1)
        starts = rng.integers(0, len(raw) - 4096, 300).tolist()
        starts += [p for k in range(1, f.raw.npoints) for p in (k * GZIP_SPACING - 7, k * GZIP_SPACING)]
        for s in starts:
            s = max(0, min(s, len(raw) - 4096))
            assert f.raw.pread(4096, s) == raw[s : s + 4096].tobytes(), f"{gz}: bytes differ at {s}"
        return f.raw.npoints


def _bare_reads(read: Callable[[int, int], bytes], offsets: np.ndarray, picks: list[int]) -> None:
    for i in picks:
        orjson.loads(read(int(offsets[i]), int(offsets[i + 1])))


def _one_corpus(kind: str, mb: int, index_root: str, singles: int) -> list[dict]:
    import indexed_gzip
    import rapidgzip

    plain = str(corpus(kind, mb << 20))
    gz = _gzip_copy(plain)
    label = f"{kind} records, {mb} MiB ({os.path.getsize(gz) / 1e6:.0f} MB .gz)"
    rows: list[dict] = []

    def row(bench, variant, median, ratio="", note=""):
        rows.append(
            {"benchmark": f"{bench}, {label}", "variant": variant, "median": median}
            | {"ratio": ratio, "note": note}
        )

    # ---- correctness first: rapidgzip's points read right through indexed_gzip; both builds agree
    points = _rapidgzip_pass(gz, 1)
    npoints = _verify(gz, plain, points)
    built = {}
    for backend in BACKENDS:
        indexer = _with_backend(backend, lambda: JSONLIndexer(gz))()
        indexer.populate_index()
        built[backend] = np.asarray(indexer.index)
    assert np.array_equal(built["indexed_gzip"], built["rapidgzip"]), f"{gz}: offsets differ"

    # ---- index build
    zcat = median_seconds(lambda: _shell(f"gzip -dc {gz} | wc -l"))
    igz = median_seconds(lambda: _igz_pass(gz))
    row("index build", "`gzip -dc | wc -l` (baseline)", f"{zcat:.3f} s", "1.00× zcat")
    row("index build", "indexed_gzip bare pass", f"{igz:.3f} s", f"{igz / zcat:.2f}× zcat", "+ seek points")
    for threads in (1, 2):
        t = median_seconds(lambda n=threads: _rapidgzip_pass(gz, n))
        row(
            "index build",
            f"rapidgzip bare pass, {threads} thread{'s' * (threads > 1)}",
            f"{t:.3f} s",
            f"{t / zcat:.2f}× zcat, {t / igz:.2f}× igz",
            f"+ export of {npoints} seek points",
        )
    sjsonl_build = {}
    for backend in BACKENDS:
        t = median_seconds(_with_backend(backend, lambda: JSONLIndexer(gz).populate_index()))
        sjsonl_build[backend] = t
        faster = sjsonl_build["indexed_gzip"] / t
        row(
            "index build",
            f"sjsonl `JSONLIndexer(gz).populate_index()`, {backend}",
            f"{t:.3f} s",
            f"{t / zcat:.2f}× zcat" + (f", {faster:.2f}× faster" if backend == "rapidgzip" else ""),
        )
    what = f"`.gz` index build, {label}, rapidgzip"
    figure(
        f"build_{kind}",
        sjsonl_build["rapidgzip"],
        "s",
        what=what,
        median_of=REPEATS,
        baseline="`gzip -dc | wc -l`",
        baseline_value=zcat,
    )
    figure(
        f"build_{kind}_vs_indexed_gzip",
        sjsonl_build["rapidgzip"],
        "s",
        what=what,
        median_of=REPEATS,
        baseline="the same build with indexed_gzip",
        baseline_value=sjsonl_build["indexed_gzip"],
    )

    # ---- random ds[i]: sjsonl reads through indexed_gzip, from either build's points; bare readers
    datasets = {}
    for backend in BACKENDS:
        index_dir = os.path.join(index_root, f"{kind}-{backend}")
        datasets[backend] = _with_backend(backend, lambda d=index_dir: JSONLDataset(gz, index_dir=d))()
    n = len(datasets["indexed_gzip"])
    offsets = np.append(built["indexed_gzip"], os.path.getsize(plain)).astype(np.int64)
    # new random records in every run (warm-up and repeats): rapidgzip caches decompressed chunks, so
    # records read again, or a file small enough to fit its cache, would measure the cache instead
    rng = np.random.default_rng(0)

    def timed(read_all: Callable[[list[int]], object]) -> float:
        return median_seconds(lambda: read_all(rng.integers(0, n, singles).tolist())) / singles

    base, per_backend = None, {}
    for backend, ds in datasets.items():
        t = timed(lambda picks, ds=ds: [ds[i] for i in picks])
        base, per_backend[backend] = base or t, t
        row("random `ds[i]`", f"sjsonl, points built by {backend}", f"{t * 1e3:.2f} ms", f"{t / base:.2f}×")
    with indexed_gzip.IndexedGzipFile(gz, drop_handles=False, buffer_size=4096) as f:
        f.import_index(fileobj=io.BytesIO(points))
        t = timed(lambda picks: _bare_reads(lambda a, b: f.raw.pread(b - a, a), offsets, picks))
    row("random `ds[i]`", "bare indexed_gzip pread + orjson", f"{t * 1e3:.2f} ms", f"{t / base:.2f}×")
    bare_igz = t
    what = f"random `ds[i]`, `.gz`, {label} (seek points from rapidgzip, the default build)"
    figure(
        f"get_{kind}",
        per_backend["rapidgzip"] * 1e3,
        "ms",
        what=what,
        median_of=REPEATS,
        baseline="bare indexed_gzip read + `orjson.loads`",
        baseline_value=bare_igz * 1e3,
    )
    for threads in (1, 2):
        with rapidgzip.RapidgzipFile(gz, parallelization=threads, chunk_size=GZIP_SPACING) as r:
            r.import_index(io.BytesIO(points))

            def read(a: int, b: int, r=r) -> bytes:
                r.seek(a)
                return r.read(b - a)

            t = timed(lambda picks, read=read: _bare_reads(read, offsets, picks))
        row(
            "random `ds[i]`",
            f"bare rapidgzip seek+read + orjson, {threads} thread{'s' * (threads > 1)}",
            f"{t * 1e3:.2f} ms",
            f"{t / base:.2f}×",
            "same seek points; chunk cache",
        )
        if threads == 1:
            figure(
                f"rapidgzip_get_{kind}",
                t * 1e3,
                "ms",
                what=f"bare rapidgzip random read, {label}",
                median_of=REPEATS,
                baseline="bare indexed_gzip read",
                baseline_value=bare_igz * 1e3,
            )

    # ---- reopen + read the last record, with the seek points saved beside the index
    def reopen_and_read_last(index_dir: str) -> None:
        JSONLDataset(gz, index_dir=index_dir, build_index_on_load=False)[n - 1]

    for backend in BACKENDS:
        index_dir = os.path.join(index_root, f"{kind}-{backend}")
        seek_file = str(datasets[backend].index_paths[0])[: -len(".npy")] + ".seekpoints"
        t = median_seconds(lambda d=index_dir: reopen_and_read_last(d))
        row(
            "reopen .gz + read the last record",
            f"seek points saved by the {backend} build",
            f"{t * 1e3:.1f} ms",
            "",
            f"{os.path.getsize(seek_file) / 1e6:.1f} MB .seekpoints",
        )
    os.unlink(seek_file)
    t = median_seconds(lambda d=index_dir: reopen_and_read_last(d))
    row(
        "reopen .gz + read the last record",
        "no saved seek points (reference)",
        f"{t * 1e3:.1f} ms",
        "",
        "decompresses up to the record",
    )
    return rows


_BUILD_IN_A_PROCESS = """
import shutil, sys, tempfile, time
from sjsonl import JSONLDataset
t0 = time.perf_counter()
index_dir = tempfile.mkdtemp(prefix="sjsonl-bench-gzip-")
try:
    n = len(JSONLDataset(sys.argv[1], index_dir=index_dir))  # the index and seek points written, as users do
finally:
    shutil.rmtree(index_dir)
with open("/proc/self/status") as f:  # its own peak: ru_maxrss keeps a forking parent's across exec
    peak_kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
print(n, time.perf_counter() - t0, peak_kib)
"""


def _bomb(records: int) -> str:
    """``records`` lines of ``1\\n`` gzipped at level 9 (268M of them: 537 MB in a 510 KiB file), cached."""
    import zlib

    path = str(DATA_DIR / f"ones-{records}.jsonl.gz")
    if not os.path.exists(path):
        deflate, block = zlib.compressobj(9, zlib.DEFLATED, 31), b"1\n" * (1 << 20)
        with open(path + ".tmp", "wb") as out:
            for _ in range(records >> 20):
                out.write(deflate.compress(block))
            out.write(deflate.flush())
        os.replace(path + ".tmp", path)
    return path


def _tiny_records(quick: bool) -> list[dict]:
    """The per-record cost of a ``.gz`` build: ~50-byte records, and the 268M-record ``1\\n`` bomb (each
    build in a fresh process: its peak RSS is that process's)."""
    rows: list[dict] = []
    plain = str(corpus("tiny", (16 if quick else 192) << 20))
    cases = [(_gzip_copy(plain), "~50-byte records"), (_bomb((16 if quick else 256) << 20), "`1\\n` records")]
    for gz, kind in cases:
        zcat = median_seconds(lambda gz=gz: _shell(f"gzip -dc {gz} | wc -l"), repeats=3)
        runs = []
        for _ in range(3):
            out = subprocess.run(
                [sys.executable, "-c", _BUILD_IN_A_PROCESS, gz], capture_output=True, text=True, check=True
            )
            n, seconds, rss_kib = out.stdout.split()
            runs.append((float(seconds), int(rss_kib)))
        seconds = sorted(t for t, _ in runs)[1]
        rss = max(r for _, r in runs) / 1024
        label = f"{kind}: {int(n):,} records, {os.path.getsize(gz) / 1e6:.1f} MB .gz"
        rows.append(
            {"benchmark": f"index build, {label}", "variant": "`gzip -dc | wc -l` (baseline)"}
            | {"median": f"{zcat:.3f} s", "ratio": "1.00× zcat", "note": ""}
        )
        rows.append(
            {"benchmark": f"index build, {label}", "variant": "sjsonl `JSONLDataset(gz)`, index written"}
            | {"median": f"{seconds:.3f} s", "ratio": f"{seconds / zcat:.2f}× zcat"}
            | {
                "note": f"in a fresh process (after its imports); peak RSS {rss:,.0f} MiB; "
                f"uint32 offsets {int(n) * 4 >> 20:,} MiB"
            }
        )
        key = "build_tiny" if "50" in kind else "build_ones"
        figure(
            key,
            seconds,
            "s",
            what=f"`.gz` index build, {label}; peak RSS {rss:,.0f} MiB",
            median_of=3,
            baseline="`gzip -dc | wc -l`",
            baseline_value=zcat,
        )
    return rows


def run(quick: bool = False) -> list[dict]:
    mb = 16 if quick else 256
    index_root = tempfile.mkdtemp(prefix="sjsonl-bench-gzip-")
    try:
        with environ("SJSONL_INDEX_DIR", index_root):  # fresh indexes; never beside the cached corpora
            singles = 100 if quick else 400
            rows = [r for kind in ("short", "long") for r in _one_corpus(kind, mb, index_root, singles)]
            return rows + _tiny_records(quick)
    finally:
        shutil.rmtree(index_root, ignore_errors=True)


if __name__ == "__main__":
    t0 = time.perf_counter()
    bench_main(__doc__, run, COLUMNS, "small corpora, for a smoke run")
    print(f"\n({time.perf_counter() - t0:.0f} s; corpora cached in {DATA_DIR})")
