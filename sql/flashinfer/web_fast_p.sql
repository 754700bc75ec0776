-- The web leaderboard's fast_p curves (fib-metrics.md §6.3), at each threshold of
-- fast_p_thresholds, per map and hardware scope, at three levels:
--   solution           one definition's solution (its kernel page); 0 entries give 0 %
--   author_definition  an author's candidate solutions of one definition pooled (the drawer)
--   author_all         an author's candidate solutions of every leaderboard definition pooled
--                      (the leaderboard's scoreboard); authors without any entry have no curve
-- `fraction` is the exact share of entries with ratio >= p (NULL without entries).
-- `web_sample_p` / `web_percent` are what the site shows for a pinned p: its curve is sampled
-- at p_i = (M/(N-1))·i, N = min(5000, max(300, ceil(300·M))), M = maxRatio, and it reads the
-- first p_i >= p (clamped to the grid), so a ratio exactly equal to p can be missed.
-- The views this one reads several times are computed once (MATERIALIZED): inlined, each
-- reference evaluated the whole chain below it again (12 s instead of 2 for the golden corpus
-- beside the H200 runs).
WITH stats AS MATERIALIZED (
    SELECT * FROM web_definition_stats
),
candidates AS MATERIALIZED (
    SELECT * FROM web_candidates
),
ratio_entries AS MATERIALIZED (
    SELECT * FROM web_ratio_entries
),
leaderboard AS (
    SELECT * FROM stats WHERE on_leaderboard
),
curves AS (
    SELECT
        c.source, c.baseline_map, d.hardware, 'solution' AS level, c.definition, c.solution, c.author,
        NULL::BOOLEAN AS ui_hidden, d.n_workloads, d.max_ratio
    FROM candidates AS c
    JOIN stats AS d USING (source, baseline_map, definition)
    WHERE NOT c.is_baseline
    UNION ALL
    SELECT DISTINCT
        c.source, c.baseline_map, d.hardware, 'author_definition', c.definition, NULL, c.author,
        c.ui_hidden, d.n_workloads, d.max_ratio
    FROM candidates AS c
    JOIN leaderboard AS d USING (source, baseline_map, definition)
    JOIN ratio_entries AS e
        ON e.source = c.source AND e.baseline_map = c.baseline_map AND e.hardware = d.hardware
        AND e.definition = c.definition AND e.solution = c.solution
    WHERE NOT c.is_baseline AND c.author IS NOT NULL
    UNION ALL
    SELECT
        c.source, c.baseline_map, d.hardware, 'author_all', '*', NULL, c.author, any_value(c.ui_hidden),
        any_value(t.n_workloads), any_value(t.max_ratio)
    FROM candidates AS c
    JOIN leaderboard AS d USING (source, baseline_map, definition)
    JOIN ratio_entries AS e
        ON e.source = c.source AND e.baseline_map = c.baseline_map AND e.hardware = d.hardware
        AND e.definition = c.definition AND e.solution = c.solution
    JOIN (
        SELECT source, baseline_map, hardware, sum(n_workloads) AS n_workloads, max(max_ratio) AS max_ratio
        FROM leaderboard GROUP BY ALL
    ) AS t ON t.source = c.source AND t.baseline_map = c.baseline_map AND t.hardware = d.hardware
    WHERE NOT c.is_baseline AND c.author IS NOT NULL
    GROUP BY ALL
),
entries AS (
    SELECT e.*, c.is_baseline, l.on_leaderboard
    FROM ratio_entries AS e
    JOIN candidates AS c USING (source, baseline_map, definition, solution)
    JOIN stats AS l USING (source, baseline_map, hardware, definition)
    WHERE NOT c.is_baseline
),
numbered AS (
    SELECT row_number() OVER () AS curve_id, * FROM curves
),
grid AS (
    SELECT
        numbered.*,
        t.p,
        t.web_preset,
        least(5000, greatest(300, ceil(300 * max_ratio)))::BIGINT AS n_samples,
        max_ratio / (n_samples - 1) AS step,
        least(greatest(t.p, 0.0), step * (n_samples - 1)) AS clamped_p,
        ceil(clamped_p / step)::BIGINT AS guess
    FROM numbered
    CROSS JOIN fast_p_thresholds AS t
),
sampled AS (
    SELECT
        *,
        step * list_min(list_filter(
            [guess - 1, guess, guess + 1],
            lambda i: i >= 0 AND i <= n_samples - 1 AND step * i >= clamped_p
        )) AS web_sample_p
    FROM grid
),
counted AS (
    SELECT
        s.curve_id,
        s.p,
        count(e.ratio) AS n_ratios,
        count(e.ratio) FILTER (WHERE e.ratio >= s.p) AS n_at_least_p,
        count(e.ratio) FILTER (WHERE e.ratio >= s.web_sample_p) AS n_at_least_sample
    FROM sampled AS s
    LEFT JOIN entries AS e
        ON e.source = s.source AND e.baseline_map = s.baseline_map AND e.hardware = s.hardware
        AND (e.definition = s.definition OR (s.level = 'author_all' AND e.on_leaderboard))
        AND (s.level = 'solution' AND e.solution = s.solution
             OR s.level <> 'solution' AND e.author = s.author)
    GROUP BY ALL
)
SELECT
    s.source,
    s.baseline_map,
    s.hardware,
    s.level,
    s.definition,
    s.solution,
    s.author,
    s.p,
    s.web_preset,
    c.n_ratios,
    c.n_at_least_p,
    CASE WHEN c.n_ratios > 0 THEN c.n_at_least_p / c.n_ratios END AS fraction,
    s.web_sample_p,
    CASE WHEN c.n_ratios > 0 THEN (c.n_at_least_sample / c.n_ratios) * 100 ELSE 0.0 END
        AS web_percent,
    s.n_workloads,
    s.max_ratio,
    s.ui_hidden
FROM sampled AS s
JOIN counted AS c USING (curve_id, p)
