"""The SQL files under ``sql/``: one SELECT each, named after the view or table it returns, in
folders by what it returns (``sql/README.md``): ``assemble/`` (the tables the build stores),
``rank/`` (the ranking), ``marts/`` (what people read), ``flashinfer/`` (FlashInfer-Bench's
figures). A file is found by its name wherever its folder, so names are unique across folders.

The order the views are created in, and the Dagster deps of the view assets, come from the SQL
itself, as dbt's ``ref()`` graph does: each SELECT is parsed by DuckDB (``json_serialize_sql``,
the parser DuckDB runs the view with) and the relations its FROM and JOIN clauses, subqueries
included, name are what it reads. CTE names are scoped and dropped where they are defined; table
functions (``read_parquet``, ``range``) and ``VALUES`` are not relations, so they never appear
(a pattern over the text would be fooled by comments, string literals and CTE names alike).
Parsing needs no schema, unlike binding against a scratch schema (which would need every stored
table created with its columns first, and the views bound in an order we do not have yet), and
costs one query over every file in an in-memory connection (about 0.2 s, once a process). The
views are then sorted topologically; the stored tables (``schemas.TABLES``,
``schemas.SETTING_TABLES``) are the roots. A cycle, or a relation that is neither a view nor a
stored table, is an error naming the file.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb


class SqlGraphError(ValueError):
    """The SQL files do not make a graph of views over stored tables (one line, naming a file)."""


def sql_dir() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "sql", here / "_sql"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("the sql/ folder is missing from this installation")


@dataclass(frozen=True)
class SqlFolder:
    """A folder of ``<name>.sql`` files (in subfolders or not) and the graph of what they read."""

    root: Path

    @cached_property
    def files(self) -> Mapping[str, Path]:
        """Each file by its name (the relation it returns); two files of one name are an error."""
        found: dict[str, Path] = {}
        for path in sorted(self.root.rglob("*.sql")):
            if path.stem in found:
                raise SqlGraphError(
                    f"{self.shown(path)}: {self.shown(found[path.stem])} returns the same name"
                )
            found[path.stem] = path
        return found

    def shown(self, path: Path) -> str:
        """A file as messages and docs name it: ``sql/<folder>/<name>.sql``."""
        return f"{self.root.name}/{path.relative_to(self.root).as_posix()}"

    def path(self, name: str) -> Path:
        """``<name>.sql`` wherever its folder; ``<folder>/<name>`` names one folder's file."""
        if "/" in name:
            return self.root / f"{name}.sql"
        if name not in self.files:
            raise FileNotFoundError(f"{self.root.name}/: no {name}.sql in any folder")
        return self.files[name]

    def text(self, name: str) -> str:
        return self.path(name).read_text().strip().rstrip(";")

    @cached_property
    def _reads(self) -> Mapping[str, frozenset[str]]:
        # Every file is parsed in one query: one DuckDB call per file costs twice as much.
        import duckdb

        names = list(self.files)
        connection = duckdb.connect()
        try:
            parsed = connection.execute(
                "SELECT name, json_serialize_sql(text) "
                "FROM (SELECT unnest($names) AS name, unnest($texts) AS text)",
                {"names": names, "texts": [self.text(name) for name in names]},
            ).fetchall()
        finally:
            connection.close()
        return {name: self._relations(name, serialized) for name, serialized in parsed}

    def _relations(self, name: str, serialized: str) -> frozenset[str]:
        """What the file ``name`` reads, from DuckDB's parse tree of it (as JSON)."""
        tree = json.loads(serialized)
        if tree.get("error"):
            message = " ".join(str(tree.get("error_message", "does not parse")).split())
            raise SqlGraphError(f"{self.shown(self.path(name))}: {message}")
        found: set[str] = set()
        _collect_relations(tree["statements"], frozenset(), found)
        return frozenset(found)

    def reads(self, name: str) -> frozenset[str]:
        """The relations the SELECT of ``name`` reads (lower case)."""
        self.path(name)  # a name without a file is named as such
        return self._reads[name]

    def view_order(self, views: Iterable[str], stored: Collection[str]) -> tuple[str, ...]:
        """``views`` in an order each is created after every view it reads: of the orders that
        do, the one that takes the first name in code point order at each step (so it does not
        depend on the files' order on disk). ``stored``: the tables, created before."""
        views = list(views)
        wanted, roots = set(views), {name.lower() for name in stored}
        readers: dict[str, list[str]] = {view: [] for view in views}
        waiting: dict[str, int] = {}
        for view in views:
            upstream = self.reads(view) - roots
            for unknown in sorted(upstream - wanted):
                also = " (its file is not a view)" if unknown in self.files else ""
                raise SqlGraphError(
                    f"{self.shown(self.path(view))}: reads {unknown!r}, neither a view nor a "
                    f"stored table{also}"
                )
            waiting[view] = len(upstream)
            for read in upstream:
                readers[read].append(view)
        ready = [view for view in views if not waiting[view]]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            view = heapq.heappop(ready)
            order.append(view)
            for reader in readers[view]:
                waiting[reader] -= 1
                if not waiting[reader]:
                    heapq.heappush(ready, reader)
        if len(order) < len(views):
            stuck = sorted(view for view in views if waiting[view])
            cycle = self._cycle(stuck, roots)
            raise SqlGraphError(
                f"{self.shown(self.path(cycle[0]))}: the views read each other in a circle: "
                + " -> ".join(cycle)
            )
        return tuple(order)

    def _cycle(self, stuck: list[str], roots: set[str]) -> list[str]:
        """One circle among the views left unsorted, from the first by name back to itself."""
        walk, seen = [stuck[0]], {stuck[0]: 0}
        while True:
            after = sorted((self.reads(walk[-1]) - roots) & set(stuck))[0]
            if after in seen:
                return [*walk[seen[after] :], after]
            seen[after] = len(walk)
            walk.append(after)

    def nearest_reads(
        self, name: str, keep: Collection[str], views: Collection[str]
    ) -> frozenset[str]:
        """The relations of ``keep`` that ``name`` reads, directly or through ``views`` not in
        ``keep``; anything else it reads is left out. The Dagster deps of a view asset, with
        ``keep`` the assets: a helper view is seen through, a settings table is no asset."""
        found: set[str] = set()
        pending, visited = [name], {name}
        while pending:
            for read in self.reads(pending.pop()):
                if read in keep:
                    found.add(read)
                elif read in views and read not in visited:
                    visited.add(read)
                    pending.append(read)
        return frozenset(found)


def _collect_relations(node: Any, ctes: frozenset[str], found: set[str]) -> None:
    # A BASE_TABLE reference names a relation (a table function is a TABLE_FUNCTION, VALUES an
    # EXPRESSION_LIST); a cte_map's names are in scope for its node, the CTEs' bodies included.
    if isinstance(node, list):
        for item in node:
            _collect_relations(item, ctes, found)
    elif isinstance(node, dict):
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict) and cte_map.get("map"):
            ctes = ctes | {entry["key"].lower() for entry in cte_map["map"]}
        if node.get("type") == "BASE_TABLE" and isinstance(node.get("table_name"), str):
            relation = node["table_name"].lower()
            if relation not in ctes:
                found.add(relation)
        for value in node.values():
            _collect_relations(value, ctes, found)


@cache
def installed() -> SqlFolder:
    """The SQL files of this installation (``sql/``, or ``tracehouse/_sql`` in a wheel)."""
    return SqlFolder(sql_dir())


def sql_path(name: str) -> Path:
    """The file of ``name`` (a bare name, found in any folder, or ``<folder>/<name>``)."""
    return installed().path(name)


def sql_shown(name: str) -> str:
    """``sql/<folder>/<name>.sql``: the file of ``name`` as docs and messages name it."""
    folder = installed()
    return "sql/" + folder.path(name).relative_to(folder.root).as_posix()


@cache
def sql_text(name: str) -> str:
    """The SELECT in ``sql/<folder>/<name>.sql``, without a trailing semicolon."""
    return installed().text(name)


def stored_relations() -> frozenset[str]:
    """The relations stored at a build, created before the views: the roots of the graph."""
    from tracehouse import schemas

    return frozenset(schemas.TABLES) | frozenset(schemas.SETTING_TABLES)


@cache
def view_order() -> tuple[str, ...]:
    """The views of ``schemas.VIEWS`` (the one declaration of which views there are), in an
    order in which each is created after the views it reads."""
    from tracehouse import schemas

    return installed().view_order(schemas.VIEWS, stored_relations())


def create_views(connection: duckdb.DuckDBPyConnection) -> None:
    """(Re)create every view in ``connection``, in dependency order."""
    for view in view_order():
        connection.execute(f"CREATE OR REPLACE VIEW {view} AS {sql_text(view)}")
