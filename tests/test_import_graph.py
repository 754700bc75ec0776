"""No import circle in ``pipelines/`` (issue 26): every module's imports, read from its source.

Every ``import`` statement counts, wherever it stands: at the top, inside a function (a lazy
import is still a dependency) and under ``if TYPE_CHECKING:`` (a circle the type checker
follows is one a reader follows too). An import of a package's ``__init__`` from inside that
package is not an edge: a package holds its modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pipelines"


def _modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imported_names(module: str, path: Path) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of pipelines/ it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges = graph[module] = set()
        for name in _imported_names(module, path):
            while name and name not in modules:  # `from pkg import function` names pkg
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                edges.add(name)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = lowest[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                lowest[module] = min(lowest[module], lowest[target])
            elif target in on_stack:
                lowest[module] = min(lowest[module], index[target])
        if lowest[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_pipelines_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 50  # the walk found the package
    assert import_cycles(graph) == []


def test_the_check_finds_a_cycle() -> None:
    """The same check on a graph with a circle through a lazy import reports it."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    # a function-level import is an edge: build imports the ingest inside _ingest_task
    assert "pipelines.transforms.ingest" in import_graph()["pipelines.build"]
