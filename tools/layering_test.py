"""The house is layered along the walk of the data (issue 22), checked over the source tree.

fetch -> read -> normalize -> identify -> ingest -> assemble -> publish -> serve, all standing on
the core (one declaration each: schemas, settings, rejects, files, interrupts, the warehouse
folder) and on kernelindex/ (the KernelIndex spec, which imports nothing of the project); the
faces (the ``tracehouse`` command, Dagster's ``defs/`` and ``definitions.py``, the Python API) on
top. A folder or top-level module is a *unit*; each unit has a stage.

- a unit imports only units of its own stage or earlier ones (no import runs back up the walk);
- the units' import graph has no circle;
- no unit imports a private name (``_x``) of another.

Imports under ``if TYPE_CHECKING:`` are not imports at run time and are left out. The package's
own ``__init__`` is the front door (it may re-export the API lazily), so its imports are not
edges of the graph.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE_NAME = "pipelines"
PACKAGE_DIR = Path(__file__).resolve().parents[2] / PACKAGE_NAME

# The walk, earliest first. Every unit (first component below the package) has one stage.
STAGES: tuple[tuple[str, frozenset[str]], ...] = (
    ("kernelindex", frozenset({"kernelindex"})),
    (
        "core",
        frozenset(
            {
                "",
                "files",
                "interrupts",
                "rejects",
                "schemas",
                "settings",
                "sql_files",
                "storage",
                "table_kinds",
                "warehouse",
            }
        ),
    ),
    ("fetch", frozenset({"fetch"})),
    ("read", frozenset({"read"})),
    ("normalize", frozenset({"normalize"})),
    ("identify", frozenset({"identify"})),
    ("ingest", frozenset({"ingest"})),
    ("assemble", frozenset({"assemble"})),
    ("publish", frozenset({"publish"})),
    ("serve", frozenset({"serve"})),
    ("build", frozenset({"build"})),  # the walk itself, orchestration only
    ("demo", frozenset({"demo"})),  # writes a dataset, then builds it as a user would
    ("faces", frozenset({"api", "cli", "definitions", "defs"})),
)
STAGE_OF = {unit: index for index, (_, units) in enumerate(STAGES) for unit in units}


@cache
def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(PACKAGE_DIR).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def unit_of(module: str) -> str:
    return module.split(".")[0]


def runtime_nodes(tree: ast.Module):
    """Every node except those under ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


@cache
def imports() -> list[tuple[str, str, str | None, int]]:
    """(importing module, imported module, imported name or None, line), runtime only."""
    known = modules()

    def resolve(dotted: str) -> str | None:
        if dotted != PACKAGE_NAME and not dotted.startswith(PACKAGE_NAME + "."):
            return None
        rel = dotted[len(PACKAGE_NAME) + 1 :]
        while rel and rel not in known:
            rel = rel.rpartition(".")[0]
        return rel

    edges: list[tuple[str, str, str | None, int]] = []
    for module, path in known.items():
        for node in runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = resolve(alias.name)
                    if target is not None:
                        edges.append((module, target, None, node.lineno))
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    target = resolve(full)
                    if target is not None and target == full[len(PACKAGE_NAME) + 1 :]:
                        edges.append((module, target, None, node.lineno))
                    else:
                        base = resolve(node.module)
                        if base is not None:
                            edges.append((module, base, alias.name, node.lineno))
    return edges


def test_every_unit_has_a_stage():
    missing = sorted({unit_of(m) for m in modules()} - set(STAGE_OF))
    assert not missing, f"units with no stage of the walk (add them to STAGES): {missing}"


def test_no_import_runs_back_up_the_walk():
    wrong = [
        f"{PACKAGE_NAME}.{source}:{line} ({STAGES[STAGE_OF[unit_of(source)]][0]}) imports "
        f"{PACKAGE_NAME}.{target} ({STAGES[STAGE_OF[unit_of(target)]][0]})"
        for source, target, _, line in imports()
        if source
        and unit_of(source) in STAGE_OF
        and unit_of(target) in STAGE_OF
        and STAGE_OF[unit_of(target)] > STAGE_OF[unit_of(source)]
    ]
    assert not wrong, "imports that run back up the walk:\n" + "\n".join(wrong)


def test_no_import_circle_between_units():
    graph: dict[str, set[str]] = {}
    for source, target, _, _ in imports():
        if source and unit_of(source) != unit_of(target):
            graph.setdefault(unit_of(source), set()).add(unit_of(target))
    circles = strongly_connected(graph)
    assert not circles, f"import circles between units: {circles}"


def test_kernelindex_imports_nothing_of_the_project():
    outside = [
        f"{PACKAGE_NAME}.{source}:{line} imports {PACKAGE_NAME}.{target}"
        for source, target, _, line in imports()
        if unit_of(source) == "kernelindex" and unit_of(target) != "kernelindex"
    ]
    assert not outside, "\n".join(outside)


def test_no_private_name_imported_across_units():
    private = [
        f"{PACKAGE_NAME}.{source}:{line} imports {name} of {PACKAGE_NAME}.{target}"
        for source, target, name, line in imports()
        if name
        and name.startswith("_")
        and not name.startswith("__")
        and unit_of(source) != unit_of(target)
    ]
    assert not private, "private names imported across units:\n" + "\n".join(private)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: every set of units that import each other (size > 1)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
