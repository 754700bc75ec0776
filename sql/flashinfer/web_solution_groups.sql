-- Each solution's evaluated lines of a web workload group reduced once, per source scope,
-- hardware scope, definition, group and solution: web_ratio_entries and web_solution_scores
-- both start from it, before the baseline maps multiply the groups. "Passing" is a PASSED line
-- with a latency > 0 (fib-metrics.md §6.2).
-- Computed once per distinct set of evaluated lines (web_hardware_scopes.same_lines_as), then
-- given to every scope that holds that set.
-- web_hardware_scopes is read twice, computed once (MATERIALIZED): inlined twice, it made
-- planning the web views over a small warehouse up to twice as slow.
WITH scopes AS MATERIALIZED (
    SELECT source, hardware, same_lines_as FROM web_hardware_scopes
),
computed AS (
    SELECT
        t.source,
        t.hardware,
        t.definition,
        t.workload_group,
        t.solution,
        arg_max(t.latency_ms, t.trace_order) FILTER (WHERE t.status = 'PASSED' AND t.latency_ms > 0)
            AS last_passing_latency_ms,
        min(t.latency_ms) FILTER (WHERE t.status = 'PASSED' AND t.latency_ms > 0)
            AS min_passing_latency_ms,
        bool_or(t.status = 'PASSED' AND t.latency_ms > 0) AS passed,
        bool_or(t.status IS DISTINCT FROM 'PASSED') AS failed
    FROM web_scoped_traces AS t
    SEMI JOIN scopes AS h
        ON h.source = t.source AND h.hardware = t.hardware AND h.same_lines_as = h.hardware
    WHERE t.has_evaluation
    GROUP BY ALL
)
SELECT c.* REPLACE (h.hardware AS hardware)
FROM computed AS c
JOIN scopes AS h ON h.source = c.source AND h.same_lines_as = c.hardware
