"""The library's layering (issues 26 and 30), read from the source of every module.

The library (``tracehouse/``) is laid out along the data's walk, each stage a folder standing
on a small core, with the public face and Dagster's code location (``pipelines/``) on top:

    kernelindex, demo   the KernelIndex spec and the demo generator: nothing else of the project
    core                tracehouse/*.py below the face: schemas, settings, files, warehouse, ...
    fetch → read → identify → ingest → assemble → publish → serve
    face                tracehouse/__init__.py, __main__.py, api.py, cli*.py, build.py
    pipelines           the code location: definitions.py and defs/

Every ``import`` statement counts, wherever it stands: at the top, inside a function (a lazy
import is still a dependency) and under ``if TYPE_CHECKING:`` (a circle the type checker
follows is one a reader follows too). An import of a package's ``__init__`` from inside that
package is not an edge: a package holds its modules.

Checked: no import circle; no import that runs back up the walk (a stage imports only the
stages before it, the core and the bottom); no private name (``_x``) of one folder imported or
reached through a module by another.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tracehouse", "pipelines")

# Folder -> height. A module may import its own folder and any folder strictly lower.
WALK = ("fetch", "read", "identify", "ingest", "assemble", "publish", "serve")
HEIGHT = {
    "kernelindex": 0,
    "demo": 0,
    "core": 1,
    **{stage: 2 + index for index, stage in enumerate(WALK)},
    "face": 2 + len(WALK),
    "pipelines": 3 + len(WALK),
}
FACE = {
    "tracehouse",
    "tracehouse.__main__",
    "tracehouse.api",
    "tracehouse.build",
    "tracehouse.cli",  # the command: main, and each error as one line
    "tracehouse.cli_parser",  # its subcommands and flags
    "tracehouse.cli_commands",  # each subcommand's handler
    "tracehouse.cli_leaderboard",  # the leaderboard as a terminal table
    "tracehouse.cli_output",  # what a person sees: one-line errors, lines, rows
}


def _modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def folder_of(module: str) -> str:
    """The layer a module belongs to (a key of HEIGHT)."""
    parts = module.split(".")
    if parts[0] == "pipelines":
        return "pipelines"
    if module in FACE:
        return "face"
    if len(parts) > 2 or (len(parts) == 2 and parts[1] in HEIGHT):
        return parts[1]  # tracehouse.<folder>.<module>, or the folder's own __init__
    return "core"


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    base = node.module or ""
    if node.level:
        package = _package_of(module, path)
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    return base


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:  # `from pkg import function` names pkg
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges = graph[module] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, path, node)
                names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            for name in names:
                target = _resolve(name, modules)
                if target and target != module and not module.startswith(target + "."):
                    edges.add(target)
    return graph


def private_reaches() -> list[str]:
    """Every private name of a module taken by a module of another folder: ``from m import
    _x``, or ``m._x`` where ``m`` is a project module imported by name."""
    modules = _modules()
    found: list[str] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        module_aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(module, path, node)
                for alias in node.names:
                    target = _resolve(f"{base}.{alias.name}", modules)
                    if target == f"{base}.{alias.name}":
                        module_aliases[alias.asname or alias.name] = target
                    elif (
                        target
                        and alias.name.startswith("_")
                        and folder_of(target) != folder_of(module)
                    ):
                        found.append(f"{module}: from {target} import {alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in modules:
                        module_aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in module_aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                target = module_aliases[node.value.id]
                if folder_of(target) != folder_of(module):
                    found.append(f"{module}: {target}.{node.attr}")
    return sorted(set(found))


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module in a higher layer, or in another folder of the same layer."""
    found = []
    for module, targets in graph.items():
        here = folder_of(module)
        for target in targets:
            there = folder_of(target)
            if there != here and HEIGHT[there] >= HEIGHT[here]:
                found.append(f"{module} ({here}) -> {target} ({there})")
    return sorted(found)


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


def test_the_library_and_the_code_location_have_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 50  # the walk found the packages
    assert import_cycles(graph) == []


def test_no_import_runs_back_up_the_walk() -> None:
    graph = import_graph()
    assert {folder_of(module) for module in graph} == set(HEIGHT)  # every layer is populated
    assert upward_imports(graph) == []


def test_no_private_name_crosses_a_folder() -> None:
    assert private_reaches() == []


def test_the_library_never_imports_the_code_location() -> None:
    """A user's own ``pipelines/`` folder then hides nothing the CLI or the API needs."""
    graph = import_graph()
    assert [
        (module, target)
        for module, targets in graph.items()
        if module.startswith("tracehouse")
        for target in targets
        if target.startswith("pipelines")
    ] == []


def test_the_checks_find_what_they_look_for() -> None:
    """The same checks on made-up graphs report a circle through a lazy import and a climb."""
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    climb = {"tracehouse.assemble.finalize": {"tracehouse.serve.changes"}}
    assert upward_imports(climb) == [
        "tracehouse.assemble.finalize (assemble) -> tracehouse.serve.changes (serve)"
    ]
    # a function-level import is an edge: the ingest plan imports the worker inside _ingest_task
    assert "tracehouse.ingest.worker" in import_graph()["tracehouse.ingest.plan"]
    assert folder_of("tracehouse.schemas") == "core"
    assert folder_of("tracehouse.fetch") == "fetch"
    assert folder_of("tracehouse.fetch.hub.cache") == "fetch"
    assert folder_of("pipelines.defs.assets") == "pipelines"
