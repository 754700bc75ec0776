-- Record history (KernelIndex §11.2, policy ranking-v1, cause new_run), one row per event.
-- Per comparison key, walk every result the warehouse has seen (latency_history: eligible
-- runs of every snapshot of every source, a result kept across revisions or sources counted
-- once) in the order the warehouse came to know them: by the build that first held the result
-- (first_seen_at), then observed_at. The first result holds the record, and every later one
-- strictly faster than the best so far takes it, displacing the previous holder. KernelIndex's
-- catalog is append-only and walked in observed_at order, so on a single snapshot (every result
-- first seen together) the events are exactly KernelIndex's, and each later revision continues
-- the story. A result as fast as the record holder (a tie) takes nothing. Results observed in
-- the same millisecond are walked fastest first, so only the fastest of them can take the
-- record at that instant; run_id breaks the remaining ties so that the walk is deterministic.
WITH walk AS (
    SELECT
        *,
        min(latency_ns) OVER (
            PARTITION BY comparison_key
            ORDER BY first_seen_at, observed_at, latency_ns, run_id
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS best_before_ns
    FROM latency_history
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
    -- When the record passed to the next holder; null while this result still holds it.
    lead(observed_at) OVER holders AS held_until,
    lead(run_id) OVER holders AS next_run_id,
    source,
    first_snapshot_number,
    first_snapshot_id,
    first_seen_at
FROM events
WINDOW holders AS (PARTITION BY comparison_key ORDER BY first_seen_at, observed_at, latency_ns, run_id)
