-- Hardware scopes of the web figures, per source scope: `all` is what the site computes (every GPU of a
-- definition together); each device string (environment.device || environment.hardware) is
-- the per-GPU variant, the same code on that device's lines only.
SELECT DISTINCT source, 'all' AS hardware FROM fib_source_scopes
UNION
SELECT DISTINCT source, coalesce(nullif(device, ''), nullif(hardware, ''), 'unknown')
FROM fib_trace_lines
WHERE has_evaluation
