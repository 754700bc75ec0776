-- Per (definition, hardware, solution, workload): how often it ran and passed, and its
-- latency in microseconds over the PASSED re-runs: best (min), median, worst (max), and the
-- spread (max − min) / median, NULL with a single passing run.
SELECT
    definition,
    hardware,
    solution,
    workload_key,
    any_value(workload_uuid) AS workload_uuid,
    count(*) AS runs,
    count(*) FILTER (WHERE status = 'PASSED') AS passed_runs,
    bool_or(status = 'PASSED') AS passed,
    min(latency_ms) FILTER (WHERE status = 'PASSED') * 1000 AS best_latency_us,
    median(latency_ms) FILTER (WHERE status = 'PASSED') * 1000 AS median_latency_us,
    max(latency_ms) FILTER (WHERE status = 'PASSED') * 1000 AS worst_latency_us,
    CASE WHEN count(*) FILTER (WHERE status = 'PASSED') > 1 THEN
        (max(latency_ms) FILTER (WHERE status = 'PASSED') - min(latency_ms) FILTER (WHERE status = 'PASSED'))
        / median(latency_ms) FILTER (WHERE status = 'PASSED')
    END AS rerun_spread
FROM runs
WHERE solution IS NOT NULL
GROUP BY definition, hardware, solution, workload_key
