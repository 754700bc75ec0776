"""From staging parts to the published warehouse, in DuckDB (out of core, all cores).

Steps: resolve the KernelIndex workload cache across files (first trace line with a workload
key fixes its digest, identity doc §2.4) and recompute the few runs it changes; write each
table as one sorted Parquet file into a new generation folder; rank with ``sql/``; write the
DuckDB file of views; publish by swapping the ``current`` symlink.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines import IMPORTER_VERSION, invariants, schemas
from pipelines.settings import Settings
from pipelines.sql_files import VIEW_ORDER, sql_text
from pipelines.transforms import identity
from pipelines.transforms.ingest import PART_TABLES, DatasetContext
from pipelines.transforms.records import Reject
from pipelines.warehouse import DUCKDB_FILE, DUCKDB_SPILL_DIR, Warehouse, sql_literal

# Sort order of every table file, so two builds of the same data are byte-identical.
TABLE_ORDER = {
    "definitions": "definition",
    "implementations": "solution",
    "workloads": "definition, workload_key",
    "environments": "environment_id",
    "protocols": "protocol_digest",
    "runs": "source_file, source_line, run_id",
    "correctness": "run_id",
    "rejects": "file, line NULLS FIRST, reason, message",
    "run_rankings": "run_id",
    "ingest_paths": "source_file",
}


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
    spec = identity.PROTOCOL_SPEC
    return {
        "protocol_digest": identity.PROTOCOL_DIGEST,
        "name": identity.PROTOCOL_METADATA["name"],
        "title": identity.PROTOCOL_METADATA["title"],
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


def _select_list(table: schemas.Table, replacements: dict[str, str]) -> str:
    # Column names come from our own schema declarations, never from data.
    return ", ".join(
        f'{replacements[name]} AS "{name}"' if name in replacements else f's."{name}"'
        for name in table.column_names
    )


RESOLVED_RUNS_SQL = """
-- Join what staging could not know: the solution (author, implementation digest) and the
-- KernelIndex workload cache (identity doc §2.4 step 4: the first accepted trace line of the
-- import with a workload key fixes its case, even for lines of another definition).
CREATE TEMP TABLE known_solutions AS
    SELECT i.solution, i.author, i.implementation_digest
    FROM implementations AS i JOIN definitions AS d USING (definition);
CREATE TEMP TABLE first_case AS
    SELECT s.workload_key,
           arg_min({'wd': s.workload_digest, 'op': s.operation_digest, 'ck': s.correctness_key},
                   {'f': s.source_file, 'l': s.source_line, 'i': s.record_index}) AS first
    FROM staged_runs AS s JOIN known_solutions AS k USING (solution)
    WHERE s.identity_complete
      AND s.source_file NOT IN (SELECT source_file FROM kernelindex_unreadable_files)
    GROUP BY s.workload_key;
CREATE TEMP VIEW resolved_runs AS
    SELECT s.* REPLACE (
               CASE WHEN s.workload_digest IS NULL THEN NULL
                    ELSE coalesce(f.first.wd, s.workload_digest) END AS workload_digest,
               CASE WHEN s.workload_digest IS NULL THEN s.operation_digest
                    ELSE coalesce(f.first.op, s.operation_digest) END AS operation_digest,
               CASE WHEN s.workload_digest IS NULL THEN s.correctness_key
                    ELSE coalesce(f.first.ck, s.correctness_key) END AS correctness_key,
               coalesce(
                   s.identity_error,
                   CASE WHEN u.source_file IS NOT NULL THEN 'file_not_strict_json' END,
                   CASE WHEN k.solution IS NULL THEN 'unknown_solution' END
               ) AS identity_error
           ),
           k.author,
           k.implementation_digest,
           string_split(s.run_body_template, chr(0)) AS run_body_parts
    FROM staged_runs AS s
    LEFT JOIN known_solutions AS k USING (solution)
    LEFT JOIN first_case AS f USING (workload_key)
    LEFT JOIN kernelindex_unreadable_files AS u USING (source_file);
"""

RUN_REPLACEMENTS = {
    "comparison_key": "c.comparison_key",
    # The body text is identity.py's canonical run envelope; only the two digests staging could
    # not know are spliced in here.
    "run_digest": (
        "CASE WHEN s.implementation_digest IS NOT NULL AND s.run_body_template IS NOT NULL "
        "THEN 'sha256:' || sha256(s.run_body_parts[1] || s.implementation_digest || "
        "s.run_body_parts[2] || s.workload_digest || s.run_body_parts[3]) END"
    ),
    "snapshot_id": "$snapshot_id",
}
COMPARISON_PARTS = (
    "operation_digest",
    "workload_digest",
    "environment_digest",
    "correctness_key",
    "has_timing",
)


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
    # The files of one group share their parts.
    part_names: dict[str, set[str]] = {name: set() for name in PART_TABLES}
    for entry in file_entries.values():
        for table, names in entry.get("parts", {}).items():
            part_names[table].update(names)
    parts = {
        table: [str(warehouse.staging / name) for name in names]
        for table, names in part_names.items()
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
            if parts[name]:
                connection.read_parquet(sorted(parts[name])).create_view(f"staged_{name}")
            else:
                connection.register(f"staged_{name}_empty", table.arrow_schema.empty_table())
                connection.execute(
                    f"CREATE VIEW staged_{name} AS SELECT * FROM staged_{name}_empty"  # noqa: S608  (own names)
                )

        snapshot = _snapshot_row(resolved, files, file_entries, loaded.context)

        def copy(table: str, query: str, parameters: dict[str, Any] | None = None) -> None:
            target = generation / f"{table}.parquet"
            relation = connection.sql(
                f"{query} ORDER BY {TABLE_ORDER[table]}", params=parameters or {}
            )
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
        # History keeps its append order (two builds can share a millisecond).
        _write_arrow(
            schemas.SOURCE_SNAPSHOTS,
            _snapshot_history(warehouse, snapshot),
            generation / "source_snapshots.parquet",
        )
        for table in ("definitions", "implementations", "protocols", "ingest_paths"):
            staged = generation / f"_{table}.parquet"
            copy(table, f"SELECT * FROM read_parquet({sql_literal(staged)}) s")  # noqa: S608
            staged.unlink()
        _create_table_views(connection, generation)

        unreadable = sorted(
            rel for rel, entry in file_entries.items() if entry.get("kernelindex_unreadable")
        )
        connection.register(
            "kernelindex_unreadable_files",
            pa.table({"source_file": pa.array(unreadable, type=pa.string())}),
        )
        connection.execute(RESOLVED_RUNS_SQL)
        connection.execute(
            f"CREATE TEMP TABLE comparison_keys AS {sql_text('comparison_keys')}",
            {"protocol_digest": identity.PROTOCOL_DIGEST},
        )
        copy(
            "runs",
            f"SELECT {_select_list(schemas.RUNS, RUN_REPLACEMENTS)} FROM resolved_runs s "  # noqa: S608
            f"LEFT JOIN comparison_keys c USING ({', '.join(COMPARISON_PARTS)})",
            {"snapshot_id": snapshot["snapshot_id"]},
        )
        copy(
            "correctness",
            f"SELECT {_select_list(schemas.CORRECTNESS, {})} FROM staged_correctness s",  # noqa: S608
        )
        copy(
            "workloads",
            f"SELECT {_select_list(schemas.WORKLOADS, {})} FROM staged_workloads s "  # noqa: S608
            "QUALIFY row_number() OVER (PARTITION BY definition, workload_key "
            "ORDER BY source_file, source_line, record_index) = 1",
        )
        copy(
            "environments",
            f"SELECT {_select_list(schemas.ENVIRONMENTS, {})} FROM staged_environments s "  # noqa: S608
            "QUALIFY row_number() OVER (PARTITION BY environment_id) = 1",
        )
        extra_rejects = [
            _reject_row(r) for r in [*discovery_rejects, *resolved.fetch_rejects, *loaded.rejects]
        ]
        connection.register("extra_rejects", _rows_to_arrow(schemas.REJECTS, extra_rejects))
        copy(
            "rejects",
            "SELECT * FROM (SELECT * FROM staged_rejects UNION ALL SELECT * FROM extra_rejects) s",
        )

        _create_table_views(connection, generation)
        invariants.enforce(connection, invariants.RUN_INVARIANTS, checks)
        copy("run_rankings", f"SELECT * FROM ({sql_text('run_rankings')}) s")  # noqa: S608
        connection.execute("DROP VIEW IF EXISTS run_rankings")
        connection.execute(
            f"CREATE VIEW run_rankings AS SELECT * FROM read_parquet({sql_literal(generation / 'run_rankings.parquet')})"  # noqa: S608
        )
        invariants.enforce(connection, invariants.RANKING_INVARIANTS, checks)
        counts = {
            name: connection.execute(f"SELECT count(*) FROM {name}").fetchone()[0]  # type: ignore[index]  # noqa: S608
            for name in schemas.TABLES
        }
        rejects_by_reason = invariants.rejects_by_reason(connection)
    finally:
        connection.close()

    _write_duckdb_file(generation)
    if before_publish is not None:
        before_publish(generation, counts, checks)
    (generation / ".complete").write_text(f"{IMPORTER_VERSION}\n")
    warehouse.publish(generation)
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


def _create_table_views(connection: duckdb.DuckDBPyConnection, generation: Path) -> None:
    for name in schemas.TABLES:
        path = generation / f"{name}.parquet"
        if path.exists():
            connection.execute(
                f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet({sql_literal(path)})"  # noqa: S608  (own names, quoted path)
            )


def _write_duckdb_file(generation: Path) -> None:
    """Views over this generation's Parquet files and the SQL views, for ad-hoc SQL."""
    path = generation / DUCKDB_FILE
    # An older storage format, so the `duckdb` command (duckdb-cli, whose releases trail the
    # Python package) can open the file too.
    connection = duckdb.connect(str(path), config={"storage_compatibility_version": "v1.0.0"})
    try:
        _create_table_views(connection, generation)
        for view in VIEW_ORDER:
            connection.execute(f"CREATE OR REPLACE VIEW {view} AS {sql_text(view)}")
        connection.execute("CHECKPOINT")
    finally:
        connection.close()
