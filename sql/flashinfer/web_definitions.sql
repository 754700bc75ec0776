-- The definitions FlashInfer-Bench's web leaderboard lists (definitions/<folder>/<file>.json,
-- one folder deep), per source scope, in its order: names sorted by JavaScript's localeCompare (ICU collation).
SELECT
    source,
    definition,
    op_type,
    row_number() OVER (PARTITION BY source ORDER BY definition COLLATE en, definition) AS web_order
FROM fib_definitions
WHERE web_visible
