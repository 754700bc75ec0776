-- The solutions FlashInfer-Bench's Python TraceSet loads (every solutions/**/*.json), each filed
-- under its own `definition` field, with its load order: files sorted by path *components*
-- (`gpt-5/…` before `gpt-5.2/…`), which decides FlashInfer-Bench's ties (fib-metrics.md §1.1).
-- `web_visible`: the web leaderboard lists it, i.e. it sits at solutions/<author>/<type>/<definition>/*.json.
SELECT
    solution,
    definition,
    author,
    source_file,
    row_number() OVER (ORDER BY string_split(source_file, '/'), source_line) AS load_order,
    len(string_split(source_file, '/')) = 5
        AND string_split(source_file, '/')[4] = definition AS web_visible
FROM implementations
WHERE source_file LIKE 'solutions/%' AND source_file LIKE '%.json'
