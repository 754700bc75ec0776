-- Record history (KernelIndex §11.2, policy ranking-v1, cause new_run), one row per event.
-- Per comparison key, walk its eligible runs (sql/run_rankings.sql decides eligibility) in
-- observed_at order: the first run holds the record, and every later run strictly faster than
-- the best so far takes it, displacing the previous holder. A run as fast as the record holder
-- (a tie) takes nothing. Runs observed in the same millisecond are walked fastest first, so only
-- the fastest of them can take the record at that instant; run_id breaks the remaining ties so
-- that the walk is deterministic. Identical runs (same run digest) have the same observed_at
-- and latency, so a duplicate never adds an event.
WITH walk AS (
    SELECT
        r.comparison_key,
        r.run_id,
        r.definition,
        r.solution,
        r.workload_uuid,
        r.hardware,
        r.observed_at,
        r.latency_ns,
        min(r.latency_ns) OVER (
            PARTITION BY r.comparison_key
            ORDER BY r.observed_at, r.latency_ns, r.run_id
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS best_before_ns
    FROM runs AS r
    JOIN run_rankings AS k ON k.run_id = r.run_id AND k.eligible
),
events AS (
    SELECT * EXCLUDE (best_before_ns)
    FROM walk
    WHERE best_before_ns IS NULL OR latency_ns < best_before_ns
)
SELECT
    comparison_key,
    observed_at AS at,
    'new_run' AS cause,
    'ranking-v1' AS policy,
    definition,
    solution,
    workload_uuid,
    hardware,
    observed_at,
    latency_ns,
    run_id,
    -- The displaced holder is the previous event of the same key: events only ever get faster.
    lag(solution) OVER holders AS previous_solution,
    lag(observed_at) OVER holders AS previous_observed_at,
    lag(latency_ns) OVER holders AS previous_latency_ns,
    lag(run_id) OVER holders AS previous_run_id,
    lag(latency_ns) OVER holders / latency_ns AS speedup_over_previous,
    row_number() OVER holders AS record_number,
    -- When the record passed to the next holder; null while this run still holds it.
    lead(observed_at) OVER holders AS held_until,
    lead(run_id) OVER holders AS next_run_id
FROM events
WINDOW holders AS (PARTITION BY comparison_key ORDER BY observed_at, latency_ns, run_id)
