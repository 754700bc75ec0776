-- Each web definition's solution list: solutions/<author>/<type>/<definition>/*.json whose
-- `definition` field names it, in the loader's order (folder names and file names bytewise).
SELECT
    s.source,
    s.definition,
    s.solution,
    s.author,
    row_number() OVER (PARTITION BY s.source, s.definition ORDER BY string_split(s.source_file, '/'))
        AS list_order
FROM fib_solutions AS s
JOIN web_definitions AS d USING (source, definition)
WHERE s.web_visible
