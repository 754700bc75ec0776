-- Per (definition, hardware, solution, workload the hardware's baseline passed): the speedup
-- baseline/solution of their best PASSED latencies, NULL when the solution did not pass that
-- workload (failed or never ran it). The report's fast_p curves and speedup distributions.
WITH baseline_workloads AS (
    SELECT w.definition, w.hardware, w.workload_key, w.best_latency_us AS baseline_us, lb.baseline_solution
    FROM solution_workload_latency AS w
    JOIN leaderboard_baselines AS lb
        ON lb.definition = w.definition AND lb.hardware = w.hardware
        AND lb.baseline_solution = w.solution
    WHERE w.passed
),
solutions AS (
    SELECT DISTINCT definition, hardware, solution FROM solution_workload_latency
)
SELECT
    s.definition,
    s.hardware,
    s.solution,
    b.workload_key,
    b.baseline_solution,
    b.baseline_us / w.best_latency_us AS speedup
FROM solutions AS s
JOIN baseline_workloads AS b USING (definition, hardware)
LEFT JOIN solution_workload_latency AS w
    ON w.definition = s.definition AND w.hardware = s.hardware AND w.solution = s.solution
    AND w.workload_key = b.workload_key AND w.passed
WHERE s.solution <> b.baseline_solution
