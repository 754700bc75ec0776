-- Per map, hardware scope and web definition: nWorkloads (usable groups), maxRatio (the curve
-- grid's end, at least 1), and whether the leaderboard includes it (≥ 1 solution and ≥ 1 line).
WITH usable AS (
    SELECT source, baseline_map, hardware, definition, count(*) FILTER (WHERE usable) AS n_workloads
    FROM web_groups
    GROUP BY ALL
),
ratios AS (
    SELECT source, baseline_map, hardware, definition, max(max_passing_ratio) AS max_passing_ratio
    FROM web_ratio_entries
    GROUP BY ALL
),
lines AS (
    SELECT source, hardware, definition, count(*) AS n_lines FROM web_scoped_traces GROUP BY ALL
)
SELECT
    h.source,
    m.baseline_map,
    h.hardware,
    d.definition,
    d.web_order,
    coalesce(u.n_workloads, 0) AS n_workloads,
    greatest(1.0, coalesce(r.max_passing_ratio, 1.0)) AS max_ratio,
    coalesce(l.n_lines, 0) > 0
        AND EXISTS (
            SELECT 1 FROM web_solutions AS s WHERE s.source = d.source AND s.definition = d.definition
        )
        AS on_leaderboard
FROM web_map_names AS m
CROSS JOIN web_hardware_scopes AS h
JOIN web_definitions AS d USING (source)
LEFT JOIN usable AS u USING (source, baseline_map, hardware, definition)
LEFT JOIN ratios AS r USING (source, baseline_map, hardware, definition)
LEFT JOIN lines AS l USING (source, hardware, definition)
