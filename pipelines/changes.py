"""What changed in the warehouse: record events (sql/record_events.sql) and regressions
(sql/regressions.sql), for ``tracehouse changes``, the record page and the Dagster check.

The regression limits are settings (``TRACEHOUSE_REGRESSION_*``). Views cannot take bound
parameters, so ``sql/regressions.sql`` reads them from a one-row relation,
``regression_thresholds``: the build stores the build's settings in the DuckDB file (for a bare
``duckdb`` session), and every ``tracehouse`` connection replaces it with a temporary table of
the settings in force when the command runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.settings import Settings
from pipelines.sql_files import sql_text

if TYPE_CHECKING:
    import duckdb

THRESHOLDS_RELATION = "regression_thresholds"

# Exit status of `tracehouse changes --fail-on-regression` when at least one regression is
# listed (2 stays the status of a user error, as for every command).
EXIT_REGRESSIONS_FOUND = 1


@dataclass(frozen=True)
class RegressionThresholds:
    """The limits a result must pass to be flagged (sql/regressions.sql states the method)."""

    min_history: int
    min_change: float
    z_threshold: float

    @classmethod
    def from_settings(cls, settings: Settings) -> RegressionThresholds:
        # Settings checks the ranges when it is created.
        return cls(
            settings.regression_min_history,
            settings.regression_min_change,
            settings.regression_z_threshold,
        )

    def describe(self) -> str:
        return (
            f"at least {self.min_history} earlier result(s), "
            f"at least {self.min_change:.0%} slower than their mean, z-score >= {self.z_threshold:g}"
        )


# The statement that creates the relation, stored or temporary; its SELECT is in sql/.
CREATE_THRESHOLDS = {
    False: f"CREATE OR REPLACE TABLE {THRESHOLDS_RELATION} AS ",
    True: f"CREATE OR REPLACE TEMP TABLE {THRESHOLDS_RELATION} AS ",
}


def store_regression_thresholds(
    connection: duckdb.DuckDBPyConnection, settings: Settings, *, temporary: bool
) -> None:
    """Create (or replace) the ``regression_thresholds`` relation from ``settings``.

    ``temporary`` makes it a temporary table, which shadows the stored one on a read-only
    connection to the warehouse file.
    """
    thresholds = RegressionThresholds.from_settings(settings)
    connection.execute(
        CREATE_THRESHOLDS[temporary] + sql_text(THRESHOLDS_RELATION),
        {
            "min_history": thresholds.min_history,
            "min_change": thresholds.min_change,
            "z_threshold": thresholds.z_threshold,
        },
    )


# --------------------------------------------------------------------------------------------
# `tracehouse changes`

CURRENT_SNAPSHOT_SQL = """
SELECT s.snapshot_id, s.source, s.requested_revision, s.resolved_sha, s.built_at, s.uri
FROM source_snapshots AS s
WHERE s.snapshot_id IN (SELECT DISTINCT snapshot_id FROM runs)
   OR NOT EXISTS (SELECT 1 FROM runs)
ORDER BY s.built_at DESC
LIMIT 1
"""

SNAPSHOTS_SQL = """
SELECT snapshot_id, source, requested_revision, resolved_sha, built_at, uri
FROM source_snapshots
ORDER BY built_at
"""

# The current snapshot of every source: the latest of each.
SOURCE_SNAPSHOTS_SQL = """
SELECT snapshot_id, source, requested_revision, resolved_sha, built_at, uri
FROM source_snapshots
QUALIFY row_number() OVER (PARTITION BY source ORDER BY snapshot_number DESC) = 1
ORDER BY source
"""

RECORD_EVENTS_SQL = """
SELECT "at", definition, solution, workload_uuid, hardware, latency_ns,
       previous_solution, previous_observed_at, previous_latency_ns, speedup_over_previous,
       record_number, held_until, run_id, previous_run_id, comparison_key
FROM record_events
WHERE $since IS NULL OR "at" >= $since
ORDER BY "at", comparison_key
"""

REGRESSIONS_SQL = """
SELECT observed_at, definition, solution, workload_uuid, hardware, latency_ns,
       history_size, history_mean_ns, history_stddev_ns, relative_change, z_score,
       previous_latency_ns, run_id, previous_run_id, comparison_key
FROM regressions
WHERE $since IS NULL OR observed_at >= $since
ORDER BY observed_at, comparison_key, solution
"""

# Leader changes across revisions (sql/leader_changes.sql); a key's first leader is already a
# record event, so only the changes of a leader are listed.
LEADER_CHANGES_SQL = """
SELECT changed_at, source, snapshot_number, cause, comparison_key, previous_solution,
       previous_latency_ns, solution, latency_ns, speedup_over_previous, previous_run_id, run_id
FROM leader_changes
WHERE cause <> 'first' AND ($since IS NULL OR changed_at >= $since)
ORDER BY changed_at, comparison_key
"""

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:\d{2})?\Z")


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: str
    source: str
    requested_revision: str | None
    resolved_sha: str | None
    built_at: datetime
    uri: str  # the folder or hf:// dataset the source's name stands for

    @property
    def revision(self) -> str:
        return self.resolved_sha or self.requested_revision or "no revision"


def _snapshots(connection: duckdb.DuckDBPyConnection, sql: str) -> list[Snapshot]:
    return [Snapshot(*row) for row in connection.execute(sql).fetchall()]


def current_snapshot(connection: duckdb.DuckDBPyConnection) -> Snapshot:
    found = _snapshots(connection, CURRENT_SNAPSHOT_SQL)
    if not found:
        raise LookupError("the warehouse records no source snapshot; rebuild it")
    return found[0]


def parse_since(text: str) -> datetime | None:
    """An ISO-8601 date or date-time as UTC (zone-less is UTC, as observed_at is), else None."""
    if not _DATE.match(text.strip()):
        return None
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace(" ", "T"))
    except ValueError as error:
        raise ValueError(f"--since {text!r}: not a valid date/time ({error})") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True)
class Since:
    """Where ``--since`` starts: changes at or after ``instant`` count as new."""

    instant: datetime
    label: str


def resolve_since(connection: duckdb.DuckDBPyConnection, text: str) -> Since:
    """The instant after which a change counts as new, from ``--since``.

    A date or date-time compares with observed_at (when the benchmark ran). A revision (commit
    sha or its prefix, branch, tag) or snapshot id names a state the warehouse read: nothing is
    new since the current one; changes since an earlier one need the runs of that revision,
    which only a warehouse with run history keeps.
    """
    instant = parse_since(text)
    if instant is not None:
        return Since(instant, _instant(instant))
    needle = text.strip().lower()
    matches = [
        snapshot
        for snapshot in _snapshots(connection, SNAPSHOTS_SQL)
        if needle
        and (
            (snapshot.resolved_sha or "").lower().startswith(needle)
            or snapshot.snapshot_id.lower().startswith(needle)
            or (snapshot.requested_revision or "").lower() == needle
        )
    ]
    if not matches:
        raise ValueError(
            f"--since {text!r}: neither an ISO date/time (e.g. 2026-03-01 or "
            "2026-03-01T12:00:00Z) nor a revision or snapshot id in source_snapshots"
        )
    # A source's current snapshot: nothing is new since it.
    for current in _snapshots(connection, SOURCE_SNAPSHOTS_SQL):
        if any(snapshot.snapshot_id == current.snapshot_id for snapshot in matches):
            return Since(datetime.max.replace(tzinfo=UTC), f"revision {current.revision} (current)")
    raise ValueError(
        f"--since {text!r}: that revision is an earlier snapshot, and records and regressions "
        "are judged over the current runs; give a date/time instead (what changed since that "
        "snapshot is in the run_history and leader_changes views)"
    )


def check_source(connection: duckdb.DuckDBPyConnection, source: str) -> Snapshot:
    """The current snapshot of ``source``: a source name (`tracehouse sources`), or the
    folder or hf:// URI given to the build."""
    held = _snapshots(connection, SOURCE_SNAPSHOTS_SQL)
    for snapshot in held:
        if source == snapshot.source or _same_source(source, snapshot.uri):
            return snapshot
    names = ", ".join(repr(s.source) for s in held)
    raise ValueError(f"--source {source!r}: not a source of this warehouse (it holds {names})")


def _same_source(given: str, stored: str) -> bool:
    given = given.split("@", 1)[0] if given.startswith("hf://") else given
    if given.rstrip("/") == stored.rstrip("/"):
        return True
    if given.startswith("hf://") or stored.startswith("hf://"):
        return False
    return Path(given).resolve() == Path(stored).resolve()


@dataclass
class ChangeReport:
    source: Snapshot
    since: Since | None
    thresholds: RegressionThresholds
    record_events: Any  # polars DataFrame of RECORD_EVENTS_SQL
    regressions: Any  # polars DataFrame of REGRESSIONS_SQL
    leader_changes: Any  # polars DataFrame of LEADER_CHANGES_SQL


def change_report(
    connection: duckdb.DuckDBPyConnection,
    settings: Settings,
    *,
    since: str | None,
    source: str | None,
) -> ChangeReport:
    """New record holders and regressions, optionally since a date or revision."""
    import polars as pl

    snapshot = (
        check_source(connection, source) if source is not None else current_snapshot(connection)
    )
    instant = resolve_since(connection, since) if since is not None else None
    parameters = {"since": instant.instant if instant is not None else None}

    def frame(sql: str) -> Any:
        return pl.from_arrow(connection.sql(sql, params=parameters).to_arrow_table())

    return ChangeReport(
        source=snapshot,
        since=instant,
        thresholds=RegressionThresholds.from_settings(settings),
        record_events=frame(RECORD_EVENTS_SQL),
        regressions=frame(REGRESSIONS_SQL),
        leader_changes=frame(LEADER_CHANGES_SQL),
    )


def _instant(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _latency(ns: float | None) -> str:
    from pipelines.kernelindex import format_latency_ns

    return "—" if ns is None else format_latency_ns(round(ns))


def _where(row: dict[str, Any]) -> str:
    return f"{row['definition']} · workload {row['workload_uuid']} · {row['hardware']}"


def record_event_line(row: dict[str, Any]) -> str:
    """One record event: who took the record, from whom, by how much."""
    head = f"{_instant(row['at'])}  {row['solution']} {_latency(row['latency_ns'])}"
    if row["previous_solution"] is None and row["previous_latency_ns"] is None:
        taken = "first result in its comparison group"
    else:
        taken = (
            f"took it from {row['previous_solution']} {_latency(row['previous_latency_ns'])} "
            f"(observed {_instant(row['previous_observed_at'])}, "
            f"{row['speedup_over_previous']:.3f}× faster)"
        )
    return f"{head}  {taken}  [{_where(row)}]"


def regression_line(row: dict[str, Any]) -> str:
    z = row["z_score"]
    z_text = "inf" if z == float("inf") else f"{z:.1f}"
    return (
        f"{_instant(row['observed_at'])}  {row['solution']} {_latency(row['latency_ns'])}  "
        f"{row['relative_change']:+.1%} against the mean {_latency(row['history_mean_ns'])} of "
        f"{row['history_size']} earlier result(s), z {z_text}  [{_where(row)}]  run {row['run_id']}"
    )


def leader_change_line(row: dict[str, Any]) -> str:
    """One change of a comparison key's rank-1 run between builds."""
    head = (
        f"{_instant(row['changed_at'])}  {row['source']} snapshot {row['snapshot_number']}  "
        f"{row['cause']}: {row['previous_solution']} {_latency(row['previous_latency_ns'])} -> "
    )
    if row["run_id"] is None:
        return f"{head}no eligible run left  [{row['comparison_key']}]"
    return (
        f"{head}{row['solution']} {_latency(row['latency_ns'])} "
        f"({row['speedup_over_previous']:.3f}×)  [{row['comparison_key']}]"
    )


def report_text(report: ChangeReport) -> str:
    since = f" since {report.since.label}" if report.since is not None else ""
    events = report.record_events.to_dicts()
    takeovers = sum(1 for e in events if e["previous_latency_ns"] is not None)
    regressions = report.regressions.to_dicts()
    lines = [
        f"source {report.source.source} at {report.source.revision} "
        f"(snapshot {report.source.snapshot_id[:12]})",
        "",
        f"record events{since} (new records and leader changes): {len(events)} "
        f"({takeovers} took the record from an earlier holder, "
        f"{len(events) - takeovers} first results)",
        *(f"  {record_event_line(row)}" for row in events),
        "",
        f"regressions{since}: {len(regressions)} ({report.thresholds.describe()})",
        *(f"  {regression_line(row)}" for row in regressions),
    ]
    leader_changes = report.leader_changes.to_dicts()
    if leader_changes:  # only a warehouse that read several snapshots has any
        lines += [
            "",
            f"leader changes between builds{since}: {len(leader_changes)}",
            *(f"  {leader_change_line(row)}" for row in leader_changes),
        ]
    return "\n".join(lines)


def report_json(report: ChangeReport) -> str:
    import json

    def value(v: Any) -> Any:
        if isinstance(v, datetime):
            return _instant(v)
        if isinstance(v, float) and v in (float("inf"), float("-inf")):
            return "Infinity" if v > 0 else "-Infinity"  # JSON has no infinite number
        return v

    def rows(frame: Any) -> list[dict[str, Any]]:
        return [{k: value(v) for k, v in row.items()} for row in frame.to_dicts()]

    document = {
        "source": report.source.source,
        "revision": report.source.revision,
        "snapshot_id": report.source.snapshot_id,
        "since": report.since.label if report.since is not None else None,
        "thresholds": {
            "min_history": report.thresholds.min_history,
            "min_change": report.thresholds.min_change,
            "z_threshold": report.thresholds.z_threshold,
        },
        "record_events": rows(report.record_events),
        "regressions": rows(report.regressions),
        "leader_changes": rows(report.leader_changes),
    }
    return json.dumps(document, ensure_ascii=False, allow_nan=False)


# --------------------------------------------------------------------------------------------
# The Dagster check (pipelines/defs/checks.py wraps it; it warns, never blocks)

NEW_REGRESSIONS_SQL = """
WITH latest AS (
    SELECT arg_max(snapshot_id, built_at) AS snapshot_id FROM source_snapshots GROUP BY source
)
SELECT count(*),
       coalesce(list(solution || ' · ' || definition || ' · workload ' || workload_uuid
                     || ' · ' || hardware || ': ' || round(100 * relative_change, 1) || ' % slower'
                     ORDER BY relative_change DESC, run_id)[1:$sample], [])
FROM regressions
WHERE first_snapshot_id IN (SELECT snapshot_id FROM latest)
"""


def no_new_regressions(connection: duckdb.DuckDBPyConnection) -> tuple[bool, dict[str, Any]]:
    """No result first seen in the latest snapshot of its source is a regression: slower than
    the same solution's earlier results on the same comparison key by at least the configured
    relative change and z-score (sql/regressions.sql, TRACEHOUSE_REGRESSION_*)."""
    rows = connection.execute(NEW_REGRESSIONS_SQL, {"sample": 10}).fetchall()
    count, sample = rows[0]
    ((min_history, min_change, z_threshold),) = connection.execute(
        f"SELECT min_history, min_change, z_threshold FROM {THRESHOLDS_RELATION}"  # noqa: S608  (own name)
    ).fetchall()
    return count == 0, {
        "new_regressions": count,
        "largest": sample,
        "min_history": min_history,
        "min_change": min_change,
        "z_threshold": z_threshold,
    }
