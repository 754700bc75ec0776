-- The web leaderboard's coverage (fib-metrics.md §6.4), per map and hardware scope, for one
-- definition (level author_definition) and over every leaderboard definition (author_all):
--   attempted = the author's ratio entries (failures are attempts)
--   total     = Σ over definitions of nWorkloads × the author's candidate solutions there
--   percent   = attempted / total × 100 (0 when total = 0)
-- Only leaderboard definitions with at least one usable group count.
-- An author with candidates but no entry is listed here (0 %) although it has no fast_p curve.
-- Each view read twice here is computed once (MATERIALIZED), not once per reference.
WITH leaderboard AS MATERIALIZED (
    SELECT * FROM web_definition_stats WHERE on_leaderboard AND n_workloads > 0
),
candidates AS MATERIALIZED (
    SELECT * FROM web_candidates WHERE NOT is_baseline AND author IS NOT NULL
),
per_definition AS (
    SELECT
        c.source,
        c.baseline_map,
        d.hardware,
        c.definition,
        c.author,
        any_value(c.ui_hidden) AS ui_hidden,
        count(*) * any_value(d.n_workloads) AS total,
        any_value(d.n_workloads) AS n_workloads
    FROM candidates AS c
    JOIN leaderboard AS d USING (source, baseline_map, definition)
    GROUP BY ALL
),
attempts AS (
    SELECT e.source, e.baseline_map, e.hardware, e.definition, c.author, count(*) AS attempted
    FROM web_ratio_entries AS e
    JOIN candidates AS c USING (source, baseline_map, definition, solution)
    GROUP BY ALL
),
by_definition AS (
    SELECT
        p.source,
        p.baseline_map,
        p.hardware,
        'author_definition' AS level,
        p.definition,
        p.author,
        coalesce(a.attempted, 0) AS attempted,
        p.total,
        p.n_workloads AS total_workloads,
        p.ui_hidden
    FROM per_definition AS p
    LEFT JOIN attempts AS a USING (source, baseline_map, hardware, definition, author)
),
overall AS (
    SELECT
        source,
        baseline_map,
        hardware,
        'author_all' AS level,
        '*' AS definition,
        author,
        sum(attempted) AS attempted,
        sum(total) AS total,
        NULL AS total_workloads,
        any_value(ui_hidden) AS ui_hidden
    FROM by_definition
    GROUP BY ALL
),
workloads_all AS (
    SELECT source, baseline_map, hardware, sum(n_workloads) AS total_workloads
    FROM leaderboard
    GROUP BY ALL
),
combined AS (
    SELECT * FROM by_definition
    UNION ALL
    SELECT o.* REPLACE (w.total_workloads AS total_workloads)
    FROM overall AS o
    JOIN workloads_all AS w USING (source, baseline_map, hardware)
)
SELECT
    source,
    baseline_map,
    hardware,
    level,
    definition,
    author,
    attempted::BIGINT AS attempted,
    total::BIGINT AS total,
    CASE WHEN total > 0 THEN (attempted / total) * 100 ELSE 0.0 END AS percent,
    attempted::BIGINT AS comparison_count,
    (sum(attempted) OVER (PARTITION BY source, baseline_map, hardware, level, definition))::BIGINT
        AS total_comparisons,
    total_workloads::BIGINT AS total_workloads,
    ui_hidden
FROM combined
