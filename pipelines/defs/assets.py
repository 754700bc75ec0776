"""Assets: the warehouse tables and the SQL views over them.

One ``@multi_asset`` produces every table, because ``build_warehouse`` (the function behind
``tracehouse build``) writes them all at once into a new generation and publishes it with one
atomic switch; there is no state in which some tables are new and others old. Asset keys are
the table names, descriptions and column schemas come from ``pipelines.schemas``, and each
materialization records its row count. ``run_rankings`` is ranked from ``runs`` inside the same
build (``sql/run_rankings.sql``), which its ``deps`` show, and it is only reported as
materialized when the gate checks on ``runs`` (``checks.GATE_CHECKS``) pass.

The views (``run_summary``, ``leaderboard``, ``record_events``, ``latency_history``,
``regressions``) live in the generation's DuckDB file; their assets read them through a
read-only connection and record what they hold, with the column meanings of
``schemas.VIEWS``. ``report`` writes the static HTML report (``pipelines.report``, as
``tracehouse report``) into ``<warehouse>/report``.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from pipelines import invariants, schemas
from pipelines.build import BuildResult, ProgressFn, build_warehouse
from pipelines.defs.checks import GATE_CHECKS
from pipelines.defs.resources import WarehouseResource
from pipelines.sql_files import sql_dir
from pipelines.warehouse import Warehouse, connect_read_only, table_row_count

GROUP = "warehouse"
RANKING = schemas.RUN_RANKINGS.name


def table_schema(table: schemas.Table) -> dg.TableSchema:
    """The Dagster column schema of a table, from its one declaration in ``schemas``."""
    single_key = table.key if len(table.key) == 1 else ()
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name=column.name,
                type=str(column.type),
                description=column.doc,
                constraints=dg.TableColumnConstraints(
                    nullable=column.nullable, unique=column.name in single_key
                ),
            )
            for column in table.columns
        ]
    )


def _table_spec(table: schemas.Table) -> dg.AssetSpec:
    ranking = table.name == RANKING
    return dg.AssetSpec(
        key=table.name,
        description=table.doc,
        group_name=GROUP,
        kinds={"parquet", "duckdb"},
        # The ranking reads runs (sql/run_rankings.sql); a failed gate check skips it.
        deps=[schemas.RUNS.name] if ranking else [],
        skippable=ranking,
        metadata={
            "dagster/column_schema": table_schema(table),
            "primary_key": ", ".join(table.key),
        },
    )


TABLE_SPECS = [_table_spec(table) for table in schemas.TABLES.values()]


class BuildConfig(dg.Config):
    force: bool = Field(
        default=False, description="Rebuild every table even when the source is unchanged."
    )


def _log_progress(context: dg.AssetExecutionContext) -> ProgressFn:
    def progress(phase: str, done: int, total: int) -> None:
        if done == total:
            context.log.info(f"{phase}: {done}/{total} done")

    return progress


def _build_metadata(result: BuildResult) -> dict[str, Any]:
    source = result.source
    return {
        "up_to_date": result.up_to_date,
        "build_seconds": round(result.seconds, 3),
        "files_parsed": result.files_parsed,
        "files_reused": result.files_reused,
        "records_read": result.records_read,
        "records_columnar": result.records_by_path.get("columnar", 0),
        "records_exact": result.records_by_path.get("exact", 0),
        "source": source.source if source else None,
        "resolved_sha": source.resolved_sha if source else None,
    }


@dg.multi_asset(
    name="warehouse_tables",
    specs=TABLE_SPECS,
    check_specs=[check.spec for check in GATE_CHECKS],
    description="Build every warehouse table with build_warehouse, atomically.",
)
def warehouse_tables(
    context: dg.AssetExecutionContext, config: BuildConfig, warehouse: WarehouseResource
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    result = build_warehouse(
        warehouse.settings(), progress=_log_progress(context), force=config.force
    )
    context.log.info("\n".join(result.summary_lines()))
    folder = Warehouse(result.warehouse)
    generation = folder.require_current()
    connection = connect_read_only(folder)
    try:
        gate_results = [check.run(connection) for check in GATE_CHECKS]
        rejects_by_reason = invariants.rejects_by_reason(connection)
    finally:
        connection.close()

    shared = {"generation": generation.name, "snapshot_id": result.snapshot_id}
    extra: dict[str, dict[str, Any]] = {
        schemas.SOURCE_SNAPSHOTS.name: _build_metadata(result),
        schemas.REJECTS.name: {"rejects_by_reason": rejects_by_reason},
    }
    for name in schemas.TABLES:
        if name == RANKING:
            continue
        yield _materialized(generation, name, {**shared, **extra.get(name, {})})
    yield from gate_results
    failed = [str(r.check_name) for r in gate_results if not r.passed]
    if failed:
        context.log.error(
            f"gate checks failed on runs ({', '.join(failed)}): {RANKING} is not reported as "
            "materialized and the views downstream will not run"
        )
        return
    yield _materialized(generation, RANKING, shared)


def _materialized(generation: Path, table: str, metadata: dict[str, Any]) -> dg.MaterializeResult:
    path = generation / f"{table}.parquet"
    return dg.MaterializeResult(
        asset_key=table,
        metadata={
            "dagster/row_count": table_row_count(generation, table),
            "path": dg.MetadataValue.path(str(path)),
            **metadata,
        },
    )


def _view_result(warehouse: WarehouseResource, view: str) -> dg.MaterializeResult:
    with warehouse.connect() as connection:
        relation = connection.table(view)
        ((rows,),) = relation.aggregate("count(*)").fetchall()
        columns = list(zip(relation.columns, relation.types, strict=True))
    docs = {column.name: column.doc for column in schemas.VIEWS[view].columns}
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": rows,
            "dagster/column_schema": dg.TableSchema(
                columns=[
                    dg.TableColumn(name=name, type=str(kind), description=docs.get(name))
                    for name, kind in columns
                ]
            ),
            "sql": dg.MetadataValue.path(str(sql_dir() / f"{view}.sql")),
        }
    )


@dg.asset(
    group_name=GROUP,
    kinds={"duckdb"},
    deps=["runs", "definitions", "implementations", "environments", "correctness", RANKING],
)
def run_summary(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """One row per run with what, who, where, how fast and its rank (sql/run_summary.sql)."""
    return _view_result(warehouse, "run_summary")


@dg.asset(
    group_name=GROUP,
    kinds={"duckdb"},
    deps=["runs", "implementations", "environments", "baseline_map", "trace_lines"],
)
def leaderboard(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Per (definition, hardware, solution): tracehouse's geometric-mean speedup over the
    hardware's baseline with coverage, and FlashInfer-Bench's own score beside it
    (sql/leaderboard.sql)."""
    return _view_result(warehouse, "leaderboard")


@dg.asset(group_name=GROUP, kinds={"duckdb"}, deps=["runs", RANKING])
def record_events(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """KernelIndex record history: per comparison key, the first eligible run and every later
    run strictly faster than the best so far, with the run it displaced (sql/record_events.sql)."""
    return _view_result(warehouse, "record_events")


@dg.asset(group_name=GROUP, kinds={"duckdb"}, deps=["runs", RANKING, "source_snapshots"])
def latency_history(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Each solution's distinct latency results per comparison key, in the order the warehouse
    saw them: the input of regressions (sql/latency_history.sql)."""
    return _view_result(warehouse, "latency_history")


@dg.asset(group_name=GROUP, kinds={"duckdb"}, deps=["latency_history"])
def regressions(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Results significantly slower than the same solution's earlier results on the same
    comparison key, by the lookback z-score method (sql/regressions.sql)."""
    return _view_result(warehouse, "regressions")


REPORT_FOLDER = "report"
OVERVIEW_ROWS_IN_METADATA = 10


@dg.asset(group_name=GROUP, kinds={"html"}, deps=["leaderboard", "run_summary", "rejects"])
def report(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """The static HTML report of the warehouse (overview + one page per definition), written
    into <warehouse>/report; opens offline (pipelines/report.py, `tracehouse report`)."""
    from pipelines.report import write_report

    settings = warehouse.settings()
    result = write_report(settings, settings.warehouse / REPORT_FOLDER)
    top = result.overview_rows[:OVERVIEW_ROWS_IN_METADATA]
    columns = ("definition", "hardware", "solution", "geomean_speedup", "coverage")
    table = "\n".join(
        [
            "| " + " | ".join(columns) + " |",
            "|" + "---|" * len(columns),
            *(
                "| " + " | ".join("–" if row[c] is None else str(row[c]) for c in columns) + " |"
                for row in top
            ),
        ]
    )
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(result.index)),
            "pages": len(result.pages),
            "overview_top_rows": dg.MetadataValue.md(table),
        }
    )
