-- Per map, hardware scope and web definition: its position on the site, nWorkloads (usable
-- groups) and whether the leaderboard includes it (≥ 1 solution and ≥ 1 line). What the author
-- ranking needs; web_definition_stats adds the curve grid's end, which costs the ratio entries.
WITH usable AS (
    SELECT source, baseline_map, hardware, definition, count(*) FILTER (WHERE usable) AS n_workloads
    FROM web_groups
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
    coalesce(l.n_lines, 0) > 0
        AND EXISTS (
            SELECT 1 FROM web_solutions AS s WHERE s.source = d.source AND s.definition = d.definition
        )
        AS on_leaderboard
FROM web_map_names AS m
CROSS JOIN web_hardware_scopes AS h
JOIN web_definitions AS d USING (source)
LEFT JOIN usable AS u USING (source, baseline_map, hardware, definition)
LEFT JOIN lines AS l USING (source, hardware, definition)
