"""Partial and typed decoding against a full parse, on records with 24 top-level fields (one nested
object, one ~1.5 KB text), all-ASCII and with some non-ASCII words: what ``fields=`` and ``schema=``
save, and the stdlib/orjson line loops as baselines in the same run. (A projection checks the UTF-8 of
what it skips — free for ASCII records, a decode of the bytes otherwise.) Then the parser itself: msgspec,
which sjsonl parses with (exact big integers), against ``orjson.loads`` on the same lines — short ASCII
records, and the short and long benchmark corpora (non-ASCII throughout).

    python benchmarks/bench_decode.py [--quick]
"""

from __future__ import annotations

import json
import os
import random
import sys

import msgspec
import numpy as np
import orjson

sys.path.insert(0, os.path.dirname(__file__))
from common import DATA_DIR, REPEATS, bench_main, corpus, figure, median_seconds
from sjsonl import JSONLDataset
from sjsonl.records.decode import fast_loads

COLUMNS = ["benchmark", "variant", "median", "ratio", "note"]


class Meta(msgspec.Struct):
    lang: str
    source: str
    score: float


class Row(msgspec.Struct):
    id: int
    meta: Meta
    text: str


def wide_corpus(n: int, ascii_only: bool) -> str:
    """``n`` records of 24 fields: ids, flags, numbers, short strings, a tag list, a nested ``meta``
    object and a long ``text``, in ASCII or with some non-ASCII words (cached in the benchmark data
    directory)."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    path = DATA_DIR / f"wide-{'ascii' if ascii_only else 'mixed'}-{n}.jsonl"
    if not path.exists():
        rng = random.Random(0)
        words = ["alpha", "beta", "gamma", "delta", "epsilon", "data", "zeta", "eta"]
        if not ascii_only:
            words[4:6] = ["épsilon", "数据"]
        with open(path, "w", encoding="utf-8") as f:
            for i in range(n):
                rec = {"id": i, "text": " ".join(rng.choices(words, k=250))}
                rec["meta"] = {
                    "lang": rng.choice(["en", "fr", "zh"]),
                    "source": "web",
                    "score": rng.random(),
                    "url": f"https://example.com/{i}",
                    "tags": ["a", "b"],
                }
                for k in range(21):
                    rec[f"f{k:02d}"] = rng.choice(
                        [rng.random(), rng.randint(0, 10**9), "x" * rng.randint(1, 30), True, None]
                    )
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return str(path)


def _drain(it) -> int:
    n = 0
    for _ in it:
        n += 1
    return n


def run(quick: bool = False) -> list[dict]:
    n = 5_000 if quick else 30_000
    rows = [row for ascii_only in (True, False) for row in _rows(wide_corpus(n, ascii_only), n, ascii_only)]
    return rows + parser_rows(20_000 if quick else 200_000)


def _first_lines(path, n: int) -> list[bytes]:
    with open(path, "rb") as f:
        return [line for line, _ in zip(f, range(n))]


def parser_rows(n: int) -> list[dict]:
    """µs per record of sjsonl's parser (msgspec) and of ``orjson.loads`` on the same ``n`` lines."""
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "data", "zeta", "eta", "the", "of", "and"]
    ascii_lines = [
        json.dumps(
            {"id": i, "text": " ".join(rng.choices(words, k=rng.randint(10, 30))), "score": rng.random()}
        ).encode()
        for i in range(n)
    ]
    corpora = {
        "ascii_short": ("short ASCII records (id, text, score)", ascii_lines),
        "short": ("short benchmark records", _first_lines(corpus("short", 16 << 20), n)),
        "long": ("long benchmark records", _first_lines(corpus("long", 64 << 20), n // 4)),
    }
    rows = []
    for tag, (label, lines) in corpora.items():
        per = 1e6 / len(lines)
        ours = median_seconds(lambda lines=lines: [fast_loads(line) for line in lines]) * per
        theirs = median_seconds(lambda lines=lines: [orjson.loads(line) for line in lines]) * per
        size = sum(map(len, lines)) / len(lines)
        title = f"parse one record, {label}, {len(lines):,} lines of {size:.0f} B"
        rows.append({"benchmark": title, "variant": "orjson.loads (baseline)", "median": f"{theirs:.2f} µs"})
        rows.append(
            {
                "benchmark": title,
                "variant": "msgspec (sjsonl's parser)",
                "median": f"{ours:.2f} µs",
                "ratio": f"{ours / theirs:.2f}×",
                "note": "ratio = time vs orjson",
            }
        )
        figure(
            f"parser_{tag}",
            ours,
            "µs",
            what=f"{title}: msgspec, the parser sjsonl uses",
            median_of=REPEATS,
            baseline="`orjson.loads`",
            baseline_value=theirs,
        )
    return rows


def _rows(path: str, n: int, ascii_only: bool) -> list[dict]:
    ds = JSONLDataset(path)
    with open(path, "rb") as f:
        lines = f.readlines()
    proj = JSONLDataset(path, fields=["id", "meta.lang"])
    variants = {
        "full parse (sjsonl)": lambda: _drain(ds),
        'fields=["id", "meta.lang"]': lambda: _drain(proj),
        'select_columns(["id"])': lambda: _drain(ds.select_columns(["id"])),
        "schema=Row (id, meta, text)": lambda: _drain(JSONLDataset(path, schema=Row)),
        "json.loads line loop": lambda: _drain(json.loads(line) for line in lines),
        "orjson line loop": lambda: _drain(orjson.loads(line) for line in lines),
    }
    times = {name: median_seconds(fn) for name, fn in variants.items()}
    base = times["full parse (sjsonl)"]
    label = f"{n:,} records of 24 fields, {'ASCII' if ascii_only else 'some non-ASCII'}"
    tag = "ascii" if ascii_only else "mixed"
    for key, name, against in [
        (f"full_{tag}", "full parse (sjsonl)", "orjson line loop"),
        (f"fields_{tag}", 'fields=["id", "meta.lang"]', "full parse (sjsonl)"),
        (f"select_{tag}", 'select_columns(["id"])', "full parse (sjsonl)"),
        (f"schema_{tag}", "schema=Row (id, meta, text)", "full parse (sjsonl)"),
    ]:
        figure(
            key,
            n / times[name],
            "rec/s",
            what=f"iteration, `{name}`, {label}",
            median_of=REPEATS,
            baseline=f"`{against}`",
            baseline_value=n / times[against],
        )
    rows = [
        {
            "benchmark": f"iteration, {label}",
            "variant": name,
            "median": f"{t:.3f} s",
            "ratio": f"{base / t:.2f}×",
            "note": f"{n / t / 1e3:,.0f} k rec/s; ratio = speed vs full parse",
        }
        for name, t in times.items()
    ]
    idx = np.random.default_rng(0).integers(0, n, 5_000)
    full_get = median_seconds(lambda: [ds[int(i)] for i in idx]) / len(idx)
    proj_get = median_seconds(lambda: [proj[int(i)] for i in idx]) / len(idx)
    figure(
        f"get_fields_{tag}",
        proj_get * 1e6,
        "µs",
        median_of=REPEATS,
        what=f'random `ds[i]` with `fields=["id", "meta.lang"]`, {label}',
        baseline="a full parse",
        baseline_value=full_get * 1e6,
    )
    rows.append(
        {"benchmark": f"random ds[i], {label}", "variant": "full parse", "median": f"{full_get * 1e6:.1f} µs"}
    )
    rows.append(
        {
            "benchmark": f"random ds[i], {label}",
            "variant": 'fields=["id", "meta.lang"]',
            "median": f"{proj_get * 1e6:.1f} µs",
            "ratio": f"{full_get / proj_get:.2f}×",
        }
    )
    return rows


if __name__ == "__main__":
    bench_main(__doc__, run, COLUMNS, "5,000 records instead of 30,000")
