"""The views' order and the Dagster view assets' deps come from the SQL (tracehouse/sql_files.py):
what each SELECT reads, parsed by DuckDB; no build, no server."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tracehouse import schemas
from tracehouse.assemble.history import store_regression_thresholds
from tracehouse.settings import Settings
from tracehouse.sql_files import (
    SqlFolder,
    SqlGraphError,
    create_views,
    installed,
    sql_shown,
    stored_relations,
    view_order,
)

FOLDERS = {"assemble", "rank", "marts", "flashinfer"}


def folder_of(files: dict[str, str], tmp_path: Path) -> SqlFolder:
    root = tmp_path / "sql"
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return SqlFolder(root)


def test_the_order_is_topological_over_every_declared_view() -> None:
    order = view_order()
    assert sorted(order) == sorted(schemas.VIEWS)
    position = {view: index for index, view in enumerate(order)}
    sql = installed()
    for view in order:
        for read in sql.reads(view):
            assert read in position or read in stored_relations(), (view, read)
            if read in position:
                assert position[read] < position[view], (view, "reads", read)
    # a few edges the SQL states, so the parse cannot be vacuous
    assert sql.reads("regressions") == {"latency_verdicts"}
    assert sql.reads("latency_verdicts") == {"latency_history", "regression_thresholds"}
    assert {"fib_solution_scores", "leaderboard_baselines"} <= sql.reads("leaderboard")


def test_every_file_is_in_a_folder_by_what_it_returns() -> None:
    sql = installed()
    folders = {path.parent.name for path in sql.files.values()}
    assert folders == FOLDERS
    assert all(path.parent.parent == sql.root for path in sql.files.values())
    outside_assemble = {name for name, path in sql.files.items() if path.parent.name != "assemble"}
    # every file outside assemble/ is a declared view or a stored relation, and every declared
    # view has its file
    assert outside_assemble == set(schemas.VIEWS) | {"run_rankings", "regression_thresholds"}
    assert {name for name in outside_assemble if name in stored_relations()} == {
        "run_rankings",
        "regression_thresholds",
    }
    assert all(
        sql_shown(name).startswith("sql/flashinfer/")
        for name in sql.files
        if name.startswith(("fib_", "web_"))
    )
    assert sql_shown("run_rankings") == "sql/rank/run_rankings.sql"


def test_the_views_are_created_in_that_order_over_empty_tables() -> None:
    """DuckDB binds a view when it is created, so a view created before one it reads fails:
    creating all of them over empty stored tables proves the order, and their columns are the
    declared ones."""
    connection = duckdb.connect()
    try:
        for table in schemas.TABLES.values():
            connection.from_arrow(table.arrow_schema.empty_table()).create(table.name)
        store_regression_thresholds(connection, Settings(), temporary=False)
        create_views(connection)
        for view in schemas.VIEWS.values():
            described = [row[0] for row in connection.execute(f"DESCRIBE {view.name}").fetchall()]
            assert described == view.column_names, view.name
        # the same views in another order fail: the order is not decoration
        connection.execute("DROP VIEW regressions")
        connection.execute("DROP VIEW latency_verdicts")
        with pytest.raises(duckdb.CatalogException, match="latency_verdicts"):
            connection.execute(f"CREATE VIEW regressions AS {installed().text('regressions')}")
    finally:
        connection.close()


def test_a_view_is_created_after_the_views_it_reads(tmp_path: Path) -> None:
    sql = folder_of(
        {
            "marts/b.sql": "SELECT * FROM a JOIN t USING (x)",
            "marts/a.sql": "SELECT x FROM t",
            "flashinfer/c.sql": "SELECT * FROM (SELECT * FROM b) WHERE x IN (SELECT x FROM a);",
        },
        tmp_path,
    )
    assert sql.view_order(["c", "b", "a"], stored=["t"]) == ("a", "b", "c")
    assert sql.reads("c") == {"a", "b"}
    connection = duckdb.connect()
    try:
        connection.execute("CREATE TABLE t (x INTEGER)")
        for view in sql.view_order(["c", "b", "a"], stored=["t"]):
            connection.execute(f"CREATE VIEW {view} AS {sql.text(view)}")
    finally:
        connection.close()


def test_cte_names_table_functions_and_values_are_not_dependencies(tmp_path: Path) -> None:
    sql = folder_of(
        {
            "v.sql": """
                -- a comment naming FROM nowhere
                WITH a AS (SELECT x FROM t), b AS (SELECT * FROM a)
                SELECT * FROM b
                UNION ALL SELECT range FROM range(3)
                UNION ALL SELECT * FROM read_parquet('x.parquet')
                UNION ALL SELECT * FROM (VALUES (1)) AS k(x)
                UNION ALL SELECT 'FROM u' AS x
            """,
            # a CTE is scoped: outside the subquery that defines it, `a` is the view a
            "w.sql": "SELECT * FROM (WITH a AS (SELECT 1 AS x) SELECT * FROM a) JOIN a USING (x)",
            "a.sql": "SELECT 1 AS x",
        },
        tmp_path,
    )
    assert sql.reads("v") == {"t"}
    assert sql.reads("w") == {"a"}
    assert sql.view_order(["w", "v", "a"], stored=["t"]) == ("a", "v", "w")


def test_a_circle_is_an_error_naming_a_file(tmp_path: Path) -> None:
    sql = folder_of(
        {
            "marts/a.sql": "SELECT * FROM c",
            "marts/b.sql": "SELECT * FROM a",
            "marts/c.sql": "SELECT * FROM b JOIN t USING (x)",
            "marts/d.sql": "SELECT * FROM t",
        },
        tmp_path,
    )
    with pytest.raises(SqlGraphError) as raised:
        sql.view_order(["a", "b", "c", "d"], stored=["t"])
    assert str(raised.value) == (
        "sql/marts/a.sql: the views read each other in a circle: a -> c -> b -> a"
    )
    assert "\n" not in str(raised.value)


def test_an_unknown_relation_is_an_error_naming_the_file(tmp_path: Path) -> None:
    sql = folder_of(
        {
            "marts/a.sql": "SELECT * FROM t",
            "flashinfer/b.sql": "SELECT * FROM a JOIN nope USING (x)",
        },
        tmp_path,
    )
    with pytest.raises(SqlGraphError, match=r"^sql/flashinfer/b.sql: reads 'nope', neither a view"):
        sql.view_order(["a", "b"], stored=["t"])
    # a file that exists but is not one of the views is named as such
    with pytest.raises(SqlGraphError, match=r"^sql/flashinfer/b.sql: reads 'a'.*not a view"):
        sql.view_order(["b"], stored=["t", "nope"])


def test_a_name_twice_or_sql_that_does_not_parse_is_an_error_naming_the_file(
    tmp_path: Path,
) -> None:
    twice = folder_of({"marts/a.sql": "SELECT 1", "rank/a.sql": "SELECT 2"}, tmp_path / "twice")
    with pytest.raises(SqlGraphError, match=r"^sql/rank/a.sql: sql/marts/a.sql returns the same"):
        twice.path("a")
    broken = folder_of({"marts/a.sql": "SELECT FROM WHERE ("}, tmp_path / "broken")
    with pytest.raises(SqlGraphError, match=r"^sql/marts/a.sql: .*syntax error"):
        broken.reads("a")
    with pytest.raises(FileNotFoundError, match="no b.sql in any folder"):
        broken.path("b")


def test_the_dagster_view_assets_deps_are_what_their_sql_reads() -> None:
    from pipelines.definitions import defs
    from pipelines.defs import assets
    from pipelines.defs.naming import asset_key

    graph = defs.resolve_asset_graph()
    sql = installed()
    assets_ = {*schemas.TABLES, *assets.VIEW_ASSETS}
    for view in assets.VIEW_ASSETS:
        parents = {key.path[-1] for key in graph.get(asset_key(view)).parent_keys}
        assert parents == set(assets.view_deps(view)), view
        # each dep is read by the view itself or by a helper view it reads (not an asset)
        for parent in parents:
            assert parent in assets_
        direct = sql.reads(view)
        helpers = direct - assets_ - stored_relations()
        assert parents == (direct & assets_) | {
            read for helper in helpers for read in sql.nearest_reads(helper, assets_, schemas.VIEWS)
        } - {view}
    deps = {view: set(assets.view_deps(view)) for view in assets.VIEW_ASSETS}
    assert deps["latency_history"] == {"run_appearances", "run_disappearances", "source_snapshots"}
    assert deps["record_events"] == deps["regressions"] == {"latency_history"}
    assert "run_rankings" in deps["run_summary"]
    # the settings table regressions reads is written with the views, so it is no dep
    assert all("regression_thresholds" not in found for found in deps.values())
