"""What changed in the warehouse: record events (sql/record_events.sql) and regressions
(sql/regressions.sql), for ``tracehouse changes``, the record page and the Dagster check.

The regression limits are settings (``TRACEHOUSE_REGRESSION_*``). Views cannot take bound
parameters, so ``sql/regressions.sql`` reads them from a one-row relation,
``regression_thresholds``: the build stores the build's settings in the DuckDB file (for a bare
``duckdb`` session), and every ``tracehouse`` connection replaces it with a temporary table of
the settings in force when the command runs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracehouse.assemble.history import (
    THRESHOLDS_RELATION,
    RegressionThresholds,
)
from tracehouse.settings import Settings

if TYPE_CHECKING:
    import duckdb

# Exit status of `tracehouse changes --fail-on-regression` when at least one regression is
# listed (2 stays the status of a user error, as for every command).
EXIT_REGRESSIONS_FOUND = 1


# --------------------------------------------------------------------------------------------
# `tracehouse changes`: what changed between two states of each source
#
# A state of a source is one of its snapshots; the runs present in it are run_history's ranges
# that cover it. A window compares the state `before` (0: nothing yet) with the state `after`
# of one source: results first seen in between are judged (latency_verdicts), statuses,
# solutions and workloads of the two states are compared, and the record holders whose result
# arrived in between are listed. Every section query joins the windows, registered as the
# relation `change_windows` (source, before_number, after_number).

WINDOWS_RELATION = "change_windows"  # named as such in the SQL below

SNAPSHOTS_SQL = """
SELECT snapshot_id, source, snapshot_number, requested_revision, resolved_sha, built_at, uri
FROM source_snapshots
ORDER BY built_at, source, snapshot_number
"""

# Results first seen by the window's source in (before, after], with their verdict (every
# verdict: `changes` lists the changes, and a leader replaced by its own solution's result is
# reported only when that result is itself a change).
VERDICTS_SQL = """
SELECT v.source, v.verdict, v.solution, v.definition, v.workload_uuid, v.hardware,
       v.comparison_key, v.run_id, v.observed_at, v.latency_ns, v.history_size,
       v.history_mean_ns, v.history_stddev_ns, v.relative_change, v.z_score,
       v.previous_latency_ns, v.first_snapshot_number
FROM latency_verdicts AS v
JOIN change_windows AS w
    ON w.source = v.source
    AND v.first_snapshot_number > w.before_number AND v.first_snapshot_number <= w.after_number
ORDER BY v.source, v.verdict, v.solution, v.definition, v.workload_uuid, v.hardware,
         v.first_seen_at, v.observed_at, v.run_id
"""

# What each side of a window holds: its source's run_history ranges covering the snapshot.
_PRESENT = """
WITH sides AS (
    SELECT source, 'before' AS side, before_number AS snapshot_number FROM change_windows
    UNION ALL
    SELECT source, 'after' AS side, after_number AS snapshot_number FROM change_windows
),
present AS (
    SELECT s.side, h.*
    FROM sides AS s
    JOIN run_history AS h
        ON h.source = s.source
        AND s.snapshot_number BETWEEN h.first_snapshot_number AND h.last_snapshot_number
)
"""


def _after_present(ctes_and_select: str) -> str:
    """A statement that reads `present` (above): more CTEs, then its SELECT."""
    return f"{_PRESENT},{ctes_and_select}"


# A (solution, workload, hardware) passes in a state when one of its runs there has status
# PASSED; it fails when it has runs and none passed. Its state after the window is compared
# with the latest earlier state the warehouse holds of it, as a result's latency is judged
# against every earlier result: the source's own state before the window when that holds it,
# else the latest state of another source that held it, built before the window's end (one
# folder per benchmark run, each its own source, still shows a fix as newly passing).
STATUS_CHANGES_SQL = _after_present(
    """
outcomes AS (
    SELECT side, source, solution, definition, workload_uuid, hardware,
           bool_or(status = 'PASSED') AS passes,
           string_agg(DISTINCT status, '/' ORDER BY status) AS statuses
    FROM present
    WHERE solution IS NOT NULL
    GROUP BY ALL
),
own_before AS (
    SELECT a.source, a.solution, a.definition, a.workload_uuid, a.hardware,
           a.passes, a.statuses, b.passes AS passed_before, b.statuses AS statuses_before,
           b.source AS compared_with
    FROM outcomes AS a
    JOIN outcomes AS b
        ON b.side = 'before' AND b.source = a.source AND b.solution = a.solution
        AND b.definition = a.definition AND b.workload_uuid IS NOT DISTINCT FROM a.workload_uuid
        AND b.hardware IS NOT DISTINCT FROM a.hardware
    WHERE a.side = 'after'
),
unmatched AS (
    SELECT a.*
    FROM outcomes AS a
    ANTI JOIN own_before AS o
        ON o.source = a.source AND o.solution = a.solution AND o.definition = a.definition
        AND o.workload_uuid IS NOT DISTINCT FROM a.workload_uuid
        AND o.hardware IS NOT DISTINCT FROM a.hardware
    WHERE a.side = 'after'
),
elsewhere AS (
    SELECT u.source, u.solution, u.definition, u.workload_uuid, u.hardware,
           h.source AS other_source, s.snapshot_number AS other_snapshot, s.built_at,
           bool_or(h.status = 'PASSED') AS passes,
           string_agg(DISTINCT h.status, '/' ORDER BY h.status) AS statuses
    FROM unmatched AS u
    JOIN change_windows AS w ON w.source = u.source
    JOIN source_snapshots AS e ON e.source = w.source AND e.snapshot_number = w.after_number
    JOIN run_history AS h
        ON h.source <> u.source AND h.solution = u.solution AND h.definition = u.definition
        AND h.workload_uuid IS NOT DISTINCT FROM u.workload_uuid
        AND h.hardware IS NOT DISTINCT FROM u.hardware
    JOIN source_snapshots AS s
        ON s.source = h.source
        AND s.snapshot_number BETWEEN h.first_snapshot_number AND h.last_snapshot_number
        AND s.built_at < e.built_at
    GROUP BY u.source, u.solution, u.definition, u.workload_uuid, u.hardware, h.source,
             s.snapshot_number, s.built_at
    QUALIFY row_number() OVER (
        PARTITION BY u.source, u.solution, u.definition, u.workload_uuid, u.hardware
        ORDER BY s.built_at DESC, h.source, s.snapshot_number DESC
    ) = 1
),
compared AS (
    SELECT * FROM own_before
    UNION ALL
    SELECT u.source, u.solution, u.definition, u.workload_uuid, u.hardware,
           u.passes, u.statuses, e.passes, e.statuses, e.other_source
    FROM unmatched AS u
    JOIN elsewhere AS e
        ON e.source = u.source AND e.solution = u.solution AND e.definition = u.definition
        AND e.workload_uuid IS NOT DISTINCT FROM u.workload_uuid
        AND e.hardware IS NOT DISTINCT FROM u.hardware
)
SELECT source,
       CASE WHEN passes THEN 'newly passing' ELSE 'newly failing' END AS change,
       solution, definition, workload_uuid, hardware,
       statuses_before AS status_before, statuses AS status_after, compared_with
FROM compared
WHERE passes <> passed_before
ORDER BY source, change, solution, definition, workload_uuid, hardware
"""
)

# Solutions (per definition) and workloads present on one side only.
MEMBERSHIP_SQL = _after_present(
    """
members AS (
    SELECT DISTINCT side, source, 'solution' AS kind, definition, solution AS name
    FROM present WHERE solution IS NOT NULL
    UNION ALL
    SELECT DISTINCT side, source, 'workload' AS kind, definition, workload_uuid AS name
    FROM present WHERE workload_uuid IS NOT NULL
)
SELECT m.source, m.kind,
       CASE WHEN m.side = 'after' THEN 'appeared' ELSE 'disappeared' END AS change,
       m.definition, m.name
FROM members AS m
WHERE NOT EXISTS (
    SELECT 1 FROM members AS o
    WHERE o.side <> m.side AND o.source = m.source AND o.kind = m.kind
      AND o.definition = m.definition AND o.name = m.name
)
ORDER BY m.source, m.kind, change, m.definition, m.name
"""
)

# Record events whose result the window's source first held in (before, after].
RECORD_HOLDERS_SQL = """
SELECT e.source, e."at", e.definition, e.solution, e.workload_uuid, e.hardware, e.latency_ns,
       e.previous_solution, e.previous_observed_at, e.previous_latency_ns,
       e.speedup_over_previous, e.record_number, e.held_until, e.run_id, e.previous_run_id,
       e.comparison_key, e.first_snapshot_number
FROM record_events AS e
JOIN change_windows AS w
    ON w.source = e.source
    AND e.first_snapshot_number > w.before_number AND e.first_snapshot_number <= w.after_number
ORDER BY e.source, e.first_seen_at, e."at", e.comparison_key
"""

# Changes of a comparison key's rank-1 run made by the window's builds; a key's first leader
# is already a record event, so only the changes of a leader are listed, each with the
# definition, workload and hardware its comparison key stands for.
LEADER_CHANGES_SQL = """
WITH keys AS (
    SELECT comparison_key, any_value(definition) AS definition,
           any_value(workload_uuid) AS workload_uuid, any_value(hardware) AS hardware
    FROM run_history
    WHERE comparison_key IS NOT NULL
    GROUP BY comparison_key
)
SELECT l.source, l.changed_at, l.snapshot_number, l.cause, l.comparison_key,
       k.definition, k.workload_uuid, k.hardware,
       l.previous_solution, l.previous_latency_ns, l.solution, l.latency_ns,
       l.speedup_over_previous, l.previous_run_id, l.run_id
FROM leader_changes AS l
JOIN change_windows AS w
    ON w.source = l.source
    AND l.snapshot_number > w.before_number AND l.snapshot_number <= w.after_number
LEFT JOIN keys AS k USING (comparison_key)
WHERE l.cause <> 'first'
ORDER BY l.source, l.changed_at, l.comparison_key
"""

# Axis values of every workload the warehouse holds, to name a workload by its shape (M=8).
WORKLOAD_AXES_SQL = """
SELECT DISTINCT definition, workload_uuid, axes_json
FROM workloads
WHERE workload_uuid IS NOT NULL
ORDER BY ALL
"""

SECTIONS = (
    # (key in the report, title)
    ("regressions", "regressions"),
    ("improvements", "improvements"),
    ("history_too_short", "changes beyond the limit, history too short for a z-score"),
    ("newly_failing", "newly failing"),
    ("newly_passing", "newly passing"),
    ("solutions_appeared", "solutions appeared"),
    ("solutions_disappeared", "solutions disappeared"),
    ("workloads_appeared", "workloads appeared"),
    ("workloads_disappeared", "workloads disappeared"),
    ("record_holders", "new record holders"),
    ("leader_changes", "leader changes (rank-1 run replaced)"),
)
# Sections whose entries are each worth a line; the others print their first few in text.
LISTED_IN_FULL = frozenset(
    {"regressions", "improvements", "history_too_short", "newly_failing", "newly_passing"}
)
TEXT_SAMPLE = 10
WIDTH = 80  # an 80-column terminal

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:\d{2})?\Z")


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: str
    source: str
    snapshot_number: int
    requested_revision: str | None
    resolved_sha: str | None
    built_at: datetime
    uri: str  # the folder or hf:// dataset the source's name stands for

    @property
    def revision(self) -> str | None:
        return self.resolved_sha or self.requested_revision

    def describe(self) -> str:
        revision = f"revision {self.revision[:12]}" if self.revision else "no revision"
        return f"snapshot {self.snapshot_number}, {revision}, built {_instant(self.built_at)}"


@dataclass(frozen=True)
class Window:
    """The two states of one source that `changes` compares."""

    source: str
    before: Snapshot | None  # None: nothing before it (the source's first snapshot)
    after: Snapshot
    # An earlier snapshot with the same content as `after`: the source went back to it.
    returns_to: Snapshot | None

    @property
    def before_number(self) -> int:
        return self.before.snapshot_number if self.before is not None else 0

    @property
    def empty(self) -> bool:
        return self.before_number >= self.after.snapshot_number


def _snapshots(connection: duckdb.DuckDBPyConnection) -> list[Snapshot]:
    return [Snapshot(*row) for row in connection.execute(SNAPSHOTS_SQL).fetchall()]


def parse_since(text: str) -> datetime | None:
    """An ISO-8601 date or date-time as UTC (zone-less is UTC, as observed_at is), else None."""
    if not _DATE.match(text.strip()):
        return None
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace(" ", "T"))
    except ValueError as error:
        raise ValueError(f"--since {text!r}: not a valid date/time ({error})") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def check_source(snapshots: list[Snapshot], source: str) -> str:
    """The name of ``source``: a source name (`tracehouse sources`), or the folder or hf://
    URI given to the build."""
    names = sorted({s.source for s in snapshots})
    for snapshot in reversed(snapshots):
        if source == snapshot.source or _same_source(source, snapshot.uri):
            return snapshot.source
    held = ", ".join(repr(n) for n in names)
    raise ValueError(f"--source {source!r}: not a source of this warehouse (it holds {held})")


def _same_source(given: str, stored: str) -> bool:
    given = given.split("@", 1)[0] if given.startswith("hf://") else given
    if given.rstrip("/") == stored.rstrip("/"):
        return True
    if given.startswith("hf://") or stored.startswith("hf://"):
        return False
    return Path(given).resolve() == Path(stored).resolve()


def change_windows(
    snapshots: list[Snapshot], *, since: str | None, source: str | None
) -> list[Window]:
    """The window of each source `changes` reports on.

    Default: each source's previous snapshot and its current one. ``since`` moves `before`: a
    date or date-time names, per source, the last snapshot built at or before it; a snapshot id
    (or a prefix), a commit sha (or a prefix) or a requested revision names a snapshot of the
    sources that read it (the latest such), and only those sources are compared."""
    by_source: dict[str, list[Snapshot]] = {}
    for snapshot in snapshots:
        by_source.setdefault(snapshot.source, []).append(snapshot)
    for own in by_source.values():
        own.sort(key=lambda s: s.snapshot_number)
    if source is not None:
        name = check_source(snapshots, source)
        by_source = {name: by_source[name]}
    starts: dict[str, Snapshot | None]
    if since is None:
        starts = {name: own[-2] if len(own) > 1 else None for name, own in by_source.items()}
    elif (instant := parse_since(since)) is not None:
        starts = {
            name: next((s for s in reversed(own) if s.built_at <= instant), None)
            for name, own in by_source.items()
        }
    else:
        starts = _revision_starts(by_source, since, source)
    windows = []
    for name, start in starts.items():
        after = by_source[name][-1]
        earlier_same = [
            s
            for s in by_source[name]
            if s.snapshot_number < after.snapshot_number and s.snapshot_id == after.snapshot_id
        ]
        windows.append(Window(name, start, after, earlier_same[-1] if earlier_same else None))
    return sorted(windows, key=lambda w: w.source)


def _revision_starts(
    by_source: dict[str, list[Snapshot]], since: str, source: str | None
) -> dict[str, Snapshot | None]:
    needle = since.strip().lower()
    starts: dict[str, Snapshot | None] = {}
    for name, own in by_source.items():
        matches = [
            s
            for s in own
            if needle
            and (
                (s.resolved_sha or "").lower().startswith(needle)
                or s.snapshot_id.lower().startswith(needle)
                or (s.requested_revision or "").lower() == needle
            )
        ]
        if matches:
            starts[name] = matches[-1]
    if not starts:
        where = f"source {source!r}" if source is not None else "source_snapshots"
        raise ValueError(
            f"--since {since!r}: neither an ISO date/time (e.g. 2026-03-01 or "
            f"2026-03-01T12:00:00Z) nor a revision or snapshot id in {where}"
        )
    return starts


@dataclass
class ChangeReport:
    windows: list[Window]
    since: str | None
    thresholds: RegressionThresholds
    sections: dict[str, list[dict[str, Any]]]  # SECTIONS' keys, each a list of entries
    # Per section (leader_changes, record_holders): the entries left out because a solution
    # replaced its own result within noise (see is_a_change).
    within_noise: dict[str, int] = field(default_factory=dict)

    def count(self, section: str) -> int:
        return len(self.sections[section])


def _rows(
    connection: duckdb.DuckDBPyConnection, sql: str, parameters: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    cursor = connection.execute(sql, parameters or {})
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _register_windows(connection: duckdb.DuckDBPyConnection, windows: list[Window]) -> None:
    # A temporary table, not a registered Arrow table: the leaderboard reads the verdicts too,
    # and a read command imports no heavy library (tests/system/test_output.py).
    connection.execute(
        f"CREATE OR REPLACE TEMP TABLE {WINDOWS_RELATION} "
        "(source VARCHAR, before_number BIGINT, after_number BIGINT)"
    )
    rows = [(w.source, w.before_number, w.after.snapshot_number) for w in windows]
    if rows:
        insert = f"INSERT INTO {WINDOWS_RELATION} VALUES (?, ?, ?)"  # noqa: S608 (our constant)
        connection.executemany(insert, rows)


def axes_text(axes_json: str | None) -> str | None:
    """A workload named by its axis values (``M=8, N=4096``), or None without any."""
    import json

    try:
        axes = json.loads(axes_json) if axes_json else None
    except ValueError:
        return None
    if not isinstance(axes, dict) or not axes:
        return None
    return ", ".join(f"{name}={value}" for name, value in axes.items())


def workload_label(axes_json: str | None, workload_key: str) -> str:
    """A workload by its axes (``M=8, N=4``), the key's first characters when it has none."""
    return axes_text(axes_json) or workload_key[:8]


def _workload_axes(connection: duckdb.DuckDBPyConnection) -> dict[tuple[Any, Any], str]:
    named: dict[tuple[Any, Any], str] = {}
    for definition, uuid, axes_json in connection.execute(WORKLOAD_AXES_SQL).fetchall():
        text = axes_text(axes_json)
        if text is not None:
            named.setdefault((definition, uuid), text)
    return named


def _listed_verdict(verdict: dict[str, Any], min_change: float) -> bool:
    """A judged result `changes` lists: a regression, an improvement, or a change beyond the
    limit whose history is too short for a z-score."""
    if verdict["verdict"] in ("regression", "improvement"):
        return True
    return verdict["verdict"] == "history too short" and (
        abs(verdict["relative_change"]) >= min_change
    )


def is_a_change(
    row: dict[str, Any], verdict_of: dict[str, dict[str, Any]], min_change: float
) -> bool:
    """A rank-1 run (or a record) replaced: a change when it passes to another solution (or to
    none); replaced by its own solution's new result, only when that result is itself a change
    by the rule regressions use (its verdict; without one, a relative change of at least
    ``min_change``). A solution replacing itself within noise is no change."""
    if row["run_id"] is None or row["solution"] != row["previous_solution"]:
        return True
    verdict = verdict_of.get(row["run_id"])
    if verdict is not None:
        return _listed_verdict(verdict, min_change)
    previous, latency = row["previous_latency_ns"], row["latency_ns"]
    if not previous or latency is None:
        return True
    return abs(latency / previous - 1) >= min_change


def _worst_first(rows: list[dict[str, Any]], sign: int) -> list[dict[str, Any]]:
    """Regressions by how much slower (sign 1), improvements by how much faster (-1)."""
    return sorted(
        rows,
        key=lambda r: (-sign * r["relative_change"], r["solution"], r["definition"], r["run_id"]),
    )


def change_report(
    connection: duckdb.DuckDBPyConnection,
    settings: Settings,
    *,
    since: str | None,
    source: str | None,
) -> ChangeReport:
    """What changed in each source between two of its states (see change_windows)."""
    snapshots = _snapshots(connection)
    if not snapshots:
        raise LookupError("the warehouse records no source snapshot; rebuild it")
    windows = change_windows(snapshots, since=since, source=source)
    min_change = settings.regression_min_change
    _register_windows(connection, windows)
    try:
        verdicts = _rows(connection, VERDICTS_SQL)
        statuses = _rows(connection, STATUS_CHANGES_SQL)
        members = _rows(connection, MEMBERSHIP_SQL)
        record_holders = _rows(connection, RECORD_HOLDERS_SQL)
        leaders = _rows(connection, LEADER_CHANGES_SQL)
        axes = _workload_axes(connection)
    finally:
        connection.unregister(WINDOWS_RELATION)
    verdict_of = {v["run_id"]: v for v in verdicts}
    changed_leaders = [r for r in leaders if is_a_change(r, verdict_of, min_change)]
    new_holders = [r for r in record_holders if is_a_change(r, verdict_of, min_change)]
    sections = {
        "regressions": _worst_first([v for v in verdicts if v["verdict"] == "regression"], 1),
        "improvements": _worst_first([v for v in verdicts if v["verdict"] == "improvement"], -1),
        # Only the results that would have been judged a change with enough history.
        "history_too_short": sorted(
            (
                v
                for v in verdicts
                if v["verdict"] == "history too short" and _listed_verdict(v, min_change)
            ),
            key=lambda r: (-abs(r["relative_change"]), r["solution"], r["run_id"]),
        ),
        "newly_failing": [r for r in statuses if r["change"] == "newly failing"],
        "newly_passing": [r for r in statuses if r["change"] == "newly passing"],
        **{
            f"{kind}s_{change}": [m for m in members if m["kind"] == kind and m["change"] == change]
            for kind in ("solution", "workload")
            for change in ("appeared", "disappeared")
        },
        "record_holders": new_holders,
        "leader_changes": changed_leaders,
    }
    for entries in sections.values():
        for row in entries:
            workload = row["name"] if row.get("kind") == "workload" else row.get("workload_uuid")
            row["workload_axes"] = axes.get((row.get("definition"), workload))
    within_noise = {
        "leader_changes": len(leaders) - len(changed_leaders),
        "record_holders": len(record_holders) - len(new_holders),
    }
    return ChangeReport(
        windows, since, RegressionThresholds.from_settings(settings), sections, within_noise
    )


# The leaderboard's and the report's view of the same verdicts --------------------------------


@dataclass
class SolutionChange:
    """What the default `changes` comparison (each source's previous snapshot and its current
    one) found for one solution on one definition and hardware."""

    regressions: list[dict[str, Any]] = field(default_factory=list)
    improvements: list[dict[str, Any]] = field(default_factory=list)
    newly_passing: list[dict[str, Any]] = field(default_factory=list)
    newly_failing: list[dict[str, Any]] = field(default_factory=list)

    @property
    def word(self) -> str | None:
        """``regressed``, ``faster``, ``newly passing``, ``newly failing`` (several joined)."""
        words = [
            word
            for word, entries in (
                ("regressed", self.regressions),
                ("faster", self.improvements),
                ("newly passing", self.newly_passing),
                ("newly failing", self.newly_failing),
            )
            if entries
        ]
        return ", ".join(words) or None

    def earlier(
        self, figure: float | None, workloads: int, *, slower_is_higher: bool
    ) -> float | None:
        """``figure`` (a geometric mean over ``workloads`` workloads) as it was before the
        judged results: each regressed or improved workload at the mean of its earlier results
        (what its verdict compares with). ``slower_is_higher``: a latency, not a speedup."""
        judged = self.regressions + self.improvements
        if figure is None or not judged or workloads <= 0:
            return None
        by_workload: dict[Any, list[float]] = {}
        for row in judged:
            by_workload.setdefault(row["workload_uuid"], []).append(
                math.log1p(row["relative_change"])
            )
        total = sum(sum(logs) / len(logs) for logs in by_workload.values())
        step = math.exp(total / workloads)
        return figure / step if slower_is_higher else figure * step


def latest_changes(
    connection: duckdb.DuckDBPyConnection, settings: Settings
) -> dict[tuple[str, str, str], SolutionChange]:
    """Per (definition, hardware, solution): the regressions, improvements, newly passing and
    newly failing of the default `changes` comparison — the same verdicts, for the leaderboard
    and the report's first page."""
    snapshots = _snapshots(connection)
    if not snapshots:
        return {}
    _register_windows(connection, change_windows(snapshots, since=None, source=None))
    try:
        # only the sections it needs (record holders and leader changes cost more)
        verdicts = _rows(connection, VERDICTS_SQL)
        statuses = _rows(connection, STATUS_CHANGES_SQL)
        axes = _workload_axes(connection)
    finally:
        connection.unregister(WINDOWS_RELATION)
    for row in verdicts + statuses:
        row["workload_axes"] = axes.get((row["definition"], row["workload_uuid"]))
    sections = {
        "regressions": _worst_first([v for v in verdicts if v["verdict"] == "regression"], 1),
        "improvements": _worst_first([v for v in verdicts if v["verdict"] == "improvement"], -1),
        "newly_passing": [r for r in statuses if r["change"] == "newly passing"],
        "newly_failing": [r for r in statuses if r["change"] == "newly failing"],
    }
    found: dict[tuple[str, str, str], SolutionChange] = {}
    for section, rows in sections.items():
        for row in rows:
            key = (row["definition"], row["hardware"], row["solution"])
            getattr(found.setdefault(key, SolutionChange()), section).append(row)
    return found


# What the command prints ---------------------------------------------------------------------


def _instant(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _latency(ns: float | None) -> str:
    from tracehouse.kernelindex import format_latency_ns

    return "—" if ns is None else format_latency_ns(round(ns))


def _percent(ratio_minus_one: float | None) -> str:
    return "—" if ratio_minus_one is None else f"{ratio_minus_one:+.1%}"


def workload_name(row: dict[str, Any], *, wide: bool = False) -> str:
    """A workload by its axes (``M=8``); its uuid only with ``wide``, or when it has no axes."""
    uuid = row.get("workload_uuid") or (row.get("name") if row.get("kind") else None) or "?"
    axes = row.get("workload_axes")
    if axes is None:
        return str(uuid)
    return f"{axes} (workload {uuid})" if wide else axes


def _where(row: dict[str, Any], wide: bool) -> str:
    return f"{row['definition']} · {workload_name(row, wide=wide)} · {row.get('hardware') or '?'}"


def _z(value: float | None) -> str:
    if value is None:
        return "—"
    if math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    return f"{value:+.1f}"


def verdict_lines(row: dict[str, Any], wide: bool = False) -> list[str]:
    """A judged result: who, where, the mean it is compared with -> its latency, the change."""
    figures = (
        f"{_latency(row['history_mean_ns'])} -> {_latency(row['latency_ns'])} "
        f"{_percent(row['relative_change'])}, vs the mean of {row['history_size']} earlier"
    )
    if row["verdict"] == "history too short":
        figures += ", too few for a z-score"
    else:
        figures += f", z {_z(row['z_score'])}"
    return [f"  {row['solution']}", f"    {_where(row, wide)}", f"    {figures}"]


def status_lines(row: dict[str, Any], wide: bool = False) -> list[str]:
    against = (
        f" (as source {row['compared_with']} had it)"
        if row.get("compared_with") not in (None, row["source"])
        else ""
    )
    return [
        f"  {row['solution']}",
        f"    {_where(row, wide)}: {row['status_before']} -> {row['status_after']}{against}",
    ]


def member_line(row: dict[str, Any], wide: bool = False) -> str:
    name = workload_name(row, wide=wide) if row["kind"] == "workload" else row["name"]
    return f"  {row['definition']} · {name}"


def record_holder_lines(row: dict[str, Any], wide: bool = False) -> list[str]:
    """One new record holder: who, how fast, where, from whom."""
    if row["previous_latency_ns"] is None:
        taken = "first result in its comparison group"
    else:
        change = row["latency_ns"] / row["previous_latency_ns"] - 1
        taken = (
            f"took it from {row['previous_solution']} {_latency(row['previous_latency_ns'])} "
            f"-> {_latency(row['latency_ns'])} {_percent(change)}"
        )
    return [
        f"  {row['solution']} {_latency(row['latency_ns'])}",
        f"    {_where(row, wide)}",
        f"    {taken}",
    ]


def leader_change_lines(row: dict[str, Any], wide: bool = False) -> list[str]:
    """One change of a comparison key's rank-1 run between builds: where, both solutions in
    full with their latencies, the change in percent."""
    where = _where(row, wide) if row.get("definition") is not None else row["comparison_key"][7:19]
    if wide:
        where += f" · key {row['comparison_key']}"
    if row["run_id"] is None:
        to = "no eligible run left"
    else:
        change = (
            row["latency_ns"] / row["previous_latency_ns"] - 1
            if row["previous_latency_ns"]
            else None
        )
        to = f"{row['solution']} {_latency(row['latency_ns'])} {_percent(change)}"
    return [
        f"  {where} (snapshot {row['snapshot_number']}, {row['cause']})",
        f"    {row['previous_solution']} {_latency(row['previous_latency_ns'])} -> {to}",
    ]


def _entry_lines(section: str, row: dict[str, Any], wide: bool) -> list[str]:
    if section in ("regressions", "improvements", "history_too_short"):
        return verdict_lines(row, wide)
    if section in ("newly_failing", "newly_passing"):
        return status_lines(row, wide)
    if section == "record_holders":
        return record_holder_lines(row, wide)
    if section == "leader_changes":
        return leader_change_lines(row, wide)
    return [member_line(row, wide)]


def window_heading(window: Window) -> list[str]:
    """Which two states of the source are compared, and how the later one came about."""
    from tracehouse.serve import render

    before = window.before
    lines = [
        f"source {window.source}: "
        + (
            f"snapshot {before.snapshot_number} -> {window.after.snapshot_number}"
            if before is not None
            else f"everything up to snapshot {window.after.snapshot_number}"
        ),
        f"  from {before.describe()}" if before is not None else "  from nothing (new)",
        f"  to   {window.after.describe()}",
    ]
    if window.returns_to is not None:
        lines.append(
            f"  went back: snapshot {window.after.snapshot_number} is the state of snapshot "
            f"{window.returns_to.snapshot_number} again"
        )
        lines.append("  (its results were seen then, and are not judged again)")
    if window.empty:
        lines.append("  no build of this source since then: nothing to compare")
    return [render.safe(line) for line in lines]


def report_text(report: ChangeReport, *, wide: bool = False, width: int = WIDTH) -> str:
    """What `tracehouse changes` prints: the one-line summary first, then each source's
    window and every section; wrapped to ``width`` (names are wrapped, never elided)."""
    from tracehouse.serve import render

    lines = [summary_line(report, wide=wide)]
    for window in report.windows:
        lines += window_heading(window)
    lines.append(f"judged: {report.thresholds.describe()}")
    for section, title in SECTIONS:
        entries = report.sections[section]
        left_out = report.within_noise.get(section, 0)
        if section == "leader_changes" and not entries and not left_out:
            continue  # only a warehouse that read several snapshots has any
        heading = f"{title}: {len(entries)}"
        if left_out:
            heading += f"; {left_out} more were a solution replacing itself within noise"
        lines += ["", heading]
        for source in sorted({e["source"] for e in entries}):
            own = [e for e in entries if e["source"] == source]
            if len(report.windows) > 1:
                lines.append(f" [{source}]")
            shown = own if section in LISTED_IN_FULL else own[:TEXT_SAMPLE]
            for entry in shown:
                lines += _entry_lines(section, entry, wide)
            if len(shown) < len(own):
                lines.append(f"  … and {len(own) - len(shown)} more (--format json lists all)")
    return "\n".join(render.fit_lines([render.safe(line) for line in lines], width))


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return _instant(value)
    if isinstance(value, float) and math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"  # JSON has no infinite number
    return value


def _snapshot_document(snapshot: Snapshot | None) -> dict[str, Any] | None:
    if snapshot is None:
        return None
    return {
        "snapshot_id": snapshot.snapshot_id,
        "snapshot_number": snapshot.snapshot_number,
        "revision": snapshot.revision,
        "built_at": _instant(snapshot.built_at),
    }


def report_json(report: ChangeReport) -> str:
    import json

    document = {
        "summary": summary_line(report),
        "windows": [
            {
                "source": w.source,
                "before": _snapshot_document(w.before),
                "after": _snapshot_document(w.after),
                "returns_to": _snapshot_document(w.returns_to),
            }
            for w in report.windows
        ],
        "since": report.since,
        "thresholds": {
            "min_history": report.thresholds.min_history,
            "min_change": report.thresholds.min_change,
            "z_threshold": report.thresholds.z_threshold,
        },
        "within_noise": report.within_noise,
        **{
            section: [{k: _jsonable(v) for k, v in row.items()} for row in entries]
            for section, entries in report.sections.items()
        },
    }
    return json.dumps(document, ensure_ascii=False, allow_nan=False)


# One row per entry of every section, for spreadsheets and scripts.
CSV_COLUMNS = (
    "section",
    "source",
    "solution",
    "definition",
    "workload_uuid",
    "workload_axes",
    "hardware",
    "comparison_key",
    "run_id",
    "latency_ns",
    "history_size",
    "history_mean_ns",
    "relative_change",
    "z_score",
    "status_before",
    "status_after",
    "previous_solution",
    "previous_latency_ns",
    "name",
)


def report_rows(report: ChangeReport) -> list[list[Any]]:
    return [
        [section, *(_jsonable(row.get(column)) for column in CSV_COLUMNS[1:])]
        for section, _ in SECTIONS
        for row in report.sections[section]
    ]


def summary_line(report: ChangeReport, *, wide: bool = False) -> str:
    """The one line `changes` starts with, and `--fail-on-regression` prints when it fails:
    how many regressions, in which sources, of which solutions, and the worst (its workload
    by its axes; the uuid too with ``wide``)."""
    found = report.sections["regressions"]
    if not found:
        sources = ", ".join(w.source for w in report.windows) or "-"
        return (
            f"no regression in source {sources}; {report.count('improvements')} "
            f"improvement(s), {report.count('newly_failing')} newly failing, "
            f"{report.count('newly_passing')} newly passing"
        )
    solutions = sorted({r["solution"] for r in found})
    sources = sorted({r["source"] for r in found})
    worst = found[0]  # worst first
    return (
        f"{len(found)} regression(s) in source {', '.join(sources)} of "
        f"{len(solutions)} solution(s) ({', '.join(solutions[:3])}"
        f"{', …' if len(solutions) > 3 else ''}); worst {worst['solution']} "
        f"{_percent(worst['relative_change'])} on {worst['definition']} "
        f"workload {workload_name(worst, wide=wide)}"
    )


def regression_failure_line(report: ChangeReport, *, wide: bool = False) -> str | None:
    """Why `--fail-on-regression` fails, in one line (``summary_line``); None when nothing
    regressed."""
    return summary_line(report, wide=wide) if report.sections["regressions"] else None


# --------------------------------------------------------------------------------------------
# The Dagster check (pipelines/defs/checks.py wraps it; it warns, never blocks)


def no_new_regressions(connection: duckdb.DuckDBPyConnection) -> tuple[bool, dict[str, Any]]:
    """No regression in what `tracehouse changes` compares by default (each source's previous
    snapshot and its current one): a result first seen in the current snapshot slower than the
    same solution's earlier results on the same comparison key by at least the configured
    relative change and z-score (sql/latency_verdicts.sql, TRACEHOUSE_REGRESSION_*)."""
    snapshots = _snapshots(connection)
    windows = change_windows(snapshots, since=None, source=None) if snapshots else []
    _register_windows(connection, windows)
    try:
        found = [r for r in _rows(connection, VERDICTS_SQL) if r["verdict"] == "regression"]
    finally:
        connection.unregister(WINDOWS_RELATION)
    found.sort(key=lambda r: (-r["relative_change"], r["run_id"]))
    ((min_history, min_change, z_threshold),) = connection.execute(
        f"SELECT min_history, min_change, z_threshold FROM {THRESHOLDS_RELATION}"  # noqa: S608  (own name)
    ).fetchall()
    return not found, {
        "new_regressions": len(found),
        "largest": [
            f"{r['solution']} · {r['definition']} · workload {r['workload_uuid']} · "
            f"{r['hardware']}: {100 * r['relative_change']:.1f} % slower"
            for r in found[:10]
        ],
        "min_history": min_history,
        "min_change": min_change,
        "z_threshold": z_threshold,
    }
