-- The baseline name maps the web figures are computed with, per source scope (the --baselines
-- map applies to every source), each {definition: {default, <device>}}:
--   baselines_file   the map given to the build (--baselines, FlashInfer-Bench's baselines.json
--                    format), when there was one;
--   author_baseline  {definition: {default: its one solution of author `baseline`}}, for
--                    definitions with exactly one such solution: the web logic with
--                    FlashInfer-Bench's Python baseline rule.
SELECT DISTINCT s.source, 'baselines_file' AS baseline_map, m.definition, m.device, m.solution, m.position
FROM fib_source_scopes AS s
CROSS JOIN baseline_map AS m
UNION ALL
SELECT source, 'author_baseline', definition, 'default', min(solution), 0
FROM fib_solutions
WHERE author = 'baseline'
GROUP BY source, definition
HAVING count(*) = 1
