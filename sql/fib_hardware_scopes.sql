-- The hardware scopes of FlashInfer-Bench's figures: `all` is FlashInfer-Bench's own, every GPU
-- mixed; each exact evaluation.environment.hardware string is the per-GPU variant (the same
-- functions on a TraceSet that keeps only that GPU's trace lines).
SELECT 'all' AS hardware
UNION
SELECT DISTINCT hardware FROM trace_lines WHERE has_evaluation AND hardware IS NOT NULL
