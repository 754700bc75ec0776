-- tracehouse's own headline, per (definition, hardware, solution), with FlashInfer-Bench's own
-- figure beside it, each labelled:
--   geomean_speedup   geometric mean of baseline/solution best (minimum) PASSED latency over the
--                     workloads both passed on this hardware (the baseline of leaderboard_baselines);
--                     the baseline itself reads 1.0 (over the workloads it passed);
--                     NULL with speedup_reason: no_baseline, no_common_workload, baseline_not_passed
--   win_rate          share of those workloads where the solution is strictly faster
--   coverage          workloads_passed / workloads of this definition run on this hardware
--   latency_us_geomean geometric mean over the passed workloads of the median latency (µs);
--   rerun_spread_median the median over re-run workloads of (max − min) / median latency
--   runs_not_evaluated records FlashInfer-Bench wrote without evaluating (runs.evaluated)
--   fib_all_gpus_*    FlashInfer-Bench's get_solution_score with every GPU mixed (fib_solution_scores,
--                     hardware `all`) in the source scope `fib_scope`: the union `(all sources)`
--                     when the warehouse has one and it holds the solution, else the first source
--                     (by name) holding it; the same number on each hardware row; NULL +
--                     fib_reason where FlashInfer-Bench raises or returns None
-- Sort (leaderboard_rank), so that nothing slower than the baseline ranks above it and a
-- solution that failed most workloads never ranks above one that passed them all among those
-- as fast: speed_class 1 = faster than the baseline (geomean_speedup > 1), 2 = the baseline,
-- 3 = not faster, 4 = not comparable (no baseline or no common workload); within a class
-- sort_tier 1 = passed every workload of the slice, 2 = passed more than half, 3 = half or
-- fewer; then geomean_speedup descending, workloads_passed descending, latency, name.
WITH per_workload AS (
    SELECT * FROM solution_workload_latency
),
slice AS (
    SELECT definition, hardware, count(DISTINCT workload_key) AS workloads_in_slice
    FROM per_workload
    GROUP BY ALL
),
attempts AS (
    SELECT
        definition,
        hardware,
        solution,
        sum(runs) AS runs,
        count(*) AS workloads_attempted,
        count(*) FILTER (WHERE passed) AS workloads_passed,
        -- sums as left folds in workload order, so the figure is the same on every query
        exp(
            list_reduce(list(ln(median_latency_us) ORDER BY workload_key) FILTER (WHERE passed),
                        lambda a, b: a + b)
            / count(*) FILTER (WHERE passed)
        ) AS latency_us_geomean,
        median(rerun_spread) AS rerun_spread_median
    FROM per_workload
    GROUP BY ALL
),
ratios AS (
    SELECT
        w.definition,
        w.hardware,
        w.solution,
        w.workload_key,
        b.best_latency_us / w.best_latency_us AS speedup
    FROM per_workload AS w
    JOIN leaderboard_baselines AS lb USING (definition, hardware)
    JOIN per_workload AS b
        ON b.definition = w.definition AND b.hardware = w.hardware
        AND b.solution = lb.baseline_solution AND b.workload_key = w.workload_key
    WHERE w.passed AND b.passed AND w.solution <> lb.baseline_solution
),
-- issue 10: FlashInfer-Bench's "skipped after N failures" records, told apart
not_evaluated AS (
    SELECT definition, hardware, solution, count(*) AS runs_not_evaluated
    FROM runs
    WHERE solution IS NOT NULL AND NOT evaluated
    GROUP BY ALL
),
scored AS (
    SELECT
        definition,
        hardware,
        solution,
        count(*) AS workloads_compared,
        exp(list_reduce(list(ln(speedup) ORDER BY workload_key), lambda a, b: a + b) / count(*))
            AS geomean_speedup,
        avg(CASE WHEN speedup > 1 THEN 1.0 ELSE 0.0 END)::DOUBLE AS win_rate
    FROM ratios
    GROUP BY ALL
),
assembled AS (
    SELECT
        a.definition,
        a.hardware,
        a.solution,
        i.author,
        -- issue 10: a solution is a baseline of its own definition only
        coalesce(i.is_baseline AND i.definition = a.definition, false) AS is_baseline,
        lb.baseline_solution,
        lb.baseline_choice,
        a.runs::BIGINT AS runs,
        coalesce(ne.runs_not_evaluated, 0) AS runs_not_evaluated,
        l.workloads_in_slice,
        a.workloads_attempted,
        a.workloads_passed,
        a.workloads_passed / l.workloads_in_slice AS coverage,
        CASE WHEN a.solution = lb.baseline_solution THEN a.workloads_passed
             ELSE coalesce(s.workloads_compared, 0) END AS workloads_compared,
        CASE
            WHEN a.solution = lb.baseline_solution THEN
                CASE WHEN a.workloads_passed > 0 THEN 1.0::DOUBLE END
            ELSE s.geomean_speedup
        END AS geomean_speedup,
        CASE
            WHEN a.solution = lb.baseline_solution THEN
                CASE WHEN a.workloads_passed > 0 THEN 0.0::DOUBLE END
            ELSE s.win_rate
        END AS win_rate,
        CASE
            WHEN a.solution = lb.baseline_solution THEN
                CASE WHEN a.workloads_passed = 0 THEN 'baseline_not_passed' END
            WHEN lb.baseline_solution IS NULL THEN 'no_baseline'
            WHEN s.geomean_speedup IS NULL THEN 'no_common_workload'
        END AS speedup_reason,
        a.latency_us_geomean,
        a.rerun_spread_median,
        CASE
            WHEN a.workloads_passed = l.workloads_in_slice THEN 1
            WHEN a.workloads_passed * 2 > l.workloads_in_slice THEN 2
            ELSE 3
        END AS sort_tier,
        f.avg_speedup AS fib_all_gpus_avg_speedup,
        f.win_rate AS fib_all_gpus_win_rate,
        f.success_rate AS fib_all_gpus_success_rate,
        f.workloads AS fib_all_gpus_workloads,
        coalesce(f.reason, CASE WHEN f.solution IS NULL THEN 'not_loaded_by_fib' END) AS fib_reason,
        f.source AS fib_scope
    FROM attempts AS a
    JOIN slice AS l USING (definition, hardware)
    LEFT JOIN scored AS s USING (definition, hardware, solution)
    LEFT JOIN not_evaluated AS ne USING (definition, hardware, solution)
    LEFT JOIN leaderboard_baselines AS lb USING (definition, hardware)
    -- A solution of several sources: the first source by name describes it.
    LEFT JOIN (
        SELECT * FROM implementations
        QUALIFY row_number() OVER (PARTITION BY solution ORDER BY source) = 1
    ) AS i ON i.solution = a.solution
    LEFT JOIN (
        SELECT * FROM fib_solution_scores
        WHERE hardware = 'all'
        QUALIFY row_number() OVER (
            PARTITION BY solution ORDER BY source = '(all sources)' DESC, source
        ) = 1
    ) AS f ON f.solution = a.solution
),
classed AS (
    SELECT
        *,
        CASE
            WHEN solution = baseline_solution THEN 2
            WHEN geomean_speedup > 1 THEN 1
            WHEN geomean_speedup IS NOT NULL THEN 3
            ELSE 4
        END AS speed_class
    FROM assembled
)
SELECT
    *,
    row_number() OVER (
        PARTITION BY definition, hardware
        ORDER BY speed_class, sort_tier, geomean_speedup DESC NULLS LAST, workloads_passed DESC,
                 latency_us_geomean NULLS LAST, solution
    ) AS leaderboard_rank
FROM classed
