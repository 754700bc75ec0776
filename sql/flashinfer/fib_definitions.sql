-- The definitions FlashInfer-Bench's Python TraceSet loads (every definitions/**/*.json), per
-- source scope (fib_source_scopes; the union keeps the definitions its sources agree on).
-- `web_visible`: the web app reads definitions/<folder>/<file>.json, exactly one folder deep.
SELECT
    sc.source,
    d.definition,
    d.op_type,
    d.source_file,
    len(string_split(d.source_file, '/')) = 3 AS web_visible
FROM fib_source_scopes AS sc
JOIN definitions AS d ON d.source = sc.member_source
LEFT JOIN fib_union_definitions AS u ON sc.is_union AND u.definition = d.definition
WHERE d.source_file LIKE 'definitions/%' AND d.source_file LIKE '%.json'
  AND (NOT sc.is_union OR u.in_union)
QUALIFY row_number() OVER (PARTITION BY sc.source, d.definition ORDER BY d.source) = 1
