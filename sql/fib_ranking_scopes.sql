-- The scopes of FlashInfer-Bench's rank_authors / summary (fib-metrics.md §3): `all` loaded
-- definitions, each op_type, each definition; one row per (scope, definition in it), and a
-- row without a definition so that scope `all` exists even when nothing is loaded.
SELECT 'all' AS scope_kind, 'all' AS scope, NULL::VARCHAR AS definition
UNION ALL
SELECT 'all', 'all', definition FROM fib_definitions
UNION ALL
SELECT 'op_type', op_type, definition FROM fib_definitions WHERE op_type IS NOT NULL
UNION ALL
SELECT 'definition', definition, definition FROM fib_definitions
