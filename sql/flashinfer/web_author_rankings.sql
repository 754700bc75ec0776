-- The web leaderboard's author ranking, computeAuthorRankings (fib-metrics.md §6.5), per map
-- and hardware scope, over the leaderboard's definitions: per (author, definition) the first
-- solution in list order with a strictly greater avg_speedup (a leading NaN is never
-- replaced), then means in definition order (localeCompare), authors by avg_speedup
-- descending, ties by localeCompare (ICU collation: `bob` before `Mallory`). A NaN average sorts
-- first. `ui_hidden`: the site hides this author (it owns a solution the map names).
WITH scored AS (
    SELECT
        s.*,
        d.web_order,
        s.list_order = min(s.list_order) OVER (
            PARTITION BY s.source, s.baseline_map, s.hardware, s.author, s.definition
        ) AS first_scored
    FROM web_solution_scores AS s
    JOIN web_definition_scopes AS d USING (source, baseline_map, hardware, definition)
    WHERE s.outcome = 'score' AND d.on_leaderboard AND s.author IS NOT NULL
),
best AS (
    SELECT *
    FROM scored
    QUALIFY row_number() OVER (
        PARTITION BY source, baseline_map, hardware, author, definition
        ORDER BY
            -- the first scored solution when it is NaN, else the largest non-NaN, first on ties
            CASE WHEN first_scored AND isnan(avg_speedup) THEN 0 ELSE 1 END,
            CASE WHEN isnan(avg_speedup) THEN NULL ELSE avg_speedup END DESC NULLS LAST,
            list_order
    ) = 1
),
authors AS (
    SELECT
        source,
        baseline_map,
        hardware,
        author,
        bool_or(ui_hidden) AS ui_hidden,
        count(*) AS definitions,
        list_reduce(list(avg_speedup ORDER BY web_order), lambda a, b: a + b) / count(*)
            AS avg_speedup,
        list_reduce(list(success_rate ORDER BY web_order), lambda a, b: a + b) / count(*)
            AS success_rate,
        list_reduce(list(win_rate ORDER BY web_order), lambda a, b: a + b) / count(*)
            AS win_rate,
        sum(workloads)::BIGINT AS workloads,
        to_json(map(list(definition ORDER BY web_order), list(solution ORDER BY web_order)))
            AS best_solutions
    FROM best
    GROUP BY ALL
)
SELECT
    source,
    baseline_map,
    hardware,
    row_number() OVER (
        PARTITION BY source, baseline_map, hardware ORDER BY avg_speedup DESC, author COLLATE en, author
    ) AS rank,
    author,
    avg_speedup,
    success_rate,
    win_rate,
    workloads,
    definitions,
    best_solutions,
    ui_hidden
FROM authors
