#!/usr/bin/env python3
"""Issue 22: move tracehouse into folders along the walk, tests into tiers, SQL by what it returns.

Run once, from the repository root of a clean checkout (after the other branches of the round are
merged, with ``make install`` done)::

    .venv/bin/python tools/restructure.py            # moves, rewrites, ruff --fix, then checks
    .venv/bin/python tools/restructure.py --dry-run  # print the plan only, change nothing

It is deterministic and data-driven: every move is a row of the tables below. Modules are moved
with ``git mv``; every import of a moved module is rewritten from the parse tree (``ast``), and
every dotted or path reference to it in text (strings such as Dagster's preload lists,
``python -m`` commands, workspace.yaml, pyproject.toml, Markdown, comments) by one regular
expression built from the same table, so a module is renamed in one pass everywhere.

Nothing unknown is silently left broken: a module, SQL file or test file the tables do not name is
listed in the report (and stays where it is, still importable), and the final check resolves every
``pipelines.*``/``tests.*`` import in the tree against the modules that exist afterwards; any that
does not resolve makes the script exit 1.

A second run on the restructured tree finds nothing to move and changes nothing.

The coordinator deletes ``tools/`` after running it: nothing in the product imports it.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

# ---------------------------------------------------------------------------------------------
# The tables. Names are dotted module names relative to their root package (`pipelines`, `tests`).

PACKAGE = "pipelines"

# Old module (or package: the prefix moves with everything below it) -> its place on the walk.
MODULE_MOVES: dict[str, str] = {
    # fetch: where bytes come from
    "sources.local": "fetch.local",
    "sources.safety": "fetch.safety",
    "sources.hub": "fetch.hub",
    # read: bytes -> lines with file, line and offset, or a reject
    "transforms.records": "read",
    # normalize: schema eras and legacy spellings into the one clean shape
    "transforms.normalize": "normalize.records",
    "transforms.timestamps": "normalize.timestamps",
    "transforms.evaluation_rules": "normalize.evaluation_rules",
    # ingest: files to staging parts, incrementally
    "transforms.context": "ingest.context",
    "transforms.ingest": "ingest.staging",
    "transforms.fib_lines": "ingest.fib_lines",
    "manifest": "ingest.manifest",
    # assemble: DuckDB SQL over the staged parts
    "transforms.finalize": "assemble.tables",
    "invariants": "assemble.invariants",
    # serve: what reads the published warehouse
    "queries": "serve.queries",
    "changes": "serve.changes",
    "export": "serve.export",
    "report": "serve.report",
    "report_changes": "serve.report_changes",
    "render": "serve.render",
}

# Modules known to stay where they are (the core, the faces, the stages already in place, and the
# modules other branches of this round add). Anything neither moved nor listed here is reported.
MODULES_STAYING = {
    "",  # the package itself
    "api",  # issue 21: the Python API (a face)
    "build",
    "cli",
    "definitions",
    "files",
    "interrupts",
    "rejects",
    "schemas",
    "settings",
    "sql_files",
    "storage",
    "table_kinds",
    "warehouse",
    "ingest",
    "ingest.columnar",
    "ingest.lines",  # issue 17: the set-based reader
    "publish",
    "publish.iceberg",
    "publish.generations",
}
PACKAGES_STAYING = ("defs", "demo", "kernelindex")  # with everything below them

# Packages the moves empty: removed when only their (docstring-only) __init__.py is left.
DISSOLVED_PACKAGES = ("transforms", "sources")

# Docstrings of the packages the moves create.
NEW_PACKAGE_DOCS = {
    "fetch": "Fetch: where the bytes of a dataset come from (a local folder, the Hugging Face Hub).",
    "normalize": "Normalise: every schema era and legacy spelling of a record into one clean shape.",
    "assemble": "Assemble: the warehouse tables from staging parts, in DuckDB SQL (sql/assemble/).",
    "serve": "Serve: what reads the published warehouse (queries, changes, exports, the report).",
}

# Top-level definitions moved between modules (after the module moves, so in new names), to
# break an import circle or an import that runs back up the walk. Each row: source module,
# names (moved together with the comments directly above them), destination module, and the
# docstring of the destination when the move creates it.
SYMBOL_MOVES: list[tuple[str, tuple[str, ...], str, str | None]] = [
    # fetch.local imported Reject from read (fetch runs before read): its home is the core.
    ("read", ("Reject",), "rejects", None),
    # schemas <-> warehouse: the kinds of table were declared with the folder layout.
    (
        "warehouse",
        ("PER_SOURCE_TABLES", "VIEW_ADDED_COLUMNS"),
        "table_kinds",
        "What kind each table is, declared without importing pyarrow (read commands import it).",
    ),
    # assemble.tables imported serve.changes: the regression limits are a stored relation the
    # build writes, so they belong to assemble; `tracehouse changes` reads them from there.
    (
        "serve.changes",
        (
            "THRESHOLDS_RELATION",
            "RegressionThresholds",
            "CREATE_THRESHOLDS",
            "store_regression_thresholds",
        ),
        "assemble.regression_thresholds",
        "The one-row regression_thresholds relation (sql/marts/regression_thresholds.sql): the"
        "\nlimits a result must pass to be flagged a regression, from the settings.",
    ),
    # publish.iceberg imported serve.export's _write_sorted (publish runs before serve).
    ("serve.export", ("write_sorted",), "warehouse", None),
]

# Private names imported across folders, made public (module, old name -> new name). Applied
# before SYMBOL_MOVES, so a move may name the public spelling.
PUBLICIZE: list[tuple[str, str, str]] = [
    # the generation layout iceberg's replica writes exactly as a build does
    ("assemble.tables", "_stored_schema", "stored_schema"),
    ("assemble.tables", "_link_parts", "link_parts"),
    ("assemble.tables", "_rows_to_arrow", "rows_to_arrow"),
    ("assemble.tables", "_write_duckdb_file", "write_duckdb_file"),
    ("assemble.tables", "_write_empty_parts", "write_empty_parts"),
    ("assemble.tables", "_write_ranking_parts", "write_ranking_parts"),
    ("serve.export", "_write_sorted", "write_sorted"),
]

# Code that names a moved module's *file* (not its import name), found on the merged branches:
# (file, the text as it is, the text it becomes). A patch whose text is in neither form is
# reported. Strings naming an old module file elsewhere are listed for a look by hand.
PATCHES: list[tuple[str, str, str]] = [
    (  # issue 20: the report asset's code version digests the report's modules
        "pipelines/defs/assets.py",
        "    package = Path(__file__).resolve().parents[1]\n"
        '    files = ("report.py", "report_changes.py", "render.py")\n',
        '    package = Path(__file__).resolve().parents[1] / "serve"\n'
        '    files = ("report.py", "report_changes.py", "render.py")\n',
    ),
]

# SQL files (stem -> folder under sql/). Rules for stems not listed: RULES, else reported.
SQL_FOLDERS: dict[str, tuple[str, ...]] = {
    "flashinfer": ("author_rankings", "fast_p_thresholds", "win_at_p"),
    "rank": ("ranking_inputs", "run_rankings", "baseline_solutions"),
    "marts": (
        "run_summary",
        "source_summary",
        "leaderboard",
        "leaderboard_baselines",
        "leaderboard_speedups",
        "leaderboard_fast_p",
        "solution_workload_latency",
        "run_history",
        "latency_history",
        "latency_verdicts",
        "regressions",
        "regression_thresholds",
        "record_events",
        "leader_changes",
    ),
}
SQL_PREFIX_RULES = (("fib_", "flashinfer"), ("web_", "flashinfer"), ("leaderboard_", "marts"))
SQL_SUBFOLDERS = ("assemble", "rank", "marts", "flashinfer")

# Tests by tier. Helpers go to fixtures/; conftest.py stays at tests/ (it serves every tier).
TEST_TIERS: dict[str, tuple[str, ...]] = {
    # pure functions, the source tree and the docs: seconds each
    "unit": (
        "test_commit_sha",
        "test_kept_records",
        "test_layering",
        "test_one_home",
        "test_properties",
        "test_readme",
        "test_settings",
    ),
    # SQL over small real DuckDB tables, no build
    "sql": ("test_invariants",),
    # through the real `tracehouse` command, end to end: builds of real warehouses, crashes,
    # interrupts, concurrency, the browser, S3, the Hub, Dagster
    "system": (
        "test_bench_harness",
        "test_changes",
        "test_cli_errors",
        "test_concurrency",
        "test_crash_safety",
        "test_dagster",
        "test_demo",  # `tracehouse demo` end to end
        "test_fanout",
        "test_history",
        "test_hostile_input",
        "test_hub",
        "test_hub_build",
        "test_iceberg",
        "test_interrupts",
        "test_least_privilege",
        "test_no_silent_loss",
        "test_output",
        "test_report",
        "test_report_folder",
        "test_sources",
        "test_warehouse",
        "test_corruption_repair",  # issue 16
        "test_hostile_sources",  # issue 16
        "test_query_limits",  # issue 16
        "test_many_sources",  # issue 19
        "test_source_identity",  # issue 19
        "test_truthful_output",  # issue 19
        "test_api",  # issue 21
        "test_hub_offline",  # issue 21
        "test_iceberg_docs",  # issue 21
        "test_open_anywhere",  # issue 21
        "test_packaging",  # issue 21: builds a wheel
    ),
    # KernelIndex identities and FlashInfer-Bench parity against goldens; the production ingest
    # against the per-line reference
    "contract": (
        "test_canonical",  # against the reference implementation, rfc8785.dumps
        "test_columnar",
        "test_fib_metrics",
        "test_identity",
        "test_identity_golden",
        "test_set_ingest",  # issue 17
    ),
    "fixtures": (
        "browser",
        "docs_tables",  # writes docs/tables.md from the schemas
        "fib_golden",
        "hostile_corpus",
        "hub_server",
        "oracle",  # issue 17: the per-line KernelIndex reference
        "shared_data",
    ),
}
TESTS_STAYING = {"__init__", "conftest"}
TEST_FOLDERS_MOVING_WITH = {"__snapshots__": "test_dagster"}  # data folders follow their test
TIERS_FAST = ("unit", "sql")  # what `make test-fast` runs

TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".txt", ".cfg", ".ini", ".sh", ".json"}
TEXT_NAMES = {"Makefile"}
SCANNED_ROOTS = ("pipelines", "tests", "bench", "docs", "tools")
SCANNED_FILES = ("README.md", "pyproject.toml", "workspace.yaml", "Makefile")

# ---------------------------------------------------------------------------------------------


@dataclass
class Report:
    done: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def print(self) -> None:
        for title, lines in (
            ("done", self.done),
            ("not in the tables (left where they are; place them by hand)", self.unknown),
            ("PROBLEMS", self.problems),
        ):
            print(f"== {title}: {len(lines)}")
            for line in lines:
                print(f"   {line}")


class Tree:
    """The checkout being restructured."""

    def __init__(self, root: Path, dry_run: bool, report: Report) -> None:
        self.root = root
        self.dry_run = dry_run
        self.report = report

    def git(self, *args: str) -> None:
        if self.dry_run:
            return
        subprocess.run(["git", *args], cwd=self.root, check=True, capture_output=True)

    def move(self, old: Path, new: Path) -> None:
        self.report.done.append(f"git mv {old.relative_to(self.root)} {new.relative_to(self.root)}")
        if self.dry_run:
            return
        new.parent.mkdir(parents=True, exist_ok=True)
        if new.is_dir():
            # A folder left by an earlier run or checkout holding only bytecode caches: git mv
            # would nest the moved folder inside it.
            real = [f for f in new.rglob("*") if f.is_file() and "__pycache__" not in f.parts]
            if real:
                self.report.problems.append(f"{new.relative_to(self.root)} exists; not moved")
                return
            shutil.rmtree(new)
        tracked = (
            subprocess.run(
                ["git", "ls-files", "--error-unmatch", str(old)], cwd=self.root, capture_output=True
            ).returncode
            == 0
        )
        if tracked:
            self.git("mv", str(old), str(new))
        else:
            shutil.move(str(old), str(new))

    def text_files(self) -> list[Path]:
        files: list[Path] = []
        for name in SCANNED_ROOTS:
            base = self.root / name
            if base.is_dir():
                files += [
                    p
                    for p in base.rglob("*")
                    if p.is_file()
                    and "__pycache__" not in p.parts
                    and (p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES)
                    and p.resolve() != Path(__file__).resolve()
                ]
        files += [self.root / n for n in SCANNED_FILES if (self.root / n).is_file()]
        return sorted(set(files))

    def write(self, path: Path, text: str) -> None:
        if path.read_text() != text and not self.dry_run:
            path.write_text(text)


def modules_of(package_dir: Path) -> dict[str, Path]:
    """Dotted names (relative to the package) of every module below ``package_dir``."""
    found: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(package_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def mapped(name: str, moves: dict[str, str]) -> str | None:
    """Where the module ``name`` goes under ``moves`` (longest matching prefix), or None."""
    for old in sorted(moves, key=len, reverse=True):
        if name == old or name.startswith(old + "."):
            return moves[old] + name[len(old) :]
    return None


def module_path(package_dir: Path, name: str, is_package: bool) -> Path:
    base = package_dir.joinpath(*name.split(".")) if name else package_dir
    return base / "__init__.py" if is_package else base.with_suffix(".py")


# --------------------------------------------------------------------------------------------
# Rewriting imports from the parse tree


def absolute_from(node: ast.ImportFrom, file_module: str, is_package: bool) -> str:
    """The absolute module of ``from <...> import`` (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    parts = file_module.split(".") if is_package else file_module.split(".")[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def dotted_module(path: Path, root: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def render_from(module: str, names: list[tuple[str, str | None]], indent: str) -> str:
    body = ", ".join(n if a is None else f"{n} as {a}" for n, a in names)
    line = f"from {module} import {body}"
    if len(indent) + len(line) <= 100:
        return line
    inner = "".join(f"{indent}    {n if a is None else f'{n} as {a}'},\n" for n, a in names)
    return f"from {module} import (\n{inner}{indent})"


def replace_segments(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Apply (start offset, end offset, replacement) edits, last first."""
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def rewrite_from_imports(
    text: str,
    file_module: str,
    is_package: bool,
    resolve,  # (absolute module, imported name) -> (new module, new name) or None
) -> str:
    """Rewrite every ``from X import a, b`` whose (X, name) ``resolve`` maps elsewhere; names
    that stay keep their statement, the others get one statement per new module."""
    tree = ast.parse(text)
    starts = offsets(text)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = absolute_from(node, file_module, is_package)
        groups: dict[str, list[tuple[str, str | None]]] = {}
        changed = bool(node.level)  # relative imports become absolute
        for alias in node.names:
            target = resolve(base, alias.name)
            if target is None:
                groups.setdefault(base, []).append((alias.name, alias.asname))
                continue
            new_module, new_name = target
            bound = alias.asname or alias.name
            changed = True
            groups.setdefault(new_module, []).append(
                (new_name, None if bound == new_name else bound)
            )
        if not changed:
            continue
        indent = " " * node.col_offset
        statements = [render_from(m, names, indent) for m, names in groups.items()]
        start = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]
        edits.append((start, end, f"\n{indent}".join(statements)))
    return replace_segments(text, edits)


# --------------------------------------------------------------------------------------------
# Text references (dotted names and paths), one regular expression per table


def dotted_pattern(moves: dict[str, str], root: str) -> tuple[re.Pattern[str], dict[str, str]]:
    keys = sorted(moves, key=len, reverse=True)
    alternation = "|".join(re.escape(k) for k in keys)
    pattern = re.compile(rf"(?<![\w.]){re.escape(root)}\.({alternation})(?![\w])")
    return pattern, {k: f"{root}.{v}" for k, v in moves.items()}


def rewrite_dotted(text: str, moves: dict[str, str], root: str) -> str:
    if not moves:
        return text
    pattern, new = dotted_pattern(moves, root)
    return pattern.sub(lambda m: new[m.group(1)], text)


def rewrite_paths(text: str, path_moves: dict[str, str]) -> str:
    """Paths such as ``pipelines/transforms/records.py`` or ``sql/leaderboard.sql`` (with or
    without their first folder when that is unambiguous)."""
    if not path_moves:
        return text
    keys = sorted(path_moves, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w./-])(" + "|".join(re.escape(k) for k in keys) + r")(?![\w])")
    return pattern.sub(lambda m: path_moves[m.group(1)], text)


# --------------------------------------------------------------------------------------------
# Moving top-level definitions between modules


def defined_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    return set()


def is_type_checking_block(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )


def top_level_bindings(tree: ast.Module) -> dict[str, tuple[ast.stmt, bool]]:
    """Name -> (statement binding it at module level, whether under TYPE_CHECKING)."""
    bound: dict[str, tuple[ast.stmt, bool]] = {}
    for node in tree.body:
        if is_type_checking_block(node):
            for inner in node.body:  # type: ignore[attr-defined]
                for name in defined_names(inner):
                    bound.setdefault(name, (inner, True))
        for name in defined_names(node):
            bound.setdefault(name, (node, False))
    return bound


def free_names(nodes: list[ast.stmt]) -> set[str]:
    loaded: set[str] = set()
    local: set[str] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                (loaded if isinstance(sub.ctx, ast.Load) else local).add(sub.id)
            elif isinstance(sub, ast.arg):
                local.add(sub.arg)
            elif isinstance(sub, ast.Import | ast.ImportFrom):
                local |= {(a.asname or a.name).split(".")[0] for a in sub.names}
            elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) or (
                isinstance(sub, ast.ExceptHandler) and sub.name
            ):
                local.add(sub.name)  # type: ignore[union-attr]
    return loaded - local - set(dir(builtins))


def statement_span(lines: list[str], node: ast.stmt) -> tuple[int, int]:
    """0-based [first, last) lines of a statement with its decorators and the comment lines
    directly above it."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    while first > 0 and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    return first, node.end_lineno  # type: ignore[return-value]


def import_line_for(name: str, statement: ast.stmt) -> str:
    """The import of one name, taken from the statement that binds it in the source module."""
    if isinstance(statement, ast.ImportFrom):
        for alias in statement.names:
            if (alias.asname or alias.name) == name:
                suffix = f" as {alias.asname}" if alias.asname else ""
                return f"from {'.' * statement.level}{statement.module or ''} import {alias.name}{suffix}"
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            if (alias.asname or alias.name).split(".")[0] == name:
                return f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
    raise ValueError(name)


def insert_imports(text: str, plain: list[str], type_checking: list[str]) -> str:
    """Add import lines after the module's last top-level import (or its docstring)."""
    if not plain and not type_checking:
        return text
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    anchor = 0
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) or (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and anchor == 0
        ):
            anchor = node.end_lineno or anchor
        elif anchor:
            break
    block = "".join(f"{line}\n" for line in plain)
    if type_checking:
        if "TYPE_CHECKING" not in top_level_bindings(tree):
            block += "from typing import TYPE_CHECKING\n"
        block += "\nif TYPE_CHECKING:\n" + "".join(f"    {line}\n" for line in type_checking)
    return "".join(lines[:anchor]) + ("\n" if anchor else "") + block + "".join(lines[anchor:])


# --------------------------------------------------------------------------------------------


class Restructure:
    def __init__(self, root: Path, dry_run: bool) -> None:
        self.root = root
        self.report = Report()
        self.tree = Tree(root, dry_run, self.report)
        self.dry_run = dry_run
        self.package_dir = root / PACKAGE
        # Where issue 21's rename script already ran, the import name is `tracehouse` (a symlink
        # to the folder): rewrite under that name.
        link = root / "tracehouse"
        self.import_name = "tracehouse" if link.is_symlink() else PACKAGE
        self.module_moves: dict[str, str] = {}  # applied module moves, relative names
        self.test_moves: dict[str, str] = {}
        self.path_moves: dict[str, str] = {}

    # ---- modules
    def plan_modules(self) -> None:
        modules = modules_of(self.package_dir)
        for name, path in modules.items():
            target = mapped(name, MODULE_MOVES)
            if target is not None:
                self.module_moves[name] = target
                continue
            if name in MODULES_STAYING or name.split(".")[0] in PACKAGES_STAYING:
                continue
            if self.is_a_new_place(name):
                continue  # a second run: already where the tables put it
            if any(name == p for p in DISSOLVED_PACKAGES):
                continue
            if any(name.startswith(p + ".") for p in DISSOLVED_PACKAGES):
                self.report.unknown.append(
                    f"{path.relative_to(self.root)}: a module of a folder being dissolved; "
                    "it stays (and so does its folder)"
                )
            else:
                self.report.unknown.append(
                    f"{path.relative_to(self.root)}: stays; the layering test needs its stage"
                )
        for old, new in self.module_moves.items():
            old_pkg = (self.package_dir.joinpath(*old.split(".")) / "__init__.py").is_file()
            self.path_moves[str(module_path(Path(PACKAGE), old, old_pkg))] = str(
                module_path(Path(PACKAGE), new, old_pkg)
            )
        for old, new in MODULE_MOVES.items():  # folder mentions: pipelines/sources/hub/
            if (self.package_dir.joinpath(*old.split("."))).is_dir():
                self.path_moves[f"{PACKAGE}/{old.replace('.', '/')}/"] = (
                    f"{PACKAGE}/{new.replace('.', '/')}/"
                )
        for old, new in list(self.path_moves.items()):  # `transforms/normalize.py` in prose
            short = old.removeprefix(f"{PACKAGE}/")
            if short.count("/") >= 1 and short not in self.path_moves:
                self.path_moves[short] = new.removeprefix(f"{PACKAGE}/")

    def is_a_new_place(self, name: str) -> bool:
        """Whether ``name`` is where a table of this script puts a module."""
        places = set(MODULE_MOVES.values()) | {d for _, _, d, _ in SYMBOL_MOVES}
        places |= set(NEW_PACKAGE_DOCS)
        return any(name == p or name.startswith(p + ".") for p in places)

    def move_modules(self) -> None:
        for old, new in sorted(self.module_moves.items()):
            old_pkg = module_path(self.package_dir, old, True)
            if old_pkg.is_file():
                continue  # packages move as folders, below
            source = module_path(self.package_dir, old, False)
            if any(old.startswith(p + ".") for p in self.package_moves()):
                continue
            self.tree.move(source, module_path(self.package_dir, new, False))
        for old in self.package_moves():
            new = MODULE_MOVES[old]
            self.tree.move(
                self.package_dir.joinpath(*old.split(".")),
                self.package_dir.joinpath(*new.split(".")),
            )
        for name, doc in NEW_PACKAGE_DOCS.items():
            init = self.package_dir / name / "__init__.py"
            if (self.package_dir / name).is_dir() and not init.exists() and not self.dry_run:
                init.write_text(f'"""{doc}"""\n')
                self.tree.git("add", str(init))
        for name in DISSOLVED_PACKAGES:
            folder = self.package_dir / name
            if not folder.is_dir():
                continue
            left = [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
            if left == [folder / "__init__.py"]:
                self.report.done.append(f"git rm {folder.relative_to(self.root)}/__init__.py")
                self.tree.git("rm", "-q", str(folder / "__init__.py"))
                if not self.dry_run:
                    shutil.rmtree(folder, ignore_errors=True)

    def package_moves(self) -> list[str]:
        return [
            old
            for old in MODULE_MOVES
            if (self.package_dir.joinpath(*old.split(".")) / "__init__.py").is_file()
        ]

    # ---- tests
    def plan_tests(self) -> None:
        tests = self.root / "tests"
        tier_of = {name: tier for tier, names in TEST_TIERS.items() for name in names}
        for path in sorted(tests.glob("*.py")):
            name = path.stem
            if name in TESTS_STAYING:
                continue
            tier = tier_of.get(name)
            if tier is None:
                tier = "sql" if name.startswith("test_") else "fixtures"
                self.report.unknown.append(
                    f"tests/{path.name}: not in TEST_TIERS; put in tests/{tier}/ (check its tier)"
                )
            self.test_moves[name] = f"{tier}.{name}"
            self.path_moves[f"tests/{path.name}"] = f"tests/{tier}/{path.name}"

    def move_tests(self) -> None:
        tests = self.root / "tests"
        for name, new in sorted(self.test_moves.items()):
            tier = new.split(".")[0]
            target = tests / tier / f"{name}.py"
            self.tree.move(tests / f"{name}.py", target)
            if not self.dry_run:
                self.deepen_file_anchors(target)
        for folder, test in TEST_FOLDERS_MOVING_WITH.items():
            if (tests / folder).is_dir() and test in self.test_moves:
                tier = self.test_moves[test].split(".")[0]
                self.tree.move(tests / folder, tests / tier / folder)
        if not self.dry_run:
            for tier in TEST_TIERS:
                init = tests / tier / "__init__.py"
                if (tests / tier).is_dir() and not init.exists():
                    init.write_text("")
                    self.tree.git("add", str(init))

    def deepen_file_anchors(self, path: Path) -> None:
        """A test one folder deeper finds the repository root and ../shared one level up."""
        text = path.read_text()
        new = re.sub(
            r"Path\(__file__\)\.resolve\(\)\.parents\[(\d+)\]",
            lambda m: f"Path(__file__).resolve().parents[{int(m.group(1)) + 1}]",
            text,
        )
        new = re.sub(
            r"Path\(__file__\)\.resolve\(\)\.parent\.parent(?!\.parent)",
            "Path(__file__).resolve().parents[2]",
            new,
        )
        if new != text:
            self.report.done.append(f"{path.relative_to(self.root)}: __file__ anchors one deeper")
            path.write_text(new)

    # ---- SQL
    def plan_sql(self) -> dict[str, str]:
        folder_of = {stem: folder for folder, stems in SQL_FOLDERS.items() for stem in stems}
        moves: dict[str, str] = {}
        for path in sorted((self.root / "sql").glob("*.sql")):
            folder = folder_of.get(path.stem)
            if folder is None:
                folder = next((f for p, f in SQL_PREFIX_RULES if path.stem.startswith(p)), None)
            if folder is None:
                self.report.unknown.append(
                    f"sql/{path.name}: no folder rule; it stays in sql/ (sql_text still finds it)"
                )
                continue
            moves[path.stem] = folder
            self.path_moves[f"sql/{path.name}"] = f"sql/{folder}/{path.name}"
        return moves

    def move_sql(self, moves: dict[str, str]) -> None:
        for stem, folder in sorted(moves.items()):
            sql = self.root / "sql"
            self.tree.move(sql / f"{stem}.sql", sql / folder / f"{stem}.sql")
        if not self.dry_run:
            self.patch_sql_files()

    def patch_sql_files(self) -> None:
        """sql_text(name) finds ``sql/<folder>/<name>.sql`` by its name (the names are unique)."""
        path = self.package_dir / "sql_files.py"
        text = path.read_text()
        if "def sql_path(" in text:
            return
        old_text = re.search(
            r"@cache\ndef sql_text\(name: str\) -> str:\n(?:    .*\n|\n)*?(?=\S|\Z)", text
        )
        if old_text is None:
            self.report.problems.append("pipelines/sql_files.py: sql_text not found; patch it")
            return
        new_text = f'''SQL_FOLDERS = {SQL_SUBFOLDERS!r}


@cache
def sql_paths() -> dict[str, Path]:
    """Every SQL file by its name: ``sql/<folder>/<name>.sql`` (folders by what the SELECT
    returns: {", ".join(SQL_SUBFOLDERS)}). Names are unique, so a name says which file."""
    found: dict[str, Path] = {{}}
    root = sql_dir()
    for path in sorted(root.glob("*.sql")) + sorted(root.glob("*/*.sql")):
        if path.stem in found:
            raise RuntimeError(f"two SQL files are named {{path.stem}}: {{found[path.stem]}}, {{path}}")
        found[path.stem] = path
    return found


def sql_path(name: str) -> Path:
    """The file of ``name`` (a bare name, or ``<folder>/<name>``)."""
    return sql_paths()[name.rpartition("/")[2]]


def sql_relative(name: str) -> str:
    """``sql/<folder>/<name>.sql``, as a person finds it in the repository."""
    path = sql_path(name)
    return "sql/" + path.relative_to(sql_dir()).as_posix()


@cache
def sql_text(name: str) -> str:
    """The SELECT in the SQL file ``name``, without a trailing semicolon."""
    return sql_path(name).read_text().strip().rstrip(";")


'''
        text = text[: old_text.start()] + new_text + text[old_text.end() :]
        text = text.replace(
            '"""The SQL files under ``sql/``: one SELECT each, named after the view or table it returns."""',
            '"""The SQL files under ``sql/<folder>/``: one SELECT each, named after the view or table it\nreturns."""',
        )
        path.write_text(text)
        self.report.done.append("pipelines/sql_files.py: sql_paths/sql_path/sql_relative by name")

    def rewrite_sql_references(self, text: str) -> tuple[str, bool]:
        """``sql_dir() / f"{x}.sql"`` -> ``sql_path(x)``; ``sql/{x}.sql`` in f-strings ->
        ``{sql_relative(x)}``. Returns the text and whether it now needs those names."""
        new = re.sub(r"sql_dir\(\)\s*/\s*f\"\{([^{}\"]+)\}\.sql\"", r"sql_path(\1)", text)
        new = re.sub(r"sql_dir\(\)\s*/\s*\"(\w+)\.sql\"", r'sql_path("\1")', new)
        new = re.sub(r"(f\"[^\"\n]*)sql/\{([^{}\"]+)\}\.sql", r"\1{sql_relative(\2)}", new)
        return new, new != text

    # ---- one pass over every text file
    def rewrite_everything(self) -> None:
        pkg_moves = self.module_moves
        test_moves = self.test_moves
        old_pkg_modules = set(modules_of(self.package_dir)) if self.dry_run else None
        for path in self.tree.text_files():
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                continue
            new = text
            if path.suffix == ".py":
                new = self.rewrite_python_imports(path, new, old_pkg_modules)
                new, needs_sql = self.rewrite_sql_references(new)
                if needs_sql:
                    used = [n for n in ("sql_path", "sql_relative") if re.search(rf"\b{n}\(", new)]
                    bound = top_level_bindings(ast.parse(new))
                    missing = [n for n in used if n not in bound]
                    if missing and path.name != "sql_files.py":
                        new = insert_imports(
                            new,
                            [f"from {self.import_name}.sql_files import {', '.join(missing)}"],
                            [],
                        )
            new = rewrite_dotted(new, pkg_moves, self.import_name)
            if self.import_name != PACKAGE:
                new = rewrite_dotted(new, pkg_moves, PACKAGE)
            new = rewrite_dotted(new, test_moves, "tests")
            new = rewrite_paths(new, self.path_moves)
            if new != text:
                self.tree.write(path, new)
                self.report.done.append(f"rewrote references in {path.relative_to(self.root)}")

    def rewrite_python_imports(self, path: Path, text: str, old_modules: set[str] | None) -> str:
        """``from pipelines.transforms import records`` style imports (a moved module named as
        an imported name) and relative imports; dotted ``from a.b import x`` is left to the
        text pass, which rewrites it identically everywhere."""
        modules = old_modules if old_modules is not None else set(self.module_moves)
        known = set(modules) | set(self.module_moves)
        name = self.import_name

        def resolve(base: str, imported: str) -> tuple[str, str] | None:
            for root, moves in (
                (name, self.module_moves),
                (PACKAGE, self.module_moves),
                ("tests", self.test_moves),
            ):
                if base != root and not base.startswith(root + "."):
                    continue
                rel = base[len(root) + 1 :] if base != root else ""
                full = f"{rel}.{imported}" if rel else imported
                if full in moves or (root != "tests" and full in known and mapped(full, moves)):
                    target = mapped(full, moves)
                    if target is None:
                        return None
                    parent, _, leaf = f"{root}.{target}".rpartition(".")
                    return parent, leaf
            return None

        try:
            relative_to = self.root
            module, is_package = dotted_module(path, relative_to)
            text = rewrite_from_imports(text, module, is_package, resolve)
            return self.drop_old_module_aliases(text)
        except SyntaxError as error:
            self.report.problems.append(f"{path.relative_to(self.root)}: cannot parse ({error})")
            return text

    def drop_old_module_aliases(self, text: str) -> str:
        """``from pipelines.assemble import tables as finalize`` becomes ``... import tables``
        with every use renamed, when the new name is free in the file (no variable, argument,
        keyword or definition spells it) and the old one is only ever the module."""
        renames: set[tuple[str, str, str]] = set()
        for root, moves in ((self.import_name, self.module_moves), ("tests", self.test_moves)):
            for old, new in moves.items():
                parent, _, leaf = f"{root}.{new}".rpartition(".")
                old_leaf = old.rpartition(".")[2]
                if old_leaf != leaf:
                    renames.add((parent, leaf, old_leaf))
        tree = ast.parse(text)
        spelled: dict[str, int] = {}  # identifier -> how often it is spelled as a non-Name
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                names.add(node.id)
            for word in (
                [node.arg]
                if isinstance(node, ast.arg | ast.keyword) and node.arg
                else [node.name]
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                else list(node.names)
                if isinstance(node, ast.Global | ast.Nonlocal)
                else [a.asname or a.name for a in node.names]
                if isinstance(node, ast.Import | ast.ImportFrom)
                else []
            ):
                spelled[word] = spelled.get(word, 0) + 1
        candidates: dict[str, tuple[str, list[ast.alias]]] = {}
        refused: set[str] = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias in node.names:
                bound = alias.asname or alias.name
                if (node.module, alias.name, alias.asname) in renames:
                    new, aliases = candidates.setdefault(bound, (alias.name, []))
                    if new != alias.name:
                        refused.add(bound)
                    aliases.append(alias)
                elif bound in candidates or any(bound == r[2] for r in renames):
                    refused.add(bound)
        edits: list[tuple[int, int, str]] = []
        starts = offsets(text)
        for old, (new, aliases) in candidates.items():
            imports_of_old = len(aliases)
            if (
                old in refused
                or new in names
                or new in spelled
                or spelled.get(old, 0) != imports_of_old
            ):
                continue
            for alias in aliases:
                start = starts[alias.lineno - 1] + alias.col_offset
                end = starts[alias.end_lineno - 1] + alias.end_col_offset  # type: ignore[operator]
                edits.append((start, end, new))
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and node.id == old:
                    start = starts[node.lineno - 1] + node.col_offset
                    edits.append((start, start + len(old), new))
        return replace_segments(text, edits)

    # ---- private names and moved definitions
    def publicize(self) -> None:
        modules = modules_of(self.package_dir)
        for module, old, new in PUBLICIZE:
            path = modules.get(module)
            if path is None:
                self.report.problems.append(f"PUBLICIZE {module}.{old}: no module {module}")
                continue
            text = path.read_text()
            if not re.search(
                rf"^(def|class) {re.escape(old)}\b|^{re.escape(old)}\s*[:=]", text, re.M
            ):
                if re.search(rf"^(def|class) {re.escape(new)}\b", text, re.M) or not any(
                    re.search(rf"(?<![\w.]){re.escape(old)}\b", f.read_text())
                    for f in self.python_files()
                ):
                    continue  # already public (a second run), perhaps moved since
                self.report.problems.append(f"PUBLICIZE {module}.{old}: not defined there")
                continue
            self.tree.write(path, re.sub(rf"(?<![\w.]){re.escape(old)}\b", new, text))
            for other in self.python_files():
                if other == path:
                    continue
                self.rename_imported(other, module, old, new)
            self.report.done.append(f"{module}.{old} -> {new} (public)")

    def python_files(self) -> list[Path]:
        return [p for p in self.tree.text_files() if p.suffix == ".py"]

    def rename_imported(self, path: Path, module: str, old: str, new: str) -> None:
        text = path.read_text()
        if old not in text:
            return
        full = f"{self.import_name}.{module}"
        file_module, is_package = dotted_module(path, self.root)
        tree = ast.parse(text)
        unaliased = False
        hit = False

        def resolve(base: str, imported: str) -> tuple[str, str] | None:
            nonlocal hit
            if base == full and imported == old:
                hit = True
                return base, new
            return None

        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and absolute_from(node, file_module, is_package) == full
            ):
                unaliased |= any(a.name == old and a.asname is None for a in node.names)
        text = rewrite_from_imports(text, file_module, is_package, resolve)
        if unaliased:  # the file used the private name itself
            text = re.sub(rf"(?<![\w.]){re.escape(old)}\b", new, text)
        # `module_alias._old` through `from pipelines.x import y`: rewrite the attribute
        for alias in self.aliases_of(ast.parse(text), full, file_module, is_package):
            text = re.sub(rf"\b{re.escape(alias)}\.{re.escape(old)}\b", f"{alias}.{new}", text)
            hit = True
        if hit or unaliased:
            self.tree.write(path, text)

    def aliases_of(
        self, tree: ast.Module, full: str, file_module: str, is_package: bool
    ) -> set[str]:
        """Names bound to module ``full`` in a file."""
        found: set[str] = set()
        parent, _, leaf = full.rpartition(".")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and absolute_from(node, file_module, is_package) == parent
            ):
                found |= {a.asname or a.name for a in node.names if a.name == leaf}
            if isinstance(node, ast.Import):
                found |= {a.asname for a in node.names if a.name == full and a.asname}
        return found

    def move_symbols(self) -> None:
        for source, names, destination, doc in SYMBOL_MOVES:
            self.move_symbol_group(source, names, destination, doc)

    def move_symbol_group(
        self, source: str, names: tuple[str, ...], destination: str, doc: str | None
    ) -> None:
        modules = modules_of(self.package_dir)
        label = f"move {', '.join(names)}: {source} -> {destination}"
        src_path = modules.get(source)
        if src_path is None:
            self.report.problems.append(f"{label}: no module {source}")
            return
        src_text = src_path.read_text()
        src_tree = ast.parse(src_text)
        definitions = (
            ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Assign | ast.AnnAssign
        )
        statements = [
            n for n in src_tree.body if isinstance(n, definitions) and defined_names(n) & set(names)
        ]
        found = set().union(*(defined_names(n) for n in statements)) if statements else set()
        dst_path = modules.get(destination)
        if not statements:
            if dst_path is not None and set(names) <= set(
                top_level_bindings(ast.parse(dst_path.read_text()))
            ):
                return  # moved by an earlier run
            self.report.problems.append(f"{label}: not defined in {source}")
            return
        if found != set(names):
            self.report.problems.append(f"{label}: statements bind {sorted(found)}; skipped")
            return
        if dst_path is None:
            dst_path = module_path(self.package_dir, destination, False)
            dst_text = f'"""{doc or destination}"""\n\nfrom __future__ import annotations\n'
        else:
            dst_text = dst_path.read_text()
        dst_bound = top_level_bindings(ast.parse(dst_text))
        src_bound = top_level_bindings(src_tree)
        plain: list[str] = []
        type_only: list[str] = []
        for free in sorted(free_names(statements) - set(names)):
            if free in dst_bound:
                continue
            if free not in src_bound:
                self.report.problems.append(f"{label}: uses {free}, bound nowhere; skipped")
                return
            binding, under_type_checking = src_bound[free]
            if not isinstance(binding, ast.Import | ast.ImportFrom):
                self.report.problems.append(
                    f"{label}: uses {free}, defined in {source} (move it too); skipped"
                )
                return
            line = import_line_for(free, binding)
            if f"{self.import_name}.{destination}" in line.split(" ")[1:2]:
                continue
            (type_only if under_type_checking else plain).append(line)
        lines = src_text.splitlines(keepends=True)
        spans = sorted(statement_span(lines, n) for n in statements)
        moved = "\n\n".join("".join(lines[a:b]).rstrip("\n") for a, b in spans)
        remaining = lines[:]
        for a, b in reversed(spans):
            del remaining[a:b]
        src_new = "".join(remaining)
        still_used = sorted(n for n in names if re.search(rf"(?<![\w.]){re.escape(n)}\b", src_new))
        if still_used:
            src_new = insert_imports(
                src_new,
                [f"from {self.import_name}.{destination} import {', '.join(still_used)}"],
                [],
            )
        dst_new = insert_imports(dst_text, plain, type_only).rstrip("\n") + "\n\n\n" + moved + "\n"
        if self.dry_run:
            self.report.done.append(label)
            return
        if not dst_path.exists():
            dst_path.parent.mkdir(parents=True, exist_ok=True)
            dst_path.write_text(dst_new)
            self.tree.git("add", str(dst_path))
        else:
            dst_path.write_text(dst_new)
        src_path.write_text(src_new)
        full_src = f"{self.import_name}.{source}"
        full_dst = f"{self.import_name}.{destination}"
        for other in self.python_files():
            if other in (src_path, dst_path):
                continue
            self.repoint_imports(other, full_src, full_dst, set(names))
        self.report.done.append(label)

    def repoint_imports(self, path: Path, src: str, dst: str, names: set[str]) -> None:
        text = path.read_text()
        if not any(n in text for n in names):
            return
        file_module, is_package = dotted_module(path, self.root)

        def resolve(base: str, imported: str) -> tuple[str, str] | None:
            return (dst, imported) if base == src and imported in names else None

        new = rewrite_from_imports(text, file_module, is_package, resolve)
        tree = ast.parse(new)
        aliases = self.aliases_of(tree, src, file_module, is_package)
        used_through_module = sorted(
            n for n in names for a in aliases if re.search(rf"\b{re.escape(a)}\.{n}\b", new)
        )
        for alias in aliases:
            for n in names:
                new = re.sub(rf"\b{re.escape(alias)}\.{n}\b", n, new)
        if used_through_module:
            new = insert_imports(new, [f"from {dst} import {', '.join(used_through_module)}"], [])
        if new != text:
            path.write_text(new)

    def apply_patches(self) -> None:
        for name, before, after in PATCHES:
            path = self.root / name
            text = path.read_text() if path.is_file() else ""
            if after in text:
                continue
            if before not in text:
                if any(line.strip() and line.strip() in text for line in before.splitlines()):
                    self.report.problems.append(f"{name}: patch anchor changed: {before.strip()!r}")
                else:  # the code it patches is not on this tree (a branch without it)
                    self.report.unknown.append(f"{name}: patch not applicable, code absent")
                continue
            self.tree.write(path, text.replace(before, after, 1))
            self.report.done.append(f"{name}: patched ({after.strip().splitlines()[0]})")

    def look_for_file_names(self) -> None:
        """String constants naming the file of a moved module (``"report.py"``): code that
        finds a module by its path, which no import rewrite can see."""
        moved = {old.rpartition(".")[2] + ".py" for old in self.module_moves}
        moved -= {new.rpartition(".")[2] + ".py" for new in self.module_moves.values()}
        patched = {name for name, _, _ in PATCHES}
        for path in self.python_files():
            rel = path.relative_to(self.root).as_posix()
            if rel in patched or rel.startswith("tools/"):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and node.value.rpartition("/")[2] in moved
                ):
                    self.report.unknown.append(
                        f"{rel}:{node.lineno}: names the file {node.value!r} of a moved module"
                    )

    # ---- Makefile and the layering test
    def patch_makefile(self) -> None:
        path = self.root / "Makefile"
        text = path.read_text()
        if "test-fast:" in text:
            return
        fast = " ".join(f"tests/{t}" for t in TIERS_FAST)
        text = text.replace(".PHONY: install demo test ", ".PHONY: install demo test test-fast ", 1)
        text = text.replace(
            "test: lint typecheck unit\n",
            "test: lint typecheck unit\n\n"
            "# The edit loop: the unit and SQL tiers (tests/unit, tests/sql) but the one end-to-end\n"
            "# Dagster run (marked integration), under two minutes on a busy 2-core machine;\n"
            "# `make test` (CI) runs lint, type checking and every tier.\n"
            f"test-fast: install\n\t$(BIN)/pytest -q -m 'not integration' {fast}\n",
            1,
        )
        if "test-fast:" not in text:
            self.report.problems.append(
                "Makefile: no `test: lint typecheck unit` line; add test-fast"
            )
            return
        self.tree.write(path, text)
        self.report.done.append("Makefile: test-fast runs " + fast)

    def install_layering_test(self) -> None:
        template = Path(__file__).resolve().parent / "layering_test.py"
        target = self.root / "tests" / "unit" / "test_layering.py"
        if target.exists() or not template.exists() or self.dry_run:
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            template.read_text().replace(
                'PACKAGE_NAME = "pipelines"', f'PACKAGE_NAME = "{PACKAGE}"'
            )
        )
        self.tree.git("add", str(target))
        self.report.done.append("tests/unit/test_layering.py installed")

    def install_layout_page(self) -> None:
        """docs/layout.md describes the folders as this script leaves them."""
        page = Path(__file__).resolve().parent / "layout.md"
        target = self.root / "docs" / "layout.md"
        if not page.exists() or self.dry_run or not target.parent.is_dir():
            return
        if target.exists() and target.read_text() == page.read_text():
            return
        target.write_text(page.read_text())
        self.tree.git("add", str(target))
        self.report.done.append("docs/layout.md: the new layout")

    # ---- the check: every import resolves
    def check_imports(self) -> None:
        """Every import of the project's modules resolves: the module exists, and an imported
        name is a submodule or is bound at the top of that module."""
        roots = {
            self.import_name: modules_of(self.package_dir),
            "tests": modules_of(self.root / "tests"),
        }
        bindings: dict[Path, set[str]] = {}

        def bound_in(path: Path) -> set[str]:
            if path not in bindings:
                bindings[path] = set(top_level_bindings(ast.parse(path.read_text())))
            return bindings[path]

        for path in self.python_files():
            file_module, is_package = dotted_module(path, self.root)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    checks = [(a.name, None) for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = absolute_from(node, file_module, is_package)
                    checks = [(base, a.name) for a in node.names]
                else:
                    continue
                for module, name in checks:
                    root, _, rel = module.partition(".")
                    if root not in roots:
                        continue
                    mods = roots[root]
                    where = f"{path.relative_to(self.root)}:{node.lineno}"
                    if rel not in mods:
                        self.report.problems.append(f"{where}: no module {module}")
                        continue
                    if name is None or name == "*" or f"{rel}.{name}".lstrip(".") in mods:
                        continue
                    names = bound_in(mods[rel])
                    if name not in names and "__getattr__" not in names:
                        self.report.problems.append(f"{where}: {module} has no {name}")
        gone = {old.split(".")[0] for old in MODULE_MOVES}
        mods = roots[self.import_name]
        for path in self.tree.text_files():
            text = path.read_text()
            for match in re.finditer(rf"(?<![\w.]){self.import_name}\.(\w+)", text):
                if match.group(1) in gone and match.group(1) not in mods:
                    line = text.count("\n", 0, match.start()) + 1
                    self.report.problems.append(
                        f"{path.relative_to(self.root)}:{line}: names "
                        f"{self.import_name}.{match.group(1)}, which is gone"
                    )

    def ruff(self) -> None:
        if self.dry_run:
            return
        ruff = self.root / ".venv" / "bin" / "ruff"
        command = str(ruff) if ruff.exists() else "ruff"
        subprocess.run([command, "check", "--fix", "--select", "I,F401", "-q", "."], cwd=self.root)
        subprocess.run([command, "format", "-q", "."], cwd=self.root)

    def run(self) -> int:
        if not (self.package_dir / "__init__.py").is_file():
            print(f"no {PACKAGE}/ here: run from the repository root", file=sys.stderr)
            return 2
        self.plan_modules()
        self.plan_tests()
        sql_moves = self.plan_sql()
        self.move_modules()
        self.move_tests()
        self.move_sql(sql_moves)
        self.rewrite_everything()
        if not self.dry_run:
            self.publicize()
            self.move_symbols()
            self.apply_patches()
            self.look_for_file_names()
            self.patch_makefile()
            self.install_layering_test()
            self.install_layout_page()
            self.ruff()
            self.check_imports()
        self.report.print()
        return 1 if self.report.problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root")
    args = parser.parse_args()
    return Restructure(args.root.resolve(), args.dry_run).run()


if __name__ == "__main__":
    sys.exit(main())
