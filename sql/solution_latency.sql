-- Per (definition, hardware, solution): how fast it typically is, and how much re-runs of the
-- same workload disagree. Only PASSED runs with a latency count.
--   best_latency_us: median over the solution's workloads of its best (minimum) latency there;
--   rerun_spread: median over workloads run more than once of (max - min) / min latency;
--     null when no workload was re-run.
WITH per_workload AS (
    SELECT definition, hardware, solution, workload_key,
           min(latency_ms) AS best_ms,
           CASE WHEN count(*) > 1 THEN (max(latency_ms) - min(latency_ms)) / min(latency_ms) END
               AS spread
    FROM runs
    WHERE status = 'PASSED' AND latency_ms > 0 AND solution IS NOT NULL
    GROUP BY ALL
)
SELECT
    definition,
    hardware,
    solution,
    count(*) AS workloads_timed,
    median(best_ms) * 1000 AS best_latency_us,
    count(spread) AS workloads_rerun,
    median(spread) AS rerun_spread
FROM per_workload
GROUP BY ALL
