-- The web leaderboard's per-solution score, computeSolutionScore (fib-metrics.md §6.5), per map
-- and hardware scope, for every solution of a web definition. It mirrors FlashInfer-Bench's
-- Python score except that: only the definition's own web trace lines count; the baseline of
-- each workload group is the map's name for the device of the group's first line, with its
-- minimum PASSED latency > 0 (any GPU); nothing raises. outcome `null` (reason):
--   is_baseline             the map names this solution for the definition
--   no_comparable_workload  no group with a baseline latency that the solution attempted
--                           (also every group when the map has no entry for the definition)
-- A PASSED line with a missing or zero latency still counts as attempted: if it is the only
-- one of its group the ratio is NaN, and so is avg_speedup, as on the site.
-- web_hardware_scopes is read twice, computed once (MATERIALIZED): inlined twice, it made
-- planning the web views over a small warehouse up to twice as slow.
WITH scopes AS MATERIALIZED (
    SELECT source, hardware, same_lines_as FROM web_hardware_scopes
),
per_group AS (
    SELECT c.source, c.baseline_map, t.hardware, c.definition, c.solution, t.workload_group,
           t.min_passing_latency_ms AS best_ms, t.failed
    FROM (
        SELECT DISTINCT source, baseline_map, definition, solution
        FROM web_candidates
        WHERE NOT is_baseline
    ) AS c
    JOIN web_solution_groups AS t
        ON t.source = c.source AND t.definition = c.definition AND t.solution = c.solution
    -- scored once per distinct set of evaluated lines (web_hardware_scopes.same_lines_as)
    SEMI JOIN scopes AS h
        ON h.source = t.source AND h.hardware = t.hardware AND h.same_lines_as = h.hardware
),
-- per solution at once: its score over the groups with a baseline latency, and whether any
-- of its groups failed (one pass over per_group, not one per use)
scored AS (
    SELECT
        p.source,
        p.baseline_map,
        p.hardware,
        p.definition,
        p.solution,
        nullif(count(*) FILTER (WHERE g.baseline_min_latency_ms IS NOT NULL), 0) AS workloads,
        -- the site adds the ratios in group order, one by one
        list_reduce(
            list(
                CASE WHEN p.best_ms IS NULL THEN 'NaN'::DOUBLE
                     ELSE g.baseline_min_latency_ms / p.best_ms END
                ORDER BY g.first_order
            ) FILTER (WHERE g.baseline_min_latency_ms IS NOT NULL),
            lambda a, b: a + b
        ) AS ratio_sum,
        count(*) FILTER (
            WHERE g.baseline_min_latency_ms IS NOT NULL
            AND p.best_ms IS NOT NULL AND g.baseline_min_latency_ms / p.best_ms > 1.0
            AND NOT isnan(g.baseline_min_latency_ms / p.best_ms)
        ) AS wins,
        bool_or(p.failed) AS has_failure
    FROM per_group AS p
    LEFT JOIN web_groups AS g USING (source, baseline_map, hardware, definition, workload_group)
    GROUP BY ALL
)
SELECT
    c.source,
    c.baseline_map,
    h.hardware,
    c.definition,
    c.solution,
    c.author,
    c.is_baseline,
    c.list_order,
    c.ui_hidden,
    CASE WHEN c.is_baseline OR s.workloads IS NULL THEN 'null' ELSE 'score' END AS outcome,
    CASE
        WHEN c.is_baseline THEN 'is_baseline'
        WHEN s.workloads IS NULL THEN 'no_comparable_workload'
    END AS reason,
    CASE WHEN s.workloads IS NOT NULL AND NOT c.is_baseline THEN
        CASE WHEN s.has_failure THEN 0.0::DOUBLE ELSE s.ratio_sum / s.workloads END
    END AS avg_speedup,
    CASE WHEN s.workloads IS NOT NULL AND NOT c.is_baseline THEN
        CASE WHEN s.has_failure THEN 0.0::DOUBLE ELSE 1.0::DOUBLE END
    END AS success_rate,
    CASE WHEN s.workloads IS NOT NULL AND NOT c.is_baseline THEN
        CASE WHEN s.has_failure THEN 0.0::DOUBLE ELSE s.wins / s.workloads END
    END AS win_rate,
    CASE WHEN NOT c.is_baseline THEN s.workloads END AS workloads
FROM web_candidates AS c
JOIN scopes AS h USING (source)
LEFT JOIN scored AS s
    ON s.source = c.source AND s.baseline_map = c.baseline_map AND s.hardware = h.same_lines_as
    AND s.definition = c.definition AND s.solution = c.solution
