"""Named read-only queries used by the CLI and the Dagster assets. Values are always bound as
parameters; nothing taken from the data or the command line is formatted into SQL.

Results are plain Python rows (``Result``), so the read commands import neither Polars nor
pyarrow and start quickly.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from tracehouse.assemble.history import store_regression_thresholds
from tracehouse.memory import duckdb_shortage
from tracehouse.read_only import check_read_only
from tracehouse.settings import Settings, env_name
from tracehouse.warehouse import QUERY_SPILL_DIR, Warehouse, connect_read_only

if TYPE_CHECKING:
    import duckdb

    from tracehouse.serve.render import SpooledTable

# The setting that bounds a reader's memory: every read command's, or the report's own.
MemorySetting = Literal["query_memory_mb", "report_memory_mb"]

# The leaderboard view (sql/marts/leaderboard.sql) as `tracehouse leaderboard` shows it. Hardware is
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
# report), from the one rule in sql/marts/leaderboard.sql.
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


# The share of the free disk one reader may fill with spill files at most (DuckDB's own
# default is 90 %, which one runaway query reached in seconds).
SPILL_SHARE_OF_FREE_DISK = 0.5


def spill_folder(settings: Settings) -> Path:
    return Warehouse(settings.warehouse).cache / QUERY_SPILL_DIR


def spill_limit_mb(settings: Settings) -> int:
    """The disk a reader may spill to: ``query_spill_mb``, at most half of what is free where
    the spill folder is (or its nearest existing parent) when it connects."""
    folder = spill_folder(settings)
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return settings.query_spill_mb
    return min(settings.query_spill_mb, int(free * SPILL_SHARE_OF_FREE_DISK) >> 20)


def reader(
    settings: Settings, memory_setting: MemorySetting = "query_memory_mb", *, batch: bool = False
) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the current generation within the read limits of
    ``settings``: ``memory_setting`` (``query_memory_mb``, or ``report_memory_mb`` for the
    report) of memory, then ``spill_limit_mb`` of spill files. Every read command (query,
    report, export, leaderboard, changes, record) connects through it. A ``batch`` reader (the
    report's: one pass over every view at its memory limit, then closed) keeps its block memory
    pooled (``connect_read_only``'s ``block_pool_mb``)."""
    memory_mb = getattr(settings, memory_setting)
    return connect_read_only(
        Warehouse(settings.warehouse),
        memory_limit_mb=memory_mb,
        spill_limit_mb=spill_limit_mb(settings),
        block_pool_mb=memory_mb if batch else None,
    )


def connect(settings: Settings) -> duckdb.DuckDBPyConnection:
    """A ``reader`` whose ``regressions`` view uses the regression limits of ``settings`` (not
    those stored when the warehouse was built)."""
    connection = reader(settings)
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
        with within_limits(settings):
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
    """A query needed more than ``query_memory_mb`` even spilling."""


class SpillTooLarge(QueryTooLarge):
    """A query needed to spill more than ``spill_limit_mb`` to disk."""


def limit_error(
    error: BaseException, settings: Settings, memory_setting: MemorySetting = "query_memory_mb"
) -> QueryTooLarge | None:
    """The one-line error naming the limit (and its setting) that made DuckDB give up, or None
    when ``error`` is not DuckDB running out of memory or spill space. ``memory_setting``: the
    one the connection was opened with (``reader``)."""
    shortage = duckdb_shortage(error)
    if shortage is None:
        return None
    memory_mb = getattr(settings, memory_setting)
    variable = env_name(memory_setting)
    if shortage.kind == "spill":
        return SpillTooLarge(
            f"the query needs more than its {spill_limit_mb(settings)} MiB of disk to spill to "
            f"under {spill_folder(settings)} (TRACEHOUSE_QUERY_SPILL_MB allows more, up to half "
            f"the free disk; it is {settings.query_spill_mb}): {shortage.reason}"
        )
    if shortage.kind == "system":
        return QueryTooLarge(
            f"the system refused the query memory before its {memory_mb} MiB "
            f"limit ({variable} lower spills sooner): {shortage.reason}"
        )
    return QueryTooLarge(
        f"the query needs more than its {memory_mb} MiB of memory "
        f"({variable} allows more): {shortage.first_sentence}"
    )


@contextlib.contextmanager
def within_limits(settings: Settings) -> Iterator[None]:
    """Turn DuckDB running out of memory or spill space into ``limit_error``'s one line."""
    try:
        yield
    except Exception as error:
        translated = limit_error(error, settings)
        if translated is not None:
            raise translated from None
        raise


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

    def check(self, error: BaseException, settings: Settings) -> None:
        """Raise the limit's own error instead of ``error`` when a limit caused it."""
        if self.fired.is_set() and not isinstance(error, KeyboardInterrupt):
            raise QueryTimeout(
                f"the query ran longer than {self.seconds:g} s and was stopped "
                "(TRACEHOUSE_QUERY_TIMEOUT_S allows more)"
            ) from None
        translated = limit_error(error, settings)
        if translated is not None:
            raise translated from None


def user_query(settings: Settings, sql: str, *, limit: int | None) -> Result:
    """A statement typed by a person: exactly one, read-only (``check_read_only``), within the
    query time and memory limits."""
    connection = connect(settings)
    limit_time = _TimeLimit(connection, settings.query_timeout_s)
    try:
        check_read_only(connection, sql)
        return _fetch(connection, sql, {}, limit)
    except Exception as error:
        limit_time.check(error, settings)
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
        limit_time.check(error, settings)
        raise
    columns = [d[0] for d in cursor.description or []]

    def batches() -> Iterator[list[Any]]:
        try:
            while rows := cursor.fetchmany(BATCH_ROWS):
                yield rows
        except Exception as error:
            limit_time.check(error, settings)
            raise
        finally:
            limit_time.cancel()
            connection.close()

    return columns, batches()


def user_query_table(settings: Settings, sql: str) -> tuple[SpooledTable, IO[str]]:
    """Every row of a statement typed by a person as a terminal table (``--limit 0``), spooled
    under the warehouse's spill folder rather than held in memory (the grid needs every row's
    width before its first line), within the same spill limit as DuckDB's own spill files. The
    caller prints ``table.lines(width)`` and closes the returned spool."""
    from tracehouse.serve.render import SpooledTable

    columns, batches = user_query_batches(settings, sql)
    spool = _spool_file(settings)
    try:
        table = SpooledTable(columns, spool)
        limit_chars = spill_limit_mb(settings) << 20
        for rows in batches:
            table.add(rows)
            if table.spooled_chars > limit_chars:
                batches.close()  # type: ignore[attr-defined]  (a generator: closes the query)
                raise SpillTooLarge(
                    f"the table of all rows needs more than its {limit_chars >> 20} MiB of disk "
                    f"under {spill_folder(settings)} (TRACEHOUSE_QUERY_SPILL_MB allows more, up "
                    "to half the free disk; --format csv or json writes rows as they come)"
                )
    except BaseException:
        spool.close()
        raise
    return table, spool


def _spool_file(settings: Settings) -> IO[str]:
    """An unnamed file in the spill folder: the system removes it when it is closed or the
    process dies, so it needs no sweep. A reader without write access spools in memory."""
    import io
    import tempfile

    folder = spill_folder(settings)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n", dir=folder)
    except OSError:
        return io.StringIO(newline="\n")


# What the latest comparison of `tracehouse changes` found for each leaderboard row (the same
# verdicts: tracehouse.serve.changes.latest_changes), appended to LEADERBOARD_SQL's columns.
LEADERBOARD_CHANGE_COLUMNS = (
    "latest_change",  # regressed / faster / newly passing / newly failing, or null
    "earlier_geomean_speedup",  # geomean_speedup with the judged workloads as they were
    "earlier_latency_us",  # latency_us likewise
    "regressed_workloads",
    "improved_workloads",
    "newly_passing_workloads",
    "newly_failing_workloads",
)


def leaderboard(settings: Settings, definition: str, *, hardware: str | None = None) -> Result:
    """The leaderboard's rows, each with what the latest `changes` comparison found for it."""
    from tracehouse.serve.changes import latest_changes

    connection = connect(settings)
    try:
        with within_limits(settings):
            result = _fetch(
                connection, LEADERBOARD_SQL, {"definition": definition, "hardware": hardware}, None
            )
            found = latest_changes(connection, settings) if result.rows else {}
    finally:
        connection.close()
    rows = []
    for row in result.rows:
        named = dict(zip(result.columns, row, strict=True))
        change = found.get((definition, named["hardware"], named["solution"]))
        rows.append((*row, *_change_cells(change, named)))
    return Result([*result.columns, *LEADERBOARD_CHANGE_COLUMNS], rows, result.total_rows)


def _change_cells(change: Any, row: dict[str, Any]) -> tuple[Any, ...]:
    if change is None:
        return (None, None, None, 0, 0, 0, 0)
    passed = int(str(row["passed"]).split("/", 1)[0])
    # The baseline reads 1.000× whatever its latency: its change shows in µs only.
    is_baseline = row["solution"] == row["baseline_solution"]
    speedup = (
        None
        if is_baseline
        else change.earlier(
            row["geomean_speedup"], row["workloads_compared"], slower_is_higher=False
        )
    )
    latency = change.earlier(row["latency_us"], passed, slower_is_higher=True)
    return (
        change.word,
        None if speedup is None else round(speedup, 3),
        None if latency is None else round(latency, 2),
        len(change.regressions),
        len(change.improvements),
        len(change.newly_passing),
        len(change.newly_failing),
    )


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
