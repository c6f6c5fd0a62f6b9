"""The reporting commands of the ``sjsonl`` command line: ``verify`` and ``stats``.

``stats`` reads record sizes from the index (every record) and decodes all records, or ``--sample N``
evenly spaced ones, for field presence, value types and string/list lengths; the size histogram is drawn
with block characters, and ``--plot`` writes the same as a matplotlib figure.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from sjsonl.cli.commands import clean, error, human_bytes, plural, size_summary
from sjsonl.cli.output import OutputGuard, output_file
from sjsonl.data.corpus import find_bad_lines
from sjsonl.data.dataset import JSONLDataset
from sjsonl.errors import SJSONLError
from sjsonl.records.badlines import as_dict
from sjsonl.runtime.parallel import map_in_order
from sjsonl.runtime.progress import Progress

#: ``verify`` checks several files in parallel processes once they hold this much (or with --workers).
PARALLEL_FILES_MIN_BYTES = 64 << 20
#: ``stats`` decodes every record up to this many, else :data:`DEFAULT_SAMPLE` evenly spaced ones.
ALL_RECORDS_UP_TO, DEFAULT_SAMPLE = 200_000, 100_000
MAX_FIELDS_SHOWN = 50
_TYPES = {
    str: "str",
    int: "int",
    float: "float",
    bool: "bool",
    type(None): "null",
    list: "list",
    dict: "object",
}
_EIGHTHS = " ▏▎▍▌▋▊▉"


def verify_file(
    path: str, index_dir: str | None, workers: int | None, progress: bool | None
) -> dict[str, Any]:
    """``{"path", "records", "bad_lines": [{line, offset, reason, excerpt, record}], "error"}``."""
    try:
        ds = JSONLDataset(path, index_dir=index_dir, workers=workers, progress=progress)
        bad = find_bad_lines(path, workers=workers, progress=progress, index_dir=index_dir)
    except BrokenPipeError:
        raise
    except (SJSONLError, OSError) as exc:
        return {"path": str(path), "records": None, "bad_lines": [], "error": clean(exc)}
    rows = [{k: v for k, v in as_dict(b).items() if k != "path"} for b in bad]
    for row in rows:
        row["reason"] = clean(row["reason"])
    return {"path": ds.files[0], "records": len(ds), "bad_lines": rows, "error": None}


def _results(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    files, workers = args.files, args.workers or os.cpu_count() or 1
    local = [f for f in files if os.path.isfile(f)]
    big = sum(os.path.getsize(f) for f in local) >= PARALLEL_FILES_MIN_BYTES
    if len(files) > 1 and workers > 1 and (args.workers or big):
        # whole files in parallel processes (parsing is CPU-bound Python), each checked in its process
        tasks = [(f, args.index_dir, 1, False) for f in files]
        yield from map_in_order(verify_file, tasks, workers)
    else:  # one file at a time; find_bad_lines parses a large one in `workers` processes
        for f in files:
            yield verify_file(f, args.index_dir, args.workers, args.progress)


def run_verify(args: argparse.Namespace) -> int:
    """``sjsonl verify``: every bad line and a summary per file (or ``--json``); 1 if any bad line."""
    results, failed = [], False
    for res in _results(args):
        results.append(res)
        failed = failed or bool(res["error"] or res["bad_lines"])
        if args.json:
            continue
        if res["error"]:
            error(res["error"])
            continue
        for b in res["bad_lines"]:
            print(
                f"{res['path']}:{b['line']}: byte offset {b['offset']}: {b['reason']}; "
                f"line starts {b['excerpt']}"
            )
        bad = res["bad_lines"]
        lines = ", ".join(str(b["line"]) for b in bad[:10]) + (", …" if len(bad) > 10 else "")
        lines = f"{plural(len(bad), 'bad line')} (line{'s' if len(bad) > 1 else ''} {lines})"
        print(f"{res['path']}: {plural(res['records'], 'record')}, {lines if bad else 'all valid'}")
    if args.json:
        total = {
            "records": sum(r["records"] or 0 for r in results),
            "bad_lines": sum(len(r["bad_lines"]) for r in results),
        }
        print(json.dumps({"ok": not failed, **total, "files": results}, ensure_ascii=False, indent=2))
    return 1 if failed else 0


def _acc(table: dict[str, list[float]], key: str, n: int) -> None:
    s = table.get(key)
    if s is None:
        table[key] = [1, n, n, n]
    else:
        s[0] += 1
        s[1] += n
        s[2] = min(s[2], n)
        s[3] = max(s[3], n)


def field_stats(records: Iterable[Any]) -> dict[str, Any]:
    """Presence, value types and string/list lengths of each top-level field of ``records``."""
    seen, present, types, not_objects = 0, Counter(), defaultdict(Counter), Counter()  # type: ignore[var-annotated]
    strlen: dict[str, list[float]] = {}
    listlen: dict[str, list[float]] = {}
    for rec in records:
        seen += 1
        if type(rec) is not dict:
            not_objects[_TYPES.get(type(rec), type(rec).__name__)] += 1
            continue
        for k, v in rec.items():
            present[k] += 1
            t = _TYPES.get(type(v), "other")
            types[k][t] += 1
            if t == "str":
                _acc(strlen, k, len(v))
            elif t == "list":
                _acc(listlen, k, len(v))
    return {
        "seen": seen,
        "present": present,
        "types": types,
        "str": strlen,
        "list": listlen,
        "not_objects": not_objects,
    }


def histogram(values: np.ndarray, bins: int = 12, width: int = 40) -> list[str]:
    """Lines of a horizontal histogram of ``values`` (log-spaced bins when they span more than 20×)."""
    if not len(values):
        return []
    lo, hi = float(values.min()), float(values.max())
    log = lo > 0 and hi / lo > 20
    edges = np.geomspace(lo, hi, bins + 1) if log else np.linspace(lo, hi if hi > lo else lo + 1, bins + 1)
    counts, _ = np.histogram(values, edges)
    top = max(1, int(counts.max()))
    out = ["record size histogram" + (" (log-spaced bins):" if log else ":")]
    for a, b, c in zip(edges, edges[1:], counts.tolist()):
        eighths = round(c / top * width * 8)
        bar = "█" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")
        out.append(f"  {human_bytes(a):>8} – {human_bytes(b):<8} │{bar:<{width}}│ {c:,}")
    return out


def _summary(s: list[float] | None, what: str) -> str:
    return "" if s is None else f"{what} len {int(s[2]):,} / {s[1] / s[0]:,.1f} / {int(s[3]):,}"


def report(path: str, sizes: np.ndarray, fs: dict[str, Any], total: int) -> list[str]:
    """The text of ``sjsonl stats``."""
    seen = fs["seen"]
    out = [
        f"file:     {path}",
        f"records:  {total:,}",
        f"bytes:    {int(sizes.sum()):,} ({human_bytes(sizes.sum())})",
    ]
    if len(sizes):
        out.append(f"record size: {size_summary(sizes)}")
    scope = "all" if seen == total else f"{seen:,} evenly spaced records of {total:,}"
    out += ["", f"fields ({scope}):"]
    if fs["not_objects"]:
        kinds = ", ".join(f"{t} {c:,}" for t, c in fs["not_objects"].most_common())
        out.append(f"  records that are not JSON objects: {sum(fs['not_objects'].values()):,} ({kinds})")
    names = sorted(fs["present"], key=lambda k: -fs["present"][k])[:MAX_FIELDS_SHOWN]
    names.sort(key=list(fs["present"]).index)  # the most frequent fields, in the order first seen
    wide = max([len("field"), *(len(k) for k in names)])
    rows = [
        (
            k,
            f"{100 * fs['present'][k] / max(1, seen):.1f}%",
            ", ".join(f"{t} {c:,}" for t, c in fs["types"][k].most_common()),
            "; ".join(filter(None, [_summary(fs["str"].get(k), "str"), _summary(fs["list"].get(k), "list")])),
        )
        for k in names
    ]
    tw = max([len("types"), *(len(r[2]) for r in rows)])
    out.append(f"  {'field':<{wide}}  present  {'types':<{tw}}  lengths (min / mean / max)")
    out += [f"  {k:<{wide}}  {p:>7}  {t:<{tw}}  {ln}".rstrip() for k, p, t, ln in rows]
    if len(fs["present"]) > len(names):
        out.append(f"  … {plural(len(fs['present']) - len(names), 'more field')}")
    return [*out, "", *histogram(sizes)]


def plot_format(out: str) -> str | None:
    """The figure format ``out``'s extension names (none: PNG, as matplotlib's default), ``None`` if
    matplotlib cannot write it."""
    from matplotlib.backend_bases import FigureCanvasBase

    fmt = os.path.splitext(out)[1][1:].lower() or "png"
    return fmt if fmt in FigureCanvasBase.get_supported_filetypes() else None


def plot(out: str, sizes: np.ndarray, fs: dict[str, Any], *, replace: bool = False) -> None:
    """Write the size histogram and field presence as a figure (matplotlib, Agg backend), atomically
    (``replace``: also over an existing file)."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed, and never a GUI window
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    # initial=: an empty file gets empty axes, not a traceback
    lo, hi = max(1, int(sizes.min(initial=1))), max(2, int(sizes.max(initial=2)))
    log = hi / lo > 20
    a.hist(sizes, bins=np.geomspace(lo, hi, 40) if log else 40)
    if log:
        a.set_xscale("log")
    a.set(title="record sizes", xlabel="bytes (with line ending)", ylabel="records")
    names = list(fs["present"])[:MAX_FIELDS_SHOWN]
    b.barh(names[::-1], [100 * fs["present"][k] / max(1, fs["seen"]) for k in names[::-1]])
    b.set(title="field presence", xlabel="% of records", xlim=(0, 100))
    fig.tight_layout()
    try:
        with output_file(out, "--plot", replace=replace) as f:
            fig.savefig(f, format=plot_format(out))
    finally:
        plt.close(fig)


def _counted(records: Iterator[Any], bar: Progress, step: int) -> Iterator[Any]:
    for i, rec in enumerate(records):
        if bar.update and i % 4096 == 4095:
            bar.update(step)
        yield rec


def run_stats(args: argparse.Namespace) -> int:
    """``sjsonl stats``: sizes, fields, value types, lengths and a size histogram (``--plot``: a PNG)."""
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (checked before the work, not after it)
        except ImportError:
            error("--plot needs matplotlib, which is not installed (pip install matplotlib)")
            return 1
        if plot_format(args.plot) is None:
            kind = os.path.splitext(args.plot)[1]
            error(f"--plot {args.plot}: matplotlib cannot write {kind} files; name a .png, .svg or .pdf file")
            return 2
    ds = JSONLDataset(args.file, index_dir=args.index_dir, progress=args.progress)
    if args.plot:
        refusal = OutputGuard(ds, args.index_dir).refusal(args.plot, "--plot", force=args.force)
        if refusal:
            error(refusal)
            return 2
    n, sizes = len(ds), ds.record_sizes()
    k = min(n, args.sample or (n if n <= ALL_RECORDS_UP_TO else DEFAULT_SAMPLE))
    records = (
        iter(ds)
        if k == n
        else ds.iter_positions(np.unique(np.linspace(0, n - 1, k).round().astype(np.int64)))
    )
    bar = Progress(int(sizes.sum()), "reading records", args.progress)
    fs = field_stats(_counted(records, bar, max(1, int(sizes.sum()) // max(1, k)) * 4096))
    bar.close()
    print("\n".join(report(ds.files[0], sizes, fs, n)))
    if args.plot:
        plot(args.plot, sizes, fs, replace=args.force)
        print(f"plot -> {args.plot}")
    return 0
