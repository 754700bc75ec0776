-- The runs of one source (history_source()) in its new snapshot, each with the eligibility
-- run_rankings gives it: what run_appearances.sql and run_disappearances.sql compare the open
-- ranges (history_open_ranges.sql) with. Only the runs history_in_scope(run_id) says are
-- compared (the caller's macro, as in history_open_ranges.sql).
SELECT
    r.run_id,
    r.comparison_key,
    k.eligible,
    r.definition,
    r.solution,
    r.workload_uuid,
    r.hardware,
    r.status,
    r.latency_ns,
    r.observed_at,
    r.run_digest,
    r.source_file,
    r.source_line
FROM runs AS r
JOIN run_rankings AS k USING (run_id)
WHERE r.source = history_source() AND history_in_scope(r.run_id)
