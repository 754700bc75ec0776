"""Asset checks over the built warehouse: each one a SQL query with bound parameters, run on a
read-only connection to the current generation, returning counts and a few offending ids.

Two kinds:

* ``GATE_CHECKS`` on ``runs`` are blocking and decide whether the ranking may be published as
  an asset. ``build_warehouse`` ranks inside the same atomic build, so they run inside the
  build step itself (``check_specs`` of the ``warehouse_tables`` multi-asset); when one fails,
  ``run_rankings`` is not materialized, the step fails and the views downstream do not run.
* The rest are ordinary ``@asset_check`` steps that can also be re-run on their own from the UI.
  ``one_cohort_size_per_comparison_key`` is blocking, so ``run_summary`` and ``leaderboard``
  wait for it.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dagster as dg
import duckdb
import orjson

from pipelines.defs.resources import WarehouseResource
from pipelines.transforms import identity
from pipelines.transforms.canonical import CanonicalizationError, digest, manifest_digest
from pipelines.transforms.normalize import FORBIDS_CORRECTNESS, NEEDS_CORRECTNESS

# How many offending ids a check lists in its metadata.
SAMPLE_IDS = 5
# How many stored digests the identity checks recompute per table.
DIGEST_SAMPLE_SIZE = 50

Outcome = tuple[bool, dict[str, Any]]


@dataclass(frozen=True)
class WarehouseCheck:
    """A named check of one table; ``evaluate``'s docstring is its description."""

    asset: str
    evaluate: Callable[[duckdb.DuckDBPyConnection], Outcome]
    blocking: bool = False

    @property
    def name(self) -> str:
        return self.evaluate.__name__

    @property
    def description(self) -> str:
        return " ".join((self.evaluate.__doc__ or self.name).split())

    @property
    def spec(self) -> dg.AssetCheckSpec:
        return dg.AssetCheckSpec(
            self.name, asset=self.asset, blocking=self.blocking, description=self.description
        )

    def run(self, connection: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
        passed, metadata = self.evaluate(connection)
        return dg.AssetCheckResult(
            asset_key=self.asset,
            check_name=self.name,
            passed=passed,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata=metadata,
        )


def _one(connection: duckdb.DuckDBPyConnection, sql: str, parameters: dict[str, Any]) -> Any:
    row = connection.execute(sql, parameters).fetchone()
    assert row is not None, "an aggregate query returns one row"
    return row


# --------------------------------------------------------------------------------------------
# Gate checks on runs (blocking, evaluated inside the build step)

UNIQUE_RUN_IDS_SQL = """
SELECT count(*) AS duplicated_ids, coalesce(sum(copies), 0) AS rows_involved,
       coalesce(list(run_id ORDER BY run_id)[1:$sample], []) AS sample_run_ids
FROM (SELECT run_id, count(*) AS copies FROM runs GROUP BY run_id HAVING count(*) > 1)
"""


def unique_run_ids(connection: duckdb.DuckDBPyConnection) -> Outcome:
    """run_id, the key of runs, is unique: no two rows share it."""
    duplicated, rows, sample = _one(connection, UNIQUE_RUN_IDS_SQL, {"sample": SAMPLE_IDS})
    return duplicated == 0, {
        "duplicated_run_ids": duplicated,
        "rows_involved": rows,
        "sample_run_ids": sample,
    }


STATUS_MATRIX_SQL = """
WITH joined AS (
    SELECT r.run_id, r.status, r.latency_ms IS NOT NULL AS has_latency,
           EXISTS (SELECT 1 FROM correctness AS c WHERE c.run_id = r.run_id) AS has_correctness
    FROM runs AS r
),
violations AS (
    SELECT run_id, status FROM joined
    WHERE (status = $passed AND NOT (has_latency AND has_correctness))
       OR (status <> $passed AND has_latency)
       OR (list_contains($needs_correctness, status) AND NOT has_correctness)
       OR (list_contains($forbids_correctness, status) AND has_correctness)
)
SELECT
    (SELECT count(*) FROM violations) AS violations,
    (SELECT coalesce(list(run_id ORDER BY run_id)[1:$sample], []) FROM violations) AS sample_run_ids,
    (SELECT coalesce(map(list(status ORDER BY status), list(n ORDER BY status)), map())
       FROM (SELECT status, count(*) AS n FROM violations GROUP BY status)) AS by_status,
    (SELECT count(*) FROM correctness AS c
      WHERE NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.run_id = c.run_id)) AS orphan_correctness
"""


def run_status_matrix(connection: duckdb.DuckDBPyConnection) -> Outcome:
    """Status decides which blocks a run has (trace format §2.5): PASSED has a latency and a
    correctness row; INCORRECT_NUMERICAL a correctness row and no latency; INCORRECT_SHAPE,
    INCORRECT_DTYPE, RUNTIME_ERROR, COMPILE_ERROR and TIMEOUT neither; no other status has a
    latency. Every correctness row belongs to a run."""
    violations, sample, by_status, orphans = _one(
        connection,
        STATUS_MATRIX_SQL,
        {
            "passed": "PASSED",
            "needs_correctness": sorted(NEEDS_CORRECTNESS),
            "forbids_correctness": sorted(FORBIDS_CORRECTNESS),
            "sample": SAMPLE_IDS,
        },
    )
    return violations == 0 and orphans == 0, {
        "violating_runs": violations,
        "violations_by_status": dict(by_status),
        "sample_run_ids": sample,
        "correctness_rows_without_run": orphans,
    }


PASSED_LATENCY_SQL = """
SELECT count(*) AS bad, coalesce(list(run_id ORDER BY run_id)[1:$sample], []) AS sample_run_ids
FROM runs
WHERE status = $passed
  AND NOT coalesce(isfinite(latency_ms) AND latency_ms > 0 AND latency_ns > 0, false)
"""


def passed_latency_finite_positive(connection: duckdb.DuckDBPyConnection) -> Outcome:
    """Every PASSED run has a finite, positive latency_ms and a positive latency_ns."""
    bad, sample = _one(connection, PASSED_LATENCY_SQL, {"passed": "PASSED", "sample": SAMPLE_IDS})
    return bad == 0, {"passed_runs_without_valid_latency": bad, "sample_run_ids": sample}


RUN_REFERENCES_SQL = """
WITH missing AS (
    SELECT
        r.run_id,
        NOT EXISTS (SELECT 1 FROM definitions AS d WHERE d.definition = r.definition) AS no_definition,
        NOT EXISTS (SELECT 1 FROM workloads AS w
                    WHERE w.definition = r.definition AND w.workload_key = r.workload_key) AS no_workload,
        NOT EXISTS (SELECT 1 FROM environments AS e
                    WHERE e.environment_id = r.environment_id) AS no_environment
    FROM runs AS r
)
SELECT
    count(*) FILTER (WHERE no_definition) AS missing_definition,
    count(*) FILTER (WHERE no_workload) AS missing_workload,
    count(*) FILTER (WHERE no_environment) AS missing_environment,
    coalesce(list(run_id ORDER BY run_id) FILTER (WHERE no_definition OR no_workload OR no_environment)[1:$sample], [])
        AS sample_run_ids
FROM missing
"""


def runs_resolve_references(connection: duckdb.DuckDBPyConnection) -> Outcome:
    """Every run resolves its definition, its workload (definition, workload_key) and its
    environment (environment_id)."""
    definition, workload, environment, sample = _one(
        connection, RUN_REFERENCES_SQL, {"sample": SAMPLE_IDS}
    )
    return definition + workload + environment == 0, {
        "runs_missing_definition": definition,
        "runs_missing_workload": workload,
        "runs_missing_environment": environment,
        "sample_run_ids": sample,
    }


COMPARISON_KEY_DIGESTS_SQL = """
WITH per_key AS (
    SELECT comparison_key,
           count(DISTINCT operation_digest) AS operation_digests,
           count(DISTINCT workload_digest) AS workload_digests,
           bool_or(operation_digest IS NULL OR workload_digest IS NULL) AS missing_digest
    FROM runs
    WHERE comparison_key IS NOT NULL
    GROUP BY comparison_key
),
offending AS (
    SELECT * FROM per_key WHERE operation_digests <> 1 OR workload_digests <> 1 OR missing_digest
)
SELECT
    (SELECT count(*) FROM per_key) AS comparison_keys,
    (SELECT count(*) FROM offending) AS offending_keys,
    (SELECT coalesce(list(comparison_key ORDER BY comparison_key)[1:$sample], []) FROM offending)
        AS sample_comparison_keys
"""


def comparison_key_single_digests(connection: duckdb.DuckDBPyConnection) -> Outcome:
    """Every comparison key names exactly one operation digest and one workload digest, so
    runs compared with each other ran the same operation on the same workload."""
    keys, offending, sample = _one(connection, COMPARISON_KEY_DIGESTS_SQL, {"sample": SAMPLE_IDS})
    return offending == 0, {
        "comparison_keys": keys,
        "offending_comparison_keys": offending,
        "sample_comparison_keys": sample,
    }


GATE_CHECKS: tuple[WarehouseCheck, ...] = tuple(
    WarehouseCheck("runs", evaluate, blocking=True)
    for evaluate in (
        unique_run_ids,
        run_status_matrix,
        passed_latency_finite_positive,
        runs_resolve_references,
        comparison_key_single_digests,
    )
)


# --------------------------------------------------------------------------------------------
# Checks run as their own steps

COHORT_SIZE_SQL = """
WITH per_key AS (
    SELECT r.comparison_key, count(DISTINCT k.cohort_size) AS sizes,
           bool_or(k.cohort_size IS NULL OR k.rank IS NULL) AS missing
    FROM run_rankings AS k JOIN runs AS r USING (run_id)
    WHERE k.eligible
    GROUP BY r.comparison_key
)
SELECT
    (SELECT count(*) FROM per_key) AS cohorts,
    (SELECT count(*) FROM per_key WHERE sizes <> 1 OR missing) AS offending_keys,
    (SELECT coalesce(list(comparison_key ORDER BY comparison_key)[1:$sample], [])
       FROM per_key WHERE sizes <> 1 OR missing) AS sample_comparison_keys,
    (SELECT count(*) FROM run_rankings
      WHERE NOT eligible AND (cohort_size IS NOT NULL OR rank IS NOT NULL)) AS ranked_ineligible
"""


def one_cohort_size_per_comparison_key(connection: duckdb.DuckDBPyConnection) -> Outcome:
    """All eligible runs of a comparison key report the same cohort size (and have a rank);
    ineligible runs have neither."""
    cohorts, offending, sample, ranked_ineligible = _one(
        connection, COHORT_SIZE_SQL, {"sample": SAMPLE_IDS}
    )
    return offending == 0 and ranked_ineligible == 0, {
        "cohorts": cohorts,
        "offending_comparison_keys": offending,
        "sample_comparison_keys": sample,
        "ineligible_runs_with_rank": ranked_ineligible,
    }


ENVIRONMENT_SAMPLE_SQL = """
SELECT environment_id, hardware_raw, libs_json, environment_digest
FROM environments
WHERE environment_digest IS NOT NULL
ORDER BY md5(environment_id)
LIMIT $sample
"""

RUN_ENVIRONMENT_DIGEST_SQL = """
SELECT count(*), coalesce(list(r.run_id ORDER BY r.run_id)[1:$sample], [])
FROM runs AS r JOIN environments AS e USING (environment_id)
WHERE r.environment_digest IS NOT NULL AND r.environment_digest IS DISTINCT FROM e.environment_digest
"""


def environment_digests_recompute(connection: duckdb.DuckDBPyConnection) -> Outcome:
    """A sample of environments (up to 50) gets the same environment_id and KernelIndex
    environment digest when recomputed from hardware_raw and libs_json, and every run's
    environment_digest agrees with its environment's."""
    rows = connection.execute(ENVIRONMENT_SAMPLE_SQL, {"sample": DIGEST_SAMPLE_SIZE}).fetchall()
    mismatched: list[str] = []
    for environment_id, hardware, libs_json, stored in rows:
        raw = {"hardware": hardware, "libs": orjson.loads(libs_json)}
        try:
            recomputed = manifest_digest("ExecutionEnvironment", identity.environment_spec(raw))
            same_id = digest(raw) == environment_id
        except (identity.IdentityError, CanonicalizationError):
            recomputed, same_id = None, False
        if recomputed != stored or not same_id:
            mismatched.append(environment_id)
    disagreeing_runs, sample_runs = _one(
        connection, RUN_ENVIRONMENT_DIGEST_SQL, {"sample": SAMPLE_IDS}
    )
    return not mismatched and disagreeing_runs == 0, {
        "environments_recomputed": len(rows),
        "mismatched_environments": len(mismatched),
        "sample_environment_ids": mismatched[:SAMPLE_IDS],
        "runs_disagreeing_with_environment": disagreeing_runs,
        "sample_run_ids": sample_runs,
    }


DEFINITION_SAMPLE_SQL = """
SELECT definition, op_type, description, tags, axes_json, inputs_json, outputs_json,
       reference_bytes, operation_digest
FROM definitions
WHERE operation_digest IS NOT NULL
ORDER BY md5(definition)
LIMIT $sample
"""

RUN_OPERATION_DIGEST_SQL = """
SELECT count(*), coalesce(list(w.definition || ' ' || w.workload_key ORDER BY w.definition, w.workload_key)[1:$sample], [])
FROM workloads AS w JOIN definitions AS d USING (definition)
WHERE w.operation_digest IS NOT NULL AND w.operation_digest IS DISTINCT FROM d.operation_digest
"""


def operation_digests_recompute(connection: duckdb.DuckDBPyConnection) -> Outcome:
    """A sample of definitions (up to 50) gets the same KernelIndex operation digest when
    recomputed from the stored columns (op_type, tags, description, axes_json, inputs_json,
    outputs_json, and whether a reference exists), and every workload's operation_digest
    agrees with its definition's."""
    rows = connection.execute(DEFINITION_SAMPLE_SQL, {"sample": DIGEST_SAMPLE_SIZE}).fetchall()
    mismatched: list[str] = []
    for name, op_type, description, tags, axes, inputs, outputs, reference_bytes, stored in rows:
        value: dict[str, Any] = {
            "name": name,
            "op_type": op_type,
            "description": description,
            "tags": tags,
            "axes": orjson.loads(axes),
            "inputs": orjson.loads(inputs),
            "outputs": orjson.loads(outputs),
        }
        if reference_bytes:
            # Only whether a reference exists enters the OperationSpec (§3.1).
            value["reference"] = "x" * reference_bytes
        try:
            recomputed: str | None = identity.operation_digest(value)
        except (identity.IdentityError, CanonicalizationError):
            recomputed = None
        if recomputed != stored:
            mismatched.append(name)
    disagreeing, sample_workloads = _one(
        connection, RUN_OPERATION_DIGEST_SQL, {"sample": SAMPLE_IDS}
    )
    return not mismatched and disagreeing == 0, {
        "definitions_recomputed": len(rows),
        "mismatched_definitions": len(mismatched),
        "sample_definitions": mismatched[:SAMPLE_IDS],
        "workloads_disagreeing_with_definition": disagreeing,
        "sample_workloads": sample_workloads,
    }


STEP_CHECKS: tuple[WarehouseCheck, ...] = (
    WarehouseCheck("run_rankings", one_cohort_size_per_comparison_key, blocking=True),
    WarehouseCheck("environments", environment_digests_recompute),
    WarehouseCheck("definitions", operation_digests_recompute),
)


def _asset_check(check: WarehouseCheck) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=check.asset,
        name=check.name,
        blocking=check.blocking,
        description=check.description,
    )
    def _evaluate(warehouse: WarehouseResource) -> dg.AssetCheckResult:
        with warehouse.connect() as connection:
            return check.run(connection)

    return _evaluate


asset_checks: list[dg.AssetChecksDefinition] = [_asset_check(check) for check in STEP_CHECKS]
