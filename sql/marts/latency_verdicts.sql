-- Every result of latency_history judged against the same solution's earlier results on the
-- same comparison key (same operation, workload, environment, protocol and correctness terms):
-- Conbench's lookback z-score for a lower-is-better metric, on latency_ns (the solution's own
-- time, never speedup_factor: the reference's timing varies far more between identical runs).
-- "Earlier" is the order the warehouse came to know results: first_seen_at, then observed_at,
-- then run_id.
--   relative_change = latency_ns / history_mean_ns - 1
--   z_score         = (latency_ns - history_mean_ns) / history_stddev_ns   (sample stddev)
-- A history without spread (one result, or identical ones) gives +/-infinity for a rise or a
-- drop and 0 otherwise, so only the relative change decides there. The verdict, with the
-- limits of regression_thresholds (settings TRACEHOUSE_REGRESSION_MIN_HISTORY, _MIN_CHANGE,
-- _Z_THRESHOLD):
--   first result       no earlier result
--   history too short  fewer than min_history earlier results: no z-score is trusted, the
--                      relative change is still given
--   regression         relative_change >= min_change and z_score >= z_threshold
--   improvement        relative_change <= -min_change and z_score <= -z_threshold
--   within noise       otherwise
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
    WHERE solution IS NOT NULL
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
            WHEN latency_ns < history_mean_ns THEN '-infinity'::DOUBLE
            ELSE 0.0
        END AS z_score
    FROM scored
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
    m.source,
    m.first_snapshot_number,
    m.first_snapshot_id,
    m.first_seen_at,
    CASE
        WHEN m.history_size = 0 THEN 'first result'
        WHEN m.history_size < t.min_history THEN 'history too short'
        WHEN m.relative_change >= t.min_change AND m.z_score >= t.z_threshold THEN 'regression'
        WHEN m.relative_change <= -t.min_change AND m.z_score <= -t.z_threshold
            THEN 'improvement'
        ELSE 'within noise'
    END AS verdict,
    t.min_history,
    t.min_change,
    t.z_threshold
FROM measured AS m
CROSS JOIN regression_thresholds AS t
