-- FlashInfer-Bench's examples/win_at_p.py (fib-metrics.md §7) at each threshold of
-- fast_p_thresholds, per source scope (fib_source_scopes), for both of its author sources:
--   name_prefix    its default: the text before the first `_` of the solution name
--   solution_json  its --author-map, built from the solution files (else the name prefix)
-- Groups are (definition, workload uuid) over every traces/**/*.jsonl line, GPUs mixed. Per
-- group, each author's minimum PASSED latency (0 kept); the group's baseline is author
-- `baseline` (any case) when it passed there, else the fastest author; groups nobody passed
-- are skipped. Every other author that attempted the group counts it in n_total; a ratio
-- baseline/author exists when both latencies are > 0. win@p = #{ratio > p} / n_total (strict).
-- outcome: curve; empty (no author besides the baselines); no_input (no trace file);
-- error (the script crashes on an `"evaluation": null` line, so no figure at all).
WITH author_sources AS (
    SELECT sc.source, a.author_source
    FROM (SELECT DISTINCT source FROM fib_source_scopes) AS sc
    CROSS JOIN (VALUES ('name_prefix'), ('solution_json')) AS a(author_source)
),
records AS (
    SELECT
        s.source,
        s.author_source,
        t.definition,
        t.workload_uuid,
        CASE
            WHEN s.author_source = 'solution_json' THEN coalesce(f.author, split_part(t.solution, '_', 1))
            ELSE split_part(t.solution, '_', 1)
        END AS author,
        CASE WHEN t.status = 'PASSED' THEN t.latency_ms END AS latency_ms
    FROM author_sources AS s
    JOIN fib_trace_lines AS t ON t.source = s.source
    LEFT JOIN fib_solutions AS f ON f.source = t.source AND f.solution = t.solution
    WHERE t.has_evaluation AND t.solution IS NOT NULL AND t.definition IS NOT NULL
      AND t.workload_uuid IS NOT NULL AND t.status IS NOT NULL
),
per_author AS (
    SELECT source, author_source, definition, workload_uuid, author, min(latency_ms) AS latency_ms
    FROM records
    GROUP BY ALL
),
baselines AS (
    SELECT
        source,
        author_source,
        definition,
        workload_uuid,
        coalesce(
            min(author) FILTER (WHERE lower(author) = 'baseline' AND latency_ms IS NOT NULL),
            arg_min(author, latency_ms)
        ) AS baseline_author
    FROM per_author
    GROUP BY ALL
    HAVING count(latency_ms) > 0
),
compared AS (
    SELECT
        a.source,
        a.author_source,
        a.author,
        CASE WHEN a.latency_ms > 0 AND b_lat.latency_ms > 0 THEN b_lat.latency_ms / a.latency_ms END
            AS ratio
    FROM per_author AS a
    JOIN baselines AS b USING (source, author_source, definition, workload_uuid)
    JOIN per_author AS b_lat
        ON b_lat.source = b.source AND b_lat.author_source = b.author_source
        AND b_lat.definition = b.definition
        AND b_lat.workload_uuid = b.workload_uuid AND b_lat.author = b.baseline_author
    WHERE a.author <> b.baseline_author
),
inputs AS (
    SELECT
        sc.source,
        bool_or(EXISTS (
            SELECT 1 FROM fib_trace_lines AS t WHERE t.source = sc.source AND NOT t.has_evaluation
        )) AS crashes,
        bool_or(
            EXISTS (SELECT 1 FROM fib_trace_lines AS t WHERE t.source = sc.source)
            OR EXISTS (
                SELECT 1 FROM workloads AS w
                WHERE w.source = sc.member_source AND w.source_file LIKE 'traces/%'
            )
            OR EXISTS (
                SELECT 1 FROM rejects AS r
                WHERE r.source = sc.member_source AND r.file LIKE 'traces/%'
            )
        ) AS has_input
    FROM fib_source_scopes AS sc
    GROUP BY sc.source
),
status AS (
    SELECT
        s.source,
        s.author_source,
        (SELECT count(*) FROM (SELECT DISTINCT definition, workload_uuid FROM records AS r
                               WHERE r.source = s.source AND r.author_source = s.author_source))
            AS n_groups,
        i.crashes,
        i.has_input,
        EXISTS (
            SELECT 1 FROM compared AS c
            WHERE c.source = s.source AND c.author_source = s.author_source
        ) AS has_curve
    FROM author_sources AS s
    JOIN inputs AS i USING (source)
),
curves AS (
    SELECT
        c.source,
        c.author_source,
        c.author,
        t.p,
        count(*) AS n_total,
        count(c.ratio) AS n_ratios,
        count(c.ratio) FILTER (WHERE c.ratio > t.p) AS n_wins
    FROM compared AS c
    CROSS JOIN fast_p_thresholds AS t
    GROUP BY ALL
)
SELECT
    s.source,
    s.author_source,
    CASE
        WHEN NOT s.has_input THEN 'no_input'
        WHEN s.crashes THEN 'error'
        WHEN NOT s.has_curve THEN 'empty'
        ELSE 'curve'
    END AS outcome,
    CASE
        WHEN NOT s.has_input THEN 'no trace files under traces/'
        WHEN s.crashes THEN 'a line has "evaluation": null; win_at_p.py raises TypeError on it'
    END AS reason,
    CASE WHEN s.has_input AND NOT s.crashes THEN s.n_groups END AS n_groups,
    c.author,
    c.p,
    c.n_total,
    c.n_ratios,
    c.n_wins,
    c.n_wins / c.n_total AS win_ratio
FROM status AS s
LEFT JOIN curves AS c
    ON c.source = s.source AND c.author_source = s.author_source AND s.has_input AND NOT s.crashes
