"""The statuses text of a change row (`changes_sql._statuses`) is what
string_agg(DISTINCT status, '/' ORDER BY status) gives, on every shape of group."""

from __future__ import annotations

import duckdb

from tracehouse.serve.changes_sql import _statuses

GROUPS = [
    ("one", ["PASSED"]),
    ("repeated", ["PASSED", "PASSED", "PASSED"]),
    ("several", ["RUNTIME_ERROR", "PASSED", "INCORRECT_NUMERICAL", "PASSED"]),
    ("with nulls", [None, "PASSED", None, "COMPILE_ERROR"]),
    ("only nulls", [None, None]),
    ("empty text", ["", "PASSED", ""]),
    ("only empty text", [""]),
    ("non-ascii", ["ÉCHEC", "PASSED", "échec"]),
]


def test_the_statuses_text_is_the_distinct_ordered_aggregate() -> None:
    connection = duckdb.connect()
    connection.execute("CREATE TABLE lines (grp VARCHAR, status VARCHAR)")
    connection.executemany(
        "INSERT INTO lines VALUES (?, ?)",
        [(group, status) for group, statuses in GROUPS for status in statuses],
    )
    rows = connection.execute(
        "SELECT grp, string_agg(DISTINCT status, '/' ORDER BY status) AS expected, "  # noqa: S608
        f"{_statuses('status')} AS got FROM lines GROUP BY grp ORDER BY grp"
    ).fetchall()
    assert len(rows) == len(GROUPS)
    for group, expected, got in rows:
        assert got == expected, group
    by_group = {group: got for group, _, got in rows}
    assert by_group["several"] == "INCORRECT_NUMERICAL/PASSED/RUNTIME_ERROR"
    assert by_group["only nulls"] is None
    assert by_group["empty text"] == "/PASSED"
