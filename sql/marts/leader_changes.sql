-- leader_changes: per comparison key, each warehouse state in which its rank-1 run changed.
-- A state is the warehouse after one build: every snapshot in source_snapshots, in build order
-- (built_at, then snapshot_id), with each source at its latest snapshot up to then; the runs
-- present are run_history's ranges covering those snapshots. The leader of a key is its
-- fastest eligible run; among equal latencies the one observed first (then the smallest
-- run_id), so identical runs read from two sources lead once. Causes:
--   first      the key's first leader (no leader in the state before)
--   faster     a run strictly faster than the previous leader
--   withdrawn  the previous leader is no longer present (its source dropped it); to_* is the
--              next fastest run, or null when the key has no eligible run left
--   tie        the previous leader is still present and a run of equal latency observed
--              earlier leads now
WITH states AS (
    SELECT
        snapshot_id,
        source,
        snapshot_number,
        built_at,
        row_number() OVER (ORDER BY built_at, snapshot_id) AS state
    FROM source_snapshots
),
source_at_state AS (
    SELECT s.state, o.source, max(o.snapshot_number) AS snapshot_number
    FROM states AS s
    JOIN states AS o ON o.state <= s.state
    GROUP BY s.state, o.source
),
present AS (
    SELECT a.state, h.run_id, h.comparison_key, h.latency_ns, h.observed_at, h.solution
    FROM source_at_state AS a
    JOIN run_history AS h
        ON h.source = a.source
        AND a.snapshot_number BETWEEN h.first_snapshot_number AND h.last_snapshot_number
    WHERE h.eligible
),
leaders AS (
    SELECT state, comparison_key, run_id, latency_ns, solution
    FROM present
    QUALIFY row_number() OVER (
        PARTITION BY state, comparison_key
        ORDER BY latency_ns, observed_at NULLS LAST, run_id
    ) = 1
),
grid AS (
    SELECT k.comparison_key, s.state
    FROM (SELECT comparison_key, min(state) AS first_state FROM leaders GROUP BY 1) AS k
    JOIN states AS s ON s.state >= k.first_state
),
walk AS (
    SELECT
        g.comparison_key,
        g.state,
        l.run_id,
        l.latency_ns,
        l.solution,
        lag(l.run_id) OVER w AS previous_run_id,
        lag(l.latency_ns) OVER w AS previous_latency_ns,
        lag(l.solution) OVER w AS previous_solution
    FROM grid AS g
    LEFT JOIN leaders AS l USING (comparison_key, state)
    WINDOW w AS (PARTITION BY g.comparison_key ORDER BY g.state)
)
SELECT
    w.comparison_key,
    s.source,
    s.snapshot_id,
    s.snapshot_number,
    s.built_at AS changed_at,
    CASE
        WHEN w.previous_run_id IS NULL THEN 'first'
        WHEN w.run_id IS NULL THEN 'withdrawn'
        WHEN w.latency_ns < w.previous_latency_ns THEN 'faster'
        WHEN NOT EXISTS (
            SELECT 1 FROM present AS p
            WHERE p.state = w.state AND p.run_id = w.previous_run_id
        ) THEN 'withdrawn'
        ELSE 'tie'
    END AS cause,
    w.previous_run_id,
    w.previous_solution,
    w.previous_latency_ns,
    w.run_id,
    w.solution,
    w.latency_ns,
    w.previous_latency_ns / w.latency_ns AS speedup_over_previous
FROM walk AS w
JOIN states AS s USING (state)
WHERE w.run_id IS DISTINCT FROM w.previous_run_id
