-- Per map: the solutions that get their own web curve and score (a definition's solutions not
-- named by the map for it), and `ui_hidden`: the leaderboard hides every author who owns a
-- solution the map names for any definition (FlashInfer-Bench section.tsx).
WITH hidden AS (
    SELECT DISTINCT n.source, n.baseline_map, s.author
    FROM web_baseline_names AS n
    JOIN web_solutions AS s ON s.source = n.source AND s.solution = n.solution
)
SELECT
    s.source,
    m.baseline_map,
    s.definition,
    s.solution,
    s.author,
    s.list_order,
    n.solution IS NOT NULL AS is_baseline,
    h.author IS NOT NULL AS ui_hidden
FROM web_map_names AS m
CROSS JOIN web_solutions AS s
LEFT JOIN web_baseline_names AS n
    ON n.source = s.source AND n.baseline_map = m.baseline_map AND n.definition = s.definition
    AND n.solution = s.solution
LEFT JOIN hidden AS h ON h.source = s.source AND h.baseline_map = m.baseline_map AND h.author = s.author
