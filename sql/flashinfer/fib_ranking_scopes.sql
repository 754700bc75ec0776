-- The scopes of FlashInfer-Bench's rank_authors / summary (fib-metrics.md §3): `all` loaded
-- definitions, each op_type, each definition, per source scope; one row per (scope, definition in it), and a
-- row without a definition so that scope `all` exists even when nothing is loaded.
SELECT DISTINCT source, 'all' AS scope_kind, 'all' AS scope, NULL::VARCHAR AS definition
FROM fib_source_scopes
UNION ALL
SELECT source, 'all', 'all', definition FROM fib_definitions
UNION ALL
SELECT source, 'op_type', op_type, definition FROM fib_definitions WHERE op_type IS NOT NULL
UNION ALL
SELECT source, 'definition', definition, definition FROM fib_definitions
