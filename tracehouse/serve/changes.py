"""What changed in the warehouse: record events (sql/marts/record_events.sql) and regressions
(sql/marts/regressions.sql), for ``tracehouse changes``, the record page and the Dagster check.

The regression limits are settings (``TRACEHOUSE_REGRESSION_*``). Views cannot take bound
parameters, so ``sql/marts/regressions.sql`` reads them from a one-row relation,
``regression_thresholds``: the build stores the build's settings in the DuckDB file (for a bare
``duckdb`` session), and every ``tracehouse`` connection replaces it with a temporary table of
the settings in force when the command runs.

This module finds the changes; their SQL is ``changes_sql``, and what ``tracehouse changes``
prints of them ``changes_text``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracehouse.assemble.history import THRESHOLDS_RELATION, RegressionThresholds
from tracehouse.serve.changes_sql import (
    LEADER_CHANGES_SQL,
    LISTED_VERDICTS_SQL,
    MEMBERSHIP_SQL,
    RECORD_HOLDERS_SQL,
    SNAPSHOTS_SQL,
    STATUS_CHANGES_SQL,
    WINDOWS_RELATION,
    WORKLOAD_AXES_SQL,
)
from tracehouse.settings import Settings

if TYPE_CHECKING:
    import duckdb


# Exit status of `tracehouse changes --fail-on-regression` when at least one regression is
# listed (2 stays the status of a user error, as for every command).
EXIT_REGRESSIONS_FOUND = 1

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
        return f"snapshot {self.snapshot_number}, {revision}, built {instant_text(self.built_at)}"


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


def _status_changes(
    connection: duckdb.DuckDBPyConnection, snapshots: list[Snapshot], windows: list[Window]
) -> list[dict[str, Any]]:
    """The rows of STATUS_CHANGES_SQL (windows registered). A state after a window is compared
    with the source's own state before it or with another source's: when no window has a
    state before it and the warehouse holds a single source there is nothing to compare with,
    and the query would group every run of the after-states to find no row (2 s over the runs
    of a first build of 1,000,000)."""
    if all(window.before is None for window in windows) and len({s.source for s in snapshots}) < 2:
        return []
    return _rows(connection, STATUS_CHANGES_SQL)


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


def parse_axes(axes_json: str | None) -> dict[str, Any] | None:
    """A workload's axes JSON as an object, None when it is missing or not one: orjson (a third
    of json's time, once per record holder of the report), and json where orjson refuses what
    json reads (NaN, integers past 64 bits)."""
    import json

    import orjson

    if not axes_json:
        return None
    try:
        axes = orjson.loads(axes_json)
    except orjson.JSONDecodeError:
        try:
            axes = json.loads(axes_json)
        except ValueError:
            return None
    return axes if isinstance(axes, dict) else None


def axes_text(axes_json: str | None) -> str | None:
    """A workload named by its axis values (``M=8, N=4096``), or None without any."""
    axes = parse_axes(axes_json)
    if not axes:
        return None
    return ", ".join(f"{name}={value}" for name, value in axes.items())


def workload_label(axes_json: str | None, workload_key: str) -> str:
    """A workload by its axes (``M=8, N=4``), the key's first characters when it has none."""
    return axes_text(axes_json) or workload_key[:8]


def _workload_of(row: dict[str, Any]) -> str | None:
    """The workload uuid a change entry is about (a workload appeared or gone is its name)."""
    return row["name"] if row.get("kind") == "workload" else row.get("workload_uuid")


def _workload_axes(
    connection: duckdb.DuckDBPyConnection, workload_uuids: Iterable[str | None]
) -> dict[tuple[Any, Any], str]:
    """The axes text of each (definition, workload_uuid) with one of ``workload_uuids``: only
    those workloads are read."""
    uuids = sorted({uuid for uuid in workload_uuids if uuid})
    named: dict[tuple[Any, Any], str] = {}
    if not uuids:
        return named
    for definition, uuid, axes_json in connection.execute(
        WORKLOAD_AXES_SQL, {"uuids": uuids}
    ).fetchall():
        text = axes_text(axes_json)
        if text is not None:
            named.setdefault((definition, uuid), text)
    return named


def _verdicts(
    connection: duckdb.DuckDBPyConnection, kinds: Collection[str], run_ids: Collection[str] = ()
) -> list[dict[str, Any]]:
    """The window's verdicts of the ``kinds`` (regression, improvement, history too short), and
    those of ``run_ids`` whatever their kind."""
    return _rows(
        connection, LISTED_VERDICTS_SQL, {"verdicts": sorted(kinds), "run_ids": sorted(run_ids)}
    )


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


# Every section of a change report, in the order `tracehouse changes` prints them.
ALL_SECTIONS = (
    "regressions",
    "improvements",
    "history_too_short",
    "newly_failing",
    "newly_passing",
    "solutions_appeared",
    "solutions_disappeared",
    "workloads_appeared",
    "workloads_disappeared",
    "record_holders",
    "leader_changes",
)
_MEMBERSHIP_SECTIONS = frozenset(
    {"solutions_appeared", "solutions_disappeared", "workloads_appeared", "workloads_disappeared"}
)
_VERDICT_OF_SECTION = {
    "regressions": "regression",
    "improvements": "improvement",
    "history_too_short": "history too short",
}


def change_report(
    connection: duckdb.DuckDBPyConnection,
    settings: Settings,
    *,
    since: str | None,
    source: str | None,
    sections: Collection[str] = ALL_SECTIONS,
) -> ChangeReport:
    """What changed in each source between two of its states (see change_windows): the
    ``sections`` asked for (each of ALL_SECTIONS), every other one left empty and unread (the
    report's pages show four; a first build of 1,000,000 runs has as many appearances)."""
    unknown = set(sections) - set(ALL_SECTIONS)
    if unknown:
        raise ValueError(f"no such change section: {', '.join(sorted(unknown))}")
    snapshots = _snapshots(connection)
    if not snapshots:
        raise LookupError("the warehouse records no source snapshot; rebuild it")
    windows = change_windows(snapshots, since=since, source=source)
    min_change = settings.regression_min_change
    wanted = set(sections)
    _register_windows(connection, windows)
    try:
        statuses = (
            _status_changes(connection, snapshots, windows)
            if wanted & {"newly_failing", "newly_passing"}
            else []
        )
        members = _rows(connection, MEMBERSHIP_SQL) if wanted & _MEMBERSHIP_SECTIONS else []
        record_holders = _rows(connection, RECORD_HOLDERS_SQL) if "record_holders" in wanted else []
        leaders = _rows(connection, LEADER_CHANGES_SQL) if "leader_changes" in wanted else []
        asked_about = {r["run_id"] for r in (*record_holders, *leaders)} - {None}
        verdicts = _verdicts(
            connection,
            [kind for section, kind in _VERDICT_OF_SECTION.items() if section in wanted],
            asked_about,
        )
    finally:
        connection.unregister(WINDOWS_RELATION)
    verdict_of = {v["run_id"]: v for v in verdicts}
    changed_leaders = [r for r in leaders if is_a_change(r, verdict_of, min_change)]
    new_holders = [r for r in record_holders if is_a_change(r, verdict_of, min_change)]
    found = {
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
    report_sections = {
        section: found[section] if section in wanted else [] for section in ALL_SECTIONS
    }
    listed = [row for entries in report_sections.values() for row in entries]
    axes = _workload_axes(connection, (_workload_of(row) for row in listed))
    for row in listed:
        row["workload_axes"] = axes.get((row.get("definition"), _workload_of(row)))
    within_noise = {
        "leader_changes": len(leaders) - len(changed_leaders),
        "record_holders": len(record_holders) - len(new_holders),
    }
    return ChangeReport(
        windows, since, RegressionThresholds.from_settings(settings), report_sections, within_noise
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
    windows = change_windows(snapshots, since=None, source=None)
    _register_windows(connection, windows)
    try:
        # only the sections it needs (record holders and leader changes cost more)
        verdicts = _verdicts(connection, ("regression", "improvement"))
        statuses = _status_changes(connection, snapshots, windows)
        axes = _workload_axes(connection, (r["workload_uuid"] for r in verdicts + statuses))
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


def instant_text(value: datetime | None) -> str:
    """An instant in UTC to the millisecond (``2026-03-01T12:00:00.000Z``); None as a dash."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# --------------------------------------------------------------------------------------------
# The Dagster check (pipelines/defs/checks.py wraps it; it warns, never blocks)


def no_new_regressions(connection: duckdb.DuckDBPyConnection) -> tuple[bool, dict[str, Any]]:
    """No regression in what `tracehouse changes` compares by default (each source's previous
    snapshot and its current one): a result first seen in the current snapshot slower than the
    same solution's earlier results on the same comparison key by at least the configured
    relative change and z-score (sql/marts/latency_verdicts.sql, TRACEHOUSE_REGRESSION_*)."""
    snapshots = _snapshots(connection)
    windows = change_windows(snapshots, since=None, source=None) if snapshots else []
    _register_windows(connection, windows)
    try:
        found = _verdicts(connection, ("regression",))
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
