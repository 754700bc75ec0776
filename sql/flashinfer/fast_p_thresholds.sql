-- The thresholds p the fast_p and bucket views are computed at: the web's presets (0.95, its
-- default pin, 1.0 and 0.7) and a grid from 0 to 2. For any other p, use web_ratio_entries.
SELECT p, p IN (0.95, 1.0, 0.7) AS web_preset
FROM (VALUES (0.0), (0.5), (0.7), (0.8), (0.9), (0.95), (1.0), (1.1), (1.2), (1.5), (2.0)) AS t(p)
