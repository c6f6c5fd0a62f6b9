"""``sjsonl`` command line: index, verify, info, get, head, sample, stats, filter, demo.

Example:
    $ sjsonl index data.jsonl          # build data.index.npy beside it
    $ sjsonl verify data.jsonl         # every line that is not valid JSON; exit status 1 if any
    $ sjsonl get data.jsonl 0 -1 10:20 # records as pretty JSON (numbers and Python slices)
    $ sjsonl filter data.jsonl "meta.lang == 'en'" -o en.jsonl

Exit status: 0 success, 1 failure (an unreadable file, bad lines found), 2 usage error (argparse, a
refused filter expression), 130 on Ctrl-C, and 141 (128 + SIGPIPE, what the shell reports for ``cat``
or ``seq``) when the reader of stdout goes away early — quietly, as in ``sjsonl head f | head -1``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__
from .dataset import JSONLDataset
from .errors import SJSONLError
from .index import find_index
from .storage import open_storage

#: The exit status when stdout's reader goes away: 128 + SIGPIPE, as the shell reports for `cat`.
EXIT_SIGPIPE = 141
_POSITION = re.compile(r":? line \d+ column \d+ \(char (\d+)\)")


def plural(n: int, word: str) -> str:
    """``plural(1, "record")`` → ``'1 record'``; ``plural(1000, "record")`` → ``'1,000 records'``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


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


def clean(message: object) -> str:
    """An error message for the terminal: a parser's ``line 2 column 1 (char 7)`` names a place inside
    the record, so it reads ``at column 8 of the record`` (it is never a line of the file)."""
    return _POSITION.sub(lambda m: f" at column {int(m.group(1)) + 1} of the record", str(message))


def error(message: object) -> None:
    """Print ``sjsonl: error: message`` on stderr."""
    print(f"sjsonl: error: {clean(message)}", file=sys.stderr)


def examples(*lines: str) -> str:
    """An epilog listing example command lines."""
    return "examples:\n" + "\n".join(f"  sjsonl {line}" for line in lines)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (1 or more), got {value}")
    return value


def index_dir_arg(text: str) -> str:
    """argparse type: a directory (it may not exist yet), never an existing file."""
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} exists and is not a directory")
    return text


def index_spec(text: str) -> int | slice:
    """argparse type: ``N`` or a Python slice ``A:B`` / ``A:B:C`` (each part optional, negatives allowed)."""
    try:
        if ":" not in text:
            return int(text)
        parts = [int(p) if p.strip() else None for p in text.split(":")]
        if len(parts) > 3 or parts[2:] == [0]:
            raise ValueError
        return slice(*parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N, A:B or A:B:C (step not 0), got {text!r}") from None


def resolve_indices(specs: Sequence[int | slice], n: int, name: str) -> list[int]:
    """Record numbers for ``specs`` in a dataset of ``n``; ``IndexError`` naming ``name`` and the range."""
    out: list[int] = []
    for spec in specs:
        if isinstance(spec, slice):
            out += range(*spec.indices(n))
        elif -n <= spec < n:
            out.append(spec % n)
        else:
            valid = (
                "it has none"
                if n == 0
                else f"valid: 0..{n - 1} or -{n}..-1".replace("0..0 or -1..-1", "0 or -1")
            )
            raise IndexError(f"{name} has {plural(n, 'record')}: index {spec} is out of range ({valid})")
    return out


def _dump(rec: Any, pretty: bool = False) -> str:
    return json.dumps(rec, indent=2 if pretty else None, ensure_ascii=False)


def cmd_index(args: argparse.Namespace) -> int:
    """``sjsonl index``: build and save each file's index; go on past a failing file, exit 1 at the end."""
    from .cli_stats import index_one

    if args.check and args.on_bad_lines not in (None, "error"):
        error(f"--check is --on-bad-lines error; it cannot go with --on-bad-lines {args.on_bad_lines}")
        return 2
    failed = 0
    for path in args.files:
        try:
            index_one(path, args)
        except (SJSONLError, OSError) as exc:
            if isinstance(exc, BrokenPipeError):
                raise
            error(exc)
            failed += 1
    if failed and len(args.files) > 1:
        error(f"{failed} of {len(args.files)} files failed")
    return 1 if failed else 0


def cmd_verify(args: argparse.Namespace) -> int:
    """``sjsonl verify``: report every bad line of each file; exit 1 when any (or a file fails)."""
    from .cli_stats import verify

    return verify(args)


def cmd_info(args: argparse.Namespace) -> int:
    """``sjsonl info``: records, bytes, index location and status, record sizes."""
    storage = open_storage(args.file)  # local, .gz/.zst, or a URL (credentials from fsspec's usual places)
    found, problems = find_index(storage, index_dir=args.index_dir)
    status = "fresh" if found else ("stale: " + problems[-1] if problems else "missing")
    ds = JSONLDataset(args.file, build_index_on_load=not args.no_build, index_dir=args.index_dir)
    sizes = ds.record_sizes()
    print(f"file:     {storage.path}")
    stored = storage.stamp(fingerprint=False).stored
    packed = "" if stored == ds.nbytes else f", {stored:,} stored"
    print(f"bytes:    {ds.nbytes:,} ({human_bytes(ds.nbytes)}{packed})")
    print(f"records:  {len(ds):,}")
    print(f"index:    {ds.index_paths[0] or '(in memory; could not be saved)'}")
    print(f"status:   {status}{'' if found else ' (rebuilt now)'}")
    if len(sizes):
        print(
            f"record bytes: mean {human_bytes(sizes.mean())}, min {human_bytes(sizes.min())}, "
            f"max {human_bytes(sizes.max())} (with line ending)"
        )
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    """``sjsonl get``: records by number or slice, as pretty JSON."""
    ds = JSONLDataset(args.file, index_dir=args.index_dir)
    for i in resolve_indices(args.indices, len(ds), args.file):  # every index checked before printing
        sys.stdout.write(_dump(ds[i], pretty=not args.compact) + "\n")
    return 0


def cmd_head(args: argparse.Namespace) -> int:
    """``sjsonl head``: the first N records (``-n -K``: all but the last K), one JSON document a line."""
    ds = JSONLDataset(args.file, index_dir=args.index_dir)
    n = args.n if args.n >= 0 else max(0, len(ds) + args.n)
    for rec in ds.take(n):
        sys.stdout.write(_dump(rec, args.pretty) + "\n")
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    """``sjsonl sample``: N records drawn uniformly without replacement, the same for the same seed."""
    ds = JSONLDataset(args.file, index_dir=args.index_dir)
    if args.n > len(ds):
        error(f"{args.file} has {plural(len(ds), 'record')}: cannot draw {args.n:,} without replacement")
        return 1
    for rec in ds.shuffle(seed=args.seed).take(args.n):
        sys.stdout.write(_dump(rec) + "\n")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """``sjsonl stats``: sizes, fields, value types, lengths and a size histogram."""
    from .cli_stats import run_stats

    return run_stats(args)


def cmd_filter(args: argparse.Namespace) -> int:
    """``sjsonl filter``: write the lines whose record matches a safe expression, bytes unchanged."""
    from .expr import ExprError, compile_expr, write_matching

    try:
        match = compile_expr(args.expr)
    except ExprError as exc:
        error(f"invalid filter expression: {exc.reason}\n{exc.pointer()}")
        return 2
    ds = JSONLDataset(args.file, index_dir=args.index_dir, on_bad_lines=args.on_bad_lines)
    out = os.path.realpath(args.output)
    protected = [os.path.realpath(p) for p in [*ds.files, *ds.index_paths] if p]
    if out in protected or (os.path.exists(out) and any(_same(out, p) for p in protected)):
        error(f"refusing to write to {args.output}: it is the input (or its index); choose another -o")
        return 1
    if os.path.isdir(out):
        error(f"-o {args.output} is a directory; give a file name")
        return 1
    matched = write_matching(ds, match, out, args.progress)
    print(f"{matched:,} of {plural(len(ds), 'record')} matched -> {args.output}")
    return 0


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def cmd_demo(args: argparse.Namespace) -> int:
    """``sjsonl demo``: generate a sample corpus and show random access and its speed."""
    from .demo import run_demo

    run_demo(args.dir, n_records=args.records)
    return 0


_SLICE = re.compile(r"^-?\d*:-?\d*(:-?\d*)?$")


class _Parser(argparse.ArgumentParser):
    """``get f -3:`` : a negative slice is a value, not an unknown option."""

    def _parse_optional(self, arg_string: str) -> Any:
        return None if _SLICE.match(arg_string) else super()._parse_optional(arg_string)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Epilogs as written; every option's help ends with its default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or not action.option_strings or action.default in (None, argparse.SUPPRESS):
            return text
        return text + " (default: %(default)s)"


def build_parser() -> argparse.ArgumentParser:
    """The ``sjsonl`` argument parser, with every subcommand."""
    parser = _Parser(
        prog="sjsonl",
        description="Random-access JSON Lines datasets.",
        formatter_class=_Formatter,
        epilog=examples("index data.jsonl", "verify *.jsonl", "get data.jsonl 0 -1 10:20", "stats data.jsonl")
        + "\n\nexit status: 0 ok, 1 failure, 2 usage error, 141 when stdout's reader exits early.",
    )
    parser.add_argument("--version", action="version", version=f"sjsonl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add(name: str, help: str, *lines: str) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name, help=help, description=help, epilog=examples(*lines), formatter_class=_Formatter
        )
        if name != "demo":
            p.add_argument(
                "--index-dir",
                type=index_dir_arg,
                help="keep indexes in this directory (default: beside the data)",
            )
        return p

    def progress(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="show progress bars on stderr (default: only for large files, on a terminal)",
        )

    def workers(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--workers", type=positive_int, default=None, help="parallel workers (default: all cores)"
        )

    p = add(
        "index",
        "build the index of each file (and save it)",
        "index a.jsonl b.jsonl",
        "index --check a.jsonl",
    )
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--check", action="store_true", help="also verify that every record is valid JSON")
    p.add_argument(
        "--on-bad-lines",
        choices=("error", "skip", "warn"),
        default=None,
        help="parse every record: error (exit 1 if any is bad, as --check), skip (report the count) or warn "
        "(each bad line on stderr); skip and warn exit 0 (default: records are not parsed)",
    )
    workers(p)
    progress(p)
    p.set_defaults(func=cmd_index)

    p = add(
        "verify",
        "report every line that is not valid JSON",
        "verify a.jsonl b.jsonl",
        "verify --json a.jsonl",
    )
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--json", action="store_true", help="print one JSON document (for scripts)")
    workers(p)
    progress(p)
    p.set_defaults(func=cmd_verify)

    p = add("info", "records, bytes, index location and status, record sizes", "info data.jsonl")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--no-build", action="store_true", help="fail instead of building a missing index")
    p.set_defaults(func=cmd_info)

    p = add(
        "get",
        "print records by number or Python slice (negative numbers count from the end) as pretty JSON",
        "get data.jsonl 0 -1",
        "get data.jsonl 10:20 -3: ::100",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("indices", nargs="+", type=index_spec, metavar="INDEX", help="N, A:B or A:B:C")
    p.add_argument("--compact", action="store_true", help="one line per record instead of indented JSON")
    p.set_defaults(func=cmd_get)

    p = add(
        "head", "print the first records, one JSON document per line", "head data.jsonl -n 5", "head -n -3 f"
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "-n", type=int, default=10, help="records to print; -K prints all but the last K (as GNU head)"
    )
    p.add_argument("--pretty", action="store_true", help="indented JSON")
    p.set_defaults(func=cmd_head)

    p = add(
        "sample", "print N records drawn uniformly without replacement", "sample data.jsonl -n 100 --seed 7"
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("-n", type=positive_int, default=10, help="records to draw")
    p.add_argument(
        "--seed", type=int, default=0, help="the same seed draws the same records in the same order"
    )
    p.set_defaults(func=cmd_sample)

    p = add(
        "stats", "record sizes, fields, value types and lengths", "stats data.jsonl", "stats f --plot s.png"
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--sample",
        type=positive_int,
        default=None,
        metavar="N",
        help="look at N evenly spaced records (default: all up to 200,000 records, else 100,000)",
    )
    p.add_argument(
        "--plot", metavar="PNG", default=None, help="also write a matplotlib figure (default: none)"
    )
    progress(p)
    p.set_defaults(func=cmd_stats)

    p = add(
        "filter",
        "write the lines whose record matches EXPR to OUT, unchanged (fields, dotted paths, [key], "
        "== != < <= > >= in, and/or/not, len(), str methods; a missing field is None)",
        "filter data.jsonl \"meta.lang == 'en' and len(text) > 100\" -o en.jsonl",
        "filter data.jsonl \"tags[0] in ['a', 'b'] or title.startswith('How')\" -o out.jsonl",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("expr", metavar="EXPR")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="the new file (written atomically)")
    p.add_argument(
        "--on-bad-lines", choices=("error", "skip", "warn"), default="error", help="lines not JSON"
    )
    progress(p)
    p.set_defaults(func=cmd_filter)

    p = add("demo", "generate a sample corpus, index it and show random access and its speed", "demo")
    p.add_argument("--dir", default=None, help="where to write the sample (default: a temp directory)")
    p.add_argument("--records", type=positive_int, default=200_000, help="records to generate")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    try:
        args = build_parser().parse_args(argv)
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except BrokenPipeError:  # `sjsonl head big.jsonl | head -1`: stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_SIGPIPE
    except KeyboardInterrupt:
        return 130
    except (SJSONLError, OSError, IndexError) as exc:
        error(clean(str(exc)))
        return 1


if __name__ == "__main__":
    sys.exit(main())
