-- FlashInfer-Bench's TraceSet.summary() / `flashinfer-bench report summary` (fib-metrics.md §4),
-- per source scope, scope and hardware. The counts ignore the scope, as FlashInfer-Bench's do: every loaded
-- trace line of the (hardware-filtered) set, `failed` = not PASSED, so an `"evaluation": null`
-- line is a failure of scope `all` and of no GPU. With no trace line at all FlashInfer-Bench
-- returns zeros without ranking; otherwise a ranking that raises leaves no counts at all
-- (outcome error, counts NULL, reason from author_rankings).
WITH counts AS (
    SELECT
        h.source,
        h.hardware,
        count(t.source_file) AS total,
        count(t.source_file) FILTER (WHERE t.has_evaluation AND t.status = 'PASSED') AS passed
    FROM fib_hardware_scopes AS h
    LEFT JOIN fib_trace_lines AS t
        ON t.source = h.source
        AND (h.hardware = 'all' OR (t.has_evaluation AND t.hardware = h.hardware))
    GROUP BY h.source, h.hardware
),
rankings AS (
    SELECT
        source,
        hardware,
        scope_kind,
        scope,
        any_value(outcome) AS ranking_outcome,
        any_value(reason) AS reason,
        any_value(detail) AS detail,
        count(author) AS n_rankings,
        list({'author': author, 'avg_speedup': avg_speedup} ORDER BY rank)
            FILTER (WHERE author IS NOT NULL) AS rankings
    FROM author_rankings
    GROUP BY ALL
)
SELECT
    r.source,
    r.hardware,
    r.scope_kind,
    r.scope,
    CASE WHEN c.total > 0 AND r.ranking_outcome = 'error' THEN 'error' ELSE 'ok' END AS outcome,
    CASE WHEN c.total > 0 AND r.ranking_outcome = 'error' THEN r.reason END AS reason,
    CASE WHEN c.total > 0 AND r.ranking_outcome = 'error' THEN r.detail END AS detail,
    CASE WHEN c.total = 0 OR r.ranking_outcome <> 'error' THEN c.total END AS total,
    CASE WHEN c.total = 0 OR r.ranking_outcome <> 'error' THEN c.passed END AS passed,
    CASE WHEN c.total = 0 OR r.ranking_outcome <> 'error' THEN c.total - c.passed END AS failed,
    CASE WHEN c.total = 0 THEN 0 WHEN r.ranking_outcome <> 'error' THEN r.n_rankings END
        AS n_rankings,
    CASE
        WHEN c.total = 0 THEN []
        WHEN r.ranking_outcome <> 'error' THEN coalesce(r.rankings, [])
    END AS rankings
FROM rankings AS r
JOIN counts AS c USING (source, hardware)
