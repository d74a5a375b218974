"""No import cycle in tenants/, notifications/, controlplane/ or kubesim/, counting the imports
under ``if TYPE_CHECKING:``, which ``.importlinter`` leaves out for every package.

A cycle that only annotations close still couples two modules both ways. The graph is
walked at every depth: among the children of each package, one child importing another
counts when any module inside it imports any module inside the other.
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

PACKAGES = ("tenants", "notifications", "controlplane", "kubesim")


def _sibling_cycles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """Strongly connected groups of more than one child of ``package``."""
    children = sorted(graph.find_children(package))
    inside = {child: {child} | graph.find_descendants(child) for child in children}
    owner = {module: child for child, modules in inside.items() for module in modules}
    edges: dict[str, set[str]] = {child: set() for child in children}
    for child, modules in inside.items():
        for module in modules:
            for imported in graph.find_modules_directly_imported_by(module):
                target = owner.get(imported)
                if target is not None and target != child:
                    edges[child].add(target)
    # Tarjan's strongly connected components.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for child in children:
        if child not in index:
            visit(child)
    return groups


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)


@pytest.mark.parametrize("root", PACKAGES)
def test_no_cycle_at_any_depth_type_checking_imports_included(
    graph: grimp.ImportGraph, root: str
) -> None:
    packages = [root, *sorted(graph.find_descendants(root))]
    cycles = {
        package: found
        for package in packages
        if graph.find_children(package) and (found := _sibling_cycles(graph, package))
    }
    assert cycles == {}


def test_a_cycle_closed_only_by_an_annotation_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The walk itself can fail: two modules that import each other, one of them only
    # for its type hints.
    package = tmp_path / "probe_cycle"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from probe_cycle import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from probe_cycle import a\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = grimp.build_graph("probe_cycle", exclude_type_checking_imports=False, cache_dir=None)
    assert _sibling_cycles(probe, "probe_cycle") == [["probe_cycle.a", "probe_cycle.b"]]
