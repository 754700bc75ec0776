-- The hardware scopes of FlashInfer-Bench's figures, per source scope: `all` is
-- FlashInfer-Bench's own, every GPU mixed; each exact evaluation.environment.hardware string is
-- the per-GPU variant (the same functions on a TraceSet that keeps only that GPU's trace lines).
SELECT DISTINCT source, 'all' AS hardware FROM fib_source_scopes
UNION
SELECT DISTINCT source, hardware FROM fib_trace_lines WHERE has_evaluation AND hardware IS NOT NULL
