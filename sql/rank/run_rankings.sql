-- ranking-v1 (KernelIndex §11, source-native profile), one row per run.
-- The one place that says which runs may rank: KernelIndex status `passed`, a primary
-- metric (latency_ns) and a comparison key. A cohort is the set of distinct eligible runs
-- (distinct run digests; without a digest, distinct record bytes) sharing a comparison key.
-- Rank is dense by latency_ns ascending; equal latencies tie. Cohort size counts runs.
WITH runs_with_reasons AS (
    SELECT
        run_id,
        ranking_bucket,
        comparison_key,
        latency_ns,
        coalesce(run_digest, line_digest) AS run_identity,
        list_filter(
            [
                CASE WHEN ki_status IS DISTINCT FROM 'passed'
                     THEN 'STATUS_' || upper(coalesce(ki_status, status)) END,
                CASE WHEN latency_ns IS NULL THEN 'MISSING_PRIMARY_METRIC' END,
                CASE WHEN comparison_key IS NULL THEN 'NO_COMPARISON_KEY' END
            ],
            lambda reason: reason IS NOT NULL
        ) AS ineligible_reasons
    FROM ranking_inputs
),
cohort_members AS (
    SELECT DISTINCT comparison_key, run_identity, latency_ns
    FROM runs_with_reasons
    WHERE len(ineligible_reasons) = 0
),
ranked AS (
    SELECT
        comparison_key,
        run_identity,
        count(*) OVER (PARTITION BY comparison_key) AS cohort_size,
        dense_rank() OVER (PARTITION BY comparison_key ORDER BY latency_ns) AS rank
    FROM cohort_members
)
SELECT
    r.run_id,
    -- the bucket the run is ranked in (sql/rank/ranking_inputs.sql): each bucket is written as
    -- its own part, without joining every run again to find it
    r.ranking_bucket,
    len(r.ineligible_reasons) = 0 AS eligible,
    r.ineligible_reasons,
    ranked.cohort_size,
    ranked.rank
FROM runs_with_reasons AS r
LEFT JOIN ranked
    ON ranked.comparison_key = r.comparison_key AND ranked.run_identity = r.run_identity
    AND len(r.ineligible_reasons) = 0
