"""The package's shape: folders are layers (DESIGN.md), data flows one way, and no module sprawls.

Every import counts — type-only and function-local ones too (``tests/_import_graph.py``).
"""

from __future__ import annotations

from . import _import_graph as import_graph

GRAPH = import_graph.build()


def test_no_import_circles() -> None:
    assert import_graph.circles(GRAPH) == []


def test_no_import_runs_back_up_a_layer() -> None:
    assert import_graph.back_edges(GRAPH) == []


def test_every_module_sits_in_a_layer_folder() -> None:
    top = sorted(m for m in GRAPH.modules if m.count(".") == 1 and import_graph.layer(m) is not None)
    assert set(top) <= {f"sjsonl.{name}" for name in import_graph.LAYERS}, top
    assert {import_graph.layer(m) for m in GRAPH.modules} - {None} <= set(import_graph.LAYERS)


def test_no_module_sprawls() -> None:
    large = {m: n for m, n in GRAPH.lines.items() if n > 560}
    assert not large, large


def test_the_checker_sees_a_circle_and_a_back_edge() -> None:
    """The two checks above fail when the graph has what they look for (so a passing run means something)."""
    graph = import_graph.Graph(modules={}, edges={})
    graph.edges = {
        "sjsonl.index.a": {"sjsonl.index.b"},
        "sjsonl.index.b": {"sjsonl.index.a"},
        "sjsonl.storage.c": {"sjsonl.data.d"},
        "sjsonl.data.d": set(),
    }
    assert import_graph.circles(graph) == [["sjsonl.index.a", "sjsonl.index.b"]]
    assert import_graph.back_edges(graph) == [("sjsonl.storage.c", "sjsonl.data.d")]
