-- The solutions FlashInfer-Bench's Python TraceSet loads (every solutions/**/*.json), per source
-- scope, each filed under its own `definition` field, with its load order: files sorted by path
-- *components* (`gpt-5/…` before `gpt-5.2/…`), which decides FlashInfer-Bench's ties
-- (fib-metrics.md §1.1). In the union a name several sources hold is described by the first
-- source by name, and solutions of a definition the sources disagree on are left out.
-- `web_visible`: the web leaderboard lists it, i.e. it sits at solutions/<author>/<type>/<definition>/*.json.
WITH scoped AS (
    SELECT sc.source, i.solution, i.definition, i.author, i.source_file, i.source_line,
           i.source AS member_source
    FROM fib_source_scopes AS sc
    JOIN implementations AS i ON i.source = sc.member_source
    LEFT JOIN fib_union_definitions AS u ON sc.is_union AND u.definition = i.definition
    WHERE i.source_file LIKE 'solutions/%' AND i.source_file LIKE '%.json'
      AND (NOT sc.is_union OR coalesce(u.in_union, true))
    QUALIFY row_number() OVER (PARTITION BY sc.source, i.solution ORDER BY i.source) = 1
)
SELECT
    source,
    solution,
    definition,
    author,
    source_file,
    row_number() OVER (
        PARTITION BY source ORDER BY string_split(source_file, '/'), source_line, member_source
    ) AS load_order,
    len(string_split(source_file, '/')) = 5
        AND string_split(source_file, '/')[4] = definition AS web_visible
FROM scoped
