"""The report's coverage rows (DEFINITION_COVERAGE_SQL) build the cell grid of the drawn
definitions only, and count a summarised one's 'not run' as its workloads less the solution's
cells: the rows are those of the grid of every definition (the formulation below), on slices
drawn and counted, with workloads a solution never ran, NULL statuses and runs not evaluated."""

from __future__ import annotations

import duckdb
import pytest

from tracehouse.serve.report_definition import DEFINITION_COVERAGE_SQL

# Every (solution, workload) cell of every slice, then the counted slices summed: the cells
# (and their status rule) as the report's query has them, the rest the grid it used to build.
GRID_OF_EVERY_SLICE = (
    DEFINITION_COVERAGE_SQL[: DEFINITION_COVERAGE_SQL.index("slices AS (")]  # noqa: S608
    + """slices AS (
    SELECT definition, hardware, count(DISTINCT workload_key) AS n_workloads
    FROM cells GROUP BY ALL
),
grid AS (
    SELECT s.definition, s.hardware, s.solution, w.workload_key
    FROM (SELECT DISTINCT definition, hardware, solution FROM cells) AS s
    JOIN (SELECT DISTINCT definition, hardware, workload_key FROM cells) AS w
        USING (definition, hardware)
),
graded AS (
    SELECT g.definition, g.hardware, g.solution, g.workload_key,
           coalesce(c.status, 'not run') AS status, n.n_workloads
    FROM grid AS g
    JOIN slices AS n USING (definition, hardware)
    LEFT JOIN cells AS c USING (definition, hardware, solution, workload_key)
)
SELECT g.definition, g.hardware, g.solution, g.workload_key, a.axes_json, g.status,
       1 AS cells, g.n_workloads
FROM graded AS g
LEFT JOIN axes AS a USING (definition, workload_key)
WHERE g.n_workloads <= $max_workloads
UNION ALL
SELECT definition, hardware, solution, NULL, NULL, status, count(*), any_value(n_workloads)
FROM graded
WHERE n_workloads > $max_workloads
GROUP BY definition, hardware, solution, status
ORDER BY definition, hardware, solution, workload_key, status
"""
)

RUNS = [
    # definition, hardware, solution, workload_key, status, evaluated
    ("d1", "H100", "a", "w1", "PASSED", True),
    ("d1", "H100", "a", "w1", "RUNTIME_ERROR", True),
    ("d1", "H100", "a", "w2", "INCORRECT_NUMERICAL", True),
    ("d1", "H100", "a", "w3", None, True),
    ("d1", "H100", "b", "w1", "COMPILE_ERROR", True),
    ("d1", "H100", "b", "w2", "RUNTIME_ERROR", False),
    ("d1", "H100", "c", "w4", "PASSED", True),
    ("d1", "B200", "a", "w1", "PASSED", True),
    ("d1", "B200", "b", "w9", "PASSED", True),
    ("d2", "H100", "x", "v1", "PASSED", True),
    ("d2", "H100", "x", "v2", "PASSED", True),
    ("d2", "H100", "y", "v2", "TIMEOUT", True),
    ("d2", "H100", None, "v3", "PASSED", True),  # no solution: no cell
]
WORKLOADS = [("d1", "w1", '{"M": 1}'), ("d1", "w2", '{"M": 8}'), ("d2", "v1", '{"N": 2}')]


@pytest.mark.parametrize("max_workloads", [0, 1, 2, 3, 4, 1000])
def test_coverage_rows_are_the_full_grids(max_workloads: int) -> None:
    connection = duckdb.connect()
    connection.execute(
        "CREATE TABLE runs (definition VARCHAR, hardware VARCHAR, solution VARCHAR, "
        "workload_key VARCHAR, status VARCHAR, evaluated BOOLEAN)"
    )
    connection.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?)", RUNS)
    connection.execute(
        "CREATE TABLE workloads (definition VARCHAR, workload_key VARCHAR, axes_json VARCHAR)"
    )
    connection.executemany("INSERT INTO workloads VALUES (?, ?, ?)", WORKLOADS)
    parameters = {"max_workloads": max_workloads}
    got = connection.execute(DEFINITION_COVERAGE_SQL, parameters).fetchall()
    expected = connection.execute(GRID_OF_EVERY_SLICE, parameters).fetchall()
    assert got == expected  # the same rows in the same order
    if max_workloads == 0:  # every slice counted: d1 on H100 has 4 workloads, c ran one
        assert ("d1", "H100", "c", None, None, "not run", 3, 4) in got
    if max_workloads == 1000:  # every slice drawn, cell by cell
        assert ("d1", "H100", "b", "w3", None, "not run", 1, 4) in got
