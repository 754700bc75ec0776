-- Significant slowdowns of a solution on one comparison key (the lookback z-score method of
-- Conbench, for a lower-is-better metric). Each result of latency_history is scored against
-- the distribution of the same solution's earlier results on the same comparison key (same
-- operation, workload, environment, protocol and correctness terms):
--   relative_change = latency_ns / history_mean_ns - 1
--   z_score         = (latency_ns - history_mean_ns) / history_stddev_ns   (sample stddev)
-- and flagged when all three hold, with the limits of regression_thresholds (settings
-- TRACEHOUSE_REGRESSION_MIN_HISTORY, _MIN_CHANGE, _Z_THRESHOLD):
--   history_size >= min_history, relative_change >= min_change, z_score >= z_threshold.
-- A history without spread (one result, or identical ones) has z_score +infinity for any rise
-- and 0 otherwise, so only the relative change decides there.
WITH scored AS (
    SELECT
        *,
        count(*) OVER earlier AS history_size,
        avg(latency_ns) OVER earlier AS history_mean_ns,
        stddev_samp(latency_ns) OVER earlier AS history_stddev_ns,
        min(latency_ns) OVER earlier AS history_best_ns,
        lag(run_id) OVER in_order AS previous_run_id,
        lag(latency_ns) OVER in_order AS previous_latency_ns,
        lag(observed_at) OVER in_order AS previous_observed_at
    FROM latency_history
    WINDOW
        in_order AS (
            PARTITION BY solution, comparison_key ORDER BY first_seen_at, observed_at, run_id
        ),
        earlier AS (in_order ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
measured AS (
    SELECT
        *,
        latency_ns / history_mean_ns - 1 AS relative_change,
        CASE
            WHEN history_stddev_ns > 0 THEN (latency_ns - history_mean_ns) / history_stddev_ns
            WHEN latency_ns > history_mean_ns THEN 'infinity'::DOUBLE
            ELSE 0.0
        END AS z_score
    FROM scored
    WHERE history_size > 0
)
SELECT
    m.solution,
    m.definition,
    m.workload_uuid,
    m.hardware,
    m.comparison_key,
    m.run_id,
    m.observed_at,
    m.latency_ns,
    m.history_size,
    m.history_mean_ns,
    m.history_stddev_ns,
    m.history_best_ns,
    m.relative_change,
    m.z_score,
    m.previous_run_id,
    m.previous_latency_ns,
    m.previous_observed_at,
    m.first_snapshot_id,
    t.min_history,
    t.min_change,
    t.z_threshold
FROM measured AS m
CROSS JOIN regression_thresholds AS t
WHERE m.history_size >= t.min_history
    AND m.relative_change >= t.min_change
    AND m.z_score >= t.z_threshold
