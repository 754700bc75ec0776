-- The source scopes of FlashInfer-Bench's figures (fib_*, web_*, author_rankings, win_at_p):
-- each source alone, as FlashInfer-Bench computes them on that source's dataset, and, when the
-- warehouse holds several sources, their union `(all sources)` as one dataset, made of the
-- definitions the sources agree on (fib_union_definitions). One row per (scope, member source).
WITH members AS (
    SELECT source FROM definitions
    UNION
    SELECT source FROM implementations
    UNION
    SELECT source FROM trace_lines
    UNION
    SELECT source FROM rejects
)
SELECT source, source AS member_source, false AS is_union FROM members
UNION ALL
SELECT '(all sources)', source, true FROM members WHERE (SELECT count(*) FROM members) > 1
