-- FlashInfer-Bench's TraceSet.get_best_trace(definition) and len(filter_traces(definition))
-- with their default tolerances (fib-metrics.md §5), per source scope and hardware scope: among the trace lines
-- filed under the definition (every solution, baselines included), the PASSED ones with
-- max_absolute_error ≤ 1e-2 and max_relative_error ≤ 1e-2 (NaN, stored as NULL, never passes), the one with
-- the largest speedup_factor — FlashInfer-Bench's speedup against the PyTorch reference, not
-- against the baseline. Ties go to the first in load order. outcome `none`: nothing qualifies.
-- For other tolerances, filter trace_lines the same way with your own bounds.
WITH qualifying AS (
    SELECT
        h.source,
        h.hardware,
        t.*  EXCLUDE (source, hardware),
        t.hardware AS trace_hardware,
        row_number() OVER (
            PARTITION BY h.source, h.hardware, t.definition
            ORDER BY coalesce(t.speedup_factor, 0.0) DESC,
                     string_split(t.source_file, '/'), t.source_line, t.record_index,
                     t.member_source
        ) AS position
    FROM fib_hardware_scopes AS h
    JOIN fib_trace_lines AS t
        ON t.source = h.source AND t.has_evaluation AND (h.hardware = 'all' OR t.hardware = h.hardware)
    WHERE t.status = 'PASSED'
      AND t.max_absolute_error <= 1e-2
      AND t.max_relative_error <= 1e-2
),
counted AS (
    SELECT source, hardware, definition, count(*) AS n_filter_traces
    FROM qualifying
    GROUP BY ALL
)
SELECT
    h.source,
    h.hardware,
    d.definition,
    CASE WHEN q.solution IS NULL AND q.source_file IS NULL THEN 'none' ELSE 'trace' END AS outcome,
    coalesce(c.n_filter_traces, 0) AS n_filter_traces,
    1e-2 AS max_abs_error_bound,
    1e-2 AS max_rel_error_bound,
    q.solution,
    q.workload_uuid,
    q.trace_hardware,
    q.timestamp,
    q.latency_ms,
    q.speedup_factor,
    q.max_absolute_error,
    q.max_relative_error,
    q.source_file,
    q.source_line
FROM fib_hardware_scopes AS h
JOIN fib_definitions AS d ON d.source = h.source
LEFT JOIN qualifying AS q
    ON q.source = h.source AND q.hardware = h.hardware AND q.definition = d.definition
    AND q.position = 1
LEFT JOIN counted AS c
    ON c.source = h.source AND c.hardware = h.hardware AND c.definition = d.definition
