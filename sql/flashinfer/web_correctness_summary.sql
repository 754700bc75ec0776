-- The web's correctness summary (fib-metrics.md §6.6), per hardware scope (no map involved):
--   level solution  every solution of a web definition's list: its web trace lines of that
--                   definition, duplicates, every GPU and `"evaluation": null` lines included
--   level author    the sums over the leaderboard's definitions per author (`unknown` if none)
--   level totals    the sum of the author rows
-- Buckets: passed = PASSED; incorrect = INCORRECT_SHAPE/NUMERICAL/DTYPE; runtime_error =
-- RUNTIME_ERROR/COMPILE_ERROR/TIMEOUT; other = anything else, including no evaluation.
-- Lines of solutions missing from the definition's list are counted nowhere, as on the site.
WITH per_solution AS (
    SELECT
        h.source,
        h.hardware,
        s.definition,
        s.solution,
        s.author,
        count(t.definition) AS total,
        count(t.definition) FILTER (WHERE t.has_evaluation AND t.status = 'PASSED') AS passed,
        count(t.definition) FILTER (
            WHERE t.has_evaluation
              AND t.status IN ('INCORRECT_SHAPE', 'INCORRECT_NUMERICAL', 'INCORRECT_DTYPE')
        ) AS incorrect,
        count(t.definition) FILTER (
            WHERE t.has_evaluation AND t.status IN ('RUNTIME_ERROR', 'COMPILE_ERROR', 'TIMEOUT')
        ) AS runtime_error
    FROM web_hardware_scopes AS h
    JOIN web_solutions AS s ON s.source = h.source
    LEFT JOIN web_scoped_traces AS t
        ON t.source = h.source AND t.hardware = h.hardware AND t.definition = s.definition AND t.solution = s.solution
    GROUP BY ALL
),
solution_rows AS (
    SELECT
        source, hardware, 'solution' AS level, definition, solution, author,
        total, passed, incorrect, runtime_error, total - passed - incorrect - runtime_error AS other
    FROM per_solution
),
author_rows AS (
    SELECT
        r.source, r.hardware, 'author' AS level, '*' AS definition, NULL AS solution,
        coalesce(r.author, 'unknown') AS author,
        sum(r.total) AS total,
        sum(r.passed) AS passed,
        sum(r.incorrect) AS incorrect,
        sum(r.runtime_error) AS runtime_error,
        sum(r.other) AS other
    FROM solution_rows AS r
    JOIN (
        SELECT DISTINCT source, hardware, definition FROM web_definition_stats WHERE on_leaderboard
    ) AS d USING (source, hardware, definition)
    GROUP BY ALL
)
SELECT * FROM solution_rows
UNION ALL
SELECT * FROM author_rows
UNION ALL
SELECT
    h.source, h.hardware, 'totals', '*', NULL, NULL,
    coalesce(sum(a.total), 0), coalesce(sum(a.passed), 0), coalesce(sum(a.incorrect), 0),
    coalesce(sum(a.runtime_error), 0), coalesce(sum(a.other), 0)
FROM web_hardware_scopes AS h
LEFT JOIN author_rows AS a USING (source, hardware)
GROUP BY h.source, h.hardware
