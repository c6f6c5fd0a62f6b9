"""Into MindSpore: time to first batch and rows/s, sjsonl vs the MindNLP route (🤗 Arrow + adapter).

Both routes end in a ``mindspore.dataset.GeneratorDataset`` over the same generated short-record corpus
(``sjsonl.sample``, ~180 B/record: half plain text, half chat ``messages``), batched by 32, one worker:

- **sjsonl**: ``sjsonl.mindspore.load_dataset("json", data_files=…)`` — index build into a fresh index
  directory every run, schema inference, GeneratorDataset over the raw file.
- **MindNLP route** (the baseline): 🤗 ``datasets.load_dataset("json", data_files=…)`` into a fresh HF cache
  directory (the Arrow conversion MindNLP's ``load_dataset`` ran), then a ``TransferDataset``-style map-style
  adapter (``tuple(ds[i][c] for c in columns)``). As written MindNLP's adapter cannot run under numpy 2 /
  MindSpore 2.10 (plain ``str``/``int`` values are refused; ``messages`` is a list of dicts, MindNLP issue
  #1795), so the baseline converts each value with the same :class:`sjsonl.mindspore.Schema` sjsonl uses —
  the comparison isolates the storage and access path.

Time to first batch starts with MindSpore and 🤗 already imported and the data file in the page cache.
Rows/s is measured over the first 100,000 rows (20,000 with ``--quick``; steady state), in file order and
shuffled, with two sources that cost next to nothing beside them: one constant row, and the same rows
converted beforehand (MindSpore's own per-row cost: no source delivers rows one at a time faster).

    python benchmarks/bench_mindspore.py [--quick]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault("GLOG_v", "3")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(__file__))
from common import REPEATS, bench_main, corpus, figure

COLUMNS = ["benchmark", "variant", "median", "ratio", "note"]
BATCH = 32


def _first_batch(gd) -> float:
    # a batched source's items are already batches of BATCH; otherwise MindSpore batches the rows
    batched = getattr(gd.source, "batch_size", None) is not None
    it = (gd if batched else gd.batch(BATCH)).create_tuple_iterator(output_numpy=True, num_epochs=1)
    next(it)
    return time.perf_counter()


def _drain(gd) -> float:
    """Seconds to pull every row of ``gd`` through MindSpore, in batches of BATCH."""
    t0 = time.perf_counter()
    for _ in gd.batch(BATCH).create_tuple_iterator(output_numpy=True, num_epochs=1):
        pass
    return time.perf_counter() - t0


def _source_rate(source, rows: int, shuffle: bool) -> float:
    """Rows/s of the adapter alone (``source[i]``), without MindSpore's per-row pipeline cost."""
    import numpy as np

    order = np.random.default_rng(0).permutation(len(source))[:rows] if shuffle else np.arange(rows)
    t0 = time.perf_counter()
    for i in order.tolist():
        source[i]
    return rows / (time.perf_counter() - t0)


class TransferDataset:
    """MindNLP's map-style adapter (mindnlp/dataset/load.py), converting values so MindSpore accepts them."""

    def __init__(self, arrow_ds, schema) -> None:
        self.ds, self.schema = arrow_ds, schema

    def __getitem__(self, index):
        return self.schema.convert(self.ds[int(index)])

    def __len__(self) -> int:
        return len(self.ds)


class TransferIterableDataset:
    """MindNLP's iterable adapter, for 🤗 streaming, converting values the same way."""

    def __init__(self, hf_iterable, schema) -> None:
        self.ds, self.schema = hf_iterable, schema

    def __iter__(self):
        return map(self.schema.convert, self.ds)


def sjsonl_route(path: str, index_dir: str, streaming: bool = False, **options):
    from sjsonl.mindspore import load_dataset

    return load_dataset(
        "json", data_files=path, split="train", cache_dir=index_dir, streaming=streaming, **options
    )


def mindnlp_route(path: str, cache_dir: str, streaming: bool = False):
    """MindNLP's load_dataset for a JSON file: 🤗 first, then an adapter into GeneratorDataset."""
    import datasets
    import mindspore.dataset as msd

    from sjsonl.mindspore import make_schema

    hf = datasets.load_dataset(
        "json", data_files=path, split="train", cache_dir=cache_dir, streaming=streaming
    )
    adapter = TransferIterableDataset if streaming else TransferDataset
    source = adapter(hf, make_schema(hf))
    return msd.GeneratorDataset(source, column_names=source.schema.column_names, shuffle=False), source


def _fresh_dir(root: str, name: str) -> str:
    path = os.path.join(root, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


BASELINE = "🤗 load_dataset + MindNLP-style adapter (baseline)"


def _ttfb(make, repeats: int) -> float:
    times = []
    for k in range(repeats):
        t0 = time.perf_counter()
        gd = make(k)
        gd = gd[0] if isinstance(gd, tuple) else gd
        times.append(_first_batch(gd) - t0)
        if hasattr(gd.source, "wait"):  # an early start's background work ends before the next run
            gd.source.wait()
    return statistics.median(times)


def _ttfb_rows(path: str, work: str) -> list[dict]:
    """Time to first batch: a first run (no index / empty 🤗 cache: building them is part of the time), a
    second run (index / Arrow cache reused), and streaming (neither). The first run of sjsonl goes four
    ways: column types from every row (the default), from 1,000 sampled rows, ``early_start=True`` (rows
    flow while the index is built), and that with ``batch_size``."""
    size = f"{os.path.getsize(path) >> 20} MiB"
    fresh = lambda **kw: lambda k: sjsonl_route(path, _fresh_dir(work, f"idx{k}"), **kw)  # noqa: E731
    reused = lambda **kw: lambda k: sjsonl_route(path, os.path.join(work, "idx0"), **kw)  # noqa: E731
    scenarios = [  # (label, the MindNLP route, [(variant, the sjsonl route, figure key)])
        ("first run", lambda k: mindnlp_route(path, _fresh_dir(work, f"hf{k}")), [
            ("sjsonl (types from every row)", fresh(), "ttfb_first_default"),
            ("sjsonl, infer_rows=1000", fresh(infer_rows=1000), "ttfb_first_infer_rows"),
            ("sjsonl, early_start=True", fresh(early_start=True), "ttfb_first_early"),
            (f"sjsonl, early_start=True, batch_size={BATCH}", fresh(early_start=True, batch_size=BATCH),
             "ttfb_first_early_batch"),
        ]),
        ("cache / index reused", lambda k: mindnlp_route(path, os.path.join(work, "hf0")), [
            ("sjsonl", reused(), "ttfb_reused"),
            (f"sjsonl, batch_size={BATCH}", reused(batch_size=BATCH), "ttfb_reused_batch"),
        ]),
        ("streaming=True", lambda k: mindnlp_route(path, os.path.join(work, "hf0"), streaming=True), [
            ("sjsonl", reused(streaming=True), "ttfb_streaming"),
        ]),
    ]  # fmt: skip
    out = []
    for label, hf_make, ours in scenarios:
        t_hf = _ttfb(hf_make, REPEATS)
        title = f"time to first batch, {label}"
        note = f"{size}; {REPEATS} runs"
        out.append(_row(title, BASELINE, f"{t_hf:.3f} s", "1.0×", note))
        for variant, our_make, key in ours:
            t_ours = _ttfb(our_make, REPEATS)
            r = t_hf / t_ours
            ratio = f"{r:.0f}× faster" if r >= 10 else f"{r:.2f}× faster" if r > 1 else f"{r:.2f}×"
            out.append(_row(title, variant, f"{t_ours:.3f} s", ratio, note))
            figure(
                key,
                t_ours,
                "s",
                what=f"MindSpore {title}, {variant}, {size}",
                median_of=REPEATS,
                baseline="🤗 `load_dataset` + MindNLP-style adapter",
                baseline_value=t_hf,
            )
    return out


def _drain_batches(gd, rows: int) -> float:
    """Seconds to pull ``rows`` rows of a batched ``gd`` (each item already a batch) through MindSpore."""
    t0 = time.perf_counter()
    got = 0
    for batch in gd.create_tuple_iterator(output_numpy=True, num_epochs=1):
        got += len(batch[0])
        if got >= rows:
            break
    return time.perf_counter() - t0


FLOOR = "a source returning one constant row (MindSpore's own per-row cost)"


class ConstantRow:
    """``source[0]`` for every index: a source that costs next to nothing, so what it delivers through a
    ``GeneratorDataset`` is MindSpore's own per-row ceiling on this machine."""

    def __init__(self, source) -> None:
        self.row, self.schema, self.n = source[0], source.schema, len(source)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return self.row


CONVERTED = "the same rows converted beforehand (MindSpore's per-row cost on real rows)"


class ConvertedRows:
    """The first ``rows`` rows of ``source``, converted before the run: a source that costs next to nothing
    yet hands MindSpore rows as varied as the file's (its length is ``rows``: shuffled, they are drawn from
    those) — what any source could at best deliver through a ``GeneratorDataset`` on these rows."""

    def __init__(self, source, rows: int) -> None:
        self.rows, self.schema = [source[i] for i in range(rows)], source.schema

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        return self.rows[i]


def _rate_rows(sources: dict, rows: int, shuffle: bool, batched) -> list[dict]:
    import mindspore.dataset as msd

    order = "shuffled" if shuffle else "file order"
    into, alone = {}, {}
    # sjsonl's batched delivery: one source item per batch of BATCH records
    into[f"sjsonl, batch_size={BATCH}"] = statistics.median(
        rows / _drain_batches(batched(shuffle), rows) for _ in range(REPEATS)
    )
    for name, source in sources.items():
        # num_samples bounds the run (MindSpore 2.10 serves `.take(n)` of a large map-style source at ~100
        # rows/s); the sampler still draws from the whole dataset.
        into[name] = statistics.median(
            rows / _drain(msd.GeneratorDataset(source, column_names=source.schema.column_names,
                                               shuffle=shuffle, num_samples=rows))
            for _ in range(REPEATS)
        )  # fmt: skip
        if name not in (FLOOR, CONVERTED):
            alone[name] = statistics.median(_source_rate(source, rows, shuffle) for _ in range(REPEATS))
    tag = "shuffled" if shuffle else "file_order"
    for key, rates, variant, what in [
        (
            f"rows_batch_{tag}",
            into,
            f"sjsonl, batch_size={BATCH}",
            f"rows/s into MindSpore, batch_size={BATCH}",
        ),
        (f"rows_{tag}", into, "sjsonl", "rows/s into MindSpore, per row"),
        (f"source_{tag}", alone, "sjsonl", "rows/s of the source alone (`source[i]`, no MindSpore)"),
        (f"rows_floor_{tag}", into, FLOOR, "rows/s into MindSpore, per row, of a constant-row source"),
    ]:
        figure(
            key,
            rates[variant],
            "rows/s",
            what=f"{what}, 1 worker, {order}",
            median_of=REPEATS,
            baseline="🤗 + MindNLP-style adapter",
            baseline_value=rates[BASELINE],
        )
    out = []
    for title, rates, note in [
        (f"rows/s into MindSpore, 1 worker, {order}", into, f"{rows:,} rows, batch {BATCH}; {REPEATS} runs"),
        (f"rows/s of the source alone, {order}", alone, f"source[i], no MindSpore; {REPEATS} runs"),
    ]:
        base = rates[BASELINE]
        out += [_row(title, k, f"{v:,.0f} rows/s", f"{v / base:.1f}×", note) for k, v in rates.items()]
    return out


def run(quick: bool = False) -> list[dict]:
    import datasets
    import mindspore.dataset  # noqa: F401  (imported up front: import time is part of neither route)

    from sjsonl import JSONLDataset
    from sjsonl.mindspore import make_schema, make_source, to_generator_dataset

    datasets.disable_progress_bars()
    path = str(corpus("short", (16 if quick else 256) << 20))
    with open(path, "rb") as f:  # into the page cache, for both routes
        while f.read(1 << 24):
            pass
    work = tempfile.mkdtemp(prefix="sjsonl-bench-ms-")
    try:
        out = _ttfb_rows(path, work)
        arrow = datasets.load_dataset(
            "json", data_files=path, split="train", cache_dir=os.path.join(work, "hf0")
        )
        theirs = TransferDataset(arrow, make_schema(arrow))
        ours = make_source(JSONLDataset(path, index_dir=os.path.join(work, "idx0")))

        def batched(shuffle: bool):
            ds = JSONLDataset(path, index_dir=os.path.join(work, "idx0"))
            return to_generator_dataset(ds, batch_size=BATCH, shuffle=shuffle, seed=0)

        rows = 20_000 if quick else 100_000
        converted = ConvertedRows(ours, rows)
        for shuffle in (False, True):
            out += _rate_rows(
                {BASELINE: theirs, "sjsonl": ours, FLOOR: ConstantRow(ours), CONVERTED: converted},
                rows,
                shuffle,
                batched,
            )
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _row(benchmark: str, variant: str, median: str, ratio: str, note: str) -> dict:
    return {"benchmark": benchmark, "variant": variant, "median": median, "ratio": ratio, "note": note}


def main() -> None:
    bench_main(__doc__, run, COLUMNS, "16 MiB corpus instead of 256 MiB")


if __name__ == "__main__":
    main()
