-- The web's workload groups (fib-metrics.md §6.2): per source scope, map, hardware scope and definition, the
-- evaluated lines of each uuid, in first-appearance order. The device of the group's FIRST
-- line (whoever ran it) picks the baseline name: the map's entry for that device, else its
-- default. fast_p uses the latency of the baseline's FIRST line in the group, whatever its
-- status, and skips the group (usable = false) unless it is a number > 0; the score uses the
-- baseline's minimum PASSED latency > 0 in the group instead.
-- Computed once per distinct set of evaluated lines (web_hardware_scopes.same_lines_as), then
-- given to every scope that holds that set.
-- web_hardware_scopes is read twice, computed once (MATERIALIZED): inlined twice, it made
-- planning the web views over a small warehouse up to twice as slow.
WITH scopes AS MATERIALIZED (
    SELECT source, hardware, same_lines_as FROM web_hardware_scopes
),
evaluated AS (
    SELECT t.*
    FROM web_scoped_traces AS t
    SEMI JOIN scopes AS h
        ON h.source = t.source AND h.hardware = t.hardware AND h.same_lines_as = h.hardware
    WHERE t.has_evaluation
),
groups AS (
    SELECT
        source,
        hardware,
        definition,
        workload_group,
        min(trace_order) AS first_order,
        arg_min(device, trace_order) AS group_device
    FROM evaluated
    GROUP BY ALL
),
named AS (
    SELECT
        m.baseline_map,
        g.*,
        coalesce(by_device.solution, by_default.solution) AS baseline_solution,
        CASE
            WHEN by_device.solution IS NOT NULL THEN 'device:' || g.group_device
            WHEN by_default.solution IS NOT NULL THEN 'default'
        END AS baseline_entry
    FROM groups AS g
    CROSS JOIN web_map_names AS m
    LEFT JOIN web_baseline_maps AS by_device
        ON by_device.source = g.source AND by_device.baseline_map = m.baseline_map
        AND by_device.definition = g.definition
        AND by_device.device = g.group_device AND by_device.device <> 'default'
    LEFT JOIN web_baseline_maps AS by_default
        ON by_default.source = g.source AND by_default.baseline_map = m.baseline_map
        AND by_default.definition = g.definition
        AND by_default.device = 'default'
),
baseline_runs AS (
    SELECT
        n.source,
        n.baseline_map,
        n.hardware,
        n.definition,
        n.workload_group,
        arg_min_null(t.latency_ms, t.trace_order) AS first_latency_ms,
        min(t.latency_ms) FILTER (WHERE t.status = 'PASSED' AND t.latency_ms > 0) AS min_latency_ms
    FROM named AS n
    JOIN evaluated AS t
        ON t.source = n.source AND t.hardware = n.hardware AND t.definition = n.definition
        AND t.workload_group = n.workload_group AND t.solution = n.baseline_solution
    GROUP BY ALL
),
computed AS (
    SELECT
        n.*,
        b.first_latency_ms AS baseline_first_latency_ms,
        b.min_latency_ms AS baseline_min_latency_ms,
        coalesce(b.first_latency_ms > 0, false) AS usable
    FROM named AS n
    LEFT JOIN baseline_runs AS b USING (source, baseline_map, hardware, definition, workload_group)
)
SELECT c.* REPLACE (h.hardware AS hardware)
FROM computed AS c
JOIN scopes AS h ON h.source = c.source AND h.same_lines_as = c.hardware
