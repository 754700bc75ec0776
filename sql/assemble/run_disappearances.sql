-- The run_history ranges of one source that end with its new snapshot ($snapshot_number): open
-- before it (history_open_ranges.sql), and no run of the new snapshot
-- (history_present_runs.sql) has the same run id, comparison key and eligibility.
SELECT
    o.run_id,
    o.comparison_key,
    o.eligible,
    o.first_snapshot_number,
    $snapshot_number::BIGINT AS absent_snapshot_number
FROM history_open_ranges AS o
WHERE NOT EXISTS (
    SELECT 1 FROM history_present_runs AS p
    WHERE p.run_id = o.run_id AND p.comparison_key IS NOT DISTINCT FROM o.comparison_key
      AND p.eligible = o.eligible
)
