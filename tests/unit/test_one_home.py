"""One home per shared rule, checked over the source tree.

Each rule the stages share is declared once: the commit-sha pattern
(`kernelindex.is_commit_sha`), the reason registries and the status vocabulary
(`tracehouse/rejects.py`), the atomic writer (`files.replace_atomically`) and the table schemas,
staging included (`tracehouse/tables/`, gathered in `tracehouse/schemas.py`, which
derives every list of tables from them). These tests read the code as Python syntax trees (and
the SQL files as text) and fail when a second copy of a rule appears, or when a reason code is
written somewhere that its registry does not know. Each also checks that it found what it looks
for, so a test cannot pass by scanning nothing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tracehouse import kernelindex, rejects, schemas
from tracehouse.fetch import safety
from tracehouse.fetch.hub import RejectedRemoteFile
from tracehouse.ingest import worker as ingest
from tracehouse.read import normalize
from tracehouse.serve.report_blocks import SHARED_VIEWS

ROOT = Path(__file__).resolve().parents[2]
# The product code: the library and the Dagster code location over it.
PACKAGES = (ROOT / "tracehouse", ROOT / "pipelines")


def product_files() -> list[Path]:
    return sorted(path for package in PACKAGES for path in package.rglob("*.py"))


@dataclass(frozen=True)
class Source:
    path: Path
    tree: ast.Module

    @property
    def rel(self) -> str:
        return self.path.relative_to(ROOT).as_posix()


def sources() -> list[Source]:
    return [
        Source(path, ast.parse(path.read_text(), filename=str(path))) for path in product_files()
    ]


SOURCES = sources()


def string_value(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def called_name(call: ast.Call) -> str:
    """`f` for `f(...)`, `attr` for `x.attr(...)`, `os.replace` for `os.replace(...)`."""
    function = call.func
    if isinstance(function, ast.Name):
        return function.id
    if isinstance(function, ast.Attribute):
        if isinstance(function.value, ast.Name) and function.value.id in ("os", "re", "shutil"):
            return f"{function.value.id}.{function.attr}"
        return function.attr
    return ""


def calls(source: Source) -> Iterator[ast.Call]:
    return (node for node in ast.walk(source.tree) if isinstance(node, ast.Call))


# ---------------------------------------------------------------------------------------------
# The commit-sha pattern

FORTY_HEX = re.compile(r"\{40\}|\{40,|len\([^)]*\)\s*[!=]=\s*40\b|(?:\[0-9a-f\]){40}")
SHA_HOME = "tracehouse/kernelindex/implementation.py"


def test_the_commit_sha_pattern_is_declared_once() -> None:
    files = [*product_files(), *(ROOT / "sql").rglob("*.sql")]
    found = {
        path.relative_to(ROOT).as_posix(): FORTY_HEX.findall(path.read_text()) for path in files
    }
    found = {rel: hits for rel, hits in found.items() if hits}
    assert found == {SHA_HOME: ["{40}"]}, (
        "a 40-hex check outside kernelindex.is_commit_sha; use that function"
    )


def test_no_pattern_is_anchored_with_a_dollar() -> None:
    # `$` also matches before a final newline, so `re.match("^x$", "x\n")` succeeds: that is how
    # one copy of the sha rule once accepted 'a' * 40 + '\n'. Use fullmatch (or `\Z`) instead.
    patterns = [
        (source.rel, call.lineno, pattern)
        for source in SOURCES
        for call in calls(source)
        if called_name(call) in ("re.compile", "re.match", "re.search", "re.fullmatch")
        and call.args
        and (pattern := string_value(call.args[0])) is not None
    ]
    assert len(patterns) > 20  # the scan sees the project's patterns
    dollar = [(rel, line, p) for rel, line, p in patterns if p.endswith("$") and p[-2:] != "\\$"]
    assert dollar == []


# ---------------------------------------------------------------------------------------------
# Reason codes


def reason_argument(call: ast.Call, position: int, keyword: str = "reason") -> ast.AST | None:
    for item in call.keywords:
        if item.arg == keyword:
            return item.value
    return call.args[position] if len(call.args) > position else None


def literals(node: ast.AST | None) -> list[str]:
    """The string constants `node` can evaluate to (through `a if c else b`)."""
    if isinstance(node, ast.IfExp):
        return literals(node.body) + literals(node.orelse)
    value = string_value(node)
    return [value] if value is not None else []


# Where a reason code is written, which argument holds it, and the registry it must belong to.
REASON_SITES: dict[str, tuple[int, frozenset[str]]] = {
    "RecordError": (0, frozenset(rejects.REJECT_REASONS)),
    "Reject": (2, frozenset(rejects.REJECT_REASONS)),
    "reject": (1, frozenset(rejects.REJECT_REASONS)),  # FileIngester.reject(line, reason, ...)
    "UnsafePathError": (0, frozenset(rejects.UNSAFE_NAME_REASONS)),
    "IdentityError": (0, frozenset(kernelindex.IDENTITY_REASON_CODES)),
    # a listed file left out, or (the cache) one that cannot be written without deleting what
    # is in its way: both end as a rejected remote file
    "RejectedRemoteFile": (1, frozenset(rejects.HUB_LISTING_REASONS | rejects.HUB_FAILURE_REASONS)),
    "_Permanent": (0, frozenset(rejects.HUB_FAILURE_REASONS)),
    "_Integrity": (0, frozenset(rejects.HUB_FAILURE_REASONS)),
    "Outcome": (3, frozenset(rejects.HUB_FAILURE_REASONS)),
}


def reason_literals() -> list[tuple[str, str, int, str, frozenset[str]]]:
    """(site, file, line, code, registry) for every reason code written in the code."""
    found = []
    identity = frozenset(rejects.IDENTITY_REASONS)
    for source in SOURCES:
        for node in ast.walk(source.tree):
            if isinstance(node, ast.Call) and called_name(node) in REASON_SITES:
                position, registry = REASON_SITES[called_name(node)]
                for code in literals(reason_argument(node, position)):
                    found.append((called_name(node), source.rel, node.lineno, code, registry))
            elif isinstance(node, ast.Assign):
                target = node.targets[0]
                if (
                    isinstance(target, ast.Subscript)
                    and string_value(target.slice) == "identity_error"
                ):
                    for code in literals(node.value):
                        found.append(("identity_error", source.rel, node.lineno, code, identity))
    # A run's resolved identity error (ingest/resolution.py): the codes it assigns to `error`.
    for source in SOURCES:
        if source.rel == "tracehouse/ingest/resolution.py":
            for node in ast.walk(source.tree):
                target = node.targets[0] if isinstance(node, ast.Assign) else None
                if isinstance(target, ast.Name) and target.id == "error":
                    for code in literals(node.value):
                        found.append(("resolution", source.rel, node.lineno, code, identity))
    return found


def test_every_reason_code_written_is_in_its_registry() -> None:
    found = reason_literals()
    sites = {site for site, *_ in found}
    # Every kind of site is seen, so a renamed constructor cannot make this test vacuous.
    assert sites == {*REASON_SITES, "identity_error", "resolution"}
    unknown = [
        (site, rel, line, code) for site, rel, line, code, known in found if code not in known
    ]
    assert unknown == []


def test_no_second_reason_registry() -> None:
    # A dict or set literal naming two or more registered codes is a copy of a registry.
    # Codes with an underscore only: words like "empty" or "timeout" mean other things too.
    codes = {
        code
        for registry in (
            rejects.REJECT_REASONS,
            rejects.UNSAFE_NAME_REASONS,
            rejects.HUB_LISTING_REASONS,
            rejects.HUB_FAILURE_REASONS,
            rejects.IDENTITY_REASONS,
        )
        for code in registry
        if "_" in code
    }
    homes = {"tracehouse/rejects.py", "tracehouse/kernelindex/errors.py"}
    copies = []
    for source in SOURCES:
        if source.rel in homes:
            continue
        for node in ast.walk(source.tree):
            keys = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
            if not isinstance(node, ast.Dict | ast.Set) or keys is None:
                continue
            named = {string_value(key) for key in keys} & codes
            if len(named) >= 2:
                copies.append((source.rel, node.lineno, sorted(named)))
    assert copies == []


@pytest.mark.parametrize(
    "make",
    [
        lambda: normalize.RecordError("not_a_registered_reason", "x"),
        lambda: rejects.Reject("f.jsonl", 1, "not_a_registered_reason", "x", None),
        lambda: safety.UnsafePathError("not_a_registered_reason", "x"),
        lambda: RejectedRemoteFile("traces/a.jsonl", "not_a_registered_reason", "x"),
        lambda: kernelindex.IdentityError("not_a_registered_reason", "x"),
    ],
)
def test_an_unregistered_reason_cannot_be_raised(make: object) -> None:
    assert callable(make)
    with pytest.raises(ValueError, match="not_a_registered_reason"):
        make()


def test_registries_are_disjoint_where_they_share_a_column() -> None:
    # Hub reasons end in the same RejectedRemoteFile.reason field as unsafe names.
    assert not rejects.HUB_LISTING_REASONS.keys() & rejects.UNSAFE_NAME_REASONS.keys()
    assert not rejects.HUB_FAILURE_REASONS.keys() & rejects.UNSAFE_NAME_REASONS.keys()
    assert not rejects.WAREHOUSE_IDENTITY_REASONS.keys() & kernelindex.IDENTITY_REASON_CODES.keys()


# ---------------------------------------------------------------------------------------------
# The status vocabulary


def test_status_sets_are_declared_once() -> None:
    # Sets of statuses live in rejects.py (from KernelIndex's status map); the demo's selection
    # is checked against them by tests/unit/test_demo.py. Anywhere else, derive from those.
    homes = {
        "tracehouse/rejects.py",
        "tracehouse/kernelindex/run.py",
        "tracehouse/demo/traces.py",
    }
    statuses = set(rejects.STATUSES)
    found: dict[str, list[int]] = {}
    for source in SOURCES:
        for node in ast.walk(source.tree):
            if isinstance(node, ast.Dict):
                elements: list[ast.expr | None] = list(node.keys)
            elif isinstance(node, ast.Set | ast.List | ast.Tuple):
                elements = list(node.elts)
            else:
                continue
            if len({string_value(e) for e in elements} & statuses) >= 2:
                found.setdefault(source.rel, []).append(node.lineno)
    assert set(found) >= {"tracehouse/rejects.py", "tracehouse/kernelindex/run.py"}
    assert {rel: lines for rel, lines in found.items() if rel not in homes} == {}


# ---------------------------------------------------------------------------------------------
# The atomic writer

# Renames that are not "write a temporary, then rename it over the target": finalize moves the
# per-group folders DuckDB's PARTITION_BY wrote into place (it writes no temporary of its own);
# the fanned-out ingest moves the finished parts its parse steps wrote into staging.
RENAME_ELSEWHERE = {"tracehouse/assemble/parts.py", "pipelines/defs/fanout.py"}


def test_every_write_then_rename_goes_through_the_one_helper() -> None:
    renames: dict[str, int] = {}
    for source in SOURCES:
        for call in calls(source):
            if called_name(call) in ("os.replace", "os.rename", "rename", "shutil.move"):
                renames[source.rel] = renames.get(source.rel, 0) + 1
    assert "tracehouse/files.py" in renames
    assert set(renames) - RENAME_ELSEWHERE == {"tracehouse/files.py"}, renames


# ---------------------------------------------------------------------------------------------
# Schemas


DECLARATIONS = "tracehouse/tables/"  # every Table and Column, and what each table is


def test_every_table_schema_is_declared_in_the_declarations() -> None:
    declared = [
        (source.rel, call.lineno)
        for source in SOURCES
        for call in calls(source)
        if called_name(call) in ("Table", "Column")
    ]
    assert any(rel.startswith(DECLARATIONS) for rel, _ in declared)
    assert [(rel, line) for rel, line in declared if not rel.startswith(DECLARATIONS)] == []
    # The staging parts a worker writes are those tables as their files store them (without
    # the source columns the views add), not copies.
    assert ingest.PART_TABLES is schemas.STAGING_TABLES
    assert set(schemas.STAGING_TABLES.values()) - set(schemas.STORED.values()) == {
        schemas.STAGING_RUN_KEYS,
        schemas.STAGING_WORKLOADS,
        schemas.STAGING_ENVIRONMENTS,
    }


# ---------------------------------------------------------------------------------------------
# Lists of tables: derived from the declarations, never kept by hand (style rule 11)

RELATION_NAMES = frozenset({*schemas.TABLES, *schemas.VIEWS, *schemas.SETTING_TABLES})
# Lists that name what some code reads, not what the tables are, left until they are derived
# from the SQL's own dependencies (issue 30, point 3: view order and Dagster deps come from
# the SQL, as dbt's ref() does): file -> the literals, by the names they hold.
READS_KEPT_BY_HAND = {
    "pipelines/defs/assets.py": [
        frozenset({"runs", "workloads", "environments"}),  # WIDE_TABLE_DEPS
        frozenset({"implementations", "definitions"}),
        # the views Dagster shows as assets (VIEW_ASSETS)
        frozenset(
            {"run_summary", "leaderboard", "latency_history", "record_events", "regressions"}
        ),
        # what the report's pages query (tracehouse/serve/report.py)
        frozenset({"leaderboard", "run_summary", "rejects", "regressions", "record_events"}),
    ],
    # the views the report computes once each: chosen by measuring which of the views its
    # queries share cost most, not something a declaration says
    "tracehouse/serve/report_blocks.py": [frozenset(SHARED_VIEWS)],
}


def table_name_literals(source: Source) -> Iterator[tuple[int, frozenset[str]]]:
    """Every tuple, list or set literal (and dict's keys) that names two or more tables or
    views and holds no other string: a list of tables kept by hand."""
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            elements = node.elts
        elif isinstance(node, ast.Dict):
            elements = [key for key in node.keys if key is not None]
        else:
            continue
        strings = [s for s in map(string_value, elements) if s is not None]
        named = frozenset(strings) & RELATION_NAMES
        if len(named) >= 2 and all(s in RELATION_NAMES for s in strings):
            yield node.lineno, named


def test_no_product_module_keeps_a_list_of_tables_by_hand() -> None:
    found: dict[str, list[tuple[int, frozenset[str]]]] = {}
    for source in SOURCES:
        if not source.rel.startswith(DECLARATIONS):
            found[source.rel] = list(table_name_literals(source))
    # the scan sees lists where they are: the declarations' own keys and orders hold none,
    # and the lists left by hand are found
    assert found["pipelines/defs/assets.py"]
    by_hand = {
        f"{rel}:{line}: {sorted(names)}"
        for rel, literals in found.items()
        for line, names in literals
        if names not in READS_KEPT_BY_HAND.get(rel, [])
    }
    assert by_hand == set(), "derive these from the table declarations (tracehouse/schemas.py)"
    left = {rel: {names for _, names in literals} for rel, literals in found.items() if literals}
    for rel, kept in READS_KEPT_BY_HAND.items():  # an allowance no longer needed goes
        assert set(kept) <= left.get(rel, set()), rel


def test_the_derived_lists_say_what_the_declarations_say() -> None:
    tables = schemas.TABLES
    assert set(schemas.PER_SOURCE_TABLES) == {n for n, t in tables.items() if t.per_source}
    assert set(schemas.HISTORY_TABLES) <= set(schemas.PER_SOURCE_TABLES)
    assert set(schemas.GROUP_PARTED_TABLES) <= set(schemas.PARTED_TABLES)
    assert set(schemas.GROUP_PARTED_TABLES) <= set(schemas.PER_SOURCE_TABLES)
    assert set(schemas.PUBLISHED_TABLES) | set(schemas.COMPUTED_TABLES) == set(tables)
    # (and the run keys, which only staging has)
    assert set(schemas.STAGING_TABLES) - {schemas.STAGING_RUN_KEYS.name} <= set(
        schemas.PER_SOURCE_TABLES
    )
    # every table a build writes in several sorted files has a row order; only the snapshot
    # history keeps the order it was appended in
    assert set(tables) - set(schemas.TABLE_ORDER) == {schemas.SOURCE_SNAPSHOTS.name}
    for name, columns in schemas.ZSTD_COLUMNS.items():
        assert set(columns) <= set(tables[name].column_names), name
    for name, view in schemas.VIEWS.items():
        assert set(view.key) <= set(view.column_names), name
        assert set(view.never_null) <= set(view.column_names), name
    assert all(schemas.VIEWS[m].key for m in schemas.ICEBERG_MARTS if m in schemas.VIEWS)
