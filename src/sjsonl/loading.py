"""``sjsonl.load_dataset``: 🤗 ``datasets.load_dataset``'s parameters, for JSON Lines read in place.

Files are found as 🤗 finds them; each split becomes a :class:`~sjsonl.dataset.JSONLDataset` (several files of
a split are one multi-file dataset, in order) — no Arrow conversion, no second copy, no cache to invalidate.

``path`` may be

- ``"json"`` with ``data_files`` (a path or glob, a list of them, or ``{split: files}``; relative to
  ``data_dir`` when given, else to the working directory) — or with ``data_dir`` alone;
- a directory: its ``.jsonl`` / ``.json`` / ``.ndjson`` files, split by name as 🤗 does — files named
  ``train*``, ``*-test.*``, ``dev*``, … or inside ``train/``, ``validation/`` … folders (keywords: train,
  training / validation, valid, dev, val / test, testing, eval, evaluation, followed by one of ``-._ 0-9``),
  or ``data/{split}-00000-of-00003.jsonl`` shards; otherwise every file is ``train``. Hidden files and
  ``__special__`` folders are ignored;
- one file, or a glob: the ``train`` split (an sjsonl convenience; 🤗 wants ``data_files`` for these).

Return value, as 🤗: ``split=None`` gives a ``dict`` ``{split: JSONLDataset}`` — **even when there is
one split** (🤗 returns a one-entry ``DatasetDict``); ``split="train"`` gives that split's dataset; a list of
splits gives a list. Splits take 🤗's slicing syntax, as views (no copy): ``"train[:10%]"``,
``"train[10:20]"``, ``"train[-5:]"``, ``"train[:33%](pct1_dropremainder)"``, ``"train+test"``.

``streaming=True`` returns :class:`~sjsonl.streaming.JSONLStream` iterables instead, which need no index
(slices other than whole splits are not available there, as in 🤗).

🤗's keywords ``cache_dir`` (where indexes go), ``num_proc`` (index workers) and ``features`` (columns,
order, types, missing keys ``None``) do what they say; ``fill_missing=True`` gives 🤗's row shape without
features. Keyword arguments 🤗 would take but this loader cannot honour raise ``TypeError``
(:class:`~sjsonl.errors.UnsupportedArgumentError`) naming them — nothing is silently
dropped. :func:`sjsonl.mindspore.load_dataset` is the variant with 🤗's full parameter list.

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for name, n in [("train.jsonl", 10), ("test.jsonl", 4)]:
    ...     _ = open(os.path.join(d, name), "w").write("".join(f'{{"i": {i}}}\\n' for i in range(n)))
    >>> dsd = load_dataset(d)
    >>> sorted(dsd), len(dsd["train"]), len(dsd["test"])
    (['test', 'train'], 10, 4)
    >>> [r["i"] for r in load_dataset("json", data_files=os.path.join(d, "train.jsonl"), split="train[:30%]")]
    [0, 1, 2]
"""

from __future__ import annotations

import errno
import glob
import math
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Union

import numpy as np

from .conform import conform_rows
from .dataset import JSONLDataset
from .errors import (
    DataFileNotFoundError,
    InvalidArgumentError,
    SJSONLError,
    SplitError,
    UnsupportedArgumentError,
)
from .index.store import is_index_artifact
from .schema import infer_schema
from .storage import is_url
from .storage.zip import split_member, zip_members
from .streaming import JSONLStream
from .transforms.splits import DatasetDict

PathLike = Union[str, "os.PathLike[str]"]
DataFiles = Union[PathLike, Sequence[PathLike], Mapping[str, Union[PathLike, Sequence[PathLike]]]]  # noqa: UP007

JSON_EXTENSIONS = (".jsonl", ".json", ".ndjson")
_FILES_TO_IGNORE = {
    "README.md",
    "config.json",
    "dataset_info.json",
    "dataset_infos.json",
    "dataset_dict.json",
}
_SPLIT_KEYWORDS = {
    "train": ["train", "training"],
    "validation": ["validation", "valid", "dev", "val"],
    "test": ["test", "testing", "eval", "evaluation"],
}
_SEP = "-._ 0-9"  # 🤗's NON_WORDS_CHARS: what may stand between a split keyword and the rest of a name
_SHARDED = re.compile(r"^(?P<split>\w+(\.\w+)*)-\d{5}-of-\d{5}.*\.[^/]+$")
_IN_DIR = ["**/{k}/**", "**/{k}[{s}]*/**", "**/*[{s}]{k}/**", "**/*[{s}]{k}[{s}]*/**"]
_IN_NAME = ["**/{k}[{s}]*", "**/*[{s}]{k}[{s}]*"]
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")
_HUB_NAME = re.compile(r"^[\w.-]+(/[\w.-]+)?$")  # "imdb", "user/name": what a Hub dataset id looks like
_SPLIT_SPEC = re.compile(
    r"^(?P<split>\w+(?:\.\w+)*)"
    r"(?:\[(?:(?P<from>-?[\d_]+)(?P<from_pct>%)?)?:(?:(?P<to>-?[\d_]+)(?P<to_pct>%)?)?\])?"
    r"(?:\((?P<rounding>[^)]*)\))?$"
)


def _not_found(message: str) -> DataFileNotFoundError:
    return DataFileNotFoundError(errno.ENOENT, message)


def _has_magic(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def _is_json_file(path: str) -> bool:
    # 🤗's test: any dotted suffix of the name is a known extension ("a.jsonl.gz" counts as .jsonl); an
    # archive counts by the members it holds
    return any(
        "." + s.lower() in JSON_EXTENSIONS
        for n in _inferred_names(path)
        for s in os.path.basename(n).split(".")[1:]
    )


def _inferred_names(path: str) -> list[str]:
    """The names whose extensions say what a data file holds: a ``.zip``'s members, else its own."""
    if path.lower().endswith(".zip") and not is_url(path):
        try:
            return [split_member(m)[1] or m for m in zip_members(path)]
        except SJSONLError:
            return [path]
    return [path]


def _glob(pattern: str, base: str) -> list[str]:
    """Files matching ``pattern`` under ``base``, sorted; hidden and ``__special__`` parts only when the
    pattern names them, as 🤗 does."""
    full = pattern if os.path.isabs(pattern) else os.path.join(base, pattern)
    ignore = _FILES_TO_IGNORE - {os.path.basename(pattern)}
    out = []
    for match in sorted(glob.glob(os.path.expanduser(full), recursive=True)):
        if not os.path.isfile(match) or os.path.basename(match) in ignore or is_index_artifact(match):
            continue
        rel = os.path.relpath(match, base).replace(os.sep, "/").split("/")
        if any(p.startswith("__") and "__" not in pattern for p in rel[:-1]):
            continue
        out.append(os.path.abspath(match))
    return out


def _resolve(patterns: list[str], base: str) -> list[str]:
    files: list[str] = []
    for pattern in patterns:
        pattern = os.fspath(pattern)
        if is_url(pattern):  # read in place by range requests (sjsonl.storage); listed, not globbed
            if _has_magic(pattern):
                raise InvalidArgumentError(f"globs over URLs are not supported; list the files: {pattern}")
            files.append(pattern)
            continue
        found = _glob(pattern, base)
        if not found and not _has_magic(pattern):
            where = pattern if os.path.isabs(pattern) else os.path.join(base, pattern)
            raise _not_found(f"no such data file: {where}")
        files.extend(found)  # as 🤗: a file named twice (or matched by two patterns) is read twice
    return files


def _infer_splits(base: str) -> dict[str, list[str]]:
    """🤗's default layout rules over the JSON files below ``base``: sharded names, then split keywords
    in folder names, then in file names, else everything is ``train``."""
    every = [f for f in _glob("**", base) if _is_json_file(f)]
    sharded: dict[str, list[str]] = {}
    for f in every:
        rel = os.path.relpath(f, base).replace(os.sep, "/")
        m = _SHARDED.match(rel[5:]) if rel.startswith("data/") and rel.count("/") == 1 else None
        if m:
            sharded.setdefault(m.group("split"), []).append(f)
    if sharded:
        order = [s for s in _SPLIT_KEYWORDS if s in sharded] + sorted(set(sharded) - set(_SPLIT_KEYWORDS))
        return {s: sharded[s] for s in order}
    keep = set(every)
    for templates in (_IN_DIR, _IN_NAME):
        splits = {}
        for split, keywords in _SPLIT_KEYWORDS.items():
            pats = [t.format(k=k, s=_SEP) for k in keywords for t in templates]
            files = [f for f in _resolve(pats, base) if f in keep]
            if files:
                splits[split] = files
        if splits:
            return splits
    if not every:
        raise _not_found(f"no JSON Lines files ({', '.join(JSON_EXTENSIONS)}) found under {base}")
    return {"train": every}


def resolve_data_files(
    path: PathLike, data_dir: PathLike | None = None, data_files: DataFiles | None = None
) -> dict[str, list[str]]:
    """``{split: [absolute file paths]}`` for :func:`load_dataset`'s ``path``, ``data_dir``, ``data_files``.

    Example:
        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> for name in ["dev.jsonl", "train-00.jsonl", "train-01.jsonl", "notes.txt"]:
        ...     _ = open(os.path.join(d, name), "w").write("{}\\n")
        >>> {k: [os.path.basename(f) for f in v] for k, v in resolve_data_files(d).items()}
        {'train': ['train-00.jsonl', 'train-01.jsonl'], 'validation': ['dev.jsonl']}
    """
    path = os.fspath(path)
    is_dir = os.path.isdir(path)
    if data_files is not None:
        if is_dir:
            base = os.path.join(path, os.fspath(data_dir or ""))
        elif path == "json":
            base = os.fspath(data_dir) if data_dir is not None else os.getcwd()
        else:
            raise InvalidArgumentError(f"data_files needs path='json' or a directory, not {path!r}")
        if isinstance(data_files, Mapping):
            named = {
                str(k): [v] if isinstance(v, (str, os.PathLike)) else list(v) for k, v in data_files.items()
            }
        else:
            named = {
                "train": [data_files] if isinstance(data_files, (str, os.PathLike)) else list(data_files)
            }
        out = {}
        for split, patterns in named.items():
            if not _SPLIT_NAME.match(split):
                raise SplitError(f"split name should match {_SPLIT_NAME.pattern!r}, got {split!r}")
            out[split] = _resolve([os.fspath(p) for p in patterns], os.path.abspath(base))
            if not out[split]:
                raise _not_found(f"no data files match {patterns} for split {split!r}")
        return out
    if path == "json":
        return _infer_splits(os.path.abspath(os.fspath(data_dir) if data_dir is not None else os.getcwd()))
    if is_dir:
        return _infer_splits(os.path.abspath(os.path.join(path, os.fspath(data_dir or ""))))
    if os.path.isfile(path):
        return {"train": [os.path.abspath(path)]}
    if _has_magic(path):
        files = _glob(path, os.getcwd())
        if files:
            return {"train": files}
    message = f"no such file, directory or matching files: {path!r}"
    if _HUB_NAME.match(path) and not _is_json_file(path):
        message += (
            f"; if it is a 🤗 Hub dataset, sjsonl reads local or URL JSON Lines only: load it with "
            f"datasets.load_dataset({path!r}) (sjsonl.mindspore.load_dataset hands Hub names to 🤗)"
        )
    raise _not_found(message)


def _flat(data_files: DataFiles | None) -> list[PathLike]:
    if data_files is None:
        return []
    if isinstance(data_files, (str, os.PathLike)):
        return [data_files]
    values = data_files.values() if isinstance(data_files, Mapping) else [data_files]
    return [f for v in values for f in ([v] if isinstance(v, (str, os.PathLike)) else v)]


def is_jsonl_source(
    path: PathLike, data_dir: PathLike | None = None, data_files: DataFiles | None = None
) -> bool:
    """Whether 🤗 would read these data with its ``json`` builder — the sources sjsonl reads itself.

    True for ``path="json"`` with local files or JSON-suffixed URLs (``s3://…``, ``gs://…``, ``https://…``
    — read in place by range requests); for a JSON file or a glob of them; for a directory (or
    ``data_files``) whose most common file extension is ``.json``, ``.jsonl`` or ``.ndjson`` (🤗's rule).
    False for anything else — other formats, Hub dataset names and ``hf://`` URLs (🤗's own caching serves
    those) — without touching the network.

    Example:
        >>> is_jsonl_source("json"), is_jsonl_source("csv"), is_jsonl_source("user/some_dataset")
        (True, False, False)
        >>> is_jsonl_source("json", data_files={"train": "s3://bucket/train.jsonl"})
        True
        >>> is_jsonl_source("json", data_files={"train": "hf://datasets/user/name/train.jsonl"})
        False
    """
    path = os.fspath(path)
    urls = [os.fspath(f) for f in _flat(data_files) if is_url(f)]
    in_place = all(_is_json_file(u) and not u.startswith("hf://") for u in urls)
    if is_url(path) or (urls and (path != "json" or not in_place)):
        return False
    if path == "json":
        return True
    if data_files is None and os.path.isfile(path):
        return _is_json_file(path)
    if data_files is None and not os.path.isdir(path):
        return _has_magic(path) and any(map(_is_json_file, _glob(path, os.getcwd())))
    if not os.path.isdir(path):
        return False
    if data_files is not None:
        try:
            files = [f for fs in resolve_data_files(path, data_dir, data_files).values() for f in fs]
        except FileNotFoundError:
            return False
    else:
        files = _glob("**", os.path.join(path, os.fspath(data_dir or "")))
    names = [n for f in files for n in _inferred_names(f)]
    counts = Counter(
        "." + s.lower() for n in names for s in os.path.basename(n).split(".")[1:] if "." + s.lower() != ".gz"
    )
    return bool(counts) and counts.most_common(1)[0][0] in JSON_EXTENSIONS


# ----------------------------------------------------------------------------------------------- splits
def _split_ranges(spec: str, sizes: Mapping[str, int]) -> list[tuple[str, int, int]]:
    """🤗's split syntax → ``[(split, start, stop)]`` with 🤗's rounding rules."""
    out = []
    roundings: set[str] = set()
    for part in re.split(r"\s*\+\s*", spec.strip()):
        m = _SPLIT_SPEC.match(part)
        if not m:
            raise SplitError(f"Unrecognized instruction format: {part}")
        split = m.group("split")
        if split not in sizes:
            raise SplitError(f'Unknown split "{split}". Should be one of {list(sizes)}.')
        n = sizes[split]
        lo, hi = m.group("from"), m.group("to")
        lo, hi = (None if x is None else int(x) for x in (lo, hi))
        if m.group("from_pct") or m.group("to_pct"):
            rounding = m.group("rounding") or "closest"
            if any(b is not None and abs(b) > 100 for b in (lo, hi)):  # 🤗's check: "train[:101%]" is refused
                raise SplitError("Percent slice boundaries must be > -100 and < 100.")
            if roundings and rounding not in roundings:
                raise SplitError(
                    "It is forbidden to sum ReadInstruction instances with different rounding values."
                )
            roundings.add(rounding)
            lo = 0 if lo is None else _pct_to_abs(lo, n, rounding)
            hi = n if hi is None else _pct_to_abs(hi, n, rounding)
        elif m.group("rounding"):
            raise SplitError("It is forbidden to specify rounding if not using percent slicing.")
        lo = 0 if lo is None else (max(n + lo, 0) if lo < 0 else lo)
        hi = n if hi is None else (max(n + hi, 0) if hi < 0 else hi)
        out.append((split, min(lo, n), min(hi, n)))
    return out


def _pct_to_abs(boundary: int, n: int, rounding: str) -> int:
    if rounding == "closest":
        return round(boundary * n / 100.0)  # Python's round, as 🤗 (halves to even)
    if rounding == "pct1_dropremainder":
        if n < 100:
            raise SplitError("pct1_dropremainder rounding needs a split of at least 100 records")
        return boundary * math.trunc(n / 100.0)
    raise SplitError("rounding must be either closest or pct1_dropremainder")


def _select_split(
    spec: str, files: Mapping[str, list[str]], make: Any, stream: Any
) -> JSONLDataset | JSONLStream:
    if stream is not None:  # streaming=True
        names = re.split(r"\s*\+\s*", spec.strip())
        bad = [p for p in names if p not in files]
        if bad:
            detail = "slices are not available with streaming=True" if any("[" in p for p in bad) else ""
            raise SplitError(f"Bad split: {spec}. Available splits: {list(files)}. {detail}".strip())
        return stream([f for p in names for f in files[p]])
    needed = {m.group("split") for p in re.split(r"\s*\+\s*", spec.strip()) if (m := _SPLIT_SPEC.match(p))}
    datasets = {s: make(files[s]) for s in files if s in needed}
    ranges = _split_ranges(spec, {s: len(datasets[s]) if s in datasets else 0 for s in files})
    if len(ranges) == 1:
        split, lo, hi = ranges[0]
        ds = datasets[split]
        return ds if (lo, hi) == (0, len(ds)) else ds.skip(lo).take(max(0, hi - lo))
    # Several parts: one multi-file dataset over every part's files, then a selection of positions.
    combined = make([f for split, _, _ in ranges for f in files[split]])
    starts, pos = [], 0
    for split, _, _ in ranges:
        starts.append(pos)
        pos += len(datasets[split])
    parts = [np.arange(lo, max(lo, hi), dtype=np.int64) + s for (_, lo, hi), s in zip(ranges, starts)]
    return combined.select(np.concatenate(parts))


def _typed(ds: JSONLDataset) -> JSONLDataset:
    from .hf_dataset import as_hf

    return as_hf(ds)


def load_dataset(
    path: PathLike,
    name: str | None = None,
    data_dir: PathLike | None = None,
    data_files: DataFiles | None = None,
    split: str | Sequence[str] | None = None,
    streaming: bool = False,
    *,
    cache_dir: PathLike | None = None,
    features: Mapping[str, Any] | None = None,
    keep_in_memory: bool | None = None,
    num_proc: int | None = None,
    fill_missing: bool = False,
    index_dir: PathLike | None = None,
    workers: int | None = None,
    storage_options: dict | None = None,
    as_hf: bool | None = None,
    field: str | None = None,
    on_bad_lines: str = "error",
    fields: Sequence[str] | None = None,
    missing: str = "absent",
    schema: type | None = None,
    **kwargs: Any,
) -> Any:
    """Load JSON Lines data with 🤗 ``datasets.load_dataset``'s parameters; see the module docstring.

    Args:
        path: ``"json"``, a directory, a file or a glob.
        name: 🤗's configuration name; the JSON builder has only ``"default"``.
        data_dir: where relative ``data_files`` live (``path="json"``), or a sub-folder of ``path``.
        data_files: a file or glob, a list of them, or ``{split: files}``. A file listed twice is read
            twice, as in 🤗.
        split: ``None`` (a dict of every split), a split spec such as ``"train[:10%]"``, or a list of specs.
        streaming: return :class:`~sjsonl.streaming.JSONLStream` objects (no index) instead of datasets.
        cache_dir: 🤗's cache directory; here, where the indexes (and schema caches) are kept — the same as
            ``index_dir``.
        features: 🤗 ``Features`` (or any mapping of column names): records come back with exactly those
            columns, in that order, missing ones ``None``, scalar ``Value`` types cast (``1`` → ``1.0`` for a
            float feature); a record with another key raises :class:`~sjsonl.conform.FeaturesMismatchError`
            (🤗 refuses such data too). See :mod:`sjsonl.conform`.
        keep_in_memory: ``None``/``False`` (the data stay on disk, read in place — what sjsonl always
            does); ``True`` is refused: copying records into memory is ``list(ds)``.
        num_proc: 🤗's worker count; here, the workers building indexes (same as ``workers``).
        field: the rows are the list under this top-level key of each file, a JSON document (as 🤗's
            ``field=``), indexed by element and read in place. Without it, a ``.json`` file holding one
            JSON array has its elements as rows, as in 🤗 (see :mod:`sjsonl.document`).
        fill_missing: give every record every column of its split (``None`` where the key is missing), as
            🤗's Arrow tables do; the columns come from all rows (:func:`sjsonl.schema.infer_schema`, cached
            with the index). By default a record is exactly its line's JSON.
        on_bad_lines, fields, missing, schema: as :class:`~sjsonl.dataset.JSONLDataset` (skip bad lines;
            decode only some, possibly nested, fields; decode as a type).
        index_dir: where to keep the indexes (as :class:`~sjsonl.dataset.JSONLDataset`).
        workers: threads for building indexes.
        storage_options: passed to fsspec for URLs in ``data_files`` (``s3://bucket/train.jsonl`` …), which
            are read in place by range requests; their indexes go to the cache directory.
        as_hf: type each dataset as a ``datasets.Dataset`` too (:class:`sjsonl.hf_dataset.HFDataset`:
            still read in place, no Arrow copy) so that code checking types (TRL's trainers) takes it.
            ``None`` (the default): when 🤗 ``datasets`` is installed — whoever has it may hand the result
            to code that checks, and must not need to know about such checks.

    Raises:
        UnsupportedArgumentError: (a ``TypeError``) for any other keyword argument,
            ``keep_in_memory=True``, or ``features``/``fill_missing`` with ``streaming=True``.
        DataFileNotFoundError: (a ``FileNotFoundError``) when no data files match; a Hub dataset name
            gets a hint.
        SplitError: (a ``ValueError``) for an unknown split or a split spec 🤗 refuses.

    Example:
        >>> import os, tempfile
        >>> f = os.path.join(tempfile.mkdtemp(), "data.jsonl")
        >>> _ = open(f, "w").write('{"a": 1}\\n{"a": 2, "b": true}\\n')
        >>> load_dataset(f, split="train")[-1], load_dataset(f)["train"][0]
        ({'a': 2, 'b': True}, {'a': 1})
        >>> load_dataset(f, split="train", fill_missing=True)[0]        # 🤗's shape: every column
        {'a': 1, 'b': None}
        >>> load_dataset(f, trust_remote_code=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        sjsonl.errors.UnsupportedArgumentError: sjsonl.load_dataset got unsupported keyword argument(s) ...
    """
    refused = sorted(kwargs)
    if keep_in_memory:
        refused.append("keep_in_memory=True (sjsonl reads in place; list(ds) copies the records)")
    if streaming and (features is not None or fill_missing):
        refused.append("features/fill_missing with streaming=True")
    if streaming and (fields is not None or schema is not None):
        refused.append("fields/schema with streaming=True (they need the index: drop streaming=True)")
    if refused:
        raise UnsupportedArgumentError(
            f"sjsonl.load_dataset got unsupported keyword argument(s) {', '.join(refused)}: it reads JSON "
            "Lines in place; use sjsonl.mindspore.load_dataset or datasets.load_dataset for 🤗's options"
        )
    if name not in (None, "default"):
        raise InvalidArgumentError(
            f"BuilderConfig {name!r} not found: the JSON Lines loader has only 'default'"
        )
    if cache_dir is not None and index_dir is not None and os.fspath(cache_dir) != os.fspath(index_dir):
        raise InvalidArgumentError("cache_dir and index_dir name the same thing here; give one")
    index_dir = index_dir if index_dir is not None else cache_dir
    workers = workers if workers is not None else num_proc
    files = resolve_data_files(path, data_dir, data_files)

    if as_hf is None:
        import importlib.util

        as_hf = importlib.util.find_spec("datasets") is not None

    def make(paths: list[str]) -> JSONLDataset:
        def open_(transform: Any = None) -> JSONLDataset:
            return JSONLDataset(
                paths,
                index_dir=index_dir,
                workers=workers,
                storage_options=storage_options,
                transform=transform,
                field=field,
                on_bad_lines=on_bad_lines,
                fields=fields,
                missing=missing,
                schema=schema,
            )

        ds = open_()
        # conform_rows is a function of one record: the per-record transform= (with_transform takes batches)
        if features is not None:
            ds = open_(conform_rows(features=features))
        elif fill_missing:
            ds = open_(conform_rows(schema=infer_schema(ds, workers=workers)))
        return _typed(ds) if as_hf else ds

    def stream(paths: list[str]) -> JSONLStream:
        return JSONLStream(paths, storage_options=storage_options, field=field, on_bad_lines=on_bad_lines)

    if split is None:
        return DatasetDict({s: (stream(fs) if streaming else make(fs)) for s, fs in files.items()})
    if isinstance(split, str) or not isinstance(split, Sequence):
        return _select_split(str(split), files, make, stream if streaming else None)
    return [_select_split(str(s), files, make, stream if streaming else None) for s in split]
