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
    SELECT h.solution, h.comparison_key, h.observed_at, h.latency_ns, h.source, h.run_id,
           h.first_snapshot_number, s.built_at
    FROM run_history AS h
    JOIN source_snapshots AS s
        ON s.source = h.source AND s.snapshot_number = h.first_snapshot_number
    WHERE h.eligible
),
-- The first range is found by its key alone, (built_at, source, run_id) with the snapshot
-- number that makes it one range, and its other columns are read back from run_history: an
-- arg_min carrying every column as its value took 2.5 s of 3.1 at 1,000,000 runs, this 1.6.
firsts AS (
    SELECT
        solution,
        comparison_key,
        observed_at,
        latency_ns,
        min({
            'built_at': built_at,
            'source': source,
            'run_id': run_id,
            'first_snapshot_number': first_snapshot_number
        }) AS first_range,
        min(built_at) AS first_seen_at
    FROM ranges
    GROUP BY solution, comparison_key, observed_at, latency_ns
)
SELECT
    f.solution,
    f.comparison_key,
    h.run_id,
    h.definition,
    h.workload_uuid,
    h.hardware,
    f.observed_at,
    f.latency_ns,
    h.source,
    h.first_snapshot_number,
    h.first_snapshot_id,
    f.first_seen_at
FROM firsts AS f
JOIN run_history AS h
    ON h.source = f.first_range.source AND h.run_id = f.first_range.run_id
    AND h.first_snapshot_number = f.first_range.first_snapshot_number
