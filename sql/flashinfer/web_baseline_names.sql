-- Per map and definition, every solution name the map gives (default and device entries):
-- such a solution never gets a curve or a score of its own on the site.
SELECT DISTINCT source, baseline_map, definition, solution FROM web_baseline_maps
