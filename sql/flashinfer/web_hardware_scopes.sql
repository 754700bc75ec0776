-- Hardware scopes of the web figures, per source scope: `all` is what the site computes (every GPU of a
-- definition together); each device string (environment.device || environment.hardware) is
-- the per-GPU variant, the same code on that device's lines only.
-- `same_lines_as` is the scope whose evaluated lines a scope holds. When every evaluated line of
-- a source ran on one device, `all` holds exactly that device's evaluated lines, so a figure of
-- `all` over evaluated lines is that device's: the web views compute it once, for the device,
-- and give it to both scopes. (Lines without an evaluation are in `all` alone.)
WITH devices AS (
    SELECT source, coalesce(nullif(device, ''), nullif(hardware, ''), 'unknown') AS device
    FROM fib_trace_lines
    WHERE has_evaluation
    GROUP BY ALL
),
one_device AS (
    SELECT source, min(device) AS device FROM devices GROUP BY source HAVING count(*) = 1
),
scopes AS (
    SELECT DISTINCT source, 'all' AS hardware FROM fib_source_scopes
    UNION
    SELECT source, device FROM devices
)
SELECT
    s.source,
    s.hardware,
    CASE WHEN s.hardware = 'all' THEN coalesce(o.device, 'all') ELSE s.hardware END
        AS same_lines_as
FROM scopes AS s
LEFT JOIN one_device AS o ON o.source = s.source
