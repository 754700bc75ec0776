"""The SQL of `tracehouse changes`: the source snapshots, and one query per section of the
report (verdicts, status changes, solutions and workloads appeared or gone, record holders,
leader changes), each over the windows the command compares.
"""

from __future__ import annotations

# What changed between two states of each source.
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
_VERDICTS_SELECT = """
SELECT v.source, v.verdict, v.solution, v.definition, v.workload_uuid, v.hardware,
       v.comparison_key, v.run_id, v.observed_at, v.latency_ns, v.history_size,
       v.history_mean_ns, v.history_stddev_ns, v.relative_change, v.z_score,
       v.previous_latency_ns, v.first_snapshot_number
FROM latency_verdicts AS v
JOIN change_windows AS w
    ON w.source = v.source
    AND v.first_snapshot_number > w.before_number AND v.first_snapshot_number <= w.after_number
"""
_VERDICTS_ORDER = """
ORDER BY v.source, v.verdict, v.solution, v.definition, v.workload_uuid, v.hardware,
         v.first_seen_at, v.observed_at, v.run_id
"""
# The verdicts a reader of the changes uses: those of the kinds in $verdicts (those it may
# list), and those of the runs in $run_ids (the leaders and record holders a change report asks
# is_a_change about), in _VERDICTS_ORDER. Most verdicts of a window are a first result or
# within noise, neither listed: not turned into Python rows (a first build of 1,000,000 runs
# has as many verdicts).
LISTED_VERDICTS_SQL = (
    _VERDICTS_SELECT
    + """
WHERE v.verdict IN (SELECT unnest($verdicts::VARCHAR[]))
   OR v.run_id IN (SELECT unnest($run_ids::VARCHAR[]))
"""
    + _VERDICTS_ORDER
)

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


def _statuses(column: str) -> str:
    """A group's distinct statuses in order, joined by '/' (NULL without any): what
    string_agg(DISTINCT …, '/' ORDER BY …) gives, at a third of its time over 1M runs (a
    DISTINCT aggregate with an ORDER BY sorts every group on its own)."""
    return (
        f"CASE WHEN count({column}) > 0 "
        f"THEN array_to_string(list_sort(list_distinct(list({column}))), '/') END"
    )


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
    f"""
outcomes AS (
    SELECT side, source, solution, definition, workload_uuid, hardware,
           bool_or(status = 'PASSED') AS passes,
           {_statuses("status")} AS statuses
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
           {_statuses("h.status")} AS statuses
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
"""  # noqa: S608  (_statuses is our own expression)
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

# Axis values of the workloads in $uuids, to name a workload by its shape (M=8).
WORKLOAD_AXES_SQL = """
SELECT DISTINCT definition, workload_uuid, axes_json
FROM workloads
WHERE workload_uuid IN (SELECT unnest($uuids::VARCHAR[]))
ORDER BY ALL
"""
