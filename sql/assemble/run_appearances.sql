-- The runs of one source ($source_name) that appear with its new snapshot ($snapshot_number):
-- present in the new snapshot with no open run_history range of the same run, comparison key
-- and eligibility. A run that stays costs no row; one that comes back opens a new range.
-- Only the runs history_in_scope(run_id) says are compared (the caller's macro: every run, or
-- those a build touched when every other one is known to be as it was).
WITH open_ranges AS (
    SELECT a.run_id, a.comparison_key, a.eligible
    FROM run_appearances AS a
    WHERE a.source = $source_name AND history_in_scope(a.run_id)
      AND NOT EXISTS (
          SELECT 1 FROM run_disappearances AS d
          WHERE d.source = a.source AND d.run_id = a.run_id AND history_in_scope(d.run_id)
            AND d.first_snapshot_number = a.first_snapshot_number
      )
)
SELECT
    r.run_id,
    r.comparison_key,
    k.eligible,
    $snapshot_number::BIGINT AS first_snapshot_number,
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
WHERE r.source = $source_name AND history_in_scope(r.run_id)
  AND NOT EXISTS (
      SELECT 1 FROM open_ranges AS o
      WHERE o.run_id = r.run_id AND o.comparison_key IS NOT DISTINCT FROM r.comparison_key
        AND o.eligible = k.eligible
  )
