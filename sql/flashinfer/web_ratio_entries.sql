-- The web's per-group ratio entries behind fast_p and coverage (fib-metrics.md §6.2 step 4): in
-- each usable group, every solution of the definition's list other than the group's baseline
-- gets baseline-first-latency / its latency from its LAST PASSED line with a latency > 0, else
-- 0 (an attempt that never passed). `max_passing_ratio` also counts overwritten passes, as the
-- web's maxRatio does. fast_p at any threshold p: the share of entries with ratio >= p.
-- Each solution's lines of a workload group are reduced once (web_solution_groups), before the
-- group's baseline (one per map) is known: the ratio of the last passing line is the baseline's
-- latency over that line's latency, and the best ratio over the smallest passing latency (usable
-- groups have a baseline latency > 0, so the division keeps the order).
SELECT
    g.source,
    g.baseline_map,
    g.hardware,
    g.definition,
    g.workload_group,
    g.first_order,
    g.baseline_solution,
    t.solution,
    s.author,
    coalesce(g.baseline_first_latency_ms / t.last_passing_latency_ms, 0.0) AS ratio,
    g.baseline_first_latency_ms / t.min_passing_latency_ms AS max_passing_ratio,
    t.passed
FROM web_groups AS g
JOIN web_solution_groups AS t
    ON t.source = g.source AND t.hardware = g.hardware AND t.definition = g.definition
    AND t.workload_group = g.workload_group
JOIN (SELECT DISTINCT source, definition, solution, author FROM web_solutions) AS s
    ON s.source = t.source AND s.definition = t.definition AND s.solution = t.solution
WHERE g.usable AND t.solution <> g.baseline_solution
