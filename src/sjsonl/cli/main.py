"""``sjsonl`` command line: index, verify, info, get, head, sample, stats, filter, demo.

Example:
    $ sjsonl index data.jsonl          # build data.index.npy beside it
    $ sjsonl verify data.jsonl         # every line that is not valid JSON; exit status 1 if any
    $ sjsonl get data.jsonl 0 -1 10:20 # records as pretty JSON (numbers and Python slices)
    $ sjsonl filter data.jsonl "meta.lang == 'en'" -o en.jsonl

Exit status: 0 success, 1 failure (an unreadable file, bad lines found), 2 usage error (argparse, a
refused filter expression, a refused output file: an input, one of its index files, or an existing file
without ``--force``), 130 on Ctrl-C, and 141 (128 + SIGPIPE, what the shell reports for ``cat``
or ``seq``) when the reader of stdout goes away early — quietly, as in ``sjsonl head f | head -1``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from sjsonl._version import __version__
from sjsonl.cli.commands import (
    clean,
    cmd_demo,
    cmd_filter,
    cmd_get,
    cmd_head,
    cmd_index,
    cmd_info,
    cmd_sample,
    error,
    human_bytes,
    plural,
)
from sjsonl.cli.executors import ExecutorSpec, parse_executor
from sjsonl.cli.stats import run_stats, run_verify
from sjsonl.errors import InvalidArgumentError, SJSONLError

# clean, error, human_bytes and plural live in sjsonl.cli.commands; re-exported for existing callers
__all__ = ["EXIT_SIGPIPE", "build_parser", "clean", "error", "human_bytes", "main", "plural"]

#: The exit status when stdout's reader goes away: 128 + SIGPIPE, as the shell reports for `cat`.
EXIT_SIGPIPE = 141
#: The choices of ``--on-bad-lines`` (see :class:`sjsonl.JSONLDataset`).
BAD_LINE_POLICIES = ("error", "skip", "warn")


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


def executor_arg(text: str) -> ExecutorSpec:
    """argparse type: an executor name (see :mod:`sjsonl.cli.executors`)."""
    try:
        return parse_executor(text)
    except InvalidArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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

    def force(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--force",
            action="store_true",
            help="replace the output file if it exists (never an input or one of its index files)",
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
        "index --compact big.jsonl",
        "index --executor dask-local:4 shards/*.jsonl",
        "index --executor dask://scheduler:8786 --index-dir /shared/indexes /shared/data/*.jsonl",
    )
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--check", action="store_true", help="also verify that every record is valid JSON")
    p.add_argument(
        "--compact",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write a compact index (NAME.index.packed, about 1-1.6 bytes a record, read in place) instead "
        "of the plain NAME.index.npy; --no-compact writes the plain one (default: compact only when the "
        "plain index would be 256 MiB or more)",
    )
    p.add_argument(
        "--on-bad-lines",
        choices=BAD_LINE_POLICIES,
        default=None,
        help="parse every record: error (exit 1 if any is bad, as --check), skip (report the count) or warn "
        "(each bad line on stderr); skip and warn exit 0 (default: records are not parsed)",
    )
    p.add_argument(
        "--executor",
        type=executor_arg,
        default=None,
        metavar="EXECUTOR",
        help="one task per file on processes[:N] (this machine), dask-local[:N] (a local Dask cluster of N "
        "worker processes) or dask://HOST:PORT (a running Dask scheduler; workers must see the files and "
        "--index-dir at the same paths); Dask needs pip install 'sjsonl[cluster]'. With local processes "
        "--workers defaults to the cores divided among them (default: one file after another here)",
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
    p.set_defaults(func=run_verify)

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
        "--plot",
        metavar="PNG",
        default=None,
        help="also write a matplotlib figure, format from the extension (default: none)",
    )
    force(p)
    progress(p)
    p.set_defaults(func=run_stats)

    p = add(
        "filter",
        "write the records that match EXPR to OUT as JSON Lines (fields, dotted paths, [key], "
        "== != < <= > >= in, and/or/not, len(), str methods; a missing field is None). A JSON Lines "
        "record keeps its bytes; an element of a JSON document (a .json array, --field) becomes one "
        "compact line",
        "filter data.jsonl \"meta.lang == 'en' and len(text) > 100\" -o en.jsonl",
        "filter data.jsonl \"tags[0] in ['a', 'b'] or title.startswith('How')\" -o out.jsonl",
        'filter squad.json --field data "len(title) > 10" -o long.jsonl',
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("expr", metavar="EXPR")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUT",
        help="the new file, written atomically; never the input or one of its index files",
    )
    p.add_argument(
        "--field",
        default=None,
        metavar="KEY",
        help="the records are the list under this key of FILE, a JSON object, as load_dataset's field= "
        "(default: a .json array's elements, else the lines)",
    )
    p.add_argument("--on-bad-lines", choices=BAD_LINE_POLICIES, default="error", help="lines not JSON")
    force(p)
    progress(p)
    p.set_defaults(func=cmd_filter)

    p = add("demo", "generate a sample corpus, index it and show random access and its speed", "demo")
    p.add_argument(
        "--dir",
        default=None,
        help="where to write the sample: sample.jsonl, or sample-N.jsonl when that exists (default: a "
        "temp directory)",
    )
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
