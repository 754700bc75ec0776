-- Hardware scopes of the web figures: `all` is what the site computes (every GPU of a
-- definition together); each device string (environment.device || environment.hardware) is
-- the per-GPU variant, the same code on that device's lines only.
SELECT 'all' AS hardware
UNION
SELECT DISTINCT coalesce(nullif(device, ''), nullif(hardware, ''), 'unknown')
FROM trace_lines
WHERE has_evaluation
