-- trace_lines once per source scope they belong to (fib_source_scopes): `source` is the scope,
-- `member_source` the source the line came from. The union leaves out lines filed under a
-- definition the sources disagree on.
SELECT sc.source, t.* EXCLUDE (source, snapshot_id), t.source AS member_source
FROM fib_source_scopes AS sc
JOIN trace_lines AS t ON t.source = sc.member_source
LEFT JOIN fib_union_definitions AS u ON sc.is_union AND u.definition = t.definition
WHERE NOT sc.is_union OR coalesce(u.in_union, true)
