-- The definitions FlashInfer-Bench's Python TraceSet loads (every definitions/**/*.json).
-- `web_visible`: the web app reads definitions/<folder>/<file>.json, exactly one folder deep.
SELECT
    definition,
    op_type,
    source_file,
    len(string_split(source_file, '/')) = 3 AS web_visible
FROM definitions
WHERE source_file LIKE 'definitions/%' AND source_file LIKE '%.json'
