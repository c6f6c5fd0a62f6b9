"""One list of the public API: ``sjsonl.__all__`` is what the documentation names, every name in it imports,
and every error and class the guides name is importable from ``sjsonl`` (or the submodule they show)."""

from __future__ import annotations

import builtins
import re
from pathlib import Path

import sjsonl

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def documented_names() -> list[str]:
    """The public names of ``sjsonl``: its ``__all__`` (rendered by the API reference, docs/api/sjsonl.md)."""
    return [name for name in sjsonl.__all__ if not name.startswith("_")]


def test_every_exported_name_imports() -> None:
    for name in sjsonl.__all__:
        assert getattr(sjsonl, name) is not None, name


def test_every_error_and_class_the_docs_name_is_importable() -> None:
    """A ``FooError``/``FooWarning`` or ``JSONL…`` name in the README or the guides, written as code, is
    exported by ``sjsonl`` — or the docs show the submodule it comes from."""
    text = "\n".join(p.read_text() for p in DOCS)
    named = set(re.findall(r"`(?:sjsonl\.)?([A-Z]\w*(?:Error|Warning)|JSONL\w+)`", text))
    missing = sorted(n for n in named if not hasattr(sjsonl, n) and not hasattr(builtins, n))
    assert not missing, f"named in the docs but not exported by sjsonl: {missing}"


def test_the_reference_page_renders_the_whole_all() -> None:
    page = (REPO / "docs" / "api" / "sjsonl.md").read_text()
    assert "::: sjsonl\n" in page and "members: true" in page  # every member of __all__, none picked by hand


def test_every_sjsonl_name_the_docs_mention_exists() -> None:
    """``sjsonl.a.b`` in the README or the guides names a module or an attribute that exists (a module moved
    or a name renamed leaves no stale reference behind)."""
    import importlib

    stale = set()
    for doc in DOCS:
        if doc.name == "changes.md":  # names the old paths on purpose
            continue
        for dotted in set(re.findall(r"\bsjsonl(?:\.[A-Za-z_]\w*)+", doc.read_text())):
            parts = dotted.split(".")
            if parts[-1] == "md":  # a link to a page (sjsonl.md), not a name
                continue
            for k in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
                try:
                    obj = importlib.import_module(".".join(parts[:k]))
                except ImportError:
                    continue
                for attr in parts[k:]:
                    obj = getattr(obj, attr, None)
                if obj is None:
                    stale.add(f"{doc.name}: {dotted}")
                break
    assert not stale, sorted(stale)
