"""Column types from every row: the compiled type pass vs the Python pass and pyarrow's JSON reader, and
what it gives the default MindSpore ``load_dataset``'s first batch (issue #30).

Two generated corpora (``sjsonl.sample``): 256 MiB of short records (~180 B: half plain text, half chat
``messages``) and 1 GiB of long ones (~2 KB); ``--quick``: 16 and 64 MiB. Every file is in the page cache.

- **The type pass alone**: ``infer_schema(ds, cache=False)`` of an indexed file — compiled, on threads (the
  default), on one thread (``workers=1``), and the Python pass it replaces (the extension switched off: in
  worker processes for large files, as before); against ``pyarrow.json.read_json`` of the same file, which
  builds typed columns of every row on all cores (the goal: the compiled pass in ≤ 0.5× its time).
- **Index and types of a fresh file**: the index scan and then the type pass, against the two in one pass
  (``sjsonl.records.alongside``, what a first ``load_dataset`` does), turn about.
- **Time to first batch, first run**: ``sjsonl.mindspore.load_dataset`` with its defaults (types from every
  row), and with ``num_proc=1`` (🤗's one process: every core for the passes, as pyarrow's reader under
  🤗, see ``sjsonl.hf.load.index_workers``), into a fresh index directory, against the MindNLP route (🤗
  JSON → Arrow, then a MindNLP-style adapter) — both from ``bench_mindspore``, run the same way.
- **column_names on a fresh file**: ``sjsonl.load_dataset(...).column_names`` (index + types) vs 🤗
  ``datasets.load_dataset(...).column_names`` (the Arrow conversion), fresh index / cache each run.

    python benchmarks/bench_types.py [--quick]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("GLOG_v", "3")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(__file__))
from bench_mindspore import BASELINE, _fresh_dir, _ttfb, mindnlp_route, sjsonl_route
from common import REPEATS, bench_main, corpus, figure, interleaved_medians

COLUMNS = ["benchmark", "corpus", "variant", "median", "vs baseline", "note"]
SLOW_REPEATS = 3  # for what takes seconds a run: the Python pass, 🤗's conversion of 1 GiB


def _page_in(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def _type_pass(path: str, work: str, label: str, repeats: int) -> list[dict]:
    import pyarrow.json as pj

    from sjsonl import JSONLDataset
    from sjsonl.records import fast_types
    from sjsonl.records.schema import infer_schema

    ds = JSONLDataset(path, index_dir=_fresh_dir(work, "types"))
    native = fast_types.NATIVE
    if native is None:
        raise RuntimeError("the compiled type pass (sjsonl.records._types) is not built")

    def python_pass() -> None:
        fast_types.NATIVE = None
        try:
            infer_schema(ds, cache=False)
        finally:
            fast_types.NATIVE = native

    threads, one, arrow, python = (
        "compiled, threads (default)",
        "compiled, workers=1",
        "pyarrow.json.read_json (baseline)",
        "the Python pass (before)",
    )
    times = interleaved_medians(
        {
            threads: lambda: infer_schema(ds, cache=False),
            one: lambda: infer_schema(ds, cache=False, workers=1),
            arrow: lambda: pj.read_json(path),
        }
    )
    times[python] = interleaved_medians({python: python_pass}, repeats, warmup=0)[python]
    note = f"{len(ds):,} records"
    rows = [
        _row("type pass alone", label, name, f"{t:.3f} s", f"{t / times[arrow]:.2f}× pyarrow", note)
        for name, t in times.items()
    ]
    key, what = _key(label), f"column types of every row, {label}"
    pyarrow = "`pyarrow.json.read_json`"
    _figure(f"types_{key}", times[threads], f"{what}, compiled, threads", pyarrow, times[arrow])
    _figure(f"types_{key}_1_thread", times[one], f"{what}, compiled, one thread", pyarrow, times[arrow])
    _figure(f"types_{key}_vs_python", times[threads], f"{what}, compiled", "the Python pass", times[python])
    return rows


def _alongside(path: str, work: str, label: str) -> list[dict]:
    """A fresh file's index and every row's types: the index scan (``pread``) and then the type pass, against
    the two in one pass (``typing_alongside``: each chunk typed while the scan has it in the cache), turn
    about, each on a fresh index directory."""
    from sjsonl import JSONLDataset
    from sjsonl.records.alongside import typing_alongside
    from sjsonl.records.schema import infer_schema

    runs = iter(range(10**6))

    def after() -> None:
        infer_schema(JSONLDataset(path, index_dir=_fresh_dir(work, f"after{next(runs)}")))

    def alongside() -> None:
        with typing_alongside():
            ds = JSONLDataset(path, index_dir=_fresh_dir(work, f"along{next(runs)}"))
        infer_schema(ds)

    before, both = "index scan, then the type pass (before)", "types alongside the index scan"
    times = interleaved_medians({before: after, both: alongside})
    rows = [
        _row("index + types, fresh file", label, name, f"{t:.3f} s", f"{times[before] / t:.2f}× faster", "")
        for name, t in times.items()
    ]
    what = f"index and every row's types of a fresh file, {label}, types alongside the scan"
    _figure(f"alongside_{_key(label)}", times[both], what, "the scan, then the type pass", times[before])
    return rows


MINDNLP = "🤗 `load_dataset` + MindNLP-style adapter"


def _first_batch(path: str, work: str, label: str, repeats: int) -> list[dict]:
    title = "time to first batch, first run"
    t_hf = _ttfb(lambda k: mindnlp_route(path, _fresh_dir(work, f"hf{k}")), repeats)
    rows = [_row(title, label, BASELINE, f"{t_hf:.3f} s", "1.0×", f"{repeats} runs")]
    for variant, options, suffix in [
        ("sjsonl (types from every row)", {}, ""),
        ("sjsonl, num_proc=1", {"num_proc": 1}, "_num_proc_1"),
    ]:
        t = _ttfb(lambda k, o=options: sjsonl_route(path, _fresh_dir(work, f"idx{k}"), **o), REPEATS)
        rows.append(_row(title, label, variant, f"{t:.3f} s", f"{t_hf / t:.1f}× faster", f"{REPEATS} runs"))
        what = f"MindSpore first batch, fresh file, {variant}, {label}"
        _figure(f"ttfb_{_key(label)}{suffix}", t, what, MINDNLP, t_hf)
    return rows


def _column_names(path: str, work: str, label: str, repeats: int) -> list[dict]:
    import datasets

    import sjsonl

    def hf(k: int) -> list[str]:
        cache = _fresh_dir(work, f"hfc{k}")
        return datasets.load_dataset("json", data_files=path, split="train", cache_dir=cache).column_names

    def ours(k: int) -> list[str]:
        cache = _fresh_dir(work, f"idxc{k}")
        return sjsonl.load_dataset("json", data_files=path, split="train", cache_dir=cache).column_names

    t_hf, t = _median_seconds(hf, repeats), _median_seconds(ours, REPEATS)
    what = f"column_names of a fresh file, {label}"
    _figure(f"column_names_{_key(label)}", t, what, "🤗 `load_dataset(...).column_names`", t_hf)
    title = "column_names, fresh file"
    return [
        _row(title, label, "🤗 load_dataset (baseline)", f"{t_hf:.3f} s", "1.0×", f"{repeats} runs"),
        _row(title, label, "sjsonl.load_dataset", f"{t:.3f} s", f"{t_hf / t:.1f}× faster", f"{REPEATS} runs"),
    ]


def _median_seconds(fn: Callable[[int], object], runs: int) -> float:
    """Median seconds of ``fn(k)`` for k = 0 … runs - 1 (each run on its own fresh directory)."""
    times = []
    for k in range(runs):
        t0 = time.perf_counter()
        fn(k)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _key(label: str) -> str:
    return label.split()[-1]  # "256 MiB short" -> "short"


def _figure(key: str, value: float, what: str, baseline: str, baseline_value: float) -> None:
    figure(key, value, "s", what=what, median_of=REPEATS, baseline=baseline, baseline_value=baseline_value)


def run(quick: bool = False) -> list[dict]:
    import datasets
    import mindspore.dataset  # noqa: F401  (imported up front: import time is part of neither route)

    datasets.disable_progress_bars()
    corpora = [("short", 16 if quick else 256), ("long", 64 if quick else 1024)]
    work = tempfile.mkdtemp(prefix="sjsonl-bench-types-")
    rows: list[dict] = []
    try:
        for kind, mib in corpora:
            path = str(corpus(kind, mib << 20))
            _page_in(path)
            label = f"{mib} MiB {kind}"
            repeats = SLOW_REPEATS if quick or mib >= 1024 else REPEATS
            rows += _type_pass(path, work, label, SLOW_REPEATS)
            rows += _alongside(path, work, label)
            rows += _first_batch(path, work, label, repeats)
            rows += _column_names(path, work, label, repeats)
            shutil.rmtree(work, ignore_errors=True)
            os.makedirs(work)
        return rows
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _row(benchmark: str, corpus_: str, variant: str, median: str, ratio: str, note: str) -> dict:
    return dict(zip(COLUMNS, [benchmark, corpus_, variant, median, ratio, note]))


def main() -> None:
    bench_main(__doc__, run, COLUMNS, "16 MiB short and 64 MiB long corpora instead of 256 MiB and 1 GiB")


if __name__ == "__main__":
    main()
