"""The invariants the build enforces before it publishes, on small real DuckDB tables."""

from __future__ import annotations

import duckdb
import pytest

from pipelines.invariants import RUN_INVARIANTS, InvariantViolation, enforce


def _warehouse(run_ids: list[str]) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect()
    connection.execute("CREATE TABLE definitions AS SELECT 'd' AS definition")
    connection.execute("CREATE TABLE workloads AS SELECT 'd' AS definition, 'w' AS workload_key")
    connection.execute("CREATE TABLE environments AS SELECT 'e' AS environment_id")
    connection.execute(
        "CREATE TABLE runs AS SELECT unnest($ids) AS run_id, 'd' AS definition, 'w' AS workload_key, "
        "'e' AS environment_id, 'PASSED' AS status, 0.5 AS latency_ms, 500000 AS latency_ns, "
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
