-- tracehouse's baseline per (definition, hardware), for its own headline (leaderboard), and why.
-- Candidates, strongest rule first: the --baselines map's entry for a device string of this
-- hardware; the map's default; the definition's solutions of author `baseline`; of author
-- `flashinfer` (its name before 2026-04-12). Among several candidates of the strongest rule
-- present, the one that passed the most workloads on this hardware, then the first by name;
-- `candidates` says how many there were. A candidate that never ran here is not chosen.
WITH slices AS (
    SELECT DISTINCT definition, hardware FROM runs
),
candidates AS (
    SELECT s.definition, s.hardware, m.solution, 1 AS priority, 'map entry for ' || m.device AS rule
    FROM slices AS s
    JOIN baseline_map AS m ON m.definition = s.definition AND m.device <> 'default'
    JOIN environments AS e ON e.hardware_raw = m.device AND e.hardware_product = s.hardware
    UNION
    SELECT s.definition, s.hardware, m.solution, 2, 'map default'
    FROM slices AS s
    JOIN baseline_map AS m ON m.definition = s.definition AND m.device = 'default'
    UNION
    SELECT s.definition, s.hardware, i.solution, 3, 'author baseline'
    FROM slices AS s
    JOIN implementations AS i ON i.definition = s.definition AND i.author = 'baseline'
    UNION
    SELECT s.definition, s.hardware, i.solution, 4, 'author flashinfer'
    FROM slices AS s
    JOIN implementations AS i ON i.definition = s.definition AND i.author = 'flashinfer'
),
measured AS (
    SELECT
        c.*,
        count(DISTINCT l.workload_key) FILTER (WHERE l.passed) AS workloads_passed
    FROM candidates AS c
    JOIN solution_workload_latency AS l
        ON l.definition = c.definition AND l.hardware = c.hardware AND l.solution = c.solution
    GROUP BY ALL
),
strongest AS (
    SELECT *, count(*) OVER (PARTITION BY definition, hardware, priority) AS candidates
    FROM measured
    QUALIFY priority = min(priority) OVER (PARTITION BY definition, hardware)
)
SELECT
    definition,
    hardware,
    solution AS baseline_solution,
    rule AS baseline_rule,
    candidates,
    CASE
        WHEN candidates = 1 THEN rule
        ELSE rule || ': ' || candidates || ' candidates, chosen for passing the most workloads here ('
            || workloads_passed || ')'
    END AS baseline_choice
FROM strongest
QUALIFY row_number() OVER (
    PARTITION BY definition, hardware ORDER BY workloads_passed DESC, solution
) = 1
