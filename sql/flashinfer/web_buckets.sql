-- The kernel page's faster / slower / incorrect buckets (fib-metrics.md §6.7), per map,
-- hardware scope and threshold p of fast_p_thresholds, for each solution of a definition the
-- map has an entry for, other than the page's baseline: the map's `default`, else its first
-- device entry (device entries are otherwise ignored here). For each group the solution ran:
-- its FIRST line c against the baseline's FIRST line b in the group (any status, any GPU):
-- c not PASSED → incorrect; b or c without a latency (or c's = 0) → slower with no ratio
-- (slower_no_ratio); else faster when b/c >= p, otherwise slower.
WITH page_baselines AS (
    SELECT source, baseline_map, definition, arg_min(solution, CASE WHEN device = 'default' THEN -1 ELSE position END) AS baseline_solution
    FROM web_baseline_maps
    GROUP BY ALL
),
evaluated AS (
    SELECT * FROM web_scoped_traces WHERE has_evaluation
),
firsts AS (
    SELECT
        source,
        hardware,
        definition,
        workload_group,
        solution,
        arg_min(status, trace_order) AS status,
        arg_min_null(latency_ms, trace_order) AS latency_ms
    FROM evaluated
    WHERE solution IS NOT NULL
    GROUP BY ALL
),
classified AS (
    SELECT
        b.source,
        b.baseline_map,
        c.hardware,
        c.definition,
        b.baseline_solution,
        c.solution,
        c.workload_group,
        c.status,
        base.latency_ms / c.latency_ms AS ratio,
        c.status = 'PASSED' AND coalesce(base.latency_ms, 0) <> 0 AND coalesce(c.latency_ms, 0) <> 0
            AS has_ratio
    FROM page_baselines AS b
    JOIN firsts AS c
        ON c.source = b.source AND c.definition = b.definition AND c.solution <> b.baseline_solution
    LEFT JOIN firsts AS base
        ON base.source = c.source AND base.hardware = c.hardware AND base.definition = c.definition
        AND base.workload_group = c.workload_group AND base.solution = b.baseline_solution
)
SELECT
    b.source,
    b.baseline_map,
    h.hardware,
    s.definition,
    b.baseline_solution,
    s.solution,
    s.author,
    t.p,
    t.web_preset,
    count(c.solution) FILTER (WHERE c.status = 'PASSED' AND c.has_ratio AND c.ratio >= t.p)
        AS faster,
    count(c.solution) FILTER (WHERE c.status = 'PASSED' AND NOT (c.has_ratio AND c.ratio >= t.p))
        AS slower,
    count(c.solution) FILTER (WHERE c.status = 'PASSED' AND NOT c.has_ratio) AS slower_no_ratio,
    count(c.solution) FILTER (WHERE c.status IS DISTINCT FROM 'PASSED') AS incorrect
FROM page_baselines AS b
JOIN web_solutions AS s
    ON s.source = b.source AND s.definition = b.definition AND s.solution <> b.baseline_solution
JOIN web_hardware_scopes AS h ON h.source = b.source
CROSS JOIN fast_p_thresholds AS t
LEFT JOIN classified AS c
    ON c.source = b.source AND c.baseline_map = b.baseline_map AND c.hardware = h.hardware
    AND c.definition = s.definition AND c.solution = s.solution
GROUP BY ALL
