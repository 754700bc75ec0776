"""sql/marts/leaderboard_fast_p.sql counts each speedup once against the 121 thresholds; its
curve is the direct one (every speedup compared with every threshold), to the bit, on the
values where the two could part: each threshold itself and the doubles either side of it, no
speedup (NULL), zero, negative, beyond the last threshold, infinite and NaN."""

from __future__ import annotations

import duckdb

from tracehouse.sql_files import sql_text

# The curve as its rule is stated: the share of a solution's speedups >= p, at each p.
DIRECT_CURVE = """
SELECT
    s.definition,
    s.hardware,
    s.solution,
    (g.i * 0.025)::DOUBLE AS p,
    avg(CASE WHEN s.speedup >= (g.i * 0.025)::DOUBLE THEN 1.0 ELSE 0.0 END)::DOUBLE AS fast_p
FROM leaderboard_speedups AS s
CROSS JOIN range(0, 121) AS g(i)
GROUP BY ALL
"""

EDGES = """
SELECT 'boundaries' AS solution, v AS speedup
FROM (
    SELECT unnest([t, nextafter(t, -1.0::DOUBLE), nextafter(t, 10.0::DOUBLE)]) AS v
    FROM (SELECT (i * 0.025)::DOUBLE AS t FROM range(0, 121) AS r(i))
)
UNION ALL SELECT 'odd values', unnest([NULL, 0.0, -0.0, -2.5, 3.0, 3.0000001, 7.5, 1e300,
                                       'inf'::DOUBLE, '-inf'::DOUBLE, 'nan'::DOUBLE])
UNION ALL SELECT 'never passed', unnest([NULL, NULL, NULL]::DOUBLE[])
UNION ALL SELECT 'one workload', 0.95
UNION ALL SELECT 'thirds', unnest([0.3, 0.9500000000000001, 2.0])
"""


def _speedups(connection: duckdb.DuckDBPyConnection) -> None:
    connection.execute(
        "CREATE TABLE leaderboard_speedups AS "  # noqa: S608  (own text)
        f"SELECT 'def' AS definition, 'H100' AS hardware, solution, "
        f"'w' || row_number() OVER () AS workload_key, 'base' AS baseline_solution, "
        f"speedup::DOUBLE AS speedup FROM ({EDGES})"
    )


def test_the_counted_curve_is_the_direct_one_to_the_bit() -> None:
    connection = duckdb.connect()
    _speedups(connection)
    counted = f"({sql_text('leaderboard_fast_p')})"
    direct = f"({DIRECT_CURVE})"
    columns = "definition, hardware, solution, p, fast_p"
    for left, right in ((counted, direct), (direct, counted)):
        missing = connection.execute(
            f"SELECT {columns} FROM {left} EXCEPT ALL SELECT {columns} FROM {right}"  # noqa: S608
        ).fetchall()
        assert missing == []
    rows = connection.execute(f"SELECT solution, p, fast_p FROM {counted}").fetchall()  # noqa: S608
    assert len(rows) == 5 * 121
    curve = {(solution, p): fast_p for solution, p, fast_p in rows}
    assert curve[("one workload", 0.95)] == 1.0  # a speedup equal to p reaches it
    assert curve[("one workload", 0.975)] == 0.0
    assert curve[("never passed", 0.0)] == 0.0
    assert curve[("thirds", 0.95)] == 2 / 3  # 0.9500000000000001 is above 0.95
    assert curve[("thirds", 3.0)] == 0.0
    # of 11 odd values, p = 0 is reached by 0.0, -0.0, 3.0, 3.0000001, 7.5, 1e300, inf and
    # NaN (DuckDB orders NaN above every number), not by NULL, -2.5 or -inf
    assert curve[("odd values", 0.0)] == 8 / 11
