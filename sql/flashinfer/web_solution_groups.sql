-- Each solution's evaluated lines of a web workload group reduced once, per source scope,
-- hardware scope, definition, group and solution: web_ratio_entries and web_solution_scores
-- both start from it, before the baseline maps multiply the groups. "Passing" is a PASSED line
-- with a latency > 0 (fib-metrics.md §6.2).
SELECT
    source,
    hardware,
    definition,
    workload_group,
    solution,
    arg_max(latency_ms, trace_order) FILTER (WHERE status = 'PASSED' AND latency_ms > 0)
        AS last_passing_latency_ms,
    min(latency_ms) FILTER (WHERE status = 'PASSED' AND latency_ms > 0)
        AS min_passing_latency_ms,
    bool_or(status = 'PASSED' AND latency_ms > 0) AS passed,
    bool_or(status IS DISTINCT FROM 'PASSED') AS failed
FROM web_scoped_traces
WHERE has_evaluation
GROUP BY ALL
