"""The invariants the build enforces before it publishes, on small real DuckDB tables."""

from __future__ import annotations

import duckdb
import pytest

from tracehouse.assemble.invariants import (
    RUN_INVARIANTS,
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
