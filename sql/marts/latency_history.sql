-- Every distinct latency result the warehouse has seen, over every snapshot of every source
-- (run_history), with when it was first seen: the input of latency_verdicts, regressions and
-- record_events. Only ranges in which the run may rank (sql/rank/run_rankings.sql) carry a
-- comparable latency. A result is (solution, comparison key, observed_at, latency_ns): the
-- same line appended twice, the same run read from two sources, or a line kept across
-- revisions is one result. It is represented by its first range: the one whose snapshot was
-- built first (then the source and run_id break ties), so a source that goes back to an
-- earlier revision brings back results it had already seen, first seen where they were.
-- Results are ordered by first_seen_at (when that snapshot was built), then observed_at.
WITH ranges AS (
    SELECT h.*, s.built_at
    FROM run_history AS h
    JOIN source_snapshots AS s
        ON s.source = h.source AND s.snapshot_number = h.first_snapshot_number
    WHERE h.eligible
),
-- The first range's columns come from one arg_min of a struct: an arg_min per column compared
-- the key once per column (3.3x slower at 1,000,000 runs).
firsts AS (
    SELECT
        solution,
        comparison_key,
        observed_at,
        latency_ns,
        arg_min(
            {
                'run_id': run_id,
                'definition': definition,
                'workload_uuid': workload_uuid,
                'hardware': hardware,
                'source': source,
                'first_snapshot_number': first_snapshot_number,
                'first_snapshot_id': first_snapshot_id
            },
            (built_at, source, run_id)
        ) AS first_range,
        min(built_at) AS first_seen_at
    FROM ranges
    GROUP BY solution, comparison_key, observed_at, latency_ns
)
SELECT
    solution,
    comparison_key,
    first_range.run_id,
    first_range.definition,
    first_range.workload_uuid,
    first_range.hardware,
    observed_at,
    latency_ns,
    first_range.source,
    first_range.first_snapshot_number,
    first_range.first_snapshot_id,
    first_seen_at
FROM firsts
