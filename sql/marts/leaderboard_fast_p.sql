-- tracehouse's own fast_p curve per (definition, hardware, solution): the share of the workloads
-- the hardware's baseline passed on which the solution passed with speedup >= p, for p from 0
-- to 3 in steps of 0.025 (a failure or a workload never run counts as not fast).
SELECT
    s.definition,
    s.hardware,
    s.solution,
    (g.i * 0.025)::DOUBLE AS p,
    avg(CASE WHEN s.speedup >= (g.i * 0.025)::DOUBLE THEN 1.0 ELSE 0.0 END)::DOUBLE AS fast_p
FROM leaderboard_speedups AS s
CROSS JOIN range(0, 121) AS g(i)
GROUP BY ALL
