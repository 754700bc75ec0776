-- FlashInfer-Bench's author ranking, TraceSet.rank_authors("baseline", op_type | definition_name)
-- as `flashinfer-bench report summary` prints it (fib-metrics.md §3), per source scope, scope and hardware
-- (`all` = FlashInfer-Bench's own GPU-mixed figure; a GPU string = the per-GPU variant).
--   outcome ranked  one row per author: the best-scoring solution per definition (ties: the
--                   first in load order), then unweighted means over those definitions; rank by
--                   avg_speedup descending, then author in code point order ("Mallory" < "bob").
--   outcome empty   no author has a score in the scope (FlashInfer-Bench returns []).
--   outcome error   some solution in the scope makes FlashInfer-Bench raise: no figure at all.
--                   `reason` lists every error kind found in the scope (which one FlashInfer-Bench
--                   names depends on Python's set order), `detail` the definitions.
WITH scopes AS (
    SELECT h.source, h.hardware, s.scope_kind, s.scope, s.definition
    FROM fib_hardware_scopes AS h JOIN fib_ranking_scopes AS s USING (source)
),
scope_list AS (
    SELECT DISTINCT source, hardware, scope_kind, scope FROM scopes
),
in_scope AS (
    SELECT s.source, s.hardware, s.scope_kind, s.scope, x.*  EXCLUDE (source, hardware, definition),
        x.definition
    FROM scopes AS s
    JOIN fib_solution_scores AS x
        ON x.source = s.source AND x.hardware = s.hardware AND x.definition = s.definition
),
errors AS (
    SELECT
        source,
        hardware,
        scope_kind,
        scope,
        array_to_string(list_sort(list(DISTINCT reason)), ', ') AS reason,
        array_to_string(list_sort(list(DISTINCT definition)), ', ') AS failing_definitions
    FROM in_scope
    WHERE outcome = 'error'
    GROUP BY ALL
),
best_per_definition AS (
    SELECT *
    FROM in_scope
    WHERE outcome = 'score'
    QUALIFY row_number() OVER (
        PARTITION BY source, hardware, scope_kind, scope, author, definition
        ORDER BY avg_speedup DESC, load_order
    ) = 1
),
authors AS (
    SELECT
        source,
        hardware,
        scope_kind,
        scope,
        author,
        count(*) AS definitions,
        -- FlashInfer-Bench sums over a set of definitions; a left fold in name order.
        list_reduce(list(avg_speedup ORDER BY definition), lambda a, b: a + b) / count(*)
            AS avg_speedup,
        list_reduce(list(success_rate ORDER BY definition), lambda a, b: a + b) / count(*)
            AS success_rate,
        list_reduce(list(win_rate ORDER BY definition), lambda a, b: a + b) / count(*)
            AS win_rate,
        sum(workloads)::BIGINT AS workloads,
        to_json(map(list(definition ORDER BY definition), list(solution ORDER BY definition)))
            AS best_solutions
    FROM best_per_definition
    GROUP BY ALL
),
ranked AS (
    SELECT
        a.*,
        row_number() OVER (
            PARTITION BY source, hardware, scope_kind, scope ORDER BY avg_speedup DESC, author
        ) AS rank
    FROM authors AS a
    WHERE NOT EXISTS (
        SELECT 1 FROM errors AS e
        WHERE e.source = a.source AND e.hardware = a.hardware AND e.scope_kind = a.scope_kind AND e.scope = a.scope
    )
)
SELECT
    l.source,
    l.hardware,
    l.scope_kind,
    l.scope,
    CASE WHEN e.reason IS NOT NULL THEN 'error' WHEN r.author IS NULL THEN 'empty' ELSE 'ranked' END
        AS outcome,
    e.reason,
    CASE WHEN e.reason IS NOT NULL THEN 'FlashInfer-Bench raises for ' || e.failing_definitions END
        AS detail,
    r.rank,
    r.author,
    r.avg_speedup,
    r.success_rate,
    r.win_rate,
    r.workloads,
    r.definitions,
    r.best_solutions
FROM scope_list AS l
LEFT JOIN errors AS e USING (source, hardware, scope_kind, scope)
LEFT JOIN ranked AS r USING (source, hardware, scope_kind, scope)
