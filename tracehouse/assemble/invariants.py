"""The warehouse's invariants, as SQL over a DuckDB connection with the table views.

One place for each rule: the build evaluates them on a new generation before publishing it
(a failure leaves the previous warehouse in place), and the Dagster asset checks report the
same functions on the published one. Each returns (passed, metadata with counts and a few
offending ids).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracehouse.rejects import FORBIDS_CORRECTNESS, NEEDS_CORRECTNESS
from tracehouse.schemas import RESULT_TABLES, SHRINK_EXEMPT_TABLES

if TYPE_CHECKING:  # a build that finds its warehouse up to date never loads DuckDB
    import duckdb

# How many offending ids a check lists in its metadata.
SAMPLE_IDS = 5

# Written into each generation before it is published: the outcome of every invariant and
# publish guard evaluated on it, which the Dagster asset checks report.
CHECKS_FILE = "checks.json"

Outcome = tuple[bool, dict[str, Any]]


def rejects_by_reason(connection: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """How many records or files each reject reason accounts for."""
    rows = connection.execute(
        "SELECT reason, count(*) FROM rejects GROUP BY reason ORDER BY reason"
    ).fetchall()
    return dict(rows)


def read_checks(generation: Path) -> dict[str, Outcome]:
    """The invariant outcomes a build recorded in ``generation`` before publishing it."""
    try:
        stored = json.loads((generation / CHECKS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {name: (entry["passed"], entry["metadata"]) for name, entry in stored.items()}


class InvariantViolation(RuntimeError):
    """A new warehouse state broke an invariant; it was not published. ``outcomes`` holds
    every invariant evaluated so far (passed or not), by name."""

    def __init__(self, message: str, outcomes: dict[str, Outcome]) -> None:
        super().__init__(message)
        self.outcomes = outcomes


def query_one(connection: duckdb.DuckDBPyConnection, sql: str, parameters: dict[str, Any]) -> Any:
    # fetch everything: DuckDB 2 refuses new work on a connection with an unfinished result
    rows = connection.execute(sql, parameters).fetchall()
    assert len(rows) == 1, "an aggregate query returns one row"
    return rows[0]


@dataclass(frozen=True)
class Checked:
    """The rows an invariant checks. Every row (``EVERYTHING``), or, on a build that changed
    part of a warehouse whose every row passed (``finalize._changed_rows``), only what the
    build changed: an invariant holds for a row the build did not touch because it held
    when that row was published, and nothing the row's check reads changed.

    Each relation is a temp view the caller created: ``runs`` the runs to check (every column a
    run invariant reads), ``correctness_run_ids`` the run ids of correctness rows that may have
    lost their run, ``rankings`` the run_rankings rows to check."""

    runs: str = "runs"
    correctness_run_ids: str = "(SELECT run_id FROM correctness)"
    rankings: str = "run_rankings"
    changed_runs: int = 0  # how many runs ``runs`` holds, when it is not every run

    @property
    def everything(self) -> bool:
        return self == EVERYTHING

    def describe(self) -> dict[str, Any]:
        """Metadata saying what was checked, and by which rules."""
        if self.everything:
            return {"checked": "every row", "rules": RULES}
        return {
            "checked": f"the rows this build changed ({self.changed_runs:,} runs)",
            "rules": RULES,
        }


EVERYTHING = Checked()

# The rules themselves, as a digest: this module and the statuses it reads. A row checked by
# other rules is checked again (passed_by_these_rules).
RULES = hashlib.sha256(
    Path(__file__).read_bytes()
    + repr((sorted(NEEDS_CORRECTNESS), sorted(FORBIDS_CORRECTNESS))).encode()
).hexdigest()[:16]


UNIQUE_RUN_IDS_SQL = """
SELECT count(*) AS duplicated_ids, coalesce(sum(copies), 0) AS rows_involved,
       coalesce(list(run_id ORDER BY run_id)[1:$sample], []) AS sample_run_ids
FROM (SELECT run_id, count(*) AS copies FROM runs {where} GROUP BY run_id HAVING count(*) > 1)
"""


def unique_run_ids(connection: duckdb.DuckDBPyConnection, checked: Checked = EVERYTHING) -> Outcome:
    """run_id, the key of runs, is unique: no two rows share it."""
    where = (
        "" if checked.everything else f"WHERE run_id IN (SELECT run_id FROM {checked.runs})"  # noqa: S608  (own names)
    )
    duplicated, rows, sample = query_one(
        connection, UNIQUE_RUN_IDS_SQL.format(where=where), {"sample": SAMPLE_IDS}
    )
    return duplicated == 0, {
        "duplicated_run_ids": duplicated,
        "rows_involved": rows,
        "sample_run_ids": sample,
        **checked.describe(),
    }


STATUS_MATRIX_SQL = """
WITH joined AS (
    SELECT r.run_id, r.status,
           r.latency_ms IS NOT NULL OR r.latency_special IS NOT NULL AS has_latency,
           EXISTS (SELECT 1 FROM correctness AS c WHERE c.run_id = r.run_id) AS has_correctness
    FROM {runs} AS r
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
    (SELECT count(*) FROM {correctness_run_ids} AS c
      WHERE NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.run_id = c.run_id)) AS orphan_correctness
"""


def run_status_matrix(
    connection: duckdb.DuckDBPyConnection, checked: Checked = EVERYTHING
) -> Outcome:
    """Status decides which blocks a run has (trace format §2.5): PASSED has a latency (or
    latency_special saying why it is not a finite number) and a correctness row; INCORRECT_NUMERICAL a correctness row and no latency; INCORRECT_SHAPE,
    INCORRECT_DTYPE, RUNTIME_ERROR, COMPILE_ERROR and TIMEOUT neither; no other status has a
    latency. Every correctness row belongs to a run."""
    violations, sample, by_status, orphans = query_one(
        connection,
        STATUS_MATRIX_SQL.format(
            runs=checked.runs, correctness_run_ids=checked.correctness_run_ids
        ),
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
        **checked.describe(),
    }


PASSED_LATENCY_SQL = """
SELECT count(*) AS bad, coalesce(list(run_id ORDER BY run_id)[1:$sample], []) AS sample_run_ids
FROM {runs}
WHERE (status = $passed AND latency_special IS NULL
       AND NOT coalesce(isfinite(latency_ms) AND latency_ms > 0 AND latency_ns > 0, false))
   OR (latency_special IS NOT NULL AND (latency_ms IS NOT NULL OR latency_ns IS NOT NULL))
"""


def passed_latency_finite_positive(
    connection: duckdb.DuckDBPyConnection, checked: Checked = EVERYTHING
) -> Outcome:
    """Every PASSED run has a finite, positive latency_ms and a positive latency_ns, unless
    latency_special says why not (then both are null, and the run never ranks)."""
    bad, sample = query_one(
        connection,
        PASSED_LATENCY_SQL.format(runs=checked.runs),
        {"passed": "PASSED", "sample": SAMPLE_IDS},
    )
    return bad == 0, {
        "passed_runs_without_valid_latency": bad,
        "sample_run_ids": sample,
        **checked.describe(),
    }


RUN_REFERENCES_SQL = """
WITH missing AS (
    SELECT
        r.run_id,
        NOT EXISTS (SELECT 1 FROM definitions AS d WHERE d.definition = r.definition) AS no_definition,
        NOT EXISTS (SELECT 1 FROM workloads AS w
                    WHERE w.definition = r.definition AND w.workload_key = r.workload_key) AS no_workload,
        NOT EXISTS (SELECT 1 FROM environments AS e
                    WHERE e.environment_id = r.environment_id) AS no_environment
    FROM {runs} AS r
)
SELECT
    count(*) FILTER (WHERE no_definition) AS missing_definition,
    count(*) FILTER (WHERE no_workload) AS missing_workload,
    count(*) FILTER (WHERE no_environment) AS missing_environment,
    coalesce(list(run_id ORDER BY run_id) FILTER (WHERE no_definition OR no_workload OR no_environment)[1:$sample], [])
        AS sample_run_ids
FROM missing
"""


def runs_resolve_references(
    connection: duckdb.DuckDBPyConnection, checked: Checked = EVERYTHING
) -> Outcome:
    """Every run resolves its definition, its workload (definition, workload_key) and its
    environment (environment_id)."""
    definition, workload, environment, sample = query_one(
        connection, RUN_REFERENCES_SQL.format(runs=checked.runs), {"sample": SAMPLE_IDS}
    )
    return definition + workload + environment == 0, {
        "runs_missing_definition": definition,
        "runs_missing_workload": workload,
        "runs_missing_environment": environment,
        "sample_run_ids": sample,
        **checked.describe(),
    }


COMPARISON_KEY_DIGESTS_SQL = """
WITH per_key AS (
    SELECT comparison_key,
           count(DISTINCT operation_digest) AS operation_digests,
           count(DISTINCT workload_digest) AS workload_digests,
           bool_or(operation_digest IS NULL OR workload_digest IS NULL) AS missing_digest
    FROM runs
    WHERE comparison_key IS NOT NULL {and_checked}
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


def comparison_key_single_digests(
    connection: duckdb.DuckDBPyConnection, checked: Checked = EVERYTHING
) -> Outcome:
    """Every comparison key names exactly one operation digest and one workload digest, so
    runs compared with each other ran the same operation on the same workload."""
    and_checked = (
        ""
        if checked.everything
        else f"AND comparison_key IN (SELECT comparison_key FROM {checked.runs})"  # noqa: S608  (own names)
    )
    keys, offending, sample = query_one(
        connection,
        COMPARISON_KEY_DIGESTS_SQL.format(and_checked=and_checked),
        {"sample": SAMPLE_IDS},
    )
    return offending == 0, {
        "comparison_keys": keys,
        "offending_comparison_keys": offending,
        "sample_comparison_keys": sample,
        **checked.describe(),
    }


# Must hold before runs are ranked.
RUN_INVARIANTS = (
    unique_run_ids,
    run_status_matrix,
    passed_latency_finite_positive,
    runs_resolve_references,
    comparison_key_single_digests,
)


COHORT_SIZE_SQL = """
WITH per_key AS (
    SELECT r.comparison_key, count(DISTINCT k.cohort_size) AS sizes,
           bool_or(k.cohort_size IS NULL OR k.rank IS NULL) AS missing
    FROM {rankings} AS k JOIN runs AS r USING (run_id)
    WHERE k.eligible
    GROUP BY r.comparison_key
)
SELECT
    (SELECT count(*) FROM per_key) AS cohorts,
    (SELECT count(*) FROM per_key WHERE sizes <> 1 OR missing) AS offending_keys,
    (SELECT coalesce(list(comparison_key ORDER BY comparison_key)[1:$sample], [])
       FROM per_key WHERE sizes <> 1 OR missing) AS sample_comparison_keys,
    (SELECT count(*) FROM {rankings}
      WHERE NOT eligible AND (cohort_size IS NOT NULL OR rank IS NOT NULL)) AS ranked_ineligible
"""


def one_cohort_size_per_comparison_key(
    connection: duckdb.DuckDBPyConnection, checked: Checked = EVERYTHING
) -> Outcome:
    """All eligible runs of a comparison key report the same cohort size (and have a rank);
    ineligible runs have neither."""
    # Scoped, the rankings the build wrote hold every run of each comparison key they hold: a
    # key's runs are ranked in one bucket (sql/rank/ranking_inputs.sql), and a bucket whole.
    cohorts, offending, sample, ranked_ineligible = query_one(
        connection, COHORT_SIZE_SQL.format(rankings=checked.rankings), {"sample": SAMPLE_IDS}
    )
    return offending == 0 and ranked_ineligible == 0, {
        "cohorts": cohorts,
        "offending_comparison_keys": offending,
        "sample_comparison_keys": sample,
        "ineligible_runs_with_rank": ranked_ineligible,
        **checked.describe(),
    }


# Must hold before a ranked warehouse is published.
RANKING_INVARIANTS = (one_cohort_size_per_comparison_key,)


def passed_by_these_rules(generation: Path) -> bool:
    """Whether every run and ranking invariant passed on ``generation``, by these very rules."""
    recorded = read_checks(generation)
    for invariant in (*RUN_INVARIANTS, *RANKING_INVARIANTS):
        passed, metadata = recorded.get(invariant.__name__, (False, {}))
        if passed is not True or not isinstance(metadata, dict) or metadata.get("rules") != RULES:
            return False
    return True


def enforce(
    connection: duckdb.DuckDBPyConnection,
    invariants: tuple[Any, ...],
    outcomes: dict[str, Outcome] | None = None,
    checked: Checked = EVERYTHING,
) -> dict[str, Outcome]:
    """Evaluate ``invariants`` over the ``checked`` rows, add their outcomes to ``outcomes``
    (returned), and raise InvariantViolation naming every one that fails."""
    outcomes = {} if outcomes is None else outcomes
    for invariant in invariants:
        outcomes[invariant.__name__] = invariant(connection, checked)
    raise_failures(outcomes, [invariant.__name__ for invariant in invariants])
    return outcomes


def raise_failures(outcomes: dict[str, Outcome], names: list[str]) -> None:
    failures = [f"{name}: {outcomes[name][1]}" for name in names if not outcomes[name][0]]
    if failures:
        raise InvariantViolation(
            "the new warehouse state breaks its invariants and was not published: "
            + "; ".join(failures),
            outcomes,
        )


# --------------------------------------------------------------------------------------------
# Publish guards: the new state against the one it would replace (evaluated on table counts)

# Fewer rejects is good news, and the snapshot history only grows.
SHRINK_EXEMPT = frozenset(SHRINK_EXEMPT_TABLES)
# Tables that hold the benchmark results themselves.
FACT_TABLES = RESULT_TABLES


def tables_shrink_within_limit(
    previous: dict[str, int] | None, new: dict[str, int], max_share: float
) -> Outcome:
    """No table (rejects excepted) loses more than max_shrink_share of the rows it has in the
    current generation; a first build passes. Stops an empty or wrong source from silently
    replacing a good warehouse."""
    shrinking: dict[str, str] = {}
    for table, before in sorted((previous or {}).items()):
        after = new.get(table, 0)
        if table in SHRINK_EXEMPT or before == 0 or after >= before:
            continue
        if (before - after) / before > max_share:
            shrinking[table] = f"{before:,} -> {after:,} rows (-{(before - after) / before:.0%})"
    return not shrinking, {
        "max_shrink_share": max_share,
        "shrinking_tables": shrinking,
        "previous_counts": dict(previous or {}),
        "new_counts": dict(new),
    }


def fact_tables_not_empty(new: dict[str, int]) -> Outcome:
    """The fact tables (runs, run_rankings) have rows: a build that finds no benchmark result
    at all is almost always a wrong source."""
    empty = [table for table in FACT_TABLES if new.get(table, 0) == 0]
    return not empty, {"empty_fact_tables": empty, **{t: new.get(t, 0) for t in FACT_TABLES}}
