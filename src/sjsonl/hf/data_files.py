"""Which files a 🤗-style ``load_dataset`` call names, found as 🤗 finds them: ``data_files`` (paths, globs,
lists, ``{split: files}``), a directory split by file and folder names (``train*``, ``*-test.*``,
``validation/``, ``data/{split}-00000-of-00003.jsonl`` shards …), archives' members and URLs — and whether
🤗 would read them with its ``json`` builder (:func:`is_jsonl_source`), the sources sjsonl reads itself.

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for name in ("train.jsonl", "test-00.jsonl"):
    ...     _ = open(os.path.join(d, name), "w").write("{}\\n")
    >>> {k: [os.path.basename(f) for f in v] for k, v in sorted(resolve_data_files(d).items())}
    {'test': ['test-00.jsonl'], 'train': ['train.jsonl']}
"""

from __future__ import annotations

import errno
import glob
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Union

from sjsonl.errors import DataFileNotFoundError, InvalidArgumentError, SJSONLError, SplitError
from sjsonl.index.layout import is_index_artifact
from sjsonl.storage import has_glob_magic, is_url
from sjsonl.storage.zip import split_member, zip_members

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


def _not_found(message: str) -> DataFileNotFoundError:
    return DataFileNotFoundError(errno.ENOENT, message)


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
    pattern names them, as 🤗 does; never sjsonl's own files (told by their bytes, not their names: a data
    file called ``search.index.meta.jsonl`` is data)."""
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
            if has_glob_magic(pattern):
                raise InvalidArgumentError(f"globs over URLs are not supported; list the files: {pattern}")
            files.append(pattern)
            continue
        found = _glob(pattern, base)
        if not found and not has_glob_magic(pattern):
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
    if has_glob_magic(path):
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
        return has_glob_magic(path) and any(map(_is_json_file, _glob(path, os.getcwd())))
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
