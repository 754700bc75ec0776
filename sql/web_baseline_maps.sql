-- The baseline name maps the web figures are computed with, each {definition: {default, <device>}}:
--   baselines_file   the map given to the build (--baselines, FlashInfer-Bench's baselines.json
--                    format), when there was one;
--   author_baseline  {definition: {default: its one solution of author `baseline`}}, for
--                    definitions with exactly one such solution: the web logic with
--                    FlashInfer-Bench's Python baseline rule.
SELECT 'baselines_file' AS baseline_map, definition, device, solution, position
FROM baseline_map
UNION ALL
SELECT 'author_baseline', definition, 'default', min(solution), 0
FROM fib_solutions
WHERE author = 'baseline'
GROUP BY definition
HAVING count(*) = 1
