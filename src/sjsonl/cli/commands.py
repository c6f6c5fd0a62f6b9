"""The commands of the ``sjsonl`` command line (index, info, get, head, sample, filter, demo) and the
terminal formatting they share with :mod:`sjsonl.cli.stats` (verify, stats).

Each ``cmd_*`` takes the parsed :class:`argparse.Namespace` and returns the exit status; the parser and
the handling of errors, Ctrl-C and a closed stdout live in :mod:`sjsonl.cli.main`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from sjsonl import errors
from sjsonl.cli.executors import ExecutorSpec, open_executor
from sjsonl.data.corpus import IndexReport, index_files
from sjsonl.data.dataset import JSONLDataset
from sjsonl.errors import out_of_range
from sjsonl.index import find_index
from sjsonl.storage import open_storage

_POSITION = re.compile(r":? line \d+ column \d+ \(char (\d+)\)")


def plural(n: int, word: str) -> str:
    """``plural(1, "record")`` → ``'1 record'``; ``plural(1000, "record")`` → ``'1,000 records'``."""
    return f"{n:,} {errors.plural(n, word).partition(' ')[2]}"


def human_bytes(n: float) -> str:
    """Decimal units with three significant digits: ``'13 B'``, ``'1.23 kB'``, ``'45.6 MB'``, ``'789 GB'``."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 999.5 or unit == "TB":
            break
        n /= 1000
    digits = 0 if unit == "B" or abs(n) >= 99.95 else 1 if abs(n) >= 9.995 else 2
    return f"{n:.{digits}f} {unit}"


def human_secs(s: float) -> str:
    """``'3 ms'``, ``'1.24 s'``, ``'2 min 5 s'``."""
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s" if s < 60 else f"{int(s // 60)} min {s % 60:.0f} s"


def size_summary(sizes: np.ndarray) -> str:
    """``'mean 1.23 kB, min 12 B, max 45.6 kB (with line ending)'`` for non-empty record ``sizes``."""
    return (
        f"mean {human_bytes(sizes.mean())}, min {human_bytes(sizes.min())}, "
        f"max {human_bytes(sizes.max())} (with line ending)"
    )


def clean(message: object) -> str:
    """An error message for the terminal: a parser's ``line 2 column 1 (char 7)`` names a place inside
    the record, so it reads ``at column 8 of the record`` (it is never a line of the file)."""
    return _POSITION.sub(lambda m: f" at column {int(m.group(1)) + 1} of the record", str(message))


def error(message: object) -> None:
    """Print ``sjsonl: error: message`` on stderr."""
    print(f"sjsonl: error: {clean(message)}", file=sys.stderr)


def resolve_indices(specs: Sequence[int | slice], n: int, name: str) -> list[int]:
    """Record numbers for ``specs`` in a dataset of ``n``; ``IndexError`` naming ``name`` and the range."""
    out: list[int] = []
    for spec in specs:
        if isinstance(spec, slice):
            out += range(*spec.indices(n))
        elif -n <= spec < n:
            out.append(spec % n)
        else:
            raise out_of_range(spec, n, name)
    return out


def _emit(records: Iterable[Any], pretty: bool = False) -> None:
    """Write each record to stdout as JSON (indented when ``pretty``), one document a line."""
    indent = 2 if pretty else None
    for rec in records:
        try:
            sys.stdout.write(json.dumps(rec, indent=indent, ensure_ascii=False) + "\n")
        except UnicodeEncodeError:  # a lone surrogate ("\ud800"), or stdout is not UTF-8: escape as \uXXXX
            sys.stdout.write(json.dumps(rec, indent=indent) + "\n")


def print_index_report(report: IndexReport, policy: str | None) -> None:
    """One line about an indexed file; with ``--on-bad-lines skip`` or ``warn`` its bad-line count (warn:
    each bad line on stderr first)."""
    note = ""
    if policy in ("skip", "warn") and report.bad_lines is not None:
        if policy == "warn":
            for message in report.bad_line_messages:
                print(f"sjsonl: warning: {clean(message)}", file=sys.stderr)
        skipped = f" ({plural(report.bad_lines, 'bad line')} skipped)"
        note = skipped if report.bad_lines else " (no bad lines)"
    secs, size = report.seconds, report.nbytes
    rate = f", {human_bytes(size / secs)}/s" if secs >= 0.1 else ""
    print(
        f"{report.path}: {plural(report.records, 'record')}{note}, "
        f"{human_bytes(size)} in {human_secs(secs)}{rate} -> {report.index_path}"
    )


def cmd_index(args: argparse.Namespace) -> int:
    """``sjsonl index``: build and save each file's index — here, or one task per file on
    ``--executor`` — and print a line as each finishes; go on past a failing file, exit 1 at the end."""
    if args.check and args.on_bad_lines not in (None, "error"):
        error(f"--check is --on-bad-lines error; it cannot go with --on-bad-lines {args.on_bad_lines}")
        return 2
    policy = "error" if args.check else args.on_bad_lines
    spec: ExecutorSpec | None = args.executor
    workers = args.workers
    if workers is None and spec is not None and spec.local_processes:
        # processes on this machine share its cores: all of them scanning with every core oversubscribes
        workers = max(1, (os.cpu_count() or 1) // spec.local_processes)
    task = {"index_dir": args.index_dir, "workers": workers, "rebuild": True, "on_bad_lines": policy,
            "compact": args.compact}  # fmt: skip
    failed = total = 0
    with open_executor(spec) if spec is not None else contextlib.nullcontext() as executor:
        for path, got in index_files(args.files, executor=executor, progress=args.progress, **task):
            total += 1
            if isinstance(got, IndexReport):
                print_index_report(got, policy)
                continue
            if isinstance(got, BrokenPipeError):
                raise got
            message = str(got) or type(got).__name__
            error(message if path in message else f"{path}: {message}")  # an executor's error may not say
            failed += 1
    if failed and total > 1:
        error(f"{failed} of {total} files failed")
    return 1 if failed else 0


def cmd_info(args: argparse.Namespace) -> int:
    """``sjsonl info``: records, bytes, index location and status, record sizes."""
    storage = open_storage(args.file)  # local, .gz/.zst, or a URL (credentials from fsspec's usual places)
    found, problems = find_index(storage, index_dir=args.index_dir)
    status = "fresh" if found else ("stale: " + problems[-1] if problems else "missing")
    ds = JSONLDataset(args.file, build_index_on_load=not args.no_build, index_dir=args.index_dir)
    f = ds._files[0]
    sizes = ds.record_sizes()
    print(f"file:     {storage.path}")
    stored = storage.stamp(fingerprint=False).stored
    packed = "" if stored == ds.file_bytes else f", {stored:,} stored"
    print(f"bytes:    {ds.file_bytes:,} ({human_bytes(ds.file_bytes)}{packed})")
    print(f"records:  {len(ds):,}")
    print(f"index:    {f.index_path or '(in memory; could not be saved)'}")
    print(f"format:   {index_format(f)}")
    done = {"found": "", "extended": " (extended now: only the appended bytes were read)"}
    print(f"status:   {status}{done.get(f.index_origin, ' (built now)')}")
    if len(sizes):
        print(f"record bytes: {size_summary(sizes)}")
    return 0


def index_format(f: Any) -> str:
    """How ``f``'s index is stored: its format, offset width and bytes per record on disk."""
    offsets = f.offsets
    on_disk = os.path.getsize(f.index_path) if f.index_path else offsets.nbytes
    per_record = f"{on_disk / len(offsets):.2f} bytes/record" if len(offsets) else "no records"
    if getattr(offsets, "is_compact", False):  # sjsonl.index.packed
        kind = f"compact .packed (blocks of {1 << offsets.log2_block}), {offsets.dtype} offsets"
    else:
        kind = f"plain .npy, {offsets.dtype} offsets"
    return f"{kind}, {per_record} ({human_bytes(on_disk)})"


def cmd_get(args: argparse.Namespace) -> int:
    """``sjsonl get``: records by number or slice, as pretty JSON."""
    ds = JSONLDataset(args.file, index_dir=args.index_dir)
    positions = resolve_indices(args.indices, len(ds), args.file)  # every index checked before printing
    _emit((ds[i] for i in positions), pretty=not args.compact)
    return 0


def cmd_head(args: argparse.Namespace) -> int:
    """``sjsonl head``: the first N records (``-n -K``: all but the last K), one JSON document a line."""
    ds = JSONLDataset(args.file, index_dir=args.index_dir)
    _emit(ds.take(args.n if args.n >= 0 else max(0, len(ds) + args.n)), args.pretty)
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    """``sjsonl sample``: N records drawn uniformly without replacement, the same for the same seed."""
    ds = JSONLDataset(args.file, index_dir=args.index_dir)
    if args.n > len(ds):
        error(f"{args.file} has {plural(len(ds), 'record')}: cannot draw {args.n:,} without replacement")
        return 1
    _emit(ds.shuffle(seed=args.seed).take(args.n))
    return 0


def cmd_filter(args: argparse.Namespace) -> int:
    """``sjsonl filter``: write the records that match a safe expression as JSON Lines (a JSON Lines
    record's bytes unchanged, a JSON document's element as one compact line)."""
    from sjsonl.cli.expr import ExprError, compile_expr
    from sjsonl.cli.output import OutputGuard, write_matching

    try:
        match = compile_expr(args.expr)
    except ExprError as exc:
        error(f"invalid filter expression: {exc.reason}\n{exc.pointer()}")
        return 2
    ds = JSONLDataset(args.file, index_dir=args.index_dir, field=args.field, on_bad_lines=args.on_bad_lines)
    refusal = OutputGuard(ds, args.index_dir).refusal(args.output, "-o", force=args.force)
    if refusal:
        error(refusal)
        return 2
    matched = write_matching(ds, match, args.output, replace=args.force, progress=args.progress)
    print(f"{matched:,} of {plural(len(ds), 'record')} matched -> {args.output}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """``sjsonl demo``: generate a sample corpus and show random access and its speed."""
    from sjsonl.cli.demo import run_demo

    run_demo(args.dir, n_records=args.records)
    return 0
