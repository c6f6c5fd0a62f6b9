"""A griffe extension for the API reference: docstring examples (``>>>`` lines and their output) become fenced
``pycon`` blocks, so that an output line such as ``[1, 2]`` is shown as code and never read as Markdown (where
``[a]`` after ``[b]`` is a reference link). The docstrings stay plain doctests, run by ``pytest``."""

from __future__ import annotations

from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    """Each run of doctest lines (a ``>>>`` line, its ``...`` continuations and its output, up to a blank line)
    wrapped in a fence at its indentation."""
    out: list[str] = []
    lines = text.split("\n")
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.lstrip().startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}```pycon")
            while k < len(lines) and lines[k].strip():
                out.append(lines[k])
                k += 1
            out.append(f"{indent}```")
            continue
        out.append(line)
        k += 1
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fences the examples of every object that has a docstring."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
