"""``sjsonl`` command line: index, info, get, head, demo.

Example:
    $ sjsonl index data.jsonl          # build data.index.npy beside it
    $ sjsonl info data.jsonl           # records, bytes, index status, record sizes
    $ sjsonl get data.jsonl 0 -1       # records as pretty JSON
    $ sjsonl head data.jsonl -n 5
    $ sjsonl demo                      # generate a sample corpus and show what sjsonl does
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

from . import __version__
from .dataset import JSONLDataset
from .errors import SJSONLError
from .index import find_index
from .indexer import JSONLIndexer
from .storage import open_storage


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def cmd_index(args: argparse.Namespace) -> None:
    for path in args.files:
        indexer = JSONLIndexer(
            path, check=args.check, workers=args.workers, progress=args.progress, index_dir=args.index_dir
        )
        t0 = time.perf_counter()
        indexer.populate_index()
        out = indexer.write_index_to_disk()
        secs = time.perf_counter() - t0
        size = indexer.stamp.size if indexer.stamp else 0
        print(
            f"{indexer.path}: {len(indexer):,} records, {_mb(size)} in {secs:.3f} s "
            f"({_mb(size / max(secs, 1e-9))}/s) -> {out}"
        )


def cmd_info(args: argparse.Namespace) -> None:
    storage = open_storage(args.file)  # local, .gz/.zst, or a URL (credentials from fsspec's usual places)
    found, problems = find_index(storage, index_dir=args.index_dir)
    status = "fresh" if found else ("stale: " + problems[-1] if problems else "missing")
    ds = JSONLDataset(args.file, build_index_on_load=not args.no_build, index_dir=args.index_dir)
    sizes = ds.record_sizes()
    print(f"file:     {storage.path}")
    stored = storage.stamp(fingerprint=False).stored
    packed = "" if stored == ds.nbytes else f" ({stored:,} stored)"
    print(f"bytes:    {ds.nbytes:,}{packed}")
    print(f"records:  {len(ds):,}")
    print(f"index:    {ds.index_paths[0] or '(in memory; could not be saved)'}")
    print(f"status:   {status}{'' if found else ' (rebuilt now)'}")
    if len(sizes):
        print(f"record bytes: mean {sizes.mean():,.0f}, max {sizes.max():,} (with line ending)")


def cmd_get(args: argparse.Namespace) -> None:
    ds = JSONLDataset(args.file, index_dir=args.index_dir)
    for i in args.indices:
        print(json.dumps(ds[i], indent=2, ensure_ascii=False))


def cmd_head(args: argparse.Namespace) -> None:
    ds = JSONLDataset(args.file, index_dir=args.index_dir)
    for rec in ds.take(args.n):
        print(json.dumps(rec, indent=2 if args.pretty else None, ensure_ascii=False))


def cmd_demo(args: argparse.Namespace) -> None:
    from .demo import run_demo

    run_demo(args.dir, n_records=args.records)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sjsonl", description="Random-access JSON Lines datasets.")
    parser.add_argument("--version", action="version", version=f"sjsonl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        if name != "demo":
            p.add_argument("--index-dir", help="keep indexes in this directory (default: beside the data)")
        return p

    p = add("index", "build the index of each file (and save it)")
    p.add_argument("files", nargs="+")
    p.add_argument("--check", action="store_true", help="also verify that every record is valid JSON")
    p.add_argument("--workers", type=int, default=None, help="scanning threads (default: all cores)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None)
    p.set_defaults(func=cmd_index)

    p = add("info", "records, bytes, index location and status, record sizes")
    p.add_argument("file")
    p.add_argument("--no-build", action="store_true", help="fail instead of building a missing index")
    p.set_defaults(func=cmd_info)

    p = add("get", "print records by number as pretty JSON (negative numbers count from the end)")
    p.add_argument("file")
    p.add_argument("indices", nargs="+", type=int)
    p.set_defaults(func=cmd_get)

    p = add("head", "print the first records, one JSON document per line")
    p.add_argument("file")
    p.add_argument("-n", type=int, default=10)
    p.add_argument("--pretty", action="store_true")
    p.set_defaults(func=cmd_head)

    p = add("demo", "generate a sample corpus, index it and show random access and its speed")
    p.add_argument("--dir", default=None, help="where to write the sample (default: a temp directory)")
    p.add_argument("--records", type=int, default=200_000)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except (SJSONLError, OSError, IndexError) as exc:
        print(f"sjsonl: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `sjsonl head big.jsonl | head -1`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
