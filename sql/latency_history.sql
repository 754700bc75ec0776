-- The input of sql/regressions.sql: one row per distinct latency result of a named solution on
-- a comparison key, with the order in which the warehouse came to know it. Only runs that may
-- rank (sql/run_rankings.sql) carry a comparable latency. A result is (solution, comparison key,
-- observed_at, latency_ns): the same line appended twice, or the same run read from two
-- sources, is one result, represented by its smallest run_id.
-- Results are ordered by first_seen_at (when the snapshot that first held the run was built),
-- then observed_at, then run_id. The warehouse keeps one snapshot per build today, so every
-- result shares first_seen_at and re-runs are ordered by observed_at; once runs are remembered
-- across revisions (run_history), first_seen_at comes from each run's first snapshot.
SELECT
    r.solution,
    r.comparison_key,
    min(r.run_id) AS run_id,
    any_value(r.definition) AS definition,
    any_value(r.workload_uuid) AS workload_uuid,
    any_value(r.hardware) AS hardware,
    r.observed_at,
    r.latency_ns,
    any_value(r.snapshot_id) AS first_snapshot_id,
    min(s.built_at) AS first_seen_at
FROM runs AS r
JOIN run_rankings AS k ON k.run_id = r.run_id AND k.eligible
LEFT JOIN source_snapshots AS s ON s.snapshot_id = r.snapshot_id AND s.source = r.source
WHERE r.solution IS NOT NULL
GROUP BY r.solution, r.comparison_key, r.observed_at, r.latency_ns
