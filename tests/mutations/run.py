"""The mutation run: does the suite notice when the library breaks? (``make mutants``)

Each mutant is a one-line bug of the kind a refactoring could bring in unnoticed. For each, a copy of the
checkout (``src``, ``tests`` and what the tests read) gets that one line changed, the tests named for it run
against the copy, and the table says whether they failed — "caught" — or passed — "MISSED", a hole in the
suite. The checkout itself is never changed, so an interrupted run leaves nothing behind.

    python tests/mutations/run.py                 # every mutant
    python tests/mutations/run.py readahead sampler   # mutants whose name contains one of these words
    python tests/mutations/run.py --baseline      # the same test selections, unmutated: all must pass
    python tests/mutations/run.py --list          # the mutants and their tests

Exit status: 0 when every mutant was caught (or, with ``--baseline``, every selection passed).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from mutants import MUTANTS, Mutant  # the list, beside this script

REPO = Path(__file__).resolve().parents[2]
COPIED = ["src", "tests", "README.md", "pyproject.toml", "setup.py", "examples", "benchmarks"]
SHARED_DATA = Path(os.environ.get("SJSONL_SHARED_DATA", REPO.parent / "shared" / "data"))
TIMEOUT = 600  # seconds per mutant; each selection takes well under a minute on an idle 2-core machine


def copy_checkout(into: Path, tests_at: str | None = None) -> Path:
    """The parts of the checkout the tests use, copied (compiled extensions included); with ``tests_at``,
    the tests as they were at that git revision (to see what the suite caught before a change)."""
    root = into / REPO.name
    root.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".hypothesis", "*.egg-info")
    for name in COPIED:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, root / name)
    if tests_at:
        shutil.rmtree(root / "tests")
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", tests_at, "tests"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    return root


def apply(root: Path, mutant: Mutant) -> str:
    """Change the one line in the copy; returns the original text, to restore it."""
    path = root / mutant.file
    text = path.read_text()
    count = text.count(mutant.old)
    if count != 1:
        raise SystemExit(
            f"mutant {mutant.name}: {mutant.old!r} occurs {count} times in {mutant.file}, not once"
        )
    path.write_text(text.replace(mutant.old, mutant.new))
    return text


def run_tests(root: Path, mutant: Mutant, stop_at_first: bool, show: bool = False) -> tuple[str, str, float]:
    """Run the mutant's tests in the copy: (result, failing tests or the reason, seconds)."""
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
    if mutant.shared_data:  # the copy does not sit beside ../shared/data: name it (and never skip)
        env["SJSONL_SHARED_DATA"] = str(SHARED_DATA)
        env["SJSONL_REQUIRE_SHARED"] = "1"
    else:  # a mutant that could make sjsonl write beside read-only data must not see the shared data
        env["SJSONL_SHARED_DATA"] = str(root / "no-shared-data")
        env.pop("SJSONL_REQUIRE_SHARED", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", *mutant.tests]
    if stop_at_first:
        cmd.insert(4, "-x")
    t0 = time.monotonic()
    try:
        out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return "caught (timeout)", f"no result in {TIMEOUT} s", time.monotonic() - t0
    seconds = time.monotonic() - t0
    if show:
        print("\n".join((out.stdout + out.stderr).splitlines()[-40:]), file=sys.stderr)
    failed = re.findall(r"^FAILED (.+?)(?: - .*)?$", out.stdout, flags=re.M)
    errors = re.findall(r"^ERROR (.+?)(?: - .*)?$", out.stdout, flags=re.M)
    skipped = re.findall(r"^SKIPPED .*", out.stdout, flags=re.M)
    if out.returncode == 0:
        note = f"{len(skipped)} skipped" if skipped else ""
        return "MISSED", note, seconds
    if out.returncode == 1 and (failed or errors):  # (run --baseline: each selection passes unmutated)
        return "caught", ", ".join(short(f) for f in (failed or errors)[:3]), seconds
    tail = (out.stdout + out.stderr).strip().splitlines()[-3:]
    return f"error (exit {out.returncode})", " / ".join(tail), seconds


def short(test_id: str) -> str:
    name = test_id.replace("tests/", "").split(" - ")[0]
    return name if len(name) < 100 else name[:96] + "…]"


#: test files split out of older ones (for --tests-at a revision from before the split)
SPLIT_FROM = {
    "tests/test_trainers_trl.py": "tests/test_trainers.py",
    "tests/test_mixture_hf.py": "tests/test_mixture.py",
    "tests/test_mixture_torch.py": "tests/test_mixture.py",
    "tests/test_batch_hf.py": "tests/test_prefetch.py",
}


def whole_files(mutant: Mutant, root: Path) -> Mutant:
    """The mutant with its selection widened to whole test files (no ``-k``, no test names), as they exist
    in ``root`` — to ask what a suite from before a change caught, whatever its tests were called."""
    files = []
    for arg in mutant.tests:
        if arg.startswith("tests/"):
            path = arg.split("::")[0]
            path = path if (root / path).exists() else SPLIT_FROM.get(path, path)
            files.append(path)
    return replace(mutant, tests=tuple(dict.fromkeys(files)))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", help="run only mutants whose name contains one of these")
    parser.add_argument("--baseline", action="store_true", help="run the selections without mutating")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--tests-at", metavar="REV", help="run the tests as they were at this git revision")
    parser.add_argument("--whole-files", action="store_true", help="run whole test files, not selections")
    parser.add_argument("--show", action="store_true", help="print the end of each pytest run")
    parser.add_argument("--all-failures", action="store_true", help="do not stop at the first failing test")
    args = parser.parse_args()
    chosen = [m for m in MUTANTS if not args.names or any(w in m.name for w in args.names)]
    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.what}\n    {m.file}: {m.old.strip()!r} -> {m.new.strip()!r}")
            print(f"    {' '.join(m.tests)}")
        return 0
    if any(m.shared_data for m in chosen) and not (SHARED_DATA / "jsonl").is_dir():
        raise SystemExit(f"the real test data is not at {SHARED_DATA}: set SJSONL_SHARED_DATA")
    rows = []
    with tempfile.TemporaryDirectory(prefix="sjsonl-mutants-") as tmp:
        root = copy_checkout(Path(tmp), args.tests_at)
        for m in chosen:
            m = whole_files(m, root) if args.whole_files else m
            original = None if args.baseline else apply(root, m)
            try:
                result, by, seconds = run_tests(root, m, not args.all_failures, args.show)
            finally:
                if original is not None:
                    (root / m.file).write_text(original)
            if args.baseline:
                result = "passes" if result == "MISSED" else f"FAILS UNMUTATED: {result}"
            rows.append((m.name, by, result, seconds))
            print(f"{m.name:28} {result:10} {seconds:5.0f} s  {by}", file=sys.stderr, flush=True)
    print_table(rows)
    bad = [r for r in rows if (r[2] != "passes" if args.baseline else not r[2].startswith("caught"))]
    return 1 if bad else 0


def print_table(rows: list[tuple[str, str, str, float]]) -> None:
    cells = [("mutant", "caught by", "result")]
    cells += [(name, by or "-", f"{result} ({seconds:.0f} s)") for name, by, result, seconds in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(3)]
    for k, row in enumerate(cells):
        print(" | ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
        if k == 0:
            print("-|-".join("-" * w for w in widths))


if __name__ == "__main__":
    sys.exit(main())
