"""A build that only added runs to its base ranks with the base's bucket names
(``finalize._ranking_scope``, ``parts.write_ranking_parts``): only the buckets of the added runs
are digested again. On real DuckDB tables: the names equal those of digesting every bucket."""

from __future__ import annotations

from pathlib import Path

import duckdb
import orjson

from tracehouse.assemble import invariants
from tracehouse.assemble.finalize import RANKING_PARTS_FILE, _ranking_scope
from tracehouse.assemble.parts import RankingScope, ranking_rule, write_ranking_parts
from tracehouse.warehouse import Warehouse

# Two operations, in two ranking buckets (the bucket is a slice of the operation digest).
OPERATIONS = ("sha256:op-a", "sha256:op-b")


def _runs(connection: duckdb.DuckDBPyConnection, runs: list[tuple[str, str, int]]) -> None:
    """The columns sql/rank/ranking_inputs.sql reads, for (run id, operation, latency) rows."""
    connection.execute(
        "CREATE OR REPLACE TABLE runs AS SELECT r.run_id, r.operation_digest, "
        "'key-' || r.operation_digest AS comparison_key, r.latency_ns, "
        "'digest-' || r.run_id AS run_digest, 'line-' || r.run_id AS line_digest, "
        "'passed' AS ki_status, 'PASSED' AS status "
        "FROM (SELECT unnest($ids) AS run_id, unnest($operations) AS operation_digest, "
        "unnest($latencies)::BIGINT AS latency_ns) AS r",
        {
            "ids": [run_id for run_id, _, _ in runs],
            "operations": [operation for _, operation, _ in runs],
            "latencies": [latency for _, _, latency in runs],
        },
    )


def _names(parts: dict[str, Path]) -> dict[str, str]:
    return {bucket: part.name for bucket, part in parts.items()}


def test_added_runs_digest_only_their_bucket_and_name_every_part_as_a_full_digest(
    tmp_path: Path,
) -> None:
    warehouse = Warehouse(tmp_path / "w")
    connection = duckdb.connect()
    base_runs = [(f"r{i}", OPERATIONS[i % 2], 1000 + i) for i in range(8)]
    _runs(connection, base_runs)
    base = _names(write_ranking_parts(connection, warehouse, None))
    assert len(base) == 2

    _runs(connection, [*base_runs, ("r8", OPERATIONS[0], 900)])
    connection.execute("CREATE TEMP TABLE added AS SELECT 'r8' AS run_id")
    full = _names(write_ranking_parts(connection, warehouse, None))
    scoped = _names(write_ranking_parts(connection, warehouse, None, RankingScope(base, "added")))
    assert scoped == full
    assert sum(full[bucket] != base[bucket] for bucket in base) == 1  # the added run's bucket

    # What the scope takes from a base's names it never recomputes: a name planted for the
    # untouched bucket stays, the touched one is digested again.
    untouched = next(bucket for bucket in base if full[bucket] == base[bucket])
    planted = {**base, untouched: "planted"}
    kept = _names(write_ranking_parts(connection, warehouse, None, RankingScope(planted, "added")))
    assert kept == {**full, untouched: "planted"}


def test_the_scope_is_taken_only_from_a_base_that_recorded_its_parts_by_the_same_rule(
    tmp_path: Path,
) -> None:
    connection = duckdb.connect()
    connection.execute("CREATE TEMP TABLE dropped_runs AS SELECT 'x' AS run_id WHERE false")
    base = tmp_path / "base"
    base.mkdir()
    rule = ranking_rule()
    checked = invariants.Checked(runs="changed_runs", changed_runs=1)

    assert _ranking_scope(connection, base, rule, checked) is None  # no record
    (base / RANKING_PARTS_FILE).write_bytes(b"{not json")
    assert _ranking_scope(connection, base, rule, checked) is None
    (base / RANKING_PARTS_FILE).write_bytes(orjson.dumps({"rule": rule, "parts": {"0a": "part-a"}}))
    assert _ranking_scope(connection, base, rule, checked) == RankingScope(
        {"0a": "part-a"}, "changed_runs"
    )
    assert _ranking_scope(connection, base, "another rule", checked) is None
    assert _ranking_scope(connection, base, rule, invariants.EVERYTHING) is None
    assert _ranking_scope(connection, None, rule, checked) is None
    # A dropped run file: a bucket may have lost runs without one being added.
    connection.execute("CREATE OR REPLACE TEMP TABLE dropped_runs AS SELECT 'x' AS run_id")
    assert _ranking_scope(connection, base, rule, checked) is None
