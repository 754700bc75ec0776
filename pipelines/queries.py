"""Named read-only queries used by the CLI and the Dagster assets. Values are always bound as
parameters; nothing taken from the data or the command line is formatted into SQL.

Results are plain Python rows (``Result``), so the read commands import neither Polars nor
pyarrow and start quickly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines.changes import store_regression_thresholds
from pipelines.settings import Settings
from pipelines.warehouse import Warehouse, check_read_only, connect_read_only

if TYPE_CHECKING:
    import duckdb

# The leaderboard view (sql/leaderboard.sql) as `tracehouse leaderboard` shows it. Hardware is
# matched without regard to case (`h200` finds `H200`).
LEADERBOARD_SQL = """
SELECT hardware, leaderboard_rank AS rank, solution, author, is_baseline,
       workloads_passed || '/' || workloads_in_slice AS passed, runs_not_evaluated,
       round(coverage, 3) AS coverage, workloads_compared,
       round(geomean_speedup, 3) AS geomean_speedup, round(win_rate, 3) AS win_rate,
       speedup_reason, round(latency_us_geomean, 2) AS latency_us,
       round(rerun_spread_median, 3) AS rerun_spread,
       round(fib_all_gpus_avg_speedup, 3) AS fib_all_gpus_avg_speedup, fib_reason,
       baseline_solution, speed_class
FROM leaderboard
WHERE definition = $definition AND ($hardware IS NULL OR lower(hardware) = lower($hardware))
ORDER BY hardware, leaderboard_rank
"""

# How the leaderboard is ordered, in words: printed under every leaderboard (terminal and
# report), from the one rule in sql/leaderboard.sql.
LEADERBOARD_ORDER_RULE = (
    "order: faster than the baseline (geo× > 1), then the baseline (1.000×), then slower, then "
    "not comparable; within each, solutions that passed every workload first, then by geo×"
)

BATCH_ROWS = 10_000


@dataclass
class Result:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    total_rows: int  # rows the query returns in all; more than len(rows) when truncated


def connect(settings: Settings) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the current generation whose ``regressions`` view uses the
    regression limits of ``settings`` (not those stored when the warehouse was built), within
    its memory limit."""
    connection = connect_read_only(
        Warehouse(settings.warehouse), memory_limit_mb=settings.query_memory_mb
    )
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
    limit: int | None = None,
) -> Result:
    """The rows of one parameterized read-only query (at most ``limit``, counting the rest)."""
    connection = connect(settings)
    try:
        return _fetch(connection, sql, parameters or {}, limit)
    finally:
        connection.close()


def _fetch(connection: Any, sql: str, parameters: dict[str, Any], limit: int | None) -> Result:
    cursor = connection.execute(sql, parameters)
    columns = [d[0] for d in cursor.description or []]
    if limit is None:
        rows = cursor.fetchall()
        return Result(columns, rows, len(rows))
    rows = cursor.fetchmany(limit + 1)
    if len(rows) <= limit:
        return Result(columns, rows, len(rows))
    # More rows than shown: count them without converting them to Python objects.
    cursor.abort()
    ((total,),) = connection.sql(sql, params=parameters).aggregate("count(*)").fetchall()
    return Result(columns, rows[:limit], int(total))


class QueryTimeout(TimeoutError):
    """A statement typed by a person ran past ``query_timeout_s``."""


class QueryTooLarge(ValueError):
    """A statement typed by a person needed more than ``query_memory_mb`` even spilling."""


class _TimeLimit:
    """Interrupts ``connection`` after ``seconds`` (DuckDB has no statement timeout), and turns
    the error the interrupted statement raises into one ``QueryTimeout`` line."""

    def __init__(self, connection: duckdb.DuckDBPyConnection, seconds: float) -> None:
        import threading

        self.seconds = seconds
        self.fired = threading.Event()

        def stop() -> None:
            self.fired.set()
            connection.interrupt()

        self.timer = threading.Timer(seconds, stop)
        self.timer.daemon = True
        self.timer.start()

    def cancel(self) -> None:
        self.timer.cancel()

    def check(self, error: BaseException, memory_mb: int) -> None:
        """Raise the limit's own error instead of ``error`` when a limit caused it."""
        if self.fired.is_set() and not isinstance(error, KeyboardInterrupt):
            raise QueryTimeout(
                f"the query ran longer than {self.seconds:g} s and was stopped "
                "(TRACEHOUSE_QUERY_TIMEOUT_S allows more)"
            ) from None
        if type(error).__name__ == "OutOfMemoryException":  # DuckDB's, without importing it
            raise QueryTooLarge(
                f"the query needs more than its {memory_mb} MiB of memory "
                f"(TRACEHOUSE_QUERY_MEMORY_MB allows more): {str(error).split('. ')[0]}"
            ) from None


def user_query(settings: Settings, sql: str, *, limit: int | None) -> Result:
    """A statement typed by a person: exactly one, read-only (``check_read_only``), within the
    query time and memory limits."""
    connection = connect(settings)
    limit_time = _TimeLimit(connection, settings.query_timeout_s)
    try:
        check_read_only(connection, sql)
        return _fetch(connection, sql, {}, limit)
    except Exception as error:
        limit_time.check(error, settings.query_memory_mb)
        raise
    finally:
        limit_time.cancel()
        connection.close()


def user_query_batches(settings: Settings, sql: str) -> tuple[list[str], Iterator[list[Any]]]:
    """Every row of a statement typed by a person, in batches (for CSV and JSON output); the
    time limit covers writing them all."""
    connection = connect(settings)
    limit_time = _TimeLimit(connection, settings.query_timeout_s)
    try:
        check_read_only(connection, sql)
        cursor = connection.execute(sql)
    except BaseException as error:
        limit_time.cancel()
        connection.close()
        limit_time.check(error, settings.query_memory_mb)
        raise
    columns = [d[0] for d in cursor.description or []]

    def batches() -> Iterator[list[Any]]:
        try:
            while rows := cursor.fetchmany(BATCH_ROWS):
                yield rows
        except Exception as error:
            limit_time.check(error, settings.query_memory_mb)
            raise
        finally:
            limit_time.cancel()
            connection.close()

    return columns, batches()


def leaderboard(settings: Settings, definition: str, *, hardware: str | None = None) -> Result:
    return fetch(settings, LEADERBOARD_SQL, {"definition": definition, "hardware": hardware})


def leaderboard_not_found(settings: Settings, definition: str, hardware: str | None) -> str:
    """Why ``tracehouse leaderboard DEFINITION [--hardware H]`` has no rows, with what is there:
    the closest definition names ("did you mean"), or the hardware the definition was run on."""
    import difflib

    known = [str(r[0]) for r in fetch(settings, "SELECT DISTINCT definition FROM leaderboard").rows]
    if definition not in known:
        close = difflib.get_close_matches(definition, known, n=3, cutoff=0.6)
        suggestion = f"; did you mean {' or '.join(close)}?" if close else ""
        return f"no runs for definition {definition!r}{suggestion}"
    found = fetch(
        settings,
        "SELECT DISTINCT hardware FROM leaderboard WHERE definition = $d ORDER BY 1",
        {"d": definition},
    )
    where = ", ".join(str(r[0]) for r in found.rows)
    return f"no runs for definition {definition!r} on hardware {hardware!r}; it ran on {where}"


def busiest_definition(settings: Settings) -> str:
    """The definition with the most solutions, to show a leaderboard worth reading."""
    result = fetch(
        settings,
        "SELECT definition FROM leaderboard GROUP BY definition "
        "ORDER BY count(*) DESC, sum(workloads_compared) DESC, definition LIMIT 1",
    )
    if not result.rows:
        raise LookupError("the warehouse has no runs")
    return str(result.rows[0][0])
