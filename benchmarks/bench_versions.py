"""Before/after: the hot paths of this checkout against an earlier commit, on the same corpora, same run.

The earlier commit's ``src`` is exported (``git archive``) into a temporary directory; each version runs
the same measurement script in its own fresh processes, alternating (A, B, A, B, …) so both see the same
machine state, and the table gives medians and the ratio. Used for the "never a wrong record" work:
pinning, verification and the one-file index must cost (almost) nothing on ``ds[i]``, iteration and open;
``benchmarks/run.py`` runs it against :data:`BASE`, the commit before that work (pure Python and numpy:
its index scan has no compiled twin).

    python benchmarks/bench_versions.py [--base d36b2b4] [--rounds 5] [--quick] [--compiled]

``--compiled`` builds the earlier commit's C extensions too (as ``bench_json_rules`` does), for a commit that
has them: both versions then read through the same kind of code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from bench_json_rules import exported
from common import REPEATS, corpus, figure, figures_table, markdown_table, take_figures

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = "d36b2b4"  # the commit before "never a wrong record" (pinning, the verified one-file index)
COLUMNS = ["corpus", "what", "before", "after", "after / before", "mmap=False"]
#: Figure keys of the measurements quoted (the others are in the table only).
KEYS = {
    "open, index on disk": "open_disk",
    "random ds[i]": "get",
    "iteration per record": "iter",
    "batch of 64 (DataLoader)": "batch",
    "index build": "build",
}

# Run under one version (PYTHONPATH chooses it); prints one JSON line of timings in seconds.
_MEASURE = r"""
import json, os, random, sys, tempfile, time
import sjsonl
from sjsonl import JSONLDataset, JSONLIndexer
path, index_dir, mmap_flag = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
kw = {"mmap": False} if not mmap_flag else {}
out = {}
t = time.perf_counter()
ds = JSONLDataset(path, index_dir=index_dir, **kw)
out["first open (builds the index)"] = time.perf_counter() - t
import sjsonl.index.store as store
getattr(store, "_VERIFIED", set()).clear()  # as in a new process: the index file is checked in full
t = time.perf_counter()
JSONLDataset(path, index_dir=index_dir, **kw)
out["open, index on disk"] = time.perf_counter() - t
opens = []
for _ in range(20):
    t = time.perf_counter()
    JSONLDataset(path, index_dir=index_dir, **kw)
    opens.append(time.perf_counter() - t)
opens.sort(); out["open again"] = opens[len(opens) // 2]
n = len(ds)
rng = random.Random(0)
picks = [rng.randrange(n) for _ in range(200_000)]
for i in picks[:20_000]:
    ds[i]
t = time.perf_counter()
for i in picks:
    ds[i]
out["random ds[i]"] = (time.perf_counter() - t) / len(picks)
t = time.perf_counter()
for _ in ds:
    pass
out["iteration per record"] = (time.perf_counter() - t) / n
batch = picks[:64]
t = time.perf_counter()
for k in range(0, 64_000, 64):
    ds[picks[k : k + 64]]
out["batch of 64 (DataLoader)"] = (time.perf_counter() - t) / 1000
t = time.perf_counter(); JSONLIndexer(path).populate_index(); out["index build"] = time.perf_counter() - t
print(json.dumps(out))
"""


def run_version(src: str, path: str, mmap: bool) -> dict[str, float]:
    index_dir = tempfile.mkdtemp(prefix="sjsonl-bench-idx-")
    env = {**os.environ, "PYTHONPATH": src}
    args = [sys.executable, "-c", _MEASURE, str(path), index_dir, "1" if mmap else "0"]
    out = subprocess.run(args, check=True, capture_output=True, text=True, env=env)
    subprocess.run(["rm", "-rf", index_dir], check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _export(base: str, into: str) -> str:
    """``base``'s ``src`` directory, exported into ``into`` (no worktree: the repository is left alone)."""
    archive = subprocess.run(
        ["git", "-C", REPO, "archive", "--format=tar", base, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return os.path.join(into, "src")


def run(quick: bool = False, base: str = BASE, rounds: int = REPEATS, compiled: bool = False) -> list[dict]:
    size = 32 << 20 if quick else 256 << 20
    with tempfile.TemporaryDirectory(prefix="sjsonl-base-") as tmp:
        before = exported(base, tmp) if compiled else _export(base, tmp)
        versions = {"before": before, "after": os.path.join(REPO, "src")}
        rows = []
        for kind in ("short", "long"):
            path = corpus(kind, size)
            cases = [("before", True), ("after", True), ("after", False)]
            samples: dict[tuple[str, bool], list[dict[str, float]]] = {c: [] for c in cases}
            for _ in range(rounds):
                for case in cases:
                    samples[case].append(run_version(versions[case[0]], str(path), case[1]))
            label = f"{kind} {size >> 20} MiB"
            for metric in samples[cases[0]][0]:
                med = {c: statistics.median(s[metric] for s in samples[c]) for c in cases}
                unit, scale = ("ms", 1e3) if med[cases[0]] > 1e-4 else ("µs", 1e6)
                before, after, safe = (med[c] * scale for c in cases)
                rows.append(
                    {
                        "corpus": label,
                        "what": metric,
                        "before": f"{before:.3g} {unit}",
                        "after": f"{after:.3g} {unit}",
                        "after / before": f"{after / before:.2f}×",
                        "mmap=False": f"{safe:.3g} {unit} ({safe / before:.2f}×)",
                    }
                )
                if metric in KEYS:
                    what = f"{metric}, {label}, this checkout"
                    figure(
                        f"{KEYS[metric]}_{kind}",
                        after,
                        unit,
                        what=what,
                        median_of=rounds,
                        baseline=f"commit {base}",
                        baseline_value=before,
                    )
                if metric == "random ds[i]":
                    figure(
                        f"get_{kind}_pread",
                        safe,
                        unit,
                        what=f"{metric}, {label}, `mmap=False`",
                        median_of=rounds,
                        baseline=f"commit {base}",
                        baseline_value=before,
                    )
    return rows


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--base", default=BASE, help=f"the earlier commit (any git ref; default {BASE})")
    parser.add_argument("--rounds", type=int, default=REPEATS)
    parser.add_argument("--quick", action="store_true", help="32 MiB corpora")
    parser.add_argument("--compiled", action="store_true", help="build the earlier commit's C extensions")
    args = parser.parse_args()
    rows = run(args.quick, args.base, args.rounds, args.compiled)
    print(f"medians of {args.rounds} fresh processes per version, alternating; before = {args.base}\n")
    print(markdown_table(rows, COLUMNS))
    print("\n" + figures_table(take_figures()))


if __name__ == "__main__":
    main()
