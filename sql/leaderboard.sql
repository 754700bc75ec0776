-- Per (definition, hardware, solution): coverage, and speed against the definition's baseline.
-- Ratios use each side's best (minimum) PASSED latency per workload, on workloads both passed.
--   geomean_speedup: geometric mean of baseline_ms / solution_ms (the headline figure);
--   win_rate: share of those workloads where the solution is strictly faster;
--   fib_mean_speedup: FlashInfer-Bench's own `report summary` figure, an arithmetic mean of
--     the same ratios that drops to 0 when the solution has any non-PASSED run (format doc §4.1).
WITH attempts AS (
    SELECT
        definition,
        hardware,
        solution,
        count(DISTINCT workload_key) AS workloads_covered,
        count(DISTINCT workload_key) FILTER (WHERE status = 'PASSED') AS workloads_passed,
        count(*) AS runs,
        -- issue 10: records FlashInfer-Bench wrote without evaluating ("skipped after N failures")
        count(*) FILTER (WHERE NOT evaluated) AS runs_not_evaluated,
        bool_or(status <> 'PASSED') AS any_failure
    FROM runs
    WHERE solution IS NOT NULL
    GROUP BY ALL
),
best AS (
    SELECT definition, hardware, solution, workload_key, min(latency_ms) AS best_ms
    FROM runs
    WHERE status = 'PASSED' AND latency_ms > 0 AND solution IS NOT NULL
    GROUP BY ALL
),
baseline_best AS (
    SELECT b.definition, b.hardware, b.workload_key, min(b.best_ms) AS baseline_ms
    FROM best AS b
    JOIN baseline_solutions AS s ON s.definition = b.definition AND s.solution = b.solution
    GROUP BY ALL
),
ratios AS (
    SELECT b.definition, b.hardware, b.solution, bb.baseline_ms / b.best_ms AS speedup
    FROM best AS b
    JOIN baseline_best AS bb USING (definition, hardware, workload_key)
),
scored AS (
    SELECT
        definition,
        hardware,
        solution,
        count(*) AS workloads_compared,
        exp(avg(ln(speedup))) AS geomean_speedup,
        avg(CASE WHEN speedup > 1 THEN 1.0 ELSE 0.0 END) AS win_rate,
        avg(speedup) AS mean_speedup
    FROM ratios
    GROUP BY ALL
)
SELECT
    a.definition,
    a.hardware,
    a.solution,
    i.author,
    -- issue 10: a solution is a baseline of its own definition only
    coalesce(i.is_baseline AND i.definition = a.definition, false) AS is_baseline,
    a.runs,
    a.runs_not_evaluated,
    a.workloads_covered,
    a.workloads_passed,
    coalesce(s.workloads_compared, 0) AS workloads_compared,
    s.geomean_speedup,
    s.win_rate,
    CASE WHEN a.any_failure THEN 0.0 ELSE s.mean_speedup END AS fib_mean_speedup
FROM attempts AS a
LEFT JOIN scored AS s USING (definition, hardware, solution)
LEFT JOIN implementations AS i ON i.solution = a.solution
