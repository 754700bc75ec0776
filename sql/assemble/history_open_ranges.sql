-- The open run_history ranges of one source (history_source()) before its new snapshot: a run
-- appeared and has not disappeared since. run_appearances.sql and run_disappearances.sql
-- compare them with history_present_runs.sql. Only the runs history_in_scope(run_id) says are
-- compared (the caller's macro: every run, or those a build touched when every other one is
-- known to be as it was; then the caller keeps this relation as a small table, read once).
SELECT a.run_id, a.comparison_key, a.eligible, a.first_snapshot_number
FROM run_appearances AS a
WHERE a.source = history_source() AND history_in_scope(a.run_id)
  AND NOT EXISTS (
      SELECT 1 FROM run_disappearances AS d
      WHERE d.source = a.source AND d.run_id = a.run_id AND history_in_scope(d.run_id)
        AND d.first_snapshot_number = a.first_snapshot_number
  )
