-- Per map, hardware scope and web definition: nWorkloads (usable groups), maxRatio (the curve
-- grid's end, at least 1), and whether the leaderboard includes it (web_definition_scopes).
WITH ratios AS (
    SELECT source, baseline_map, hardware, definition, max(max_passing_ratio) AS max_passing_ratio
    FROM web_ratio_entries
    GROUP BY ALL
)
SELECT
    d.source,
    d.baseline_map,
    d.hardware,
    d.definition,
    d.web_order,
    d.n_workloads,
    greatest(1.0, coalesce(r.max_passing_ratio, 1.0)) AS max_ratio,
    d.on_leaderboard
FROM web_definition_scopes AS d
LEFT JOIN ratios AS r USING (source, baseline_map, hardware, definition)
