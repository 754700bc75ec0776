-- Per definition name, whether the `(all sources)` scope includes it: only when every source
-- holding it agrees on its operation (the same operation digest). A definition the sources
-- disagree on is left out of the union with everything filed under it (its solutions and trace
-- lines); its figures exist per source only.
SELECT
    definition,
    list(source ORDER BY source) AS sources,
    list(DISTINCT operation_digest ORDER BY operation_digest) AS operation_digests,
    count(*) = 1 OR (count(operation_digest) = count(*) AND count(DISTINCT operation_digest) = 1)
        AS in_union,
    CASE
        WHEN count(*) = 1 THEN NULL
        WHEN count(operation_digest) < count(*) THEN 'operation_digest_missing'
        WHEN count(DISTINCT operation_digest) > 1 THEN 'operation_digests_differ'
    END AS reason
FROM definitions
GROUP BY definition
