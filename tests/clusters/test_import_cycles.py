"""No import cycle in clusters/, ``if TYPE_CHECKING:`` imports included: among the
modules, and among the children of every package (a child stands for everything below
it). ``.importlinter``'s no-cycles contract leaves type-checking imports out for the
other packages; this walk counts them for clusters/."""

from __future__ import annotations

from collections import defaultdict

import grimp


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(edges):
        if node not in index:
            visit(node)
    return found


def import_cycles(package: str = "clusters") -> list[list[str]]:
    """Every cycle among the modules of ``package`` and among the children of each of its
    packages, type-checking imports included."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=False)
    modules = graph.modules
    edges: dict[str, set[str]] = defaultdict(set)
    for module in modules:
        edges[module] |= graph.find_modules_directly_imported_by(module) & modules
    found = _cycles(edges)
    for parent in modules:
        children = graph.find_children(parent)
        if len(children) < 2:
            continue
        between: dict[str, set[str]] = defaultdict(set)
        for child in children:
            below = {child} | graph.find_descendants(child)
            for module in below:
                for imported in edges[module]:
                    for other in children - {child}:
                        if imported == other or imported.startswith(other + "."):
                            between[child].add(other)
        found += _cycles(between)
    return found


def test_clusters_has_no_import_cycle_even_in_type_checking_imports() -> None:
    assert import_cycles() == []


def test_the_walk_finds_a_cycle_of_two_modules() -> None:
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
