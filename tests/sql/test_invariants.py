"""The invariants the build enforces before it publishes, on small real DuckDB tables."""

from __future__ import annotations

import duckdb
import pytest

from tracehouse.assemble.invariants import (
    RANKING_INVARIANTS,
    RUN_INVARIANTS,
    Checked,
    InvariantViolation,
    enforce,
    fact_tables_not_empty,
    tables_shrink_within_limit,
)


def _warehouse(run_ids: list[str]) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect()
    connection.execute("CREATE TABLE definitions AS SELECT 'd' AS definition")
    connection.execute("CREATE TABLE workloads AS SELECT 'd' AS definition, 'w' AS workload_key")
    connection.execute("CREATE TABLE environments AS SELECT 'e' AS environment_id")
    connection.execute(
        "CREATE TABLE runs AS SELECT unnest($ids) AS run_id, 'd' AS definition, 'w' AS workload_key, "
        "'e' AS environment_id, 'PASSED' AS status, 0.5 AS latency_ms, 500000 AS latency_ns, "
        "NULL::VARCHAR AS latency_special, "
        "'sha256:k' AS comparison_key, 'sha256:o' AS operation_digest, 'sha256:w' AS workload_digest",
        {"ids": run_ids},
    )
    connection.execute("CREATE TABLE correctness AS SELECT run_id FROM runs")
    return connection


def test_a_consistent_warehouse_passes() -> None:
    enforce(_warehouse(["a", "b"]), RUN_INVARIANTS)


def test_duplicate_run_ids_stop_the_build() -> None:
    with pytest.raises(InvariantViolation, match="unique_run_ids"):
        enforce(_warehouse(["a", "a"]), RUN_INVARIANTS)


def test_a_run_with_an_unknown_definition_stops_the_build() -> None:
    connection = _warehouse(["a"])
    connection.execute("DELETE FROM definitions")
    with pytest.raises(InvariantViolation, match="runs_resolve_references"):
        enforce(connection, RUN_INVARIANTS)


def test_a_passed_run_with_a_non_finite_latency_is_consistent_when_it_says_why() -> None:
    connection = _warehouse(["a", "b"])
    connection.execute(
        "UPDATE runs SET latency_ms = NULL, latency_ns = NULL, latency_special = 'Infinity' "
        "WHERE run_id = 'b'"
    )
    enforce(connection, RUN_INVARIANTS)
    connection.execute("UPDATE runs SET latency_special = NULL WHERE run_id = 'b'")
    with pytest.raises(InvariantViolation, match="passed_latency_finite_positive"):
        enforce(connection, RUN_INVARIANTS)


def test_the_shrink_guard_counts_every_table_but_rejects() -> None:
    before = {"runs": 1490, "implementations": 53, "rejects": 40, "source_snapshots": 2}
    assert tables_shrink_within_limit(None, {"runs": 0}, 0.5)[0]  # a first build
    assert tables_shrink_within_limit(before, {**before, "runs": 745}, 0.5)[0]  # exactly half
    passed, metadata = tables_shrink_within_limit(
        before, {**before, "runs": 744, "rejects": 0}, 0.5
    )
    assert not passed
    assert set(metadata["shrinking_tables"]) == {"runs"}
    passed, metadata = tables_shrink_within_limit(before, {**before, "implementations": 50}, 0.05)
    assert not passed and set(metadata["shrinking_tables"]) == {"implementations"}
    assert tables_shrink_within_limit(before, {"runs": 0, "implementations": 0}, 1.0)[0]


def test_empty_fact_tables_are_named() -> None:
    assert fact_tables_not_empty({"runs": 3, "run_rankings": 3})[0]
    passed, metadata = fact_tables_not_empty({"runs": 0, "run_rankings": 0, "workloads": 9})
    assert not passed and metadata["empty_fact_tables"] == ["runs", "run_rankings"]


def _changed(connection: duckdb.DuckDBPyConnection, run_ids: list[str]) -> Checked:
    """A scope of the runs ``run_ids`` (as the files a build wrote would hold them), with
    their correctness rows and their rankings."""
    connection.execute(
        "CREATE OR REPLACE TEMP TABLE changed_ids AS SELECT unnest($ids) AS run_id",
        {"ids": run_ids},
    )
    for name, table in (
        ("changed_runs", "runs"),
        ("changed_rankings", "run_rankings"),
        ("changed_correctness", "correctness"),
    ):
        connection.execute(
            f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM {table} "  # noqa: S608  (own names)
            "WHERE run_id IN (SELECT run_id FROM changed_ids)"
        )
    return Checked(
        runs="changed_runs",
        correctness_run_ids="changed_correctness",
        rankings="changed_rankings",
        changed_runs=len(run_ids),
    )


def _ranked(connection: duckdb.DuckDBPyConnection) -> None:
    """Every run eligible, ranked, in one cohort of all of them."""
    connection.execute(
        "CREATE TABLE run_rankings AS SELECT run_id, true AS eligible, 1 AS rank, "
        "count(*) OVER () AS cohort_size FROM runs"
    )


def test_a_scoped_check_finds_what_the_changed_runs_break() -> None:
    # the changed run "a" takes the id of a run the build did not change
    connection = _warehouse(["a", "a", "c"])
    _ranked(connection)
    checked = _changed(connection, ["a"])
    with pytest.raises(InvariantViolation, match="unique_run_ids"):
        enforce(connection, RUN_INVARIANTS, checked=checked)
    connection.execute("DELETE FROM runs WHERE run_id = 'a'")
    connection.execute("INSERT INTO runs SELECT * REPLACE ('a' AS run_id) FROM runs LIMIT 1")
    # a changed run without its correctness row, and a cohort of two sizes
    connection.execute("DELETE FROM correctness WHERE run_id = 'a'")
    with pytest.raises(InvariantViolation, match="run_status_matrix") as refused:
        enforce(connection, RUN_INVARIANTS, checked=checked)
    assert refused.value.outcomes["run_status_matrix"][1]["checked"] == (
        "the rows this build changed (1 runs)"
    )
    connection.execute("INSERT INTO correctness VALUES ('a')")
    enforce(connection, RUN_INVARIANTS, checked=checked)
    # a bucket ranked again is ranked whole: its cohort of "a" and "c" with two sizes
    connection.execute("UPDATE run_rankings SET cohort_size = 2 WHERE run_id = 'a'")
    with pytest.raises(InvariantViolation, match="one_cohort_size_per_comparison_key"):
        enforce(connection, RANKING_INVARIANTS, checked=_changed(connection, ["a", "c"]))


def test_a_scoped_check_leaves_the_rows_the_build_did_not_change() -> None:
    # "c" breaks the status rules, but it was published that way by rules that passed it: a
    # build that changed only "a" checks "a"; a check of every row finds "c"
    connection = _warehouse(["a", "c"])
    _ranked(connection)
    connection.execute("DELETE FROM correctness WHERE run_id = 'c'")
    outcomes = enforce(
        connection, (*RUN_INVARIANTS, *RANKING_INVARIANTS), checked=_changed(connection, ["a"])
    )
    assert outcomes["run_status_matrix"][1]["violating_runs"] == 0
    with pytest.raises(InvariantViolation, match="run_status_matrix"):
        enforce(connection, RUN_INVARIANTS)
