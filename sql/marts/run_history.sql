-- run_history: one row per run and snapshot range of its source — the first and the last
-- snapshot in which the run was present with the same comparison key and eligibility. Stored
-- incrementally (run_appearances, run_disappearances: a row when a range opens or ends), so a
-- new snapshot costs what changed. A range still open ends at its source's latest snapshot.
WITH latest AS (
    SELECT source, max(snapshot_number) AS snapshot_number
    FROM source_snapshots
    GROUP BY source
),
ranges AS (
    SELECT
        a.*,
        coalesce(d.absent_snapshot_number - 1, l.snapshot_number) AS last_snapshot_number,
        d.absent_snapshot_number IS NULL AS current
    FROM run_appearances AS a
    JOIN latest AS l USING (source)
    LEFT JOIN run_disappearances AS d USING (source, run_id, first_snapshot_number)
)
SELECT
    r.source,
    r.run_id,
    r.first_snapshot_number,
    f.snapshot_id AS first_snapshot_id,
    r.last_snapshot_number,
    t.snapshot_id AS last_snapshot_id,
    r.current,
    r.comparison_key,
    r.eligible,
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
FROM ranges AS r
LEFT JOIN source_snapshots AS f
    ON f.source = r.source AND f.snapshot_number = r.first_snapshot_number
LEFT JOIN source_snapshots AS t
    ON t.source = r.source AND t.snapshot_number = r.last_snapshot_number
