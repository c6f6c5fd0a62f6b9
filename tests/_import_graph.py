"""The package's import graph: circles, imports that run back up a layer, modules per folder.

Every import counts — at module level, inside functions and under ``TYPE_CHECKING`` — because a type-only
import still ties two modules' shapes together. ``python tests/_import_graph.py`` prints the report;
``tests/test_layers.py`` holds the package to it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

#: The layers, lowest first (DESIGN.md, plus ``runtime``: the process pool and progress every pass runs on).
#: A module may import its own layer and any layer to its left. The
#: package's ``__init__``/``__main__`` and ``errors`` (whose exceptions every layer raises) sit outside.
LAYERS = (
    "runtime", "storage", "index", "records", "sampling", "data", "hf", "torch", "mindspore", "ray", "dask",
    "cli",
)  # fmt: skip
#: Adapters are siblings, not a stack: none may import another, though ``mindspore`` may use ``hf``
#: (it takes any 🤗 dataset) — expressed as the order above plus this one exception list.
FORBIDDEN_SIBLINGS = {
    ("torch", "mindspore"), ("torch", "hf"),
    # the cluster engines' adapters (sjsonl.ray, sjsonl.dask) share only the data layer's corpus parts
    ("ray", "torch"), ("ray", "mindspore"), ("dask", "torch"), ("dask", "mindspore"), ("dask", "ray"),
}  # fmt: skip
OUTSIDE = {"sjsonl", "sjsonl.__main__", "sjsonl.errors", "sjsonl._version", "sjsonl.sample"}


@dataclass
class Graph:
    modules: dict[str, Path]
    edges: dict[str, set[str]] = field(default_factory=dict)
    #: Whether a package's ``__init__`` holds more than re-exports (then it is a module in its own right).
    lines: dict[str, int] = field(default_factory=dict)


def _module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def build(src: Path = SRC) -> Graph:
    paths = {_module_name(p, src): p for p in sorted((src / "sjsonl").rglob("*.py"))}
    # compiled extensions (built from their .c beside them) import nothing of the package: leaves
    compiled = {_module_name(p.with_suffix(".py"), src) for p in (src / "sjsonl").rglob("*.c")}
    graph = Graph(paths)
    for name, path in paths.items():
        tree = ast.parse(path.read_text(), str(path))
        graph.lines[name] = len(path.read_text().splitlines())
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node.level, node.module)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub not in compiled:
                        targets.add(sub if sub in paths else base)
        graph.edges[name] = {t for t in targets if t in paths and t != name}
    return graph


def layer(module: str) -> str | None:
    if module in OUTSIDE:
        return None
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def circles(graph: Graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph.edges):
        if v not in index:
            visit(v)
    return sorted(found, key=len, reverse=True)


def back_edges(graph: Graph) -> list[tuple[str, str]]:
    """Imports from a layer to one above it (or to a forbidden sibling), and lower layers importing the
    façade."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad = []
    for source, targets in graph.edges.items():
        source_layer = layer(source)
        for target in targets:
            target_layer = layer(target)
            if target == "sjsonl" and source != "sjsonl.__main__":
                bad.append((source, target))
            if source_layer is None or target_layer is None or source_layer == target_layer:
                continue
            if source_layer not in rank or target_layer not in rank:
                continue
            if rank[target_layer] > rank[source_layer] or (source_layer, target_layer) in FORBIDDEN_SIBLINGS:
                bad.append((source, target))
    return sorted(bad)


def folders(graph: Graph) -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in graph.modules.values():
        folder = path.parent.relative_to(SRC).as_posix()
        counts[folder] = counts.get(folder, 0) + 1
    return dict(sorted(counts.items()))


def report(graph: Graph) -> Iterable[str]:
    found = circles(graph)
    yield f"modules: {len(graph.modules)}, lines: {sum(graph.lines.values())}"
    for folder, count in folders(graph).items():
        yield f"  {folder}/: {count} modules"
    largest = max(graph.lines, key=graph.lines.__getitem__)
    yield f"largest module: {largest} ({graph.lines[largest]} lines)"
    yield f"circles: {len(found)}"
    for component in found:
        yield f"  {len(component)}: {', '.join(component)}"
    bad = back_edges(graph)
    yield f"imports running back up a layer: {len(bad)}"
    for source, target in bad:
        yield f"  {source} -> {target}"


if __name__ == "__main__":
    print("\n".join(report(build(Path(sys.argv[1]) if len(sys.argv) > 1 else SRC))))
