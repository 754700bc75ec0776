-- The definitions FlashInfer-Bench's web leaderboard lists (definitions/<folder>/<file>.json,
-- one folder deep), in its order: names sorted by JavaScript's localeCompare (ICU collation).
SELECT
    definition,
    op_type,
    row_number() OVER (ORDER BY definition COLLATE en, definition) AS web_order
FROM fib_definitions
WHERE web_visible
