"""Named read-only queries used by the CLI and the Dagster assets. Values are always bound as
parameters; nothing taken from the data or the command line is formatted into SQL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipelines.changes import store_regression_thresholds
from pipelines.settings import Settings
from pipelines.warehouse import Warehouse, check_read_only, connect_read_only

if TYPE_CHECKING:
    import duckdb

LEADERBOARD_SQL = """
SELECT hardware, leaderboard_rank AS rank, solution, author, is_baseline,
       workloads_passed || '/' || workloads_in_slice AS passed, round(coverage, 3) AS coverage,
       workloads_compared, round(geomean_speedup, 3) AS geomean_speedup,
       round(win_rate, 3) AS win_rate, speedup_reason,
       round(latency_us_geomean, 2) AS latency_us, round(rerun_spread_median, 3) AS rerun_spread,
       round(fib_all_gpus_avg_speedup, 3) AS fib_all_gpus_avg_speedup, fib_reason
FROM leaderboard
WHERE definition = $definition AND ($hardware IS NULL OR hardware = $hardware)
ORDER BY hardware, leaderboard_rank
"""


def connect(settings: Settings) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the current generation whose ``regressions`` view uses the
    regression limits of ``settings`` (not those stored when the warehouse was built)."""
    connection = connect_read_only(Warehouse(settings.warehouse))
    try:
        store_regression_thresholds(connection, settings, temporary=True)
    except BaseException:
        connection.close()
        raise
    return connection


def fetch(
    settings: Settings,
    sql: str,
    parameters: dict[str, Any] | None = None,
    *,
    user_sql: bool = False,
) -> Any:
    """A polars DataFrame with the result of one parameterized read-only query.

    ``user_sql`` marks SQL typed by a person: it must pass ``check_read_only`` first.
    """
    import polars as pl

    connection = connect(settings)
    try:
        if user_sql:
            check_read_only(connection, sql)
        return pl.from_arrow(connection.sql(sql, params=parameters or {}).to_arrow_table())
    finally:
        connection.close()


def leaderboard(settings: Settings, definition: str, *, hardware: str | None = None) -> Any:
    return fetch(settings, LEADERBOARD_SQL, {"definition": definition, "hardware": hardware})


def busiest_definition(settings: Settings) -> str:
    """The definition with the most solutions, to show a leaderboard worth reading."""
    frame = fetch(
        settings,
        "SELECT definition FROM leaderboard GROUP BY definition "
        "ORDER BY count(*) DESC, sum(workloads_compared) DESC, definition LIMIT 1",
    )
    if frame.height == 0:
        raise LookupError("the warehouse has no runs")
    return str(frame.item(0, 0))
