"""``sjsonl.load_dataset`` side by side with the real 🤗 ``datasets.load_dataset`` (offline), on JSON Lines
layouts ported from 🤗's own tests (``tests/test_data_files.py``: split inference by folder and file names,
sharded names, hidden and special files; ``tests/packaged_modules/test_json.py``: missing keys, mixed
int/float columns, unicode; ``tests/test_load.py``: ``data_files`` as str/list/dict, ``data_dir``, split
slicing, ``features``).

Every layout × call gives exactly 🤗's rows (with sjsonl's defaults; values compared with their types: ``1``
is not ``1.0``), or raises what 🤗 raises: an error of the same built-in kind (🤗's builder errors are
compared by the cause they wrap) with the same message — or, where the wording differs, naming the same
thing (:data:`MESSAGES`). The differences that are real and deliberate are listed in :data:`DIFFERENT`
(case → reason; the README's "coming from 🤗" section must say each reason), and each case there is
checked to differ in just that way — so exactly those cases differ.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import math
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

datasets = pytest.importorskip("datasets")

import sjsonl  # noqa: E402

ROWS = [{"id": i, "text": f"t{i}", "score": i / 2} for i in range(10)]
SPARSE = [{"id": 0, "a": 1}, {"id": 1, "b": "x"}, {"id": 2, "a": 2, "b": "y"}, {"id": 3}]
MIXED = [{"x": 1}, {"x": 2.5}, {"x": None}, {"x": 4}]
UNICODE = [{"s": "héllo"}, {"s": "日本語"}, {"s": "🚀"}, {"s": ""}]
LISTS = [{"l": [1, 2]}, {"l": []}, {"l": [3]}, {"l": None}]

FEATURES = {
    "id": datasets.Value("int64"),
    "text": datasets.Value("string"),
    "score": datasets.Value("float64"),
}
FEATURES_WIDE = {
    "score": datasets.Value("float32"),
    "id": datasets.Value("string"),
    "text": datasets.Value("string"),
}

# name -> {relative path: rows}; a value that is bytes is written as is
LAYOUTS: dict[str, dict[str, Any]] = {
    "one train file": {"train.jsonl": ROWS},
    "train and test": {"train.jsonl": ROWS, "test.jsonl": ROWS[:4]},
    "train test validation": {"train.jsonl": ROWS, "test.jsonl": ROWS[:3], "validation.jsonl": ROWS[3:5]},
    "dev is validation": {"train.jsonl": ROWS, "dev.jsonl": ROWS[:2]},
    "valid and val": {"train.jsonl": ROWS, "valid.jsonl": ROWS[:2], "val.jsonl": ROWS[2:4]},
    "training testing evaluation": {
        "training.jsonl": ROWS,
        "testing.jsonl": ROWS[:2],
        "evaluation.jsonl": ROWS[2:3],
    },
    "keywords after a separator": {"my-train.jsonl": ROWS, "my_test.jsonl": ROWS[:3]},
    "keywords with digits": {"train1.jsonl": ROWS[:5], "train2.jsonl": ROWS[5:], "test0.jsonl": ROWS[:1]},
    "no keywords": {"a.jsonl": ROWS[:4], "b.jsonl": ROWS[4:]},
    "pretrain is not train": {"pretrain.jsonl": ROWS[:2], "test.jsonl": ROWS[2:5], "train.jsonl": ROWS[5:]},
    "split folders": {"train/a.jsonl": ROWS[:5], "train/b.jsonl": ROWS[5:], "test/c.jsonl": ROWS[:2]},
    "nested split folders": {"data/train/a.jsonl": ROWS, "data/test/b.jsonl": ROWS[:3]},
    "data folder": {"data/train.jsonl": ROWS, "data/test.jsonl": ROWS[:2]},
    "sharded names": {
        "data/train-00000-of-00002.jsonl": ROWS[:5],
        "data/train-00001-of-00002.jsonl": ROWS[5:],
        "data/test-00000-of-00001.jsonl": ROWS[:2],
    },
    "hidden and special ignored": {
        "train.jsonl": ROWS,
        ".hidden.jsonl": ROWS[:1],
        ".cache/x.jsonl": ROWS[:1],
        "__pycache__/y.jsonl": ROWS[:1],
    },
    "readme and config ignored": {"train.jsonl": ROWS, "README.md": b"# card\n", "notes.txt": b"x\n"},
    "ndjson and json extensions": {"train.ndjson": ROWS[:5], "test.json": ROWS[5:]},
    "missing keys": {"train.jsonl": SPARSE},
    "int and float mix": {"train.jsonl": MIXED},
    "unicode": {"train.jsonl": UNICODE},
    "lists": {"train.jsonl": LISTS},
    "blank lines and crlf": {"train.jsonl": b'{"a": 1}\r\n\r\n{"a": 2}\r\n\n  \n{"a": 3}'},
    "gzip": {"train.jsonl.gz": ROWS},
    "bzip2": {"train.jsonl.bz2": ROWS, "test.jsonl.bz2": ROWS[:3]},
    "xz": {"train.jsonl.xz": ROWS, "test.jsonl.xz": ROWS[:3]},
    "compressed json array": {"train.json.bz2": json.dumps(ROWS, indent=2).encode()},
    # 🤗's test_load_dataset_zip_jsonl: an archive of two JSON Lines files (one in a folder), deflated
    "zip of jsonl": {"train.zip": {"dataset.jsonl": ROWS, "sub/dataset2.jsonl": ROWS[:4]}},
    "stored zip": {
        "train-stored.zip": {"a.jsonl": ROWS[:3], ".hidden.jsonl": ROWS, "__MACOSX/._a.jsonl": b"x"}
    },
    "hundred rows": {"train.jsonl": [{"i": i} for i in range(100)], "test.jsonl": [{"i": -1}]},
    # layouts where sjsonl differs on purpose (see KNOWN)
    "nested objects": {"train.jsonl": [{"m": {"a": 1}}, {"m": {"b": 2}}]},
    "json array document": {"train.json": b'[{"a": 1}, {"a": 2}, {"a": 3}]'},
    "pretty json array document": {"train.json": json.dumps(ROWS, indent=2).encode()},
    "rows under a field": {"train.json": json.dumps({"v": "1", "data": ROWS, "n": [1]}, indent=1).encode()},
    # the key twice: json.loads — and 🤗 — keep the last list
    "rows under a field held twice": {
        "train.json": b'{"data": '
        + json.dumps(SPARSE).encode()
        + b', "v": "1", "data": '
        + json.dumps(ROWS, indent=1).encode()
        + b"}"
    },
    "type conflict": {"train.jsonl": [{"x": 1}, {"x": "s"}]},
    "a bad line": {"train.jsonl": b'{"a": 1}\n{"a": 2\n'},
}

#: layout -> keywords every call on it passes
LAYOUT_KW: dict[str, dict[str, Any]] = {
    "rows under a field": {"field": "data"},
    "rows under a field held twice": {"field": "data"},
}


COMPRESS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}


def _write(root: Path, files: dict[str, Any]) -> None:
    for rel, rows in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".zip"):
            method = zipfile.ZIP_STORED if "stored" in rel else zipfile.ZIP_DEFLATED
            with zipfile.ZipFile(path, "w", method) as archive:
                for member, content in rows.items():
                    archive.writestr(member, _encode(content))
            continue
        path.write_bytes(COMPRESS.get(Path(rel).suffix, lambda d: d)(_encode(rows)))


def _encode(rows: Any) -> bytes:
    return rows if isinstance(rows, bytes) else "".join(json.dumps(r) + "\n" for r in rows).encode()


def _first_split(files: dict[str, Any]) -> str:
    names = " ".join(files)
    for split, words in [("train", ["train"]), ("test", ["test"]), ("validation", ["dev", "val"])]:
        if any(w in names for w in words):
            return split
    return "train"


def _calls(name: str, files: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    split = _first_split(files)
    data = sorted(k for k in files if not k.endswith((".md", ".txt")) and "/." not in "/" + k)
    data = [k for k in data if not k.startswith((".", "__")) and "/__" not in k]
    one = data[0]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("folder", {}),
        ("folder split", {"split": split}),
        ("first half", {"split": f"{split}[:50%]"}),
        ("skip one", {"split": f"{split}[1:]"}),
        ("last one", {"split": f"{split}[-1:]"}),
        ("pct beyond 100", {"split": f"{split}[:101%]"}),
        ("unknown split", {"split": "nosuch"}),
        ("split list", {"split": [split, f"{split}[:2]"]}),
        ("json one file", {"path": "json", "data_files": one}),
        ("json file twice", {"path": "json", "data_files": [one, one], "split": "train"}),
        ("json dict", {"path": "json", "data_files": {"a": one, "b": data}}),
        ("json glob", {"path": "json", "data_files": "**/*.json*", "split": "train"}),
        ("streaming", {"split": split, "streaming": True}),
        ("json data_dir only", {"path": "json"}),
    ]
    if not any(".json" in k for k in data):  # the glob names no file (🤗 then fails inside its builder)
        calls = [c for c in calls if c[0] != "json glob"]
    train = files.get("train.jsonl")
    if isinstance(train, list) and all(set(r) <= set(FEATURES) for r in train):
        calls.append(("features", {"split": "train", "features": datasets.Features(FEATURES)}))
        calls.append(("features subset", {"split": "train", "features": datasets.Features(FEATURES_WIDE)}))
    return calls + [(call, kw) for call, kw in EXTRA_CALLS.get(name, [])]


#: layout -> calls made on it besides those of every layout
EXTRA_CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "one train file": [
        ("missing data file", {"path": "json", "data_files": "nosuch.jsonl"}),
        ("one of two data files missing", {"path": "json", "data_files": ["train.jsonl", "nope.jsonl"]}),
        ("slice past the end", {"split": "train[20:30]"}),
        (
            "features missing a column",
            {"split": "train", "features": datasets.Features({k: FEATURES[k] for k in ("id", "text")})},
        ),
        (
            "features of another type",
            {"split": "train", "features": datasets.Features({**FEATURES, "text": datasets.Value("int64")})},
        ),
    ],
    "missing keys": [
        (
            "features",
            {
                "split": "train",
                "features": datasets.Features(
                    {
                        "id": datasets.Value("int64"),
                        "a": datasets.Value("int64"),
                        "b": datasets.Value("string"),
                    }
                ),
            },
        )
    ],
    "int and float mix": [
        ("features", {"split": "train", "features": datasets.Features({"x": FEATURES["score"]})})
    ],
}


CASES = [
    (layout, call, {**kw, **LAYOUT_KW.get(layout, {})})
    for layout, files in LAYOUTS.items()
    for call, kw in _calls(layout, files)
]


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down: ``1`` is not ``1.0`` nor ``True``; keys in order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def _rows(obj: Any) -> Any:
    if isinstance(obj, dict) or type(obj).__name__ in ("DatasetDict", "IterableDatasetDict"):
        return {str(k): _rows(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rows(v) for v in obj]
    return list(obj)


def _run(fn, root: Path, kw: dict[str, Any], **extra: Any) -> tuple[str, Any]:
    """``("ok", rows)`` or ``("raised", exception)`` — for 🤗's builder errors, the error they wrap."""
    kw = dict(kw)
    path = kw.pop("path", str(root))
    if path == "json":
        kw["data_dir"] = str(root)
    cwd = os.getcwd()
    os.chdir(root)  # 🤗 resolves relative data_files against the working directory when data_dir is None
    try:
        return "ok", _rows(fn(path, **kw, **extra))
    except Exception as exc:
        if type(exc).__name__ == "DatasetGenerationError" and exc.__cause__ is not None:
            return "raised", exc.__cause__  # "An error occurred while generating the dataset" says nothing
        return "raised", exc
    finally:
        os.chdir(cwd)


def _builtin(exc: BaseException) -> type:
    """The most specific built-in class of an exception (pyarrow's ArrowInvalid → ValueError)."""
    return next(c for c in type(exc).__mro__ if c.__module__ == "builtins")


# ----------------------------------------------------------------------------- what differs, and why
#: case -> (what sjsonl's message says, what 🤗's says): the same error in other words, for errors whose
#: wording differs; ``{root}`` is the layout's folder. Every other error's message is 🤗's, word for word.
MESSAGES: dict[str, tuple[str, str]] = {
    "one train file|missing data file": ("{root}/nosuch.jsonl", "{root}/nosuch.jsonl"),
    "one train file|one of two data files missing": ("{root}/nope.jsonl", "{root}/nope.jsonl"),
    "one train file|features missing a column": ("['score']", "score: double"),  # the column names
    # Arrow's words; 🤗 names the value that failed its column-wide cast, sjsonl the first record read
    "one train file|features of another type": ("as a scalar of type int64", "as a scalar of type int64"),
    # the bad line: sjsonl's file:line (1-based) and byte offset; 🤗's row (0-based)
    **{
        f"a bad line|{call}": ("{root}/train.jsonl:2: invalid JSON record at byte offset 9", "in row 1")
        for call in (
            "folder",
            "folder split",
            "skip one",
            "last one",
            "split list",
            "json one file",
            "json file twice",
            "json dict",
            "json glob",
            "streaming",
            "json data_dir only",
        )
    },
}

A_RECORD_IS_A_LINE = (
    "a record is its line: a key missing from it stays missing (fill_missing=True: 🤗's rows)"
)
STREAMED_AS_IS = "a streamed record is its line (fill_missing and features are refused with streaming=True)"
NUMBERS_AS_WRITTEN = (
    "a record is json.loads of its line: 1 stays an int where 🤗's column is float (features= casts)"
)
READ_LAZILY = (
    "sjsonl reads lazily: a bad line raises when read, so slices without it read (🤗 parses it all first)"
)
SPLITS_FIRST = (
    "sjsonl reads lazily: a bad split is told before any record is read (🤗 parses every file first)"
)

#: case -> why sjsonl's result differs from 🤗's, on purpose (each reason belongs in the README's "coming
#: from 🤗" section).
DIFFERENT: dict[str, str] = {
    **{
        f"missing keys|{call}": A_RECORD_IS_A_LINE
        for call in (
            "folder",
            "folder split",
            "first half",
            "skip one",
            "last one",
            "split list",
            "json one file",
            "json file twice",
            "json dict",
            "json glob",
            "json data_dir only",
        )
    },
    "missing keys|streaming": STREAMED_AS_IS,
    **{
        f"int and float mix|{call}": NUMBERS_AS_WRITTEN
        for call in (
            "folder",
            "folder split",
            "first half",
            "skip one",
            "last one",
            "split list",
            "json one file",
            "json file twice",
            "json dict",
            "json glob",
            "streaming",
            "json data_dir only",
        )
    },
    "a bad line|first half": READ_LAZILY,
    "a bad line|pct beyond 100": SPLITS_FIRST,
    "a bad line|unknown split": SPLITS_FIRST,
}


def _check_difference(reason: str, hf: tuple[str, Any], ours: tuple[str, Any], rerun: Callable) -> None:
    """The case differs from 🤗, and only in the way ``reason`` says."""
    if reason in (A_RECORD_IS_A_LINE, NUMBERS_AS_WRITTEN, STREAMED_AS_IS):
        assert hf[0] == ours[0] == "ok" and not same(ours[1], hf[1]), (hf, ours)
    if reason == A_RECORD_IS_A_LINE:
        filled = rerun(fill_missing=True)
        assert filled[0] == "ok" and same(filled[1], hf[1])  # every column in every row: 🤗's rows exactly
    elif reason == NUMBERS_AS_WRITTEN:
        assert ours[1] == hf[1]  # the same numbers: 1 == 1.0
    elif reason == STREAMED_AS_IS:
        columns = list(dict.fromkeys(k for row in ours[1] for k in row))
        assert same([{k: row.get(k) for k in columns} for row in ours[1]], hf[1])  # 🤗 fills the missing
    elif reason == READ_LAZILY:
        assert hf[0] == "raised" and ours == ("ok", [{"a": 1}])  # the first half: the good line only
    elif reason == SPLITS_FIRST:  # what 🤗 says of these splits of a good file (compared above)
        told = [
            "Percent slice boundaries must be > -100 and < 100.",
            "Unknown split \"nosuch\". Should be one of ['train'].",
        ]
        assert hf[0] == ours[0] == "raised" and isinstance(ours[1], ValueError) and str(ours[1]) in told
        assert "in row 1" in str(hf[1])  # 🤗 stopped at the bad line before it looked at the split
    else:
        raise AssertionError(f"no check for {reason!r}")


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for name, files in LAYOUTS.items():
        root = tmp_path_factory.mktemp("layout")
        _write(root, files)
        out[name] = root
    return out


@pytest.mark.parametrize(
    ("layout", "call", "kw"), CASES, ids=[f"{layout}|{call}" for layout, call, _ in CASES]
)
def test_same_as_hf(
    roots: dict[str, Path], layout: str, call: str, kw: dict[str, Any], tmp_path_factory
) -> None:
    root = roots[layout]
    case = f"{layout}|{call}"
    cache = str(root.parent / (root.name + "-hf-cache"))  # per layout: 🤗 reuses its Arrow files across calls
    hf = _run(datasets.load_dataset, root, kw, cache_dir=cache)

    def rerun(**extra: Any) -> tuple[str, Any]:
        return _run(sjsonl.load_dataset, root, kw, index_dir=str(tmp_path_factory.mktemp("idx")), **extra)

    ours = rerun()
    if case in DIFFERENT:
        _check_difference(DIFFERENT[case], hf, ours, rerun)
    elif hf[0] == "raised":
        assert ours[0] == "raised", f"🤗 raised {hf[1]!r}, sjsonl gave {ours[1]!r}"
        assert isinstance(ours[1], _builtin(hf[1])), (hf[1], ours[1])
        if case in MESSAGES:
            ours_says, hf_says = (text.format(root=root) for text in MESSAGES[case])
            assert ours_says in str(ours[1]) and hf_says in str(hf[1]), (hf[1], ours[1])
        else:
            assert str(ours[1]) == str(hf[1])
    else:
        assert ours[0] == "ok", f"🤗 gave {hf[1]!r}, sjsonl raised {ours[1]!r}"
        assert same(ours[1], hf[1]), (hf[1], ours[1])


def test_every_listed_difference_is_a_case() -> None:
    cases = {f"{layout}|{call}" for layout, call, _ in CASES}
    assert set(DIFFERENT) <= cases and set(MESSAGES) <= cases and not set(DIFFERENT) & set(MESSAGES)


def test_at_least_150_comparisons() -> None:
    assert len(CASES) >= 150


def test_hf_reads_a_folder_sjsonl_indexed_exactly_as_before(tmp_path: Path, monkeypatch) -> None:
    """sjsonl writes its index (and schema cache) beside the data by default; 🤗 must not see them as data.

    If this fails only because ``*.index.meta.json`` files exist, it passes once the index metadata moves
    into the ``.index.npy`` trailer (index format change by another engineer)."""
    _write(tmp_path, LAYOUTS["train test validation"])
    cache = str(tmp_path.parent / (tmp_path.name + "-hf"))
    before = _rows(datasets.load_dataset(str(tmp_path), cache_dir=cache + "1"))
    for ds in sjsonl.load_dataset(str(tmp_path), fill_missing=True).values():
        list(ds)  # index and schema built and saved beside the data
    written = sorted(p.name for p in tmp_path.iterdir() if ".index." in p.name)
    assert "train.index.npy" in written and "train.index.schema" in written
    after = _rows(datasets.load_dataset(str(tmp_path), cache_dir=cache + "2"))
    assert same(after, before), f"sjsonl's files {written} changed what 🤗 reads"
