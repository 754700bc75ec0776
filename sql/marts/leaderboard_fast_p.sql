-- tracehouse's own fast_p curve per (definition, hardware, solution): the share of the workloads
-- the hardware's baseline passed on which the solution passed with speedup >= p, for p from 0
-- to 3 in steps of 0.025 (a failure or a workload never run counts as not fast).
-- Each speedup is placed once by how many thresholds p_i = (i × 0.025)::DOUBLE it reaches
-- (floor(speedup × 40) estimates it, and the comparisons with p_i and p_{i+1} settle it exactly,
-- as `speedup >= p_i` would), and only the per-solution counts meet the 121 thresholds: the
-- curve of every speedup against every threshold was 121 rows a speedup (2.3 s at 1M runs).
WITH estimated AS (
    SELECT
        definition,
        hardware,
        solution,
        speedup,
        greatest(-1, least(120, floor(speedup * 40)))::BIGINT AS i
    FROM leaderboard_speedups
),
reached AS (
    SELECT
        definition,
        hardware,
        solution,
        CASE
            WHEN speedup IS NULL THEN 0
            WHEN i < 120 AND speedup >= ((i + 1) * 0.025)::DOUBLE THEN i + 2
            WHEN i >= 0 AND speedup < (i * 0.025)::DOUBLE THEN i
            ELSE i + 1
        END AS thresholds_reached
    FROM estimated
),
counted AS (
    SELECT definition, hardware, solution, thresholds_reached, count(*) AS workloads
    FROM reached
    GROUP BY ALL
)
SELECT
    c.definition,
    c.hardware,
    c.solution,
    (g.i * 0.025)::DOUBLE AS p,
    (coalesce(sum(c.workloads) FILTER (WHERE c.thresholds_reached > g.i), 0)
        / sum(c.workloads))::DOUBLE AS fast_p
FROM counted AS c
CROSS JOIN range(0, 121) AS g(i)
GROUP BY ALL
