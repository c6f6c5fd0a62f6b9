"""A writer that keeps changing a data file, and readers that check every record they get.

Every record carries its version and its number: ``{"v": version, "i": number, "pad": ...}``. All records
of one state of the file share a version (appends continue the current one), so a reader holding a
dataset knows what each ``ds[i]`` must be: number ``i``, and the version its first record showed. A record
that differs is a wrong record; an :class:`~sjsonl.SJSONLError` is an allowed failure (the reader then
reopens); anything else is a defect. Used by ``test_chaos.py`` in the test process, a forked worker and a
spawned worker (this module is importable by name, as spawn needs)."""

from __future__ import annotations

import gzip
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from sjsonl import JSONLDataset, SJSONLError


def records(version: int, lo: int, hi: int, pad: int) -> bytes:
    return b"".join(b'{"v": %d, "i": %d, "pad": "%s"}\n' % (version, i, b"x" * pad) for i in range(lo, hi))


class FileWriter:
    """Appends to, rewrites in place, replaces and truncates a local file (gzip-compressed if asked)."""

    OPS = ("append", "rewrite", "replace", "truncate")

    def __init__(self, path: str, compress: bool, ops: tuple[str, ...] = OPS, seed: int = 0) -> None:
        self.path, self.compress, self.ops = path, compress, ops
        self.rng = random.Random(seed)
        self.version, self.count, self.pad = 1, 0, 10

    def encode(self, data: bytes) -> bytes:
        return gzip.compress(data, 1) if self.compress else data

    def fresh(self) -> bytes:
        self.version += 1
        self.count, self.pad = self.rng.randint(500, 3000), self.rng.randint(0, 40)
        return self.encode(records(self.version, 0, self.count, self.pad))

    def start(self) -> None:
        with open(self.path, "wb") as f:
            f.write(self.fresh())

    def step(self) -> str:
        op = self.rng.choice(self.ops)
        if op == "append":  # gzip: a new member, which is how gzip files are appended to
            more = self.rng.randint(1, 300)
            with open(self.path, "ab") as f:
                f.write(self.encode(records(self.version, self.count, self.count + more, self.pad)))
            self.count += more
        elif op == "rewrite":  # same file, new bytes: O_TRUNC, then the writes
            with open(self.path, "wb") as f:
                f.write(self.fresh())
        elif op == "replace":
            tmp = self.path + ".tmp-new"
            with open(tmp, "wb") as f:
                f.write(self.fresh())
            os.replace(tmp, self.path)
        else:
            size = os.path.getsize(self.path)
            with open(self.path, "r+b") as f:
                f.truncate(self.rng.randint(size // 3, size))
            self.count = 0  # the state is cut at some byte; a later append starts a fresh version
            self.version += 1
            self.start()
        return op


def run_file_writer(
    path: str, compress: bool, ops: tuple[str, ...], seconds: float, seed: int, done: Any = None
) -> None:
    """Change the file every few ms for ``seconds`` — or, given ``done`` (an Event), until the readers are
    done, ``seconds`` at the most: a reader spawned on a loaded machine can start after any fixed time."""
    writer = FileWriter(path, compress, ops, seed)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (done is not None and done.is_set()):
        writer.step()
        time.sleep(writer.rng.uniform(0.005, 0.03))


#: a reader that has not read enough records, or seen enough versions, when its time is up goes on (the
#: version it reopens after the writer stops is one more), for at most this long
#: (a loaded machine can spend a spawned reader's whole time starting it and reopening after changes)
GRACE_SECONDS = 60.0


def read_and_check(
    open_ds: Callable[[], JSONLDataset],
    seconds: float,
    seed: int,
    ds: JSONLDataset | None = None,
    enough: tuple[int, int] = (0, 0),
) -> dict[str, Any]:
    """Read random records, batches and runs for ``seconds`` — longer, up to :data:`GRACE_SECONDS` more,
    until ``enough`` = (records read, versions seen); count reads, wrong records and errors."""
    rng = random.Random(seed)
    stats: Counter[str] = Counter()
    wrong: list[str] = []
    examples: dict[str, str] = {}  # one message per error type, for a reader of a failure report
    versions: set[int] = set()  # of the data, as the datasets read saw them
    deadline = time.monotonic() + seconds
    hard_deadline = deadline + GRACE_SECONDS

    def short() -> bool:
        return stats["reads"] < enough[0] or len(versions) < enough[1]

    while (now := time.monotonic()) < deadline or (short() and now < hard_deadline):
        try:
            if ds is None:
                ds = open_ds()
            n = len(ds)
            if n == 0:
                ds = None
                continue
            seen: int | None = None
            for _ in range(50):
                kind = rng.random()
                if kind < 0.8:
                    picks = [rng.randrange(n)]
                    got = [ds[picks[0]]]
                elif kind < 0.95:
                    picks = [rng.randrange(n) for _ in range(16)]
                    got = ds[picks]
                else:
                    lo = rng.randrange(n)
                    picks = list(range(lo, min(n, lo + 100)))
                    got = list(ds.skip(lo).take(100))
                for i, rec in zip(picks, got):
                    seen = rec["v"] if seen is None else seen
                    versions.add(seen)
                    stats["reads"] += 1
                    if rec["i"] != i or rec["v"] != seen:
                        wrong.append(f"ds[{i}] = {rec} (dataset's version {seen})")
            if rng.random() < 0.3:  # follow the writer now and then (a pinned dataset never sees it)
                ds = None
        except SJSONLError as exc:
            stats[type(exc).__name__] += 1
            examples.setdefault(type(exc).__name__, str(exc))
            ds = None
        except Exception as exc:  # a defect: the test reports it
            stats[f"unexpected {type(exc).__name__}: {exc}"] += 1
            ds = None
    return {
        "stats": dict(stats),
        "wrong": wrong[:5],
        "wrong_count": len(wrong),
        "examples": examples,
        "versions": len(versions),
    }


def open_local(path: str, index_dir: str, mmap: bool) -> Callable[[], JSONLDataset]:
    return lambda: JSONLDataset(path, index_dir=index_dir, mmap=mmap)


def child_reader(
    path: str, index_dir: str, mmap: bool, seconds: float, enough: tuple, seed: int, ds: Any, queue: Any
) -> None:
    """Entry point for a forked or spawned reader: starts from ``ds`` (inherited or unpickled)."""
    queue.put(read_and_check(open_local(path, index_dir, mmap), seconds, seed, ds, enough))


def child_s3_reader(
    url: str, options: dict, seconds: float, enough: tuple, seed: int, ds: Any, queue: Any
) -> None:
    opened = lambda: JSONLDataset(url, storage_options=options)  # noqa: E731
    queue.put(read_and_check(opened, seconds, seed, ds, enough))
