-- Trace lines FlashInfer-Bench's Python scorer reads, per source scope, once per hardware scope they belong to:
-- lines with a solution and an evaluation (`"evaluation": null` lines are skipped by every
-- score). `latency_ms` is what its model holds for a PASSED line (default 0.0 when the
-- performance block has no latency); `invalid_performance` is its rule-5 test (latency ≤ 0).
SELECT
    s.source,
    s.hardware AS scope_hardware,
    t.solution,
    t.definition,
    t.workload_uuid,
    t.status,
    t.status = 'PASSED' AS passed,
    CASE WHEN t.status = 'PASSED' AND t.has_performance THEN coalesce(t.latency_ms, 0.0) END
        AS latency_ms,
    t.status = 'PASSED' AND (NOT t.has_performance OR coalesce(t.latency_ms, 0.0) <= 0)
        AS invalid_performance
FROM fib_hardware_scopes AS s
JOIN fib_trace_lines AS t
    ON t.source = s.source AND t.has_evaluation AND t.solution IS NOT NULL
    AND (s.hardware = 'all' OR t.hardware = s.hardware)
