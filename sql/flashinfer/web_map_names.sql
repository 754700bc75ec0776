-- Which baseline maps exist in this warehouse (see web_baseline_maps): `author_baseline`
-- always, `baselines_file` when the build was given a map.
SELECT 'author_baseline' AS baseline_map
UNION ALL
SELECT 'baselines_file' WHERE EXISTS (SELECT 1 FROM baseline_map)
