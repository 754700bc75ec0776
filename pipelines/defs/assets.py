"""Assets, in four stages (one asset group each, so the lineage view reads as the pipeline):

* ``source`` — ``tracehouse/source_dataset``, an observable source partitioned by source (the
  dynamic partitions ``tracehouse_sources``). A partition's data version is what that source is
  at: the commit an ``hf://`` revision resolves to; for a folder, its git HEAD (or the
  configured revision) with a digest of the fingerprints the build compares to find its files
  unchanged (``build.file_fingerprints``: size, mtime, inode), so a trace file edited, added
  or removed in a clone whose HEAD did not move is a new version, as it is for the build.
* ``tables`` — one ``@multi_asset``, because ``build_warehouse`` (the function behind
  ``tracehouse build``) writes every table at once into a new generation and publishes it with
  one atomic switch. A run builds one source: it materializes that source's partition of the
  per-source tables (``schemas.PER_SOURCE_TABLES``) and the unpartitioned warehouse-wide
  tables (``run_rankings`` ranks over every source, ``source_snapshots`` holds every snapshot),
  which sit downstream of the per-source ones. Every table's ``code_version`` is the importer
  version, so a parser change marks the tables stale; a partition's data version is its source
  snapshot under that importer, the warehouse-wide tables' the snapshots of every source.
* ``views`` — one ``@multi_asset`` that (re)creates the SQL views in the published DuckDB file
  and records what they hold; its code version is a digest of ``sql/``.
* ``report`` — the static HTML report (``tracehouse report``).

What Dagster records is what happened. The blocking checks (``checks.BUILD_CHECKS``) are the
invariants the build evaluated before publishing: if one fails nothing is published or
materialized, and nothing downstream runs. A build that finds its source unchanged publishes
nothing new and records the tables again with the data versions they already had, so after
an unchanged run no asset is stale (the source's newest observation is the one the tables
were checked against).
"""

import hashlib
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from pipelines.defs.checks import BUILD_CHECKS
from pipelines.defs.naming import OWNERS, asset_key, file_uri, markdown_safe, table_name
from pipelines.defs.resources import WarehouseResource
from pipelines.defs.sources import SOURCES, register_sources, source_uris
from tracehouse import schemas, sql_files
from tracehouse.assemble.invariants import InvariantViolation, Outcome
from tracehouse.build import BuildResult, ProgressFn, build_warehouse, read_checks
from tracehouse.schemas import IMPORTER_VERSION, PER_SOURCE_TABLES, PRODUCT_VIEWS
from tracehouse.serve import render
from tracehouse.settings import Settings, SettingsError, load_settings
from tracehouse.warehouse import (
    DUCKDB_FILE,
    GenerationSource,
    Warehouse,
    generation_sources,
    source_key,
    table_files,
    table_row_count,
)

SOURCE_STAGE, TABLES_STAGE, VIEWS_STAGE, REPORT_STAGE = "source", "tables", "views", "report"
SOURCE_ASSET = "source_dataset"
RANKING = schemas.RUN_RANKINGS.name
PREVIEW_ROWS = 10
# How often the source is looked at (a folder listing, or one Hub API call per hf:// source).
OBSERVE_CRON = "*/15 * * * *"
# The marts people read; one build a day is the expectation (the old daily schedule).
MART_FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=timedelta(hours=48), warn_window=timedelta(hours=26)
)


def storage_kinds() -> set[str]:
    """Where the tables are kept: Parquet files with DuckDB views over them, and an Iceberg
    catalog when one is configured (TRACEHOUSE_CATALOG; a bad setting is the run's error)."""
    try:
        catalog = load_settings().catalog
    except SettingsError:
        catalog = None
    return {"parquet", "duckdb"} | ({"iceberg"} if catalog else set())


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


# --------------------------------------------------------------------------------------------
# source


@dg.observable_source_asset(
    key=asset_key(SOURCE_ASSET),
    group_name=SOURCE_STAGE,
    partitions_def=SOURCES,
    tags={"dagster/kind/jsonl": ""},  # its kind (this decorator takes no kinds=)
    automation_condition=dg.AutomationCondition.cron_tick_passed(OBSERVE_CRON)
    & ~dg.AutomationCondition.in_progress(),
    description="The FlashInfer-Trace datasets the warehouse is built from, one partition per "
    "source (TRACEHOUSE_SOURCES, or TRACEHOUSE_SOURCE under its name; sources the warehouse "
    "already holds stay). Data version: the commit an hf:// revision resolves to; for a "
    "folder, its git HEAD (or TRACEHOUSE_REVISION) with a digest of its data files' sizes, "
    "modification times and inodes, so an edited, added or removed trace file is a new "
    "version. Observing registers the configured sources as partitions.",
)
def source_dataset(
    context: dg.OpExecutionContext, warehouse: WarehouseResource
) -> dg.DataVersionsByPartition:
    from tracehouse.fetch.resolve import source_version

    settings = warehouse.settings()
    uris = register_sources(context.instance, settings)
    versions: dict[str, str] = {}
    for name, uri in uris.items():
        try:
            versions[name] = source_version(replace(settings, sources=None, source=uri))
        except (SettingsError, OSError) as unreadable:  # that source is reported, not the rest
            context.log.warning(f"source {name!r} ({uri}) not observed: {unreadable}")
    return dg.DataVersionsByPartition(versions)


# --------------------------------------------------------------------------------------------
# tables

WIDE_TABLE_DEPS: dict[str, tuple[str, ...]] = {
    # The ranking reads runs and what identifies them (sql/rank/run_rankings.sql); the snapshots
    # list every source's; the baseline map names implementations; protocols are a constant.
    RANKING: ("runs", "workloads", "environments"),
    schemas.SOURCE_SNAPSHOTS.name: tuple(PER_SOURCE_TABLES),
    schemas.BASELINE_MAP.name: ("implementations", "definitions"),
    schemas.PROTOCOLS.name: (),
}


# The per-source tables first: a multi-asset reports its assets in dependency order.
TABLE_ORDER = sorted(schemas.TABLES, key=lambda name: name not in PER_SOURCE_TABLES)


def _table_spec(table: schemas.Table, kinds: set[str], code_version: str) -> dg.AssetSpec:
    per_source = table.name in PER_SOURCE_TABLES
    deps = [SOURCE_ASSET] if per_source else list(WIDE_TABLE_DEPS[table.name])
    return dg.AssetSpec(
        key=asset_key(table.name),
        description=markdown_safe(table.doc),
        group_name=TABLES_STAGE,
        owners=OWNERS,
        kinds=kinds,
        code_version=code_version,
        deps=[asset_key(dep) for dep in deps],
        partitions_def=SOURCES if per_source else None,
        # Per source: built when its source moves. The warehouse-wide tables are written by
        # the same step, so they need no condition of their own.
        automation_condition=dg.AutomationCondition.eager() if per_source else None,
        skippable=True,  # not materialized when the build refuses to publish
        metadata={
            "dagster/column_schema": table_schema(table),
            "dagster/table_name": table_name(table.name),
            "primary_key": ", ".join(table.key),
            "stored": "per source" if per_source else "warehouse-wide",
        },
    )


def table_specs(code_version: str = IMPORTER_VERSION) -> list[dg.AssetSpec]:
    kinds = storage_kinds()
    return [_table_spec(table, kinds, code_version) for table in schemas.TABLES.values()]


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
        "source": source.source if source else None,
        "resolved_sha": source.resolved_sha if source else None,
    }


def _check_results(outcomes: dict[str, Outcome], **extra: Any) -> Iterator[dg.AssetCheckResult]:
    for check in BUILD_CHECKS:
        if check.name in outcomes:
            yield check.result(outcomes[check.name], **extra)


def warehouse_version(generation: Path) -> str:
    """What the warehouse-wide tables are a function of: every source's snapshot, under this
    importer (the data version of those tables and the input of the views')."""
    snapshots = sorted(f"{s.source}={s.snapshot_id}" for s in generation_sources(generation))
    return _digest(IMPORTER_VERSION, *snapshots)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def make_warehouse_tables(code_version: str = IMPORTER_VERSION) -> dg.AssetsDefinition:
    """The build step over every table (``code_version``: the importer's)."""

    @dg.multi_asset(
        name="warehouse_tables",
        specs=table_specs(code_version),
        check_specs=[check.spec for check in BUILD_CHECKS],
        description="Build one source into the warehouse with build_warehouse, atomically: its "
        "partition of the per-source tables and the warehouse-wide tables.",
    )
    def warehouse_tables(
        context: dg.AssetExecutionContext, config: BuildConfig, warehouse: WarehouseResource
    ) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        settings = _partition_settings(context, warehouse)
        try:
            result = build_warehouse(
                settings,
                progress=_log_progress(context),
                force=config.force,
                require_fact_rows=True,
            )
            outcomes = result.checks
            if result.up_to_date:
                outcomes = read_checks(Warehouse(result.warehouse).require_current())
                if {check.name for check in BUILD_CHECKS} - set(outcomes):
                    # A generation from before checks were recorded: evaluate by rebuilding.
                    result = build_warehouse(
                        settings,
                        progress=_log_progress(context),
                        force=True,
                        require_fact_rows=True,
                    )
                    outcomes = result.checks
        except InvariantViolation as refused:
            yield from _check_results(refused.outcomes, published=False)
            raise dg.Failure(description=str(refused)) from None
        context.log.info("\n".join(result.summary_lines()))
        generation = Warehouse(result.warehouse).require_current()
        rebuilt = not result.up_to_date
        if not rebuilt:
            context.log.info(
                f"source unchanged: generation {generation.name} stays current; the tables are "
                "recorded again with the data versions they had"
            )
        (source,) = [s for s in generation_sources(generation) if s.source == context.partition_key]
        shared = {"generation": generation.name, "rebuilt": rebuilt}
        extra: dict[str, dict[str, Any]] = {
            schemas.SOURCE_SNAPSHOTS.name: _build_metadata(result) if rebuilt else {},
            schemas.REJECTS.name: {"rejects_by_reason": result.rejects_by_reason}
            if rebuilt
            else {},
        }
        for name in TABLE_ORDER:
            yield table_result(
                settings, generation, source, name, {**shared, **extra.get(name, {})}
            )
        yield from _check_results(outcomes, generation=generation.name, rebuilt=rebuilt)

    return warehouse_tables


def _partition_settings(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> Settings:
    """The settings of this run: its partition's source under the partition's name."""
    settings = warehouse.settings()
    name = context.partition_key
    uris = source_uris(settings)
    if name not in uris:
        raise dg.Failure(
            description=f"partition {name!r}: no such source (TRACEHOUSE_SOURCES, "
            "TRACEHOUSE_SOURCE or the warehouse's own sources name it)"
        )
    # A run pinned to a revision in run config (source set on the resource) keeps it.
    pinned = settings.source if settings.source_name == name else None
    return replace(settings, source=pinned or uris[name], source_name=name, sources=None)


def _table_uri(settings: Settings, generation: Path, table: str, source: str | None) -> str:
    if settings.catalog is not None and settings.object_store is not None:
        return f"{settings.object_store.rstrip('/')}/{table}"
    path = generation / f"{table}.parquet"
    return file_uri(path / source_key(source) if source else path)


def table_result(
    settings: Settings,
    generation: Path,
    source: GenerationSource,
    table: str,
    metadata: dict[str, Any],
) -> dg.MaterializeResult:
    if table in PER_SOURCE_TABLES:
        rows = sum(table_row_count_of(path) for path in table_files(generation, table, source.key))
        version = _digest(IMPORTER_VERSION, source.source, source.snapshot_id)
        uri = _table_uri(settings, generation, table, source.source)
        metadata = {**metadata, "snapshot_id": source.snapshot_id}
    else:
        rows = table_row_count(generation, table)
        version = warehouse_version(generation)
        uri = _table_uri(settings, generation, table, None)
    return dg.MaterializeResult(
        asset_key=asset_key(table),
        data_version=dg.DataVersion(version),
        metadata={"dagster/row_count": rows, "dagster/uri": uri, **metadata},
    )


def table_row_count_of(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(path).num_rows


warehouse_tables = make_warehouse_tables()


# --------------------------------------------------------------------------------------------
# views

# The views Dagster shows as assets (the rest are helpers they read). What each reads comes from
# its SQL (sql_files: latency_history reads run_history, a helper over the appearances and
# disappearances of runs per snapshot, so its deps are those tables).
VIEW_ASSETS = ("run_summary", "leaderboard", "latency_history", "record_events", "regressions")
# The views people read as products: a freshness policy says when they are overdue.
MARTS = frozenset(PRODUCT_VIEWS)


def view_deps(view: str) -> list[str]:
    """The assets ``view`` reads: tables, and the view assets it reads directly or through
    helper views (a settings table such as regression_thresholds is written with the views)."""
    keep = {*schemas.TABLES, *VIEW_ASSETS} - {view}
    return sorted(sql_files.installed().nearest_reads(view, keep, schemas.VIEWS))


def views_code_version() -> str:
    """Every SQL view is recreated together (they read each other), so one digest of sql/."""
    return "sql:" + _digest(
        *(f"{view}\n{sql_files.sql_text(view)}" for view in sorted(schemas.VIEWS))
    )


def _view_spec(view: str) -> dg.AssetSpec:
    return dg.AssetSpec(
        key=asset_key(view),
        description=markdown_safe(schemas.VIEWS[view].doc)
        + f" Its SQL: {sql_files.sql_shown(view)}. Materializing it recreates the SQL views in the "
        "published DuckDB file.",
        group_name=VIEWS_STAGE,
        owners=OWNERS,
        kinds={"duckdb"},
        code_version=views_code_version(),
        deps=[asset_key(dep) for dep in view_deps(view)],
        automation_condition=dg.AutomationCondition.eager(),
        freshness_policy=MART_FRESHNESS if view in MARTS else None,
        metadata={
            "dagster/table_name": table_name(view),
            "sql": dg.MetadataValue.path(str(sql_files.sql_path(view))),
        },
    )


LEADERBOARD_PREVIEW_SQL = """
SELECT definition, hardware, solution, author, workloads_compared,
       round(geomean_speedup, 3) AS geomean_speedup, round(win_rate, 3) AS win_rate
FROM leaderboard
WHERE NOT is_baseline AND workloads_compared > 0
ORDER BY geomean_speedup DESC, workloads_compared DESC, definition, hardware, solution
LIMIT $rows
"""


def recreate_views(settings: Settings) -> Path:
    """(Re)create the SQL views in the current generation's DuckDB file; the generation.

    The views are written into a copy of the file that then replaces it in one rename, so a
    reader never waits on a lock or sees a half-written file (one that opened the file before
    keeps reading the old views). Under the build lock: a build publishing meanwhile would
    switch generations under us."""
    import shutil

    import duckdb

    from tracehouse.assemble.duckdb_files import create_sql_views
    from tracehouse.files import replace_atomically
    from tracehouse.publish.generations import record_generation_files
    from tracehouse.warehouse import seal_published_file

    read = _reading(settings)
    warehouse = Warehouse(read.warehouse, read.keep_generations)
    with warehouse.build_lock(settings.lock_timeout_s):
        generation = warehouse.require_current()
        published = generation / DUCKDB_FILE

        def rewrite(copy: Path) -> None:
            shutil.copyfile(published, copy)
            connection = duckdb.connect(str(copy))
            try:
                create_sql_views(connection, settings)
                connection.execute("CHECKPOINT")
            finally:
                connection.close()
            Path(f"{copy}.wal").unlink(missing_ok=True)  # checkpointed: nothing left in it
            seal_published_file(copy)  # read-only to clients, as the build published it

        replace_atomically(published, rewrite)
        # the file's new size and digest, for the damage check (the other files keep theirs)
        record_generation_files(generation, only=[DUCKDB_FILE])
    return generation


def _reading(settings: Settings) -> Settings:
    if settings.object_store is None:
        return settings
    from tracehouse.publish.iceberg.replica import reading_settings

    return reading_settings(settings)


@dg.multi_asset(
    name="warehouse_views",
    specs=[_view_spec(view) for view in VIEW_ASSETS],
    description="Recreate the SQL views (sql/) in the published DuckDB file and record what "
    "each holds. They read each other, so they are recreated together.",
)
def warehouse_views(warehouse: WarehouseResource) -> Iterator[dg.MaterializeResult]:
    settings = warehouse.settings()
    generation = recreate_views(settings)
    version = _digest(views_code_version(), warehouse_version(generation))
    with warehouse.connect() as connection:
        for view in VIEW_ASSETS:
            extra: dict[str, Any] = {}
            if view == "leaderboard":
                cursor = connection.execute(LEADERBOARD_PREVIEW_SQL, {"rows": PREVIEW_ROWS})
                columns = [d[0] for d in cursor.description]
                preview = render.markdown_table(columns, cursor.fetchall())
                extra[f"top_{PREVIEW_ROWS}_by_geomean_speedup"] = dg.MetadataValue.md(preview)
            yield dg.MaterializeResult(
                asset_key=asset_key(view),
                data_version=dg.DataVersion(version),
                metadata={
                    **_view_metadata(connection, view),
                    "generation": generation.name,
                    "dagster/uri": file_uri(generation / DUCKDB_FILE),
                    **extra,
                },
            )


def _view_metadata(connection: Any, view: str) -> dict[str, Any]:
    """Row count and columns of a view, its types in the tables' (Arrow) vocabulary."""
    ((rows,),) = connection.table(view).aggregate("count(*)").fetchall()
    arrow = connection.table(view).limit(0).to_arrow_table().schema
    docs = {column.name: column.doc for column in schemas.VIEWS[view].columns}
    return {
        "dagster/row_count": rows,
        "dagster/column_schema": dg.TableSchema(
            columns=[
                dg.TableColumn(
                    name=field.name, type=str(field.type), description=docs.get(field.name)
                )
                for field in arrow
            ]
        ),
    }


# --------------------------------------------------------------------------------------------
# report

REPORT_FOLDER = "report"
OVERVIEW_ROWS_IN_METADATA = 10


def report_code_version() -> str:
    """The report's code is tracehouse/serve/report*.py (with its what-changed pages and render.py): a
    digest of them, so Dagster computes the report's data version from it and the views' (and
    marks the report stale when the code changes)."""
    from tracehouse.serve import (
        render,
        report,
        report_blocks,
        report_changes,
        report_definition,
        report_overview,
    )

    modules = (report, report_blocks, report_overview, report_definition, report_changes, render)
    return "report:" + _digest(*(Path(module.__file__ or "").read_text() for module in modules))


@dg.asset(
    key=asset_key("report"),
    code_version=report_code_version(),
    group_name=REPORT_STAGE,
    owners=OWNERS,
    kinds={"html"},
    # the overview and definition pages read these; the what-changed pages, regressions,
    # record_events and latency_history (tracehouse/serve/report_changes.py)
    deps=[
        asset_key(name)
        for name in ("leaderboard", "run_summary", "rejects", "regressions", "record_events")
    ],
    automation_condition=dg.AutomationCondition.eager(),
    description="The static HTML report of the warehouse (overview and one page per "
    "definition), written into the warehouse's `report/` folder; opens offline "
    "(tracehouse/serve/report.py, `tracehouse report`).",
)
def report(warehouse: WarehouseResource) -> dg.MaterializeResult:
    from tracehouse.serve.report import write_report

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
            "path": dg.MetadataValue.path(str(result.index.absolute())),
            "dagster/uri": file_uri(result.index),
            "pages": len(result.pages),
            "overview_top_rows": dg.MetadataValue.md(table),
        },
    )
