"""Assets: the source dataset, the warehouse tables, and the SQL views over them.

``source_dataset`` is an observable source asset: its data version is what the configured
source is at (the commit an ``hf://`` revision resolves to, a folder's git HEAD, else a digest
of its file listing). Every table depends on it.

One ``@multi_asset`` produces every table, because ``build_warehouse`` (the function behind
``tracehouse build``) writes them all at once into a new generation and publishes it with one
atomic switch; there is no state in which some tables are new and others old. Asset keys are
the table names, descriptions and column schemas come from ``pipelines.schemas``, each
materialization records its row count, and its data version is the build's snapshot id.

What Dagster records is what happened:

* the blocking checks (``checks.BUILD_CHECKS``) are the invariants the build evaluated before
  publishing; if one fails, nothing is published, nothing is materialized, the step fails and
  the views do not run;
* a build that finds the source unchanged materializes nothing (the views do not run either)
  and reports the check outcomes recorded with the current generation.

The views (``run_summary``, ``leaderboard``, ``record_events``, ``latency_history``,
``regressions``) live in the generation's DuckDB file; their assets wait for the blocking checks,
read the views through a read-only connection, and record what they hold, with the column
meanings of ``schemas.VIEWS``; the leaderboard adds a Markdown preview of its top rows.
``report`` writes the static HTML report (``pipelines.report``, as ``tracehouse report``) into
``<warehouse>/report``.
"""

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from pipelines import render, schemas
from pipelines.build import BuildResult, ProgressFn, build_warehouse, read_checks, source_version
from pipelines.defs.checks import BUILD_CHECKS
from pipelines.defs.resources import WarehouseResource
from pipelines.invariants import InvariantViolation, Outcome
from pipelines.settings import SettingsError, load_settings, parse_sources
from pipelines.sql_files import sql_dir
from pipelines.warehouse import Warehouse, table_row_count

GROUP = "warehouse"
SOURCE_ASSET = "source_dataset"
RANKING = schemas.RUN_RANKINGS.name
PREVIEW_ROWS = 10


def configured_sources() -> dict[str, str]:
    """The sources of TRACEHOUSE_SOURCES by name (none: the tables are not partitioned and
    build the one TRACEHOUSE_SOURCE)."""
    try:
        text = load_settings().sources
    except SettingsError:  # a bad setting is reported by the run that reads it, in one line
        return {}
    return parse_sources(text) if text else {}


# One partition of the tables per configured source: materializing partition X builds source X
# into the shared warehouse, replacing only X's rows (ranks are recomputed over every source).
SOURCE_PARTITIONS = (
    dg.StaticPartitionsDefinition(sorted(configured_sources())) if configured_sources() else None
)


def table_schema(table: schemas.Table) -> dg.TableSchema:
    """The Dagster column schema of a table or view, from its one declaration in ``schemas``."""
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


@dg.observable_source_asset(
    name=SOURCE_ASSET,
    group_name=GROUP,
    description="The FlashInfer-Trace dataset the warehouse is built from (TRACEHOUSE_SOURCE). "
    "Data version: the commit an hf:// revision resolves to, a folder's git HEAD, or a digest "
    "of its file listing.",
)
def source_dataset(warehouse: WarehouseResource) -> dg.DataVersion:
    return dg.DataVersion(source_version(warehouse.settings()))


def _table_spec(table: schemas.Table) -> dg.AssetSpec:
    ranking = table.name == RANKING
    return dg.AssetSpec(
        key=table.name,
        description=table.doc,
        group_name=GROUP,
        kinds={"parquet", "duckdb"},
        # The ranking reads runs (sql/run_rankings.sql); everything else reads the source.
        deps=[schemas.RUNS.name] if ranking else [SOURCE_ASSET],
        # Not materialized when the build changes nothing or refuses to publish.
        skippable=True,
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
        "build_seconds": round(result.seconds, 3),
        "files_parsed": result.files_parsed,
        "files_reused": result.files_reused,
        "records_read": result.records_read,
        "records_columnar": result.records_by_path.get("columnar", 0),
        "records_exact": result.records_by_path.get("exact", 0),
        "source": source.source if source else None,
        "resolved_sha": source.resolved_sha if source else None,
    }


def _check_results(outcomes: dict[str, Outcome], **extra: Any) -> Iterator[dg.AssetCheckResult]:
    for check in BUILD_CHECKS:
        if check.name in outcomes:
            yield check.result(outcomes[check.name], **extra)


@dg.multi_asset(
    name="warehouse_tables",
    specs=TABLE_SPECS,
    check_specs=[check.spec for check in BUILD_CHECKS],
    description="Build every warehouse table with build_warehouse, atomically (partitioned by "
    "source when TRACEHOUSE_SOURCES names several).",
    partitions_def=SOURCE_PARTITIONS,
)
def warehouse_tables(
    context: dg.AssetExecutionContext, config: BuildConfig, warehouse: WarehouseResource
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    settings = _partition_settings(context, warehouse)
    try:
        result = build_warehouse(
            settings, progress=_log_progress(context), force=config.force, require_fact_rows=True
        )
        outcomes = result.checks
        if result.up_to_date:
            current = Warehouse(result.warehouse).require_current()
            outcomes = read_checks(current)
            if {check.name for check in BUILD_CHECKS} - set(outcomes):
                # A generation from before checks were recorded: evaluate by rebuilding.
                result = build_warehouse(
                    settings, progress=_log_progress(context), force=True, require_fact_rows=True
                )
                outcomes = result.checks
    except InvariantViolation as refused:
        yield from _check_results(refused.outcomes, published=False)
        raise dg.Failure(description=str(refused)) from None
    context.log.info("\n".join(result.summary_lines()))

    if result.up_to_date:
        context.log.info(
            f"source unchanged: generation {result.generation} stays current; nothing is "
            "materialized, and the checks report what was evaluated before it was published"
        )
        yield from _check_results(outcomes, generation=result.generation, rebuilt=False)
        return
    generation = Warehouse(result.warehouse).require_current()
    shared = {"generation": generation.name, "snapshot_id": result.snapshot_id}
    extra: dict[str, dict[str, Any]] = {
        schemas.SOURCE_SNAPSHOTS.name: _build_metadata(result),
        schemas.REJECTS.name: {"rejects_by_reason": result.rejects_by_reason},
    }
    for name in schemas.TABLES:
        yield _materialized(generation, name, result.snapshot_id, {**shared, **extra.get(name, {})})
    yield from _check_results(outcomes, generation=generation.name, rebuilt=True)


def _partition_settings(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> Any:
    """The settings of this run: for a partition, its source under its name (a run the Hub
    sensor pinned to a commit keeps that pinned URI)."""
    settings = warehouse.settings()
    if not context.has_partition_key:
        return settings
    name = context.partition_key
    sources = parse_sources(settings.sources or "")
    if name not in sources:
        raise dg.Failure(description=f"partition {name!r} is not in TRACEHOUSE_SOURCES")
    pinned = settings.source if settings.source_name == name else None
    return replace(settings, source=pinned or sources[name], source_name=name)


def _materialized(
    generation: Path, table: str, snapshot_id: str | None, metadata: dict[str, Any]
) -> dg.MaterializeResult:
    path = generation / f"{table}.parquet"
    return dg.MaterializeResult(
        asset_key=table,
        data_version=dg.DataVersion(snapshot_id) if snapshot_id else None,
        metadata={
            "dagster/row_count": table_row_count(generation, table),
            "path": dg.MetadataValue.path(str(path)),
            **metadata,
        },
    )


def _snapshot_id(connection: Any) -> str | None:
    """The current generation's snapshot: the last row of its source_snapshots history."""
    rows = connection.execute("SELECT snapshot_id FROM source_snapshots").fetchall()
    return rows[-1][0] if rows else None


def _view_result(
    warehouse: WarehouseResource, view: str, extra: dict[str, Any] | None = None
) -> dg.MaterializeResult:
    with warehouse.connect() as connection:
        relation = connection.table(view)
        ((rows,),) = relation.aggregate("count(*)").fetchall()
        columns = list(zip(relation.columns, relation.types, strict=True))
        snapshot_id = _snapshot_id(connection)
    docs = {column.name: column.doc for column in schemas.VIEWS[view].columns}
    return dg.MaterializeResult(
        data_version=dg.DataVersion(snapshot_id) if snapshot_id else None,
        metadata={
            "dagster/row_count": rows,
            "dagster/column_schema": dg.TableSchema(
                columns=[
                    dg.TableColumn(name=name, type=str(kind), description=docs.get(name))
                    for name, kind in columns
                ]
            ),
            "sql": dg.MetadataValue.path(str(sql_dir() / f"{view}.sql")),
            **(extra or {}),
        },
    )


@dg.asset(
    group_name=GROUP,
    kinds={"duckdb"},
    deps=["runs", "definitions", "implementations", "environments", "correctness", RANKING],
)
def run_summary(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """One row per run with what, who, where, how fast and its rank (sql/run_summary.sql)."""
    return _view_result(warehouse, "run_summary")


LEADERBOARD_PREVIEW_SQL = """
SELECT definition, hardware, solution, author, workloads_compared,
       round(geomean_speedup, 3) AS geomean_speedup, round(win_rate, 3) AS win_rate
FROM leaderboard
WHERE NOT is_baseline AND workloads_compared > 0
ORDER BY geomean_speedup DESC, workloads_compared DESC, definition, hardware, solution
LIMIT $rows
"""


@dg.asset(
    group_name=GROUP,
    kinds={"duckdb"},
    deps=["runs", "implementations", "environments", "baseline_map", "trace_lines", RANKING],
)
def leaderboard(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Per (definition, hardware, solution): coverage and geometric-mean speedup against the
    definition's baseline (sql/leaderboard.sql). Waits for the blocking checks of the build."""
    with warehouse.connect() as connection:
        cursor = connection.execute(LEADERBOARD_PREVIEW_SQL, {"rows": PREVIEW_ROWS})
        columns = [d[0] for d in cursor.description]
        top = cursor.fetchall()
    preview = render.markdown_table(columns, top)
    return _view_result(
        warehouse,
        "leaderboard",
        {f"top_{PREVIEW_ROWS}_by_geomean_speedup": dg.MetadataValue.md(preview)},
    )


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
    with warehouse.connect() as connection:
        snapshot_id = _snapshot_id(connection)
    return dg.MaterializeResult(
        data_version=dg.DataVersion(snapshot_id) if snapshot_id else None,
        metadata={
            "path": dg.MetadataValue.path(str(result.index)),
            "pages": len(result.pages),
            "overview_top_rows": dg.MetadataValue.md(table),
        },
    )
