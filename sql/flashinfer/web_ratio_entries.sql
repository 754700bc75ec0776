-- The web's per-group ratio entries behind fast_p and coverage (fib-metrics.md §6.2 step 4): in
-- each usable group, every solution of the definition's list other than the group's baseline
-- gets baseline-first-latency / its latency from its LAST PASSED line with a latency > 0, else
-- 0 (an attempt that never passed). `max_passing_ratio` also counts overwritten passes, as the
-- web's maxRatio does. fast_p at any threshold p: the share of entries with ratio >= p.
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
    coalesce(
        arg_max(g.baseline_first_latency_ms / t.latency_ms, t.trace_order)
            FILTER (WHERE t.status = 'PASSED' AND t.latency_ms > 0),
        0.0
    ) AS ratio,
    max(g.baseline_first_latency_ms / t.latency_ms)
        FILTER (WHERE t.status = 'PASSED' AND t.latency_ms > 0) AS max_passing_ratio,
    bool_or(t.status = 'PASSED' AND t.latency_ms > 0) AS passed
FROM web_groups AS g
JOIN web_scoped_traces AS t
    ON t.source = g.source AND t.hardware = g.hardware AND t.definition = g.definition
    AND t.workload_group = g.workload_group AND t.has_evaluation
JOIN web_solutions AS s
    ON s.source = t.source AND s.definition = t.definition AND s.solution = t.solution
WHERE g.usable AND t.solution <> g.baseline_solution
GROUP BY ALL
