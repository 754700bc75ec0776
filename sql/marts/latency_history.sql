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
)
SELECT
    solution,
    comparison_key,
    arg_min(run_id, (built_at, source, run_id)) AS run_id,
    arg_min(definition, (built_at, source, run_id)) AS definition,
    arg_min(workload_uuid, (built_at, source, run_id)) AS workload_uuid,
    arg_min(hardware, (built_at, source, run_id)) AS hardware,
    observed_at,
    latency_ns,
    arg_min(source, (built_at, source, run_id)) AS source,
    arg_min(first_snapshot_number, (built_at, source, run_id)) AS first_snapshot_number,
    arg_min(first_snapshot_id, (built_at, source, run_id)) AS first_snapshot_id,
    min(built_at) AS first_seen_at
FROM ranges
GROUP BY solution, comparison_key, observed_at, latency_ns
