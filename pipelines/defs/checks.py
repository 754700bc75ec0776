"""Asset checks: what Dagster reports about each warehouse state.

Three kinds:

* ``BUILD_CHECKS`` are blocking and are the outcomes of the invariants ``build_warehouse``
  evaluates on a new generation *before* publishing it (``tracehouse.assemble.invariants``): the run
  invariants on ``runs``, the cohort rule on ``run_rankings``, and the publish guards (no table
  shrinks beyond ``max_shrink_share``; the fact tables are not empty). They are declared on the
  ``warehouse_tables`` multi-asset and reported from its step, never recomputed afterwards; when
  one fails, nothing is published or materialized and the views downstream do not run. When the
  source is unchanged, the step reports the outcomes recorded with the current generation.
* ``STEP_CHECKS`` recompute a sample of stored digests from the published tables (every
  source's), as ordinary ``@asset_check`` steps that can be executed on their own from the UI.

``no_new_regressions`` on ``regressions`` is not an invariant: a slower kernel is news about
the data, not a broken warehouse, so it reports with severity WARN and blocks nothing.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dagster as dg
import duckdb
import orjson

from pipelines.defs.naming import asset_key, markdown_safe
from pipelines.defs.resources import WarehouseResource
from tracehouse import kernelindex
from tracehouse.assemble.invariants import (
    RANKING_INVARIANTS,
    RUN_INVARIANTS,
    SAMPLE_IDS,
    Outcome,
    fact_tables_not_empty,
    query_one,
    tables_shrink_within_limit,
)
from tracehouse.ingest.worker import environment_id
from tracehouse.kernelindex import CanonicalizationError, manifest_digest
from tracehouse.serve.changes import no_new_regressions

# How many stored digests the identity checks recompute per table.
DIGEST_SAMPLE_SIZE = 50


@dataclass(frozen=True)
class WarehouseCheck:
    """A named check of one table; ``evaluate``'s docstring is its description."""

    asset: str
    evaluate: Callable[..., Outcome]
    blocking: bool = False
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR

    @property
    def name(self) -> str:
        return self.evaluate.__name__

    @property
    def description(self) -> str:
        text = markdown_safe(" ".join((self.evaluate.__doc__ or self.name).split()))
        if self.blocking:
            # Dagster greys out "Execute" for a check a multi-asset reports: say why.
            text += (
                " Evaluated by the build (warehouse_tables) on the new generation before it "
                "is published, so it runs with a build, not on its own."
            )
        return text

    @property
    def spec(self) -> dg.AssetCheckSpec:
        return dg.AssetCheckSpec(
            self.name,
            asset=asset_key(self.asset),
            blocking=self.blocking,
            description=self.description,
        )

    def result(self, outcome: Outcome, **extra: Any) -> dg.AssetCheckResult:
        passed, metadata = outcome
        return dg.AssetCheckResult(
            asset_key=asset_key(self.asset),
            check_name=self.name,
            passed=passed,
            severity=self.severity,
            metadata={**metadata, **extra},
        )

    def run(self, connection: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
        return self.result(self.evaluate(connection))


# --------------------------------------------------------------------------------------------
# Build checks (blocking): outcomes of what the build evaluated before publishing

BUILD_CHECKS: tuple[WarehouseCheck, ...] = (
    *(WarehouseCheck("runs", evaluate, blocking=True) for evaluate in RUN_INVARIANTS),
    *(WarehouseCheck("run_rankings", evaluate, blocking=True) for evaluate in RANKING_INVARIANTS),
    WarehouseCheck("runs", tables_shrink_within_limit, blocking=True),
    WarehouseCheck("runs", fact_tables_not_empty, blocking=True),
)


# --------------------------------------------------------------------------------------------
# Checks run as their own steps

ENVIRONMENT_SAMPLE_SQL = """
SELECT environment_id, hardware_raw, libs_json, extra_json, environment_digest
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
    for stored_id, hardware, libs_json, extra_json, stored in rows:
        raw = {"hardware": hardware, "libs": orjson.loads(libs_json)}
        extra = orjson.loads(extra_json) if extra_json else None
        try:
            recomputed = manifest_digest("ExecutionEnvironment", kernelindex.environment_spec(raw))
            # rows with a digest never had numeric library versions
            same_id = environment_id(hardware, raw["libs"], extra, numeric_libs=False) == stored_id
        except (kernelindex.IdentityError, CanonicalizationError):
            recomputed, same_id = None, False
        if recomputed != stored or not same_id:
            mismatched.append(stored_id)
    disagreeing_runs, sample_runs = query_one(
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
            recomputed: str | None = kernelindex.operation_digest(value)
        except (kernelindex.IdentityError, CanonicalizationError):
            recomputed = None
        if recomputed != stored:
            mismatched.append(name)
    disagreeing, sample_workloads = query_one(
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
    WarehouseCheck("environments", environment_digests_recompute),
    WarehouseCheck("definitions", operation_digests_recompute),
)

# Checks about the data rather than the warehouse: they warn and never block.
WARN_CHECKS: tuple[WarehouseCheck, ...] = (
    WarehouseCheck("regressions", no_new_regressions, severity=dg.AssetCheckSeverity.WARN),
)


def _asset_check(check: WarehouseCheck) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=asset_key(check.asset),
        name=check.name,
        blocking=check.blocking,
        description=check.description,
    )
    def _evaluate(warehouse: WarehouseResource) -> dg.AssetCheckResult:
        with warehouse.connect() as connection:
            return check.run(connection)

    return _evaluate


asset_checks: list[dg.AssetChecksDefinition] = [
    _asset_check(check) for check in (*STEP_CHECKS, *WARN_CHECKS)
]
