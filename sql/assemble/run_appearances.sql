-- The runs of one source that appear with its new snapshot ($snapshot_number): present in the
-- new snapshot (history_present_runs.sql) with no open run_history range
-- (history_open_ranges.sql) of the same run, comparison key and eligibility. A run that stays
-- costs no row; one that comes back opens a new range.
SELECT
    p.run_id,
    p.comparison_key,
    p.eligible,
    $snapshot_number::BIGINT AS first_snapshot_number,
    p.definition,
    p.solution,
    p.workload_uuid,
    p.hardware,
    p.status,
    p.latency_ns,
    p.observed_at,
    p.run_digest,
    p.source_file,
    p.source_line
FROM history_present_runs AS p
WHERE NOT EXISTS (
    SELECT 1 FROM history_open_ranges AS o
    WHERE o.run_id = p.run_id AND o.comparison_key IS NOT DISTINCT FROM p.comparison_key
      AND o.eligible = p.eligible
)
