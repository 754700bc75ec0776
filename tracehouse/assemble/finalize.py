"""From staging parts to the published warehouse, in DuckDB (out of core, all cores).

Steps: resolve the KernelIndex workload cache across files (first trace line with a workload
key fixes its digest, identity doc §2.4) and recompute the few runs it changes; write each
table (the build's source's slice of it) as one sorted Parquet file into a new generation
folder, beside every other source's files linked from the current one; rank across all sources
with ``sql/``; add what changed to run_history; write the DuckDB file of views; publish by
swapping the ``current`` symlink.
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

from tracehouse import kernelindex, schemas
from tracehouse.assemble import invariants
from tracehouse.assemble.history import store_regression_thresholds
from tracehouse.files import sha256_file
from tracehouse.identify.context import baseline_map_rows
from tracehouse.ingest.manifest import FileEntry
from tracehouse.ingest.worker import PART_TABLES, DatasetContext
from tracehouse.rejects import Reject
from tracehouse.schemas import (
    GROUP_PARTED_TABLES,
    HISTORY_TABLES,
    IMPORTER_VERSION,
    PARTED_TABLES,
    PER_SOURCE_TABLES,
    TABLE_ORDER,
)
from tracehouse.settings import Settings
from tracehouse.sql_files import VIEW_ORDER, sql_text
from tracehouse.warehouse import (
    DUCKDB_FILE,
    DUCKDB_SPILL_DIR,
    READER_DUCKDB_FILE,
    SNAPSHOT_FILE,
    GenerationSource,
    Warehouse,
    create_table_views,
    generation_sources,
    holds_sources,
    seal_published_file,
    sql_literal,
    table_files,
    write_generation_sources,
)

FINALIZE_MEMORY_LIMIT = "400MB"


@dataclass
class FinalizeOutcome:
    generation: Path
    table_counts: dict[str, int]
    rejects_by_reason: dict[str, int]
    snapshot_id: str
    checks: dict[str, invariants.Outcome]  # every invariant evaluated before publishing


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
    resolved: Any, files: list[Any], file_entries: dict[str, FileEntry], context: DatasetContext
) -> dict[str, Any]:
    # JSONL files by content hash; definitions and solutions through the context fingerprint.
    listing = hashlib.sha256(f"{context.fingerprint}\n".encode())
    total = 0
    for source_file in files:
        entry = file_entries.get(source_file.rel)
        sha = (entry.sha256 if entry is not None else None) or ""
        listing.update(f"{source_file.rel}\0{source_file.size}\0{sha}\n".encode())
        total += source_file.size
    file_list_digest = "sha256:" + listing.hexdigest()
    snapshot_id = hashlib.sha256(
        f"{resolved.name}\0{resolved.uri}\0{resolved.resolved_sha}\0{file_list_digest}".encode()
    ).hexdigest()[:32]
    return {
        "snapshot_id": snapshot_id,
        "source": resolved.name,
        "uri": resolved.uri,
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


def _projection(table: str) -> str:
    # Column names come from our own schema declarations, never from data.
    return ", ".join(f'"{name}"' for name in schemas.stored_columns(table))


def stored_schema(table: str) -> pa.Schema:
    """The Arrow schema of what ``table``'s files hold (per-source tables store no source)."""
    declared = schemas.TABLES[table].arrow_schema
    return pa.schema([declared.field(name) for name in schemas.stored_columns(table)])


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


def _groups(warehouse: Warehouse, file_entries: dict[str, FileEntry]) -> list[_Group]:
    found: dict[str, dict[str, list[str]]] = {}
    for entry in file_entries.values():
        if entry.group_key is not None:  # the files of one group share their parts
            found[entry.group_key] = {
                table: [str(warehouse.staging / name) for name in names]
                for table, names in entry.parts.items()
            }
    return [_Group(key, parts) for key, parts in sorted(found.items())]


# Parted tables are stored as one part per (source, group of source files)
# (GROUP_PARTED_TABLES); run_rankings, which spans every source, is parted by ranking bucket
# instead (write_ranking_parts).
# Stored columns of the parted tables (source and snapshot_id come from the generation).
PART_COLUMNS = {name: schemas.stored_columns(name) for name in PARTED_TABLES}
# run_id in the assembled parts is qualified by the source's name, so the same trace line read
# from two sources (a dataset and its fork) is two runs with two ids; the staged id is the
# path, line and bytes of the record.
# (COPY takes no bound parameters, so the name comes from a one-row temp table.)
QUALIFIED_RUN_ID = "substr(sha256((SELECT name FROM build_source) || chr(10) || s.run_id), 1, 32)"


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
    source_name: str,
    base: Path | None,
    key: str,
) -> dict[str, list[Path]]:
    """The resolved part of every group for each parted table: reused when it exists, else
    assembled by SQL — one statement per table for each batch of the groups that need it
    (_write_batches), split into one part folder per group by DuckDB's partitioned write.

    A part is a folder (cache/parts/<table>/<name>/) because a partitioned write may cut one
    group into several files; it is complete once renamed into place. Part names are keyed by
    (source, group), so the parts of one source are never another's, and a build of one source
    leaves every other source's parts as they are.

    A part the base generation ``base`` already holds (in ``<table>.parquet/<key>/``; the
    build checked it byte for byte) is linked from there; any other is copied from the
    cache, whose copy is checked against its recorded digests first and written again from
    the staging parts when it does not match.
    """

    def name(*terms: str) -> str:
        return hashlib.sha256("\n".join([source_name, *terms]).encode()).hexdigest()[:32]

    names_of: dict[str, dict[str, str]] = {}
    for group in groups:
        # A runs part depends on the resolution too; the others on their group's files only.
        names_of[group.key] = {
            table: name(group.key, resolution) if table == schemas.RUNS.name else name(group.key)
            for table in GROUP_PARTED_TABLES
        }
    for table in GROUP_PARTED_TABLES:
        held = _base_folder(base, table, key)
        missing = [
            g
            for g in groups
            if not _held_by(held, names_of[g.key][table])
            and not _intact_part(warehouse.parts / table / names_of[g.key][table])
        ]
        for batch in _write_batches(table, missing):
            _write_missing_parts(connection, warehouse, table, batch, names_of, source_name)
    return {
        table: [warehouse.parts / table / names_of[g.key][table] for g in groups]
        for table in GROUP_PARTED_TABLES
    }


# At most about this much staged data (uncompressed) per partitioned write. One statement
# over every group held the resolved rows' hash joins (the workload cache, comparison keys)
# and the write's per-thread partition buffers at once, and at 1M runs that outgrew
# FINALIZE_MEMORY_LIMIT with no operator left to spill (issue 16); a batch of groups bounds
# all three, and the comparison keys of a batch are only its own.
PARTED_WRITE_BATCH_BYTES = 256 * 1024 * 1024


def _write_batches(table: str, groups: list[_Group]) -> list[list[_Group]]:
    """``groups`` in order, cut into batches of about PARTED_WRITE_BATCH_BYTES of staged
    ``table`` rows (by the parts' Parquet footers; a bigger group is a batch of its own)."""
    batches: list[list[_Group]] = []
    size = 0
    for group in groups:
        group_size = 0
        for path in group.parts.get(table, []):
            metadata = pq.read_metadata(path)
            group_size += sum(
                metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)
            )
        if not batches or size + group_size > PARTED_WRITE_BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(group)
        size += group_size
    return batches


def _write_missing_parts(
    connection: duckdb.DuckDBPyConnection,
    warehouse: Warehouse,
    table: str,
    groups: list[_Group],
    names_of: dict[str, dict[str, str]],
    source_name: str,
) -> None:
    connection.execute(
        "CREATE OR REPLACE TEMP TABLE build_source AS SELECT $name::VARCHAR AS name",
        {"name": source_name},
    )
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
    columns = ", ".join(
        f'{QUALIFIED_RUN_ID} AS "run_id"' if c == "run_id" else f's."{c}"'
        for c in PART_COLUMNS[table]  # own names
    )
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
        _record_part_digests(written)
        os.replace(written, warehouse.parts / table / name)
    shutil.rmtree(out, ignore_errors=True)
    connection.unregister("part_of_file")


def write_ranking_parts(
    connection: duckdb.DuckDBPyConnection, warehouse: Warehouse, base: Path | None
) -> list[Path]:
    """run_rankings as one part per ranking bucket (sql/ranking_inputs.sql): a part is named by
    the ranking rule and its bucket's inputs, so a bucket whose runs did not change keeps its
    part, and only the others are ranked, by sql/run_rankings.sql over just their runs. As in
    _write_parts, a part the base generation holds (``base``: its run_rankings.parquet folder)
    or an intact cache copy of it is reused."""
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
    stale = {
        bucket: name
        for bucket, name in name_of.items()
        if not _held_by(base, name) and not _intact_part(folder / name)
    }
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
            _record_part_digests(out / f"part={name}")
            os.replace(out / f"part={name}", folder / name)
        shutil.rmtree(out, ignore_errors=True)
        connection.unregister("stale_ranking_buckets")
    return [folder / name for name in name_of.values()]


def write_empty_parts(generation: Path, key: str | None = None) -> None:
    """A parted table without rows gets one empty part: a view needs at least one file (with
    ``key``, in that source's folder of the per-source tables)."""
    for table in PARTED_TABLES:
        per_source = table in PER_SOURCE_TABLES
        if per_source and key is None:
            continue
        folder = generation / f"{table}.parquet"
        folder = folder / key if per_source and key is not None else folder
        if folder.is_dir() and not table_files(generation, table, key if per_source else None):
            pq.write_table(stored_schema(table).empty_table(), folder / "empty.parquet")


# Beside the files of each part folder of cache/parts/: their names and SHA-256, written before
# the folder is renamed into place. A part is reused only while its files match.
PART_DIGESTS = "digests.json"


def _record_part_digests(folder: Path) -> None:
    digests = {path.name: sha256_file(path) for path in sorted(folder.glob("*.parquet"))}
    (folder / PART_DIGESTS).write_bytes(orjson.dumps(digests) + b"\n")


def _intact_part(folder: Path) -> bool:
    """Whether a cache part can be reused: its files are those it was written with, byte for
    byte. A damaged one is removed here, so that it is written again."""
    if not folder.is_dir():
        return False
    try:
        digests = orjson.loads((folder / PART_DIGESTS).read_bytes())
        files = {path.name: path for path in folder.glob("*.parquet")}
        intact = (
            isinstance(digests, dict)
            and set(digests) == set(files)
            and all(sha256_file(files[name]) == digest for name, digest in digests.items())
        )
    except (OSError, orjson.JSONDecodeError):
        intact = False
    if not intact:
        shutil.rmtree(folder, ignore_errors=True)
    return intact


def _held_by(base: Path | None, part_name: str) -> bool:
    return base is not None and any(base.glob(f"{part_name}-*.parquet"))


def _base_folder(current: Path | None, table: str, key: str | None = None) -> Path | None:
    """The folder of ``table`` (a source's, with ``key``) in the base generation."""
    if current is None:
        return None
    folder = current / f"{table}.parquet"
    return folder / key if key is not None else folder


def place_parts(folder: Path, parts: list[Path], base: Path | None) -> None:
    """A folder of a parted table in a generation (a source's, or run_rankings'): each part's
    files as ``<part>-<file>``, hard links of the base generation's files where it holds the
    part (``base`` is the same folder there: generations share what did not change), else
    copies of the cache's files. A generation never shares a file with the cache, so damage to
    one never reaches the other (a repair used to re-publish a damaged part from the cache)."""
    folder.mkdir(parents=True, exist_ok=True)
    for part in parts:
        held = sorted(base.glob(f"{part.name}-*.parquet")) if base is not None else []
        for path in held:
            _link(path, folder / path.name)
        if not held:
            for source in sorted(part.glob("*.parquet")):
                shutil.copyfile(source, folder / f"{part.name}-{source.name}")


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _link_other_sources(
    current: Path | None,
    generation: Path,
    keep: list[GenerationSource],
    tables: tuple[str, ...] = PER_SOURCE_TABLES,
) -> None:
    """Every file of the sources a build leaves alone, linked from the current generation:
    their rows are exactly what they were."""
    if current is None:
        return
    for source in keep:
        for table in tables:
            origin = current / f"{table}.parquet" / source.key
            for path in sorted(origin.rglob("*.parquet")):
                target = generation / f"{table}.parquet" / source.key / path.relative_to(origin)
                target.parent.mkdir(parents=True, exist_ok=True)
                _link(path, target)


def finalize(
    *,
    warehouse: Warehouse,
    settings: Settings,
    resolved: Any,
    loaded: Any,
    files: list[Any],
    file_entries: dict[str, FileEntry],
    discovery_rejects: list[Reject],
    progress: Callable[[str, int, int], None] | None,
    before_publish: Callable[[Path, dict[str, int], dict[str, invariants.Outcome]], None]
    | None = None,
    base: Path | None = None,
    publish: Callable[[Warehouse, Path], None],
) -> FinalizeOutcome:
    """Write the build's source into a new generation beside every other source of ``base``
    (the generation the build checked and chose to build on; linked as they are), rank across
    all of them, and publish.

    ``before_publish(generation, table_counts, outcomes)`` runs the publish guards last; it
    may add outcomes, and raises to keep the generation unpublished. ``publish(warehouse,
    generation)`` is the atomic switch (tracehouse/publish/generations.py)."""
    current = base
    if current is not None and not holds_sources(current):
        current = None  # built by an older tracehouse: nothing of it is reused
    others = [
        s for s in (generation_sources(current) if current else []) if s.source != resolved.name
    ]
    generation = warehouse.new_generation()
    checks: dict[str, invariants.Outcome] = {}
    if progress:
        progress("finalize", 0, 1)
    groups = _groups(warehouse, file_entries)
    all_parts = {
        name: sorted({p for group in groups for p in group.parts.get(name, [])})
        for name in PART_TABLES
    }
    key = resolved.key

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
        history = _snapshot_history(current)
        snapshot = _snapshot_row(resolved, files, file_entries, loaded.context)
        snapshot["snapshot_number"] = _snapshot_number(history, resolved.name, snapshot)
        (generation / SNAPSHOT_FILE).write_text(snapshot["snapshot_id"] + "\n")
        this_source = GenerationSource(
            resolved.name,
            resolved.uri,
            key,
            snapshot["snapshot_id"],
            snapshot["snapshot_number"],
            resolved.resolved_sha,
        )
        # Until this source's own rows are assembled, the views show it alone: the assembly
        # SQL reads its definitions and solutions, never another source's.
        write_generation_sources(generation, [this_source])
        _keep_history(generation, current, this_source)

        def copy(table: str, query: str) -> None:
            """One table's rows as one sorted file: the source's slice, or a global table."""
            if table in PER_SOURCE_TABLES:
                target = generation / f"{table}.parquet" / key / "data.parquet"
                target.parent.mkdir(parents=True, exist_ok=True)
                order = schemas.slice_order(table)
            else:
                target = generation / f"{table}.parquet"
                order = TABLE_ORDER[table]
            relation = connection.sql(f"{query} ORDER BY {order}")
            relation.write_parquet(str(target), compression="zstd")

        for table, rows in (
            ("definitions", loaded.definition_rows),
            ("implementations", loaded.implementation_rows),
            ("protocols", [_protocol_row()]),
            ("baseline_map", baseline_map_rows(settings.baselines_file)),
        ):
            staged = generation / f"_{table}.parquet"
            pq.write_table(rows_to_arrow(table, rows), staged, compression="zstd")
            copy(table, f"SELECT * FROM read_parquet({sql_literal(staged)}) s")  # noqa: S608
            staged.unlink()
        # History keeps its append order (two builds can share a millisecond).
        history.append(snapshot)
        pq.write_table(
            rows_to_arrow("source_snapshots", history),
            generation / "source_snapshots.parquet",
            compression="zstd",
        )
        create_table_views(connection, generation)

        unreadable = sorted(
            rel for rel, entry in file_entries.items() if entry.kernelindex_unreadable
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
        for table in schemas.WHOLE_SOURCE_STAGED_TABLES:
            copy(
                table,
                f"SELECT {_projection(table)} "  # noqa: S608  (own names)
                f"FROM ({sql_text(f'assemble/{table}')}) s",
            )
        parts = _write_parts(
            connection,
            warehouse,
            groups,
            _resolution_digest(connection),
            resolved.name,
            current,
            key,
        )
        # Records refused before the ingest (discovery, fetch, definitions, solutions): one
        # more rejects part, of this generation only.
        extra_rejects = [
            _reject_row(r) for r in [*discovery_rejects, *resolved.fetch_rejects, *loaded.rejects]
        ]
        for table in GROUP_PARTED_TABLES:
            place_parts(
                generation / f"{table}.parquet" / key,
                parts[table],
                _base_folder(current, table, key),
            )
        connection.register("extra_rejects", rows_to_arrow("rejects", extra_rejects))
        connection.sql(
            "SELECT * FROM extra_rejects ORDER BY " + schemas.slice_order("rejects")  # noqa: S608
        ).write_parquet(str(generation / "rejects.parquet" / key / "before-ingest.parquet"))
        write_empty_parts(generation, key)

        # Now every source: ranks, cohorts and the invariants span the warehouse.
        _link_other_sources(current, generation, others)
        write_generation_sources(generation, [*others, this_source])
        create_table_views(connection, generation)
        invariants.enforce(connection, invariants.RUN_INVARIANTS, checks)
        rankings = _base_folder(current, "run_rankings")
        place_parts(
            generation / "run_rankings.parquet",
            write_ranking_parts(connection, warehouse, rankings),
            rankings,
        )
        write_empty_parts(generation)
        create_table_views(connection, generation)
        _write_history(connection, generation, current, this_source)
        create_table_views(connection, generation)
        invariants.enforce(connection, invariants.RANKING_INVARIANTS, checks)
        counts = _table_counts(connection)
        rejects_by_reason = invariants.rejects_by_reason(connection)
    finally:
        connection.close()

    _complete_and_publish(warehouse, generation, settings, counts, checks, before_publish, publish)
    if progress:
        progress("finalize", 1, 1)
    return FinalizeOutcome(generation, counts, rejects_by_reason, snapshot["snapshot_id"], checks)


def _keep_history(generation: Path, current: Path | None, source: GenerationSource) -> None:
    """The source's run_history files so far, linked from the current generation (an empty
    file for a new source: a view needs one)."""
    if current is not None and any(s.source == source.source for s in generation_sources(current)):
        _link_other_sources(current, generation, [source], HISTORY_TABLES)
    for table in HISTORY_TABLES:
        folder = generation / f"{table}.parquet" / source.key
        folder.mkdir(parents=True, exist_ok=True)
        # One empty file of the current schema, named after it: older files may lack a column
        # added since, and the view reads them by name (warehouse.table_view_sql).
        schema = stored_schema(table)
        digest = hashlib.sha256(str(schema).encode()).hexdigest()[:12]
        empty = folder / f"empty-{digest}.parquet"
        if not empty.exists():
            pq.write_table(schema.empty_table(), empty)


def _write_history(
    connection: duckdb.DuckDBPyConnection,
    generation: Path,
    current: Path | None,
    source: GenerationSource,
) -> None:
    """run_history, incrementally: beside the source's earlier files (_keep_history), one file
    each of what changed with this snapshot (runs that appeared, ranges that ended). An
    unchanged run costs nothing."""
    parameters = {"source_name": source.source, "snapshot_number": source.snapshot_number}
    for table in HISTORY_TABLES:
        # A name no earlier delta of the source has: the snapshot number and the generation.
        target = (
            generation
            / f"{table}.parquet"
            / source.key
            / f"{source.snapshot_number:06d}-{generation.name}.parquet"
        )
        columns = ", ".join(f'"{c}"' for c in schemas.stored_columns(table))  # own names
        # Written by DuckDB, never held as one Arrow table: on a cold build every run appeared
        # (1M rows at issue 16's scale), beyond what the process may hold beside DuckDB.
        connection.sql(
            f"SELECT {columns} FROM ({sql_text(f'assemble/{table}')}) s "  # noqa: S608
            f"ORDER BY {schemas.slice_order(table)}",
            params=parameters,
        ).write_parquet(str(target), compression="zstd")
        if pq.read_metadata(target).num_rows == 0:
            target.unlink()


def _table_counts(connection: duckdb.DuckDBPyConnection) -> dict[str, int]:
    return {
        table: connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]  # noqa: S608  (own names)
        for table in schemas.TABLES
    }


def _complete_and_publish(
    warehouse: Warehouse,
    generation: Path,
    settings: Settings,
    counts: dict[str, int],
    checks: dict[str, invariants.Outcome],
    before_publish: Callable[[Path, dict[str, int], dict[str, invariants.Outcome]], None] | None,
    publish: Callable[[Warehouse, Path], None],
) -> None:
    """The last steps of every new generation: its DuckDB file, the publish guards, the
    completion marker, the atomic switch, and the parts no generation links any more."""
    write_duckdb_file(generation, settings)
    if before_publish is not None:
        before_publish(generation, counts, checks)
    (generation / ".complete").write_text(f"{IMPORTER_VERSION}\n")
    publish(warehouse, generation)
    _remove_unlinked_parts(warehouse)


def _remove_unlinked_parts(warehouse: Warehouse) -> None:
    """Parts no kept generation holds any more (a generation names its copy of a part's file
    ``<part>-<file>``, place_parts)."""
    if not warehouse.parts.exists():
        return
    held: set[str] = set()
    if warehouse.generations.exists():
        for generation in warehouse.generations.iterdir():
            for table in PARTED_TABLES:
                held.update(
                    path.name.split("-", 1)[0]
                    for path in (generation / f"{table}.parquet").rglob("*-*.parquet")
                )
    for part in warehouse.parts.glob("*/*"):
        if part.is_dir() and part.name not in held:
            shutil.rmtree(part, ignore_errors=True)


def rows_to_arrow(table: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = stored_schema(table)
    return pa.Table.from_pydict(
        {name: [row.get(name) for row in rows] for name in schema.names}, schema=schema
    )


def _now_ms() -> datetime:
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def _snapshot_history(current: Path | None) -> list[dict[str, Any]]:
    """Every snapshot of every source the current generation lists, in build order, so the
    table shows which revision each state came from."""
    if current is None or not (current / "source_snapshots.parquet").exists():
        return []
    return pq.read_table(current / "source_snapshots.parquet").to_pylist()


def _snapshot_number(history: list[dict[str, Any]], name: str, snapshot: dict[str, Any]) -> int:
    """The source's number for this snapshot: its latest one's again when nothing changed (that
    row is then replaced, taken out of ``history``), else one more than its latest."""
    own = [row for row in history if row["source"] == name]
    if own and own[-1]["snapshot_id"] == snapshot["snapshot_id"]:
        history.remove(own[-1])
        return own[-1]["snapshot_number"]
    return max((row["snapshot_number"] for row in own), default=0) + 1


# An older storage format, so the `duckdb` command (duckdb-cli, whose releases trail the
# Python package) can open the files too; v1.2.0 is the first that stores text with zstd, which
# the full logs, records and sources need (schemas.ZSTD_COLUMNS: 30 times smaller than FSST).
DUCKDB_FILE_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "storage_compatibility_version": "v1.2.0"
}


def write_duckdb_file(generation: Path, settings: Settings) -> None:
    """The generation's two DuckDB files: the reader file (views over its Parquet files, for
    tracehouse's own readers) and the published one, which stores every table in itself."""
    reader = generation / READER_DUCKDB_FILE
    connection = duckdb.connect(str(reader), config=DUCKDB_FILE_CONFIG)
    try:
        # One transaction: each DDL statement committed alone syncs the file (~5-20 ms each,
        # over a thousand statements with the comments).
        connection.execute("BEGIN TRANSACTION")
        create_table_views(connection, generation.resolve())
        create_sql_views(connection, settings)
        connection.execute("COMMIT")
        connection.execute("CHECKPOINT")
    finally:
        connection.close()
    _write_published_duckdb_file(generation, reader, settings)


def _write_published_duckdb_file(generation: Path, reader: Path, settings: Settings) -> None:
    """``tracehouse.duckdb`` with every table's rows in the file itself and the views of sql/
    over them: views over Parquet files would hold paths, which DuckDB resolves against the
    opening process's directory (a relative one) or which stop existing once the folder moves
    (an absolute one); no path survives being stored in a view. Column and table comments carry
    the documentation of ``schemas``, which DBeaver and ``duckdb_columns()`` show."""
    path = generation / DUCKDB_FILE
    connection = duckdb.connect(
        str(path),
        # The copy of every table, full logs included, in one transaction: bounded like the
        # rest of finalize (DuckDB spills to the file's side), not by DuckDB's 80% of RAM.
        config={
            **DUCKDB_FILE_CONFIG,
            "threads": max(1, settings.workers),
            "memory_limit": FINALIZE_MEMORY_LIMIT,
        },
    )
    try:
        connection.execute(f"ATTACH {sql_literal(reader.resolve())} AS build (READ_ONLY)")
        connection.execute("BEGIN TRANSACTION")  # one commit, not one per statement
        for name, table in schemas.TABLES.items():
            if not (generation / f"{name}.parquet").exists():
                continue
            _copy_table(connection, name)
            _comment(connection, "TABLE", name, table.doc)
            for column in table.columns:
                _comment(connection, "COLUMN", f'{name}."{column.name}"', column.doc)
        create_sql_views(connection, settings)
        connection.execute("COMMIT")
        connection.execute("DETACH build")
        connection.execute("CHECKPOINT")
    finally:
        connection.close()
    seal_published_file(path)


def _copy_table(connection: duckdb.DuckDBPyConnection, name: str) -> None:
    """``build.main.<name>`` into the published file; its long text columns with zstd, which
    DuckDB never chooses by itself."""
    compressed = schemas.ZSTD_COLUMNS.get(name, ())
    if not compressed:
        connection.execute(f"CREATE TABLE main.{name} AS FROM build.main.{name}")
        return
    columns = connection.execute(f"DESCRIBE build.main.{name}").fetchall()
    # Names and types come from our own schema declarations (DESCRIBE of our own views).
    definitions = ", ".join(
        f'"{column}" {type_}' + (" USING COMPRESSION zstd" if column in compressed else "")
        for column, type_, *_ in columns
    )
    connection.execute(f"CREATE TABLE main.{name} ({definitions})")
    connection.execute(f"INSERT INTO main.{name} FROM build.main.{name}")


def _comment(connection: duckdb.DuckDBPyConnection, kind: str, target: str, text: str) -> None:
    # COMMENT ON takes no bound parameter; the text is ours (schemas.py), quoted as a literal.
    connection.execute(f"COMMENT ON {kind} {target} IS {sql_literal(text)}")


def create_sql_views(connection: duckdb.DuckDBPyConnection, settings: Settings) -> None:
    """The SQL views (sql/, in dependency order) and the regression limits they read; every
    build writes them, and the Dagster view assets write them again into a published file."""
    store_regression_thresholds(connection, settings, temporary=False)
    for view in VIEW_ORDER:
        connection.execute(f"CREATE OR REPLACE VIEW {view} AS {sql_text(view)}")
    # Recreating a view drops its comments, so they are written with it, from schemas.
    documented = [("VIEW", view) for view in schemas.VIEWS.values()]
    documented += [("TABLE", table) for table in schemas.SETTING_TABLES.values()]
    for kind, relation in documented:
        _comment(connection, kind, relation.name, relation.doc)
        for column in relation.columns:
            _comment(connection, "COLUMN", f'{relation.name}."{column.name}"', column.doc)


def finalize_without_source(
    *,
    warehouse: Warehouse,
    settings: Settings,
    name: str,
    before_publish: Callable[[Path, dict[str, int], dict[str, invariants.Outcome]], None]
    | None = None,
    publish: Callable[[Warehouse, Path], None],
) -> FinalizeOutcome:
    """A new generation holding every source of the current one but ``name``: their files
    linked as they are, the source's snapshots dropped from source_snapshots, ranks computed
    again over what remains; published like any build."""
    current = warehouse.require_current()
    held = generation_sources(current)
    keep = [s for s in held if s.source != name]
    generation = warehouse.new_generation()
    checks: dict[str, invariants.Outcome] = {}
    _link_other_sources(current, generation, keep)
    write_generation_sources(generation, keep)
    for table in schemas.SOURCE_INDEPENDENT_TABLES:
        _link(current / f"{table}.parquet", generation / f"{table}.parquet")
    history = [row for row in _snapshot_history(current) if row["source"] != name]
    pq.write_table(
        rows_to_arrow("source_snapshots", history),
        generation / "source_snapshots.parquet",
        compression="zstd",
    )
    # The generation shows the latest snapshot it holds.
    (generation / SNAPSHOT_FILE).write_text(history[-1]["snapshot_id"] + "\n")
    connection = duckdb.connect(
        config={
            "threads": max(1, settings.workers),
            "memory_limit": FINALIZE_MEMORY_LIMIT,
            "temp_directory": str(warehouse.cache / DUCKDB_SPILL_DIR),
            "preserve_insertion_order": False,
        }
    )
    try:
        create_table_views(connection, generation)
        invariants.enforce(connection, invariants.RUN_INVARIANTS, checks)
        rankings = _base_folder(current, "run_rankings")
        place_parts(
            generation / "run_rankings.parquet",
            write_ranking_parts(connection, warehouse, rankings),
            rankings,
        )
        write_empty_parts(generation)
        create_table_views(connection, generation)
        invariants.enforce(connection, invariants.RANKING_INVARIANTS, checks)
        counts = _table_counts(connection)
        rejects_by_reason = invariants.rejects_by_reason(connection)
    finally:
        connection.close()
    _complete_and_publish(warehouse, generation, settings, counts, checks, before_publish, publish)
    return FinalizeOutcome(
        generation, counts, rejects_by_reason, history[-1]["snapshot_id"], checks
    )
