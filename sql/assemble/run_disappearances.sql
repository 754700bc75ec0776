-- The run_history ranges of one source ($source_name) that end with its new snapshot
-- ($snapshot_number): open before it, and no run of the new snapshot has the same run id,
-- comparison key and eligibility. Only the runs history_in_scope(run_id) says are compared (the
-- caller's macro: every run, or those a build touched when every other one is as it was).
SELECT
    a.run_id,
    a.comparison_key,
    a.eligible,
    a.first_snapshot_number,
    $snapshot_number::BIGINT AS absent_snapshot_number
FROM run_appearances AS a
WHERE a.source = $source_name AND history_in_scope(a.run_id)
  AND NOT EXISTS (
      SELECT 1 FROM run_disappearances AS d
      WHERE d.source = a.source AND d.run_id = a.run_id AND history_in_scope(d.run_id)
        AND d.first_snapshot_number = a.first_snapshot_number
  )
  AND NOT EXISTS (
      SELECT 1 FROM runs AS r
      JOIN run_rankings AS k USING (run_id)
      WHERE r.source = $source_name AND r.run_id = a.run_id AND history_in_scope(r.run_id)
        AND r.comparison_key IS NOT DISTINCT FROM a.comparison_key AND k.eligible = a.eligible
  )
