-- FlashInfer-Bench's own per-solution score, TraceSet.get_solution_score(S, "baseline")
-- (fib-metrics.md §2), for every loaded solution, per source scope (fib_source_scopes) and hardware scope (`all` = FlashInfer-Bench's
-- figure; a GPU string = the same rule on that GPU's trace lines only).
-- The first rule that applies decides (outcome / reason):
--   error no_baseline            the definition has no solution of author `baseline` (FIB raises)
--   error multiple_baselines     it has several (FIB raises, for the baselines too)
--   none  is_baseline            S is that baseline (FIB returns None: no 1.0 is invented)
--   error invalid_performance    a PASSED line of S, or of the baseline, has latency ≤ 0 (FIB raises)
--   none  no_comparable_workload no workload both the baseline passed and S attempted
--   score (any failure)          S has a non-PASSED line anywhere: every rate is 0.0
--   score                        the mean of baseline/S minimum latencies, win rate (ratio > 1)
-- Runs are matched by solution name across definition files and GPUs, as FlashInfer-Bench does.
-- Each distinct set of lines is scored once: `all` takes its GPU's figures when it holds only
-- that GPU's lines (fib_hardware_scopes.same_lines_as).
WITH computed_scopes AS (
    SELECT source, hardware FROM fib_hardware_scopes WHERE same_lines_as = hardware
),
scoped_traces AS (
    SELECT t.*
    FROM fib_scoped_traces AS t
    SEMI JOIN computed_scopes AS c ON c.source = t.source AND c.hardware = t.scope_hardware
),
baselines AS (
    SELECT
        source,
        definition,
        count(*) AS baseline_count,
        min(solution) AS baseline_solution,
        list(solution ORDER BY solution) AS baseline_names
    FROM fib_solutions
    WHERE author = 'baseline'
    GROUP BY source, definition
),
per_workload AS (
    SELECT
        source,
        scope_hardware,
        solution,
        workload_uuid,
        min(latency_ms) FILTER (WHERE passed) AS best_ms
    FROM scoped_traces
    GROUP BY ALL
),
per_solution AS (
    SELECT
        source,
        scope_hardware,
        solution,
        bool_or(NOT passed) AS has_failure,
        min(workload_uuid) FILTER (WHERE invalid_performance) AS invalid_workload
    FROM scoped_traces
    GROUP BY ALL
),
candidates AS (
    SELECT
        h.source,
        h.hardware,
        s.definition,
        s.solution,
        s.author,
        s.load_order,
        b.baseline_count,
        CASE WHEN b.baseline_count = 1 THEN b.baseline_solution END AS baseline_solution,
        b.baseline_names
    FROM computed_scopes AS h
    JOIN fib_solutions AS s ON s.source = h.source
    LEFT JOIN baselines AS b ON b.source = s.source AND b.definition = s.definition
),
-- The baseline's best latency per workload, once per definition and hardware: aggregated
-- before the candidates join it, so every join below is keyed by (definition, workload) or by
-- solution and grows with runs, not with solutions squared (a join of per_workload with itself
-- on the workload alone paired every solution with every other one).
baseline_workloads AS (
    SELECT b.source, bw.scope_hardware AS hardware, b.definition, bw.workload_uuid, bw.best_ms
    FROM baselines AS b
    JOIN per_workload AS bw ON bw.source = b.source AND bw.solution = b.baseline_solution
    WHERE b.baseline_count = 1 AND bw.best_ms IS NOT NULL
),
ratios AS (
    SELECT
        c.source,
        c.hardware,
        c.solution,
        bw.best_ms / sw.best_ms AS ratio,
        sw.best_ms IS NOT NULL AS solution_passed,
        sw.workload_uuid
    FROM candidates AS c
    JOIN per_workload AS sw
        ON sw.source = c.source AND sw.scope_hardware = c.hardware AND sw.solution = c.solution
    JOIN baseline_workloads AS bw
        ON bw.source = c.source AND bw.hardware = c.hardware AND bw.definition = c.definition
        AND bw.workload_uuid IS NOT DISTINCT FROM sw.workload_uuid
),
compared AS (
    SELECT
        source,
        hardware,
        solution,
        count(*) AS workloads,
        -- FlashInfer-Bench adds the ratios one by one (over a Python set); a left fold in
        -- uuid order matches it within a few ulp.
        list_reduce(list(ratio ORDER BY workload_uuid), lambda a, b: a + b) AS ratio_sum,
        count(*) FILTER (WHERE ratio > 1.0) AS wins
    FROM ratios
    GROUP BY ALL
),
decided AS (
    SELECT
        c.*,
        ps.has_failure,
        ps.invalid_workload,
        bs.invalid_workload AS baseline_invalid_workload,
        coalesce(m.workloads, 0) AS compared_workloads,
        m.ratio_sum,
        m.wins,
        CASE
            WHEN c.baseline_count IS NULL THEN 'no_baseline'
            WHEN c.baseline_count > 1 THEN 'multiple_baselines'
            WHEN c.solution = c.baseline_solution THEN 'is_baseline'
            WHEN ps.invalid_workload IS NOT NULL THEN 'invalid_performance'
            WHEN bs.invalid_workload IS NOT NULL THEN 'baseline_invalid_performance'
            WHEN m.workloads IS NULL THEN 'no_comparable_workload'
        END AS reason
    FROM candidates AS c
    LEFT JOIN per_solution AS ps
        ON ps.source = c.source AND ps.scope_hardware = c.hardware AND ps.solution = c.solution
    LEFT JOIN per_solution AS bs
        ON bs.source = c.source AND bs.scope_hardware = c.hardware
        AND bs.solution = c.baseline_solution
    LEFT JOIN compared AS m
        ON m.source = c.source AND m.hardware = c.hardware AND m.solution = c.solution
),
-- every scope, with the figures of the scope whose lines it holds
scoped AS (
    SELECT d.* REPLACE (h.hardware AS hardware)
    FROM decided AS d
    JOIN fib_hardware_scopes AS h ON h.source = d.source AND h.same_lines_as = d.hardware
)
SELECT
    source,
    hardware,
    definition,
    solution,
    author,
    CASE
        WHEN reason IN ('is_baseline', 'no_comparable_workload') THEN 'none'
        WHEN reason IS NOT NULL THEN 'error'
        ELSE 'score'
    END AS outcome,
    CASE WHEN reason = 'baseline_invalid_performance' THEN 'invalid_performance' ELSE reason END
        AS reason,
    CASE reason
        WHEN 'no_baseline' THEN
            'No baseline solution from author ''baseline'' for definition ''' || definition || ''''
        WHEN 'multiple_baselines' THEN
            'Multiple baseline solutions from author ''baseline'' for definition '''
            || definition || ''': ' || array_to_string(baseline_names, ', ')
        WHEN 'is_baseline' THEN 'the baseline itself is not scored'
        WHEN 'invalid_performance' THEN
            'PASSED trace for solution ''' || solution || ''' workload '''
            || invalid_workload || ''' has invalid performance data'
        WHEN 'baseline_invalid_performance' THEN
            'PASSED trace for solution ''' || baseline_solution || ''' workload '''
            || baseline_invalid_workload || ''' has invalid performance data'
        WHEN 'no_comparable_workload' THEN
            'no workload that the baseline passed and the solution attempted'
    END AS detail,
    CASE WHEN reason IS NULL THEN CASE WHEN has_failure THEN 0.0::DOUBLE ELSE ratio_sum / compared_workloads END END
        AS avg_speedup,
    CASE WHEN reason IS NULL THEN CASE WHEN has_failure THEN 0.0::DOUBLE ELSE 1.0::DOUBLE END END AS success_rate,
    CASE WHEN reason IS NULL THEN CASE WHEN has_failure THEN 0.0::DOUBLE ELSE wins / compared_workloads END END
        AS win_rate,
    CASE WHEN reason IS NULL THEN compared_workloads END AS workloads,
    CASE WHEN reason IS NULL THEN 1 END AS definitions,
    baseline_solution,
    load_order
FROM scoped
