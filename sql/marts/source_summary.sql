-- One row per source the warehouse holds: its current (latest) snapshot and what it
-- contributes. `tracehouse sources` prints it.
WITH latest AS (
    SELECT *
    FROM source_snapshots
    QUALIFY row_number() OVER (PARTITION BY source ORDER BY snapshot_number DESC) = 1
),
run_counts AS (
    SELECT r.source, count(*) AS runs, count(*) FILTER (WHERE k.eligible) AS eligible_runs
    FROM runs AS r
    JOIN run_rankings AS k USING (run_id)
    GROUP BY r.source
),
reject_counts AS (
    SELECT source, count(*) AS rejects FROM rejects GROUP BY source
),
definition_counts AS (
    SELECT source, count(*) AS definitions FROM definitions GROUP BY source
),
solution_counts AS (
    SELECT source, count(*) AS solutions FROM implementations GROUP BY source
)
SELECT
    l.source,
    l.uri,
    coalesce(l.resolved_sha, l.requested_revision) AS revision,
    l.snapshot_number,
    l.snapshot_id,
    l.built_at,
    coalesce(d.definitions, 0) AS definitions,
    coalesce(s.solutions, 0) AS solutions,
    coalesce(r.runs, 0) AS runs,
    coalesce(r.eligible_runs, 0) AS eligible_runs,
    coalesce(j.rejects, 0) AS rejects
FROM latest AS l
LEFT JOIN run_counts AS r USING (source)
LEFT JOIN reject_counts AS j USING (source)
LEFT JOIN definition_counts AS d USING (source)
LEFT JOIN solution_counts AS s USING (source)
