-- The hardware scopes of FlashInfer-Bench's figures, per source scope: `all` is
-- FlashInfer-Bench's own, every GPU mixed; each exact evaluation.environment.hardware string is
-- the per-GPU variant (the same functions on a TraceSet that keeps only that GPU's trace lines).
-- `same_lines_as` is the scope whose trace lines a scope holds. When every evaluated line of a
-- source names one GPU (a source run on one machine, the common case), `all` holds exactly that
-- GPU's lines, so a figure of `all` is the figure of that GPU: the score views compute it once,
-- for the GPU, and give it to both scopes.
WITH gpus AS (
    SELECT source, hardware FROM fib_trace_lines WHERE has_evaluation GROUP BY ALL
),
one_gpu AS (
    SELECT source, min(hardware) AS hardware
    FROM gpus
    GROUP BY source
    HAVING count(*) = 1 AND count(hardware) = 1
),
scopes AS (
    SELECT DISTINCT source, 'all' AS hardware FROM fib_source_scopes
    UNION
    SELECT source, hardware FROM gpus WHERE hardware IS NOT NULL
)
SELECT
    s.source,
    s.hardware,
    CASE WHEN s.hardware = 'all' THEN coalesce(o.hardware, 'all') ELSE s.hardware END
        AS same_lines_as
FROM scopes AS s
LEFT JOIN one_gpu AS o ON o.source = s.source
