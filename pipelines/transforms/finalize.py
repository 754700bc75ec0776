"""From staging parts to the published warehouse, in DuckDB (out of core, all cores).

Steps: resolve the KernelIndex workload cache across files (first trace line with a workload
key fixes its digest, identity doc §2.4) and recompute the few runs it changes; write each
table as one sorted Parquet file into a new generation folder; rank with ``sql/``; write the
DuckDB file of views; publish by swapping the ``current`` symlink.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines import IMPORTER_VERSION, invariants, kernelindex, schemas
from pipelines.changes import store_regression_thresholds
from pipelines.schemas import TABLE_ORDER
from pipelines.settings import Settings
from pipelines.sql_files import VIEW_ORDER, sql_text
from pipelines.transforms.context import baseline_map_rows
from pipelines.transforms.ingest import PART_TABLES, DatasetContext
from pipelines.transforms.records import Reject
from pipelines.warehouse import (
    DUCKDB_FILE,
    DUCKDB_SPILL_DIR,
    PARTED_TABLES,
    SNAPSHOT_FILE,
    Warehouse,
    create_table_views,
    sql_literal,
    table_files,
)

FINALIZE_MEMORY_LIMIT = "400MB"


@dataclass
class FinalizeOutcome:
    generation: Path
    table_counts: dict[str, int]
    rejects_by_reason: dict[str, int]
    snapshot_id: str
    records_by_path: dict[str, int]
    checks: dict[str, invariants.Outcome]  # every invariant evaluated before publishing


def _write_arrow(table: schemas.Table, rows: list[dict[str, Any]], path: Path) -> None:
    pq.write_table(_rows_to_arrow(table, rows), path, compression="zstd")


def _reject_row(reject: Reject) -> dict[str, Any]:
    return {
        "file": reject.file,
        "line": reject.line,
        "reason": reject.reason,
        "message": reject.message,
        "raw_prefix": reject.raw_prefix,
    }


def _protocol_row() -> dict[str, Any]:
    spec = kernelindex.PROTOCOL_SPEC
    return {
        "protocol_digest": kernelindex.PROTOCOL_DIGEST,
        "name": kernelindex.PROTOCOL_METADATA["name"],
        "title": kernelindex.PROTOCOL_METADATA["title"],
        "harness_name": spec["harness"]["name"],
        "timer": spec["measurement"]["timer"],
        "primary_statistic": spec["measurement"]["primaryStatistic"],
        "comparator": spec["correctness"]["comparator"],
        "spec_json": orjson.dumps(spec, option=orjson.OPT_SORT_KEYS).decode(),
    }


def _snapshot_row(
    resolved: Any, files: list[Any], file_entries: dict[str, Any], context: DatasetContext
) -> dict[str, Any]:
    # JSONL files by content hash; definitions and solutions through the context fingerprint.
    listing = hashlib.sha256(f"{context.fingerprint}\n".encode())
    total = 0
    for source_file in files:
        entry = file_entries.get(source_file.rel, {})
        listing.update(
            f"{source_file.rel}\0{source_file.size}\0{entry.get('sha256', '')}\n".encode()
        )
        total += source_file.size
    file_list_digest = "sha256:" + listing.hexdigest()
    snapshot_id = hashlib.sha256(
        f"{resolved.source}\0{resolved.resolved_sha}\0{file_list_digest}".encode()
    ).hexdigest()[:32]
    return {
        "snapshot_id": snapshot_id,
        "source": resolved.source,
        "requested_revision": resolved.requested_revision,
        "resolved_sha": resolved.resolved_sha,
        "built_at": _now_ms(),
        "files": len(files),
        "bytes": total,
        "file_list_digest": file_list_digest,
        "importer_version": IMPORTER_VERSION,
    }


# Temp tables built once per build over every file, in dependency order, each the SELECT in
# sql/assemble/<name>.sql; resolved_runs and comparison_keys are then built per group.
GLOBAL_RELATIONS = ("known_solutions", "first_case")


def _projection(table: schemas.Table) -> str:
    # Column names come from our own schema declarations, never from data.
    return ", ".join(f'"{name}"' for name in table.column_names)


def _staged_view(
    connection: duckdb.DuckDBPyConnection,
    name: str,
    table: schemas.Table,
    paths: list[str],
    *,
    with_filename: bool = False,
) -> None:
    """(Re)point the view staged_<name> at some staging parts (none: an empty relation);
    ``with_filename`` adds the part file each row came from."""
    if paths:
        connection.read_parquet(sorted(paths), filename=with_filename).create_view(
            f"staged_{name}", replace=True
        )
    else:
        empty = table.arrow_schema.empty_table()
        if with_filename:
            empty = empty.append_column("filename", pa.array([], type=pa.string()))
        connection.register(f"staged_{name}_empty", empty)
        connection.execute(
            f"CREATE OR REPLACE VIEW staged_{name} AS SELECT * FROM staged_{name}_empty"  # noqa: S608  (own names)
        )


@dataclass(frozen=True)
class _Group:
    """The staging parts of one group of source files, keyed by the group's content."""

    key: str
    parts: dict[str, list[str]]  # table -> staging part paths


def _groups(warehouse: Warehouse, file_entries: dict[str, Any]) -> list[_Group]:
    found: dict[str, dict[str, list[str]]] = {}
    for entry in file_entries.values():
        if "group_key" in entry:  # the files of one group share their parts
            found[entry["group_key"]] = {
                table: [str(warehouse.staging / name) for name in names]
                for table, names in entry.get("parts", {}).items()
            }
    return [_Group(key, parts) for key, parts in sorted(found.items())]


# Parted tables stored as one part per group of source files; run_rankings is parted by
# ranking bucket instead (_write_ranking_parts).
GROUP_PARTED_TABLES = ("runs", "correctness", "rejects", "trace_lines")
# Stored columns of the parted tables (runs.snapshot_id comes from the generation).
PART_COLUMNS = {
    name: [c for c in schemas.TABLES[name].column_names if (name, c) != ("runs", "snapshot_id")]
    for name in PARTED_TABLES
}


def _resolution_digest(connection: duckdb.DuckDBPyConnection) -> str:
    """A digest of everything resolution takes from outside a group: solutions, the workload
    cache and the files KernelIndex cannot read. A group's resolved runs part is reused while
    its own content and this digest are unchanged."""
    ((digest,),) = connection.execute(sql_text("assemble/resolution_digest")).fetchall()
    return digest


def _write_parts(
    connection: duckdb.DuckDBPyConnection,
    warehouse: Warehouse,
    groups: list[_Group],
    resolution: str,
) -> dict[str, list[Path]]:
    """The resolved part of every group for each parted table: reused when it exists, else
    assembled by SQL — one statement per table for all the groups that need it, split into
    one part folder per group by DuckDB's partitioned write.

    A part is a folder (cache/parts/<table>/<name>/) because a partitioned write may cut one
    group into several files; it is complete once renamed into place.
    """
    names_of: dict[str, dict[str, str]] = {}
    for group in groups:
        names_of[group.key] = {
            "runs": hashlib.sha256(f"{group.key}\n{resolution}".encode()).hexdigest()[:32],
            "correctness": group.key[:32],
            "rejects": group.key[:32],
            "trace_lines": group.key[:32],
        }
    for table in GROUP_PARTED_TABLES:
        missing = [
            g for g in groups if not (warehouse.parts / table / names_of[g.key][table]).is_dir()
        ]
        if missing:
            _write_missing_parts(connection, warehouse, table, missing, names_of)
    return {
        table: [warehouse.parts / table / names_of[g.key][table] for g in groups]
        for table in GROUP_PARTED_TABLES
    }


def _write_missing_parts(
    connection: duckdb.DuckDBPyConnection,
    warehouse: Warehouse,
    table: str,
    groups: list[_Group],
    names_of: dict[str, dict[str, str]],
) -> None:
    files = [(path, names_of[g.key][table]) for g in groups for path in g.parts.get(table, [])]
    connection.register(
        "part_of_file",
        pa.table(
            {
                "filename": pa.array([f for f, _ in files], type=pa.string()),
                "part": pa.array([n for _, n in files], type=pa.string()),
            }
        ),
    )
    for name, declared in PART_TABLES.items():
        paths = [p for g in groups for p in g.parts.get(name, [])]
        _staged_view(connection, name, declared, paths, with_filename=True)
    if table == "runs":
        connection.execute(
            f"CREATE OR REPLACE TEMP VIEW resolved_runs AS {sql_text('assemble/resolved_runs')}"
        )
        connection.execute(
            "CREATE OR REPLACE TEMP TABLE comparison_keys AS "
            + sql_text("assemble/comparison_keys"),
            {"protocol_digest": kernelindex.PROTOCOL_DIGEST},
        )
    out = warehouse.parts / table / f".write.{os.getpid()}.tmp"
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    columns = ", ".join(f's."{c}"' for c in PART_COLUMNS[table])  # own names
    connection.execute(
        f"COPY (SELECT {columns}, p.part FROM ({sql_text(f'assemble/{table}')}) s "  # noqa: S608
        f"JOIN part_of_file p USING (filename)) TO {sql_literal(out)} "
        "(FORMAT parquet, PARTITION_BY (part), COMPRESSION zstd)"
    )
    for group in groups:
        name = names_of[group.key][table]
        written = out / f"part={name}"
        if not written.is_dir():  # a group without rows of this table
            written.mkdir(parents=True)
        os.replace(written, warehouse.parts / table / name)
    shutil.rmtree(out, ignore_errors=True)
    connection.unregister("part_of_file")


def _write_ranking_parts(connection: duckdb.DuckDBPyConnection, warehouse: Warehouse) -> list[Path]:
    """run_rankings as one part per ranking bucket (sql/ranking_inputs.sql): a part is named by
    the ranking rule and its bucket's inputs, so a bucket whose runs did not change keeps its
    part and only the others are ranked, by sql/run_rankings.sql over just their runs."""
    connection.execute(
        f"CREATE OR REPLACE TEMP VIEW all_ranking_inputs AS {sql_text('ranking_inputs')}"
    )
    rule = hashlib.sha256(
        (sql_text("ranking_inputs") + sql_text("run_rankings")).encode()
    ).hexdigest()
    buckets = connection.execute(sql_text("assemble/ranking_buckets")).fetchall()
    name_of = {
        bucket: hashlib.sha256(f"{rule}\n{bucket}\n{digest}".encode()).hexdigest()[:32]
        for bucket, digest in buckets
    }
    folder = warehouse.parts / "run_rankings"
    stale = {bucket: name for bucket, name in name_of.items() if not (folder / name).is_dir()}
    if stale:
        connection.register(
            "stale_ranking_buckets",
            pa.table(
                {
                    "ranking_bucket": pa.array(list(stale), type=pa.string()),
                    "part": pa.array(list(stale.values()), type=pa.string()),
                }
            ),
        )
        connection.execute(
            "CREATE OR REPLACE TEMP VIEW ranking_inputs AS SELECT i.* FROM all_ranking_inputs i "
            "JOIN stale_ranking_buckets USING (ranking_bucket)"
        )
        out = folder / f".write.{os.getpid()}.tmp"
        shutil.rmtree(out, ignore_errors=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        columns = ", ".join(f'k."{c}"' for c in PART_COLUMNS["run_rankings"])  # own names
        connection.execute(
            f"COPY (SELECT {columns}, b.part FROM ({sql_text('run_rankings')}) k "  # noqa: S608
            "JOIN ranking_inputs USING (run_id) JOIN stale_ranking_buckets b USING (ranking_bucket)) "
            f"TO {sql_literal(out)} (FORMAT parquet, PARTITION_BY (part), COMPRESSION zstd)"
        )
        for name in stale.values():
            os.replace(out / f"part={name}", folder / name)
        shutil.rmtree(out, ignore_errors=True)
        connection.unregister("stale_ranking_buckets")
    return [folder / name for name in name_of.values()]


def _write_empty_parts(generation: Path) -> None:
    """A parted table without rows gets one empty part: a view needs at least one file."""
    for table in PARTED_TABLES:
        folder = generation / f"{table}.parquet"
        if folder.is_dir() and not table_files(generation, table):
            pq.write_table(
                pa.schema(
                    [schemas.TABLES[table].arrow_schema.field(c) for c in PART_COLUMNS[table]]
                ).empty_table(),
                folder / "empty.parquet",
            )


def _link_parts(generation: Path, table: str, parts: list[Path]) -> None:
    """The generation's folder of a parted table: hard links to the files of the shared parts
    (copies where the file system has no links), so a generation stays whole when the cache
    is cleaned."""
    folder = generation / f"{table}.parquet"
    folder.mkdir()
    for part in parts:
        for source in sorted(part.glob("*.parquet")):
            target = folder / f"{part.name}-{source.name}"
            try:
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)


def finalize(
    *,
    warehouse: Warehouse,
    settings: Settings,
    resolved: Any,
    loaded: Any,
    files: list[Any],
    file_entries: dict[str, Any],
    discovery_rejects: list[Reject],
    progress: Callable[[str, int, int], None] | None,
    before_publish: Callable[[Path, dict[str, int], dict[str, invariants.Outcome]], None]
    | None = None,
) -> FinalizeOutcome:
    """``before_publish(generation, table_counts, outcomes)`` runs the publish guards last;
    it may add outcomes, and raises to keep the generation unpublished."""
    generation = warehouse.new_generation()
    checks: dict[str, invariants.Outcome] = {}
    if progress:
        progress("finalize", 0, 1)
    groups = _groups(warehouse, file_entries)
    all_parts = {
        name: sorted({p for group in groups for p in group.parts.get(name, [])})
        for name in PART_TABLES
    }

    temp_dir = warehouse.cache / DUCKDB_SPILL_DIR
    connection = duckdb.connect(
        config={
            "threads": max(1, settings.workers),
            # Beyond this DuckDB spills to temp_directory, so peak memory stays flat as the
            # dataset grows (issue 5); every table is written with an explicit ORDER BY, so
            # insertion order need not be kept.
            "memory_limit": FINALIZE_MEMORY_LIMIT,
            "temp_directory": str(temp_dir),
            "preserve_insertion_order": False,
        }
    )
    try:
        for name, table in PART_TABLES.items():
            _staged_view(connection, name, table, all_parts[name])
        snapshot = _snapshot_row(resolved, files, file_entries, loaded.context)
        (generation / SNAPSHOT_FILE).write_text(snapshot["snapshot_id"] + "\n")

        def copy(table: str, query: str) -> None:
            target = generation / f"{table}.parquet"
            relation = connection.sql(f"{query} ORDER BY {TABLE_ORDER[table]}")
            relation.write_parquet(str(target), compression="zstd")

        _write_arrow(
            schemas.DEFINITIONS, loaded.definition_rows, generation / "_definitions.parquet"
        )
        _write_arrow(
            schemas.IMPLEMENTATIONS,
            loaded.implementation_rows,
            generation / "_implementations.parquet",
        )
        _write_arrow(schemas.PROTOCOLS, [_protocol_row()], generation / "_protocols.parquet")
        _write_arrow(
            schemas.INGEST_PATHS,
            _ingest_path_rows(file_entries),
            generation / "_ingest_paths.parquet",
        )
        _write_arrow(
            schemas.BASELINE_MAP,
            baseline_map_rows(settings.baselines_file),
            generation / "_baseline_map.parquet",
        )
        # History keeps its append order (two builds can share a millisecond).
        _write_arrow(
            schemas.SOURCE_SNAPSHOTS,
            _snapshot_history(warehouse, snapshot),
            generation / "source_snapshots.parquet",
        )
        for table in (
            "definitions",
            "implementations",
            "protocols",
            "ingest_paths",
            "baseline_map",
        ):
            staged = generation / f"_{table}.parquet"
            copy(table, f"SELECT * FROM read_parquet({sql_literal(staged)}) s")  # noqa: S608
            staged.unlink()
        create_table_views(connection, generation)

        unreadable = sorted(
            rel for rel, entry in file_entries.items() if entry.get("kernelindex_unreadable")
        )
        connection.register(
            "kernelindex_unreadable_files",
            pa.table({"source_file": pa.array(unreadable, type=pa.string())}),
        )
        # The workload cache spans every file, so it is computed over all staging parts (only
        # its few columns are read); then every group is resolved on its own.
        for relation in GLOBAL_RELATIONS:
            connection.execute(
                f"CREATE TEMP TABLE {relation} AS {sql_text(f'assemble/{relation}')}"
            )
        for table in ("workloads", "environments"):
            copy(
                table,
                f"SELECT {_projection(schemas.TABLES[table])} "  # noqa: S608  (own names)
                f"FROM ({sql_text(f'assemble/{table}')}) s",
            )
        parts = _write_parts(connection, warehouse, groups, _resolution_digest(connection))
        # Records refused before the ingest (discovery, fetch, definitions, solutions): one
        # more rejects part, of this generation only.
        extra_rejects = [
            _reject_row(r) for r in [*discovery_rejects, *resolved.fetch_rejects, *loaded.rejects]
        ]
        for table in GROUP_PARTED_TABLES:
            _link_parts(generation, table, parts[table])
        connection.register("extra_rejects", _rows_to_arrow(schemas.REJECTS, extra_rejects))
        connection.sql(
            "SELECT * FROM extra_rejects ORDER BY " + TABLE_ORDER["rejects"]  # noqa: S608
        ).write_parquet(str(generation / "rejects.parquet" / "before-ingest.parquet"))
        _write_empty_parts(generation)

        create_table_views(connection, generation)
        invariants.enforce(connection, invariants.RUN_INVARIANTS, checks)
        _link_parts(generation, "run_rankings", _write_ranking_parts(connection, warehouse))
        _write_empty_parts(generation)
        create_table_views(connection, generation)
        invariants.enforce(connection, invariants.RANKING_INVARIANTS, checks)
        counts = {
            name: connection.execute(f"SELECT count(*) FROM {name}").fetchone()[0]  # type: ignore[index]  # noqa: S608
            for name in schemas.TABLES
        }
        rejects_by_reason = invariants.rejects_by_reason(connection)
    finally:
        connection.close()

    _write_duckdb_file(generation, settings)
    if before_publish is not None:
        before_publish(generation, counts, checks)
    (generation / ".complete").write_text(f"{IMPORTER_VERSION}\n")
    warehouse.publish(generation)
    _remove_unlinked_parts(warehouse)
    if progress:
        progress("finalize", 1, 1)
    path_rows = _ingest_path_rows(file_entries)
    records_by_path = {
        "columnar": sum(r["columnar_records"] for r in path_rows),
        "exact": sum(r["exact_records"] for r in path_rows),
    }
    return FinalizeOutcome(
        generation, counts, rejects_by_reason, snapshot["snapshot_id"], records_by_path, checks
    )


def _remove_unlinked_parts(warehouse: Warehouse) -> None:
    """Parts no generation links to any more (their only link is the cache's own)."""
    if not warehouse.parts.exists():
        return
    for part in warehouse.parts.glob("*/*"):
        files = list(part.glob("*.parquet"))
        if all(f.stat().st_nlink == 1 for f in files):
            shutil.rmtree(part, ignore_errors=True)


def _ingest_path_rows(file_entries: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "source_file": rel,
            "records": entry.get("records", 0),
            "runs": entry.get("runs", 0),
            "columnar_records": entry.get("columnar_records", 0),
            "exact_records": entry.get("records", 0) - entry.get("columnar_records", 0),
        }
        for rel, entry in sorted(file_entries.items())
    ]


def _rows_to_arrow(table: schemas.Table, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pydict(
        {name: [row.get(name) for row in rows] for name in table.column_names},
        schema=table.arrow_schema,
    )


def _now_ms() -> datetime:
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def _snapshot_history(warehouse: Warehouse, snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """Earlier snapshots stay listed, so the table shows which revision each state came from."""
    history: list[dict[str, Any]] = []
    current = warehouse.current_generation()
    if current is not None and (current / "source_snapshots.parquet").exists():
        history = pq.read_table(current / "source_snapshots.parquet").to_pylist()
    history = [row for row in history if row["snapshot_id"] != snapshot["snapshot_id"]]
    history.append(snapshot)
    return history


def _write_duckdb_file(generation: Path, settings: Settings) -> None:
    """Views over this generation's Parquet files and the SQL views, for ad-hoc SQL."""
    path = generation / DUCKDB_FILE
    # An older storage format, so the `duckdb` command (duckdb-cli, whose releases trail the
    # Python package) can open the file too.
    connection = duckdb.connect(str(path), config={"storage_compatibility_version": "v1.0.0"})
    try:
        create_table_views(connection, generation)
        store_regression_thresholds(connection, settings, temporary=False)
        for view in VIEW_ORDER:
            connection.execute(f"CREATE OR REPLACE VIEW {view} AS {sql_text(view)}")
        connection.execute("CHECKPOINT")
    finally:
        connection.close()
