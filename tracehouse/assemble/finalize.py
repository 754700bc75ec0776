"""From staging parts to the published warehouse, in DuckDB (out of core, all cores).

Steps: resolve the KernelIndex workload cache across files (first trace line with a workload
key fixes its digest, identity doc §2.4) and recompute the few runs it changes; write each
table (the build's source's slice of it) as one sorted Parquet file into a new generation
folder, beside every other source's files linked from the current one; rank across all sources
with ``sql/``; add what changed to run_history; write the DuckDB file of views; publish by
swapping the ``current`` symlink.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import duckdb
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tracehouse import kernelindex, schemas
from tracehouse.assemble import invariants
from tracehouse.assemble.duckdb_files import (
    BuildMemory,
    UpdateInAdvance,
    ViewsInAdvance,
    views_beside,
    write_duckdb_file,
)
from tracehouse.assemble.parts import (
    GROUP_PARTED_TABLES,
    RankingScope,
    SourceResolution,
    base_folder,
    link_file,
    link_other_sources,
    place_parts,
    ranking_rule,
    remove_unlinked_parts,
    staged_groups,
    staged_view,
    stored_schema,
    write_empty_parts,
    write_group_parts,
    write_ranking_parts,
)
from tracehouse.files import read_parquet_file, same_file
from tracehouse.identify.context import StoredRows, baseline_map_rows
from tracehouse.identify.dataset_context import DatasetContext
from tracehouse.ingest.manifest import FileEntry
from tracehouse.ingest.worker import PART_TABLES
from tracehouse.memory import DuckdbShortage, duckdb_shortage
from tracehouse.rejects import Reject
from tracehouse.schemas import (
    HISTORY_TABLES,
    IMPORTER_VERSION,
    PER_SOURCE_TABLES,
    STAGING_RUN_KEYS,
    TABLE_ORDER,
)
from tracehouse.settings import Settings, env_name
from tracehouse.sql_files import sql_text
from tracehouse.warehouse import (
    DUCKDB_SPILL_DIR,
    SNAPSHOT_FILE,
    GenerationSource,
    Warehouse,
    create_table_views,
    generation_sources,
    holds_sources,
    sql_literal,
    table_files,
    write_generation_sources,
)


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
# sql/assemble/<name>.sql.
GLOBAL_RELATIONS = ("first_case",)


def _projection(table: str) -> str:
    # Column names come from our own schema declarations, never from data.
    return ", ".join(f'"{name}"' for name in schemas.stored_columns(table))


class BuildOutOfMemory(ValueError):
    """DuckDB ran out of the memory a build may use (``build_memory_mb``), or of the disk it
    spills to; the build published nothing."""


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _within_build_memory(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """DuckDB running out of a build's memory, anywhere in ``function`` (a keyword ``settings``)
    or in the threads it waits for, as one line naming the setting (``BuildOutOfMemory``)
    instead of DuckDB's advice to change settings of its own."""

    @functools.wraps(function)
    def within(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return function(*args, **kwargs)
        except duckdb.OutOfMemoryException as error:
            settings = kwargs["settings"]
            assert isinstance(settings, Settings)
            shortage = duckdb_shortage(error)
            assert shortage is not None
            raise _out_of_memory(shortage, settings) from error

    return within


def _out_of_memory(shortage: DuckdbShortage, settings: Settings) -> BuildOutOfMemory:
    memory_mb, variable = settings.build_memory_mb, env_name("build_memory_mb")
    if shortage.kind == "spill":
        return BuildOutOfMemory(
            "assembling the warehouse needs more disk to spill to than is free under "
            f"{settings.warehouse / 'cache'}; nothing was published: {shortage.reason}"
        )
    if shortage.kind == "system":
        return BuildOutOfMemory(
            f"the system refused the build memory before its {memory_mb} MiB limit "
            f"({variable} lower spills sooner); nothing was published: {shortage.reason}"
        )
    return BuildOutOfMemory(
        f"assembling the warehouse needs more than its {memory_mb} MiB of memory ({variable} "
        f"allows more); nothing was published: {shortage.first_sentence}"
    )


@_within_build_memory
def finalize(
    *,
    warehouse: Warehouse,
    settings: Settings,
    resolved: Any,
    loaded: Any,
    context_rows: StoredRows,
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
    all of them, and publish. ``context_rows``: the dataset context's rows on disk
    (identify.context.store_context_rows).

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
    # The sql/ views need no table's rows: they are bound beside the assembly.
    with views_beside(generation, current, settings) as views:
        checks: dict[str, invariants.Outcome] = {}
        if progress:
            progress("finalize", 0, 1)
        groups = staged_groups(warehouse, file_entries)
        all_parts = {
            name: sorted({p for group in groups for p in group.parts.get(name, [])})
            for name in PART_TABLES
        }
        key = resolved.key

        temp_dir = warehouse.cache / DUCKDB_SPILL_DIR
        memory = BuildMemory.of(settings)
        connection = duckdb.connect(
            config={
                "threads": max(1, settings.workers),
                # Beyond this DuckDB spills to temp_directory, so peak memory stays flat as the
                # dataset grows (issue 5); every table is written with an explicit ORDER BY, so
                # insertion order need not be kept.
                "memory_limit": memory.assembly,
                "temp_directory": str(temp_dir),
                "preserve_insertion_order": False,
            }
        )
        try:
            for name, table in PART_TABLES.items():
                # (which part a run's keys came from: parts.write_group_parts)
                with_filename = name == STAGING_RUN_KEYS.name
                staged_view(connection, name, table, all_parts[name], with_filename=with_filename)
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

            def copy(table: str, query: str, file_name: str = "data.parquet") -> None:
                """One table's rows as one sorted file: the source's slice, or a global table."""
                if table in PER_SOURCE_TABLES:
                    target = generation / f"{table}.parquet" / key / file_name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    order = schemas.slice_order(table)
                else:
                    target = generation / f"{table}.parquet"
                    order = TABLE_ORDER[table]
                relation = connection.sql(f"{query} ORDER BY {order}")
                relation.write_parquet(str(target), compression="zstd")

            context_files = _context_file_names(context_rows)
            written = _link_context_tables(generation, current, key, context_files)
            context_tables: list[tuple[str, list[dict[str, Any]], str | None]] = []
            if len(written) < len(context_files):
                rows_of = context_rows.read()
                context_tables = [
                    (table, rows_of.pop(table), name)
                    for table, name in context_files.items()
                    if table not in written
                ]
                del rows_of
            for table, rows, file_name in (
                *context_tables,
                ("protocols", [_protocol_row()], None),  # tables of no source: one file
                ("baseline_map", baseline_map_rows(settings.baselines_file), None),
            ):
                staged = generation / f"_{table}.parquet"
                pq.write_table(rows_to_arrow(table, rows), staged, compression="zstd")
                query = f"SELECT * FROM read_parquet({sql_literal(staged)}) s"  # noqa: S608
                copy(table, query, file_name or "data.parquet")
                staged.unlink()
            del context_tables
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
            # The solutions the workers completed runs with: the one list of them.
            solutions = loaded.context.solutions
            connection.register(
                "known_solutions",
                pa.table(
                    {
                        "solution": pa.array(list(solutions), type=pa.string()),
                        "author": pa.array([a for a, _ in solutions.values()], type=pa.string()),
                        "implementation_digest": pa.array(
                            [d for _, d in solutions.values()], type=pa.string()
                        ),
                    }
                ),
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
            parts = write_group_parts(
                connection,
                warehouse,
                groups,
                SourceResolution(solutions, frozenset(unreadable)),
                resolved.name,
                current,
                key,
            )
            # Records refused before the ingest (discovery, fetch, definitions, solutions): one
            # more rejects part, of this generation only.
            extra_rejects = [
                _reject_row(r)
                for r in [*discovery_rejects, *resolved.fetch_rejects, *loaded.rejects]
            ]
            for table in GROUP_PARTED_TABLES:
                place_parts(
                    generation / f"{table}.parquet" / key,
                    parts[table],
                    base_folder(current, table, key),
                )
            connection.register("extra_rejects", rows_to_arrow("rejects", extra_rejects))
            connection.sql(
                "SELECT * FROM extra_rejects ORDER BY " + schemas.slice_order("rejects")  # noqa: S608
            ).write_parquet(str(generation / "rejects.parquet" / key / "before-ingest.parquet"))
            write_empty_parts(generation, key)

            # Now every source: ranks, cohorts and the invariants span the warehouse.
            link_other_sources(current, generation, others)
            write_generation_sources(generation, [*others, this_source])
            create_table_views(connection, generation)
            if views is not None:  # every table but the rankings and history is final now
                views.begin_tables(generation)
            checked = _changed_rows(connection, generation, current, key)
            invariants.enforce(connection, invariants.RUN_INVARIANTS, checks, checked)
            _rank(connection, warehouse, generation, current, memory, checked)
            if not checked.everything:
                _view_changed_rankings(connection, generation, current, checked)
            _write_history(connection, generation, current, this_source, checked, temp_dir)
            create_table_views(connection, generation, only=HISTORY_TABLES)
            counts, rejects_by_reason = _checked_counts(connection, checks, checked)
        finally:
            connection.close()

        _complete_and_publish(
            warehouse, generation, current, settings, counts, checks, before_publish, publish, views
        )
    if progress:
        progress("finalize", 1, 1)
    return FinalizeOutcome(generation, counts, rejects_by_reason, snapshot["snapshot_id"], checks)


def _context_file_names(context_rows: StoredRows) -> dict[str, str]:
    """The name of each context table's file of a source, by what its bytes follow from: the
    context's rows (the digest of the bytes store_context_rows wrote), the table's stored
    schema and order, and the importer. A generation whose file has that name holds those very
    rows."""
    rows_digest = context_rows.sha256
    names = {}
    for table in schemas.CONTEXT_TABLES:
        inputs = [IMPORTER_VERSION, table, str(stored_schema(table)), schemas.slice_order(table)]
        digest = hashlib.sha256("\n".join([*inputs, rows_digest]).encode()).hexdigest()
        names[table] = f"context-{digest[:32]}.parquet"
    return names


def _link_context_tables(
    generation: Path, current: Path | None, key: str, names: dict[str, str]
) -> set[str]:
    """Link each context table's file of the source from ``current`` (checked before the build
    relied on it) when it holds one of the same name: a build whose definitions and solutions
    did not change writes neither table again (~0.15 s of a build after one changed file).
    The tables linked."""
    linked: set[str] = set()
    if current is None:
        return linked
    for table, name in names.items():
        held = current / f"{table}.parquet" / key / name
        if held.is_file():
            target = generation / f"{table}.parquet" / key / name
            target.parent.mkdir(parents=True, exist_ok=True)
            link_file(held, target)
            linked.add(table)
    return linked


def _changed_rows(
    connection: duckdb.DuckDBPyConnection, generation: Path, current: Path | None, key: str
) -> invariants.Checked:
    """The rows the invariants must check in a generation built on ``current`` for the source
    ``key``: every row, unless ``current`` passed every invariant by these rules and the
    source's tables a run refers to hold the rows they held there. Then only the runs of the
    files this build wrote (every other run is a file of ``current``'s, linked: as it was when
    it passed), and the correctness rows of the files it wrote or whose run's file it dropped.
    ~0.15 s of a build after one changed file, which adds a few runs to 154,000."""
    if current is None or not invariants.passed_by_these_rules(current):
        return invariants.EVERYTHING
    for table in PER_SOURCE_TABLES:
        if not schemas.TABLES[table].parted and not schemas.TABLES[table].history:
            before, after = (
                {p.name: p for p in table_files(g, table, key)} for g in (current, generation)
            )
            if before.keys() != after.keys() or not all(
                same_file(before[name], after[name]) for name in before
            ):
                return invariants.EVERYTHING
    runs, correctness = schemas.RUNS.name, schemas.CORRECTNESS.name
    written_runs, dropped_runs = _written_and_dropped(generation, current, runs, key)
    written_correctness, _ = _written_and_dropped(generation, current, correctness, key)
    _files_view(connection, "changed_runs", written_runs, runs)
    _files_view(connection, "dropped_runs", dropped_runs, runs)
    _files_view(connection, "changed_correctness", written_correctness, correctness)
    ((changed,),) = connection.execute("SELECT count(*) FROM changed_runs").fetchall()
    return invariants.Checked(
        changed_runs=changed,
        runs="changed_runs",
        correctness_run_ids="(SELECT run_id FROM changed_correctness UNION ALL "
        "SELECT run_id FROM correctness WHERE run_id IN (SELECT run_id FROM dropped_runs))",
        rankings="changed_rankings",
    )


def _view_changed_rankings(
    connection: duckdb.DuckDBPyConnection,
    generation: Path,
    current: Path | None,
    checked: invariants.Checked,
) -> None:
    """The view ``checked.rankings``: the run_rankings files this build wrote (once ranked)."""
    table = schemas.RUN_RANKINGS.name
    written, _ = _written_and_dropped(generation, current, table, None)
    _files_view(connection, checked.rankings, written, table)


def _written_and_dropped(
    generation: Path, current: Path | None, table: str, key: str | None
) -> tuple[list[Path], list[Path]]:
    """The files of ``table`` (the source ``key``'s) that ``generation`` holds and ``current``
    does not (by inode: an unchanged part is a link of the base's file), and the other way
    round."""

    def by_inode(folder: Path | None) -> dict[tuple[int, int], Path]:
        found = {}
        for path in table_files(folder, table, key) if folder is not None else []:
            status = path.stat()
            found[(status.st_dev, status.st_ino)] = path
        return found

    new, old = by_inode(generation), by_inode(current)
    return [p for i, p in new.items() if i not in old], [p for i, p in old.items() if i not in new]


def _files_view(
    connection: duckdb.DuckDBPyConnection, name: str, files: list[Path], table: str
) -> None:
    """A temp view of the rows of ``files`` (none: no rows, with the view ``table``'s columns)."""
    if files:
        listed = ", ".join(sql_literal(path) for path in files)
        relation = f"read_parquet([{listed}], union_by_name = true)"
    else:
        relation = f"(SELECT * FROM {table} LIMIT 0)"  # noqa: S608  (own names)
    connection.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM {relation}")  # noqa: S608  (own names, literals)


def _keep_history(generation: Path, current: Path | None, source: GenerationSource) -> None:
    """The source's run_history files so far, linked from the current generation (an empty
    file for a new source: a view needs one)."""
    if current is not None and any(s.source == source.source for s in generation_sources(current)):
        link_other_sources(current, generation, [source], HISTORY_TABLES)
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


# A generation's record of the rules its run_history files were written by.
HISTORY_RULES_FILE = "history.rules"


# What the history tables' SQL reads: the source's open ranges and its runs now, each read once
# into a small table when a build compares only the runs it touched.
HISTORY_INPUTS = ("history_open_ranges", "history_present_runs")


def _history_rules() -> str:
    texts = [sql_text(f"assemble/{name}") for name in (*HISTORY_INPUTS, *HISTORY_TABLES)]
    return hashlib.sha256("\0".join([IMPORTER_VERSION, *texts]).encode()).hexdigest()[:16]


def _write_history(
    connection: duckdb.DuckDBPyConnection,
    generation: Path,
    current: Path | None,
    source: GenerationSource,
    checked: invariants.Checked,
    scratch_folder: Path,
) -> None:
    """run_history, incrementally: beside the source's earlier files (_keep_history), one file
    each of what changed with this snapshot (runs that appeared, ranges that ended). An
    unchanged run costs nothing. ``scratch_folder`` holds what a large one is sorted from.

    With ``checked`` (the rows the build changed: _changed_rows) only the runs the build
    touched are compared: a run of a file and a ranking it linked from ``current`` is what it
    was there, and there every open range was a run present (each build writes the ranges that
    make it so), when ``current``'s ranges were written by these rules."""
    rules = _history_rules()
    (generation / HISTORY_RULES_FILE).write_text(rules + "\n")
    touched = not checked.everything and _recorded_history_rules(current) == rules
    if touched:
        connection.execute(
            "CREATE OR REPLACE TEMP TABLE touched_runs AS "  # noqa: S608  (own names)
            f"SELECT run_id FROM {checked.runs} UNION SELECT run_id FROM dropped_runs "
            f"UNION SELECT run_id FROM {checked.rankings}"
        )
        scope = "id IN (SELECT run_id FROM touched_runs)"
    else:
        scope = "true"
    connection.execute(f"CREATE OR REPLACE TEMP MACRO history_in_scope(id) AS {scope}")
    connection.execute(
        f"CREATE OR REPLACE TEMP MACRO history_source() AS {sql_literal(source.source)}"
    )
    # Compared in full (a cold build: every run, 1M at issue 16's scale) the inputs stay views,
    # streamed by each query; a few touched runs are read out of the 154k once, not per query
    # (~0.1 s of a build after one changed file).
    kind = "TABLE" if touched else "VIEW"
    for name in HISTORY_INPUTS:
        connection.execute(
            f"CREATE OR REPLACE TEMP {kind} {name} AS {sql_text(f'assemble/{name}')}"
        )
    parameters = {"snapshot_number": source.snapshot_number}
    for table in HISTORY_TABLES:
        # A name no earlier delta of the source has: the snapshot number and the generation.
        target = (
            generation
            / f"{table}.parquet"
            / source.key
            / f"{source.snapshot_number:06d}-{generation.name}.parquet"
        )
        query = f"SELECT {_columns_as_written(table)} FROM ({sql_text(f'assemble/{table}')}) s"  # noqa: S608
        # A few touched runs are sorted at once; compared in full (a cold build: every run
        # appeared), a run_id range at a time.
        scratch = None if touched else scratch_folder
        if _write_by_run_id(connection, query, parameters, table, target, scratch) == 0:
            target.unlink()


# A sort merges its sorted runs holding a block of each at once, and DuckDB spills the runs, not
# that: the ordered history of a cold build of 1,000,000 runs took all but ~90 MB of the
# assembly's memory (BuildMemory), of 2,000,000 more than all of it (an Out of Memory Error).
# Rows past this many are sorted a run_id range at a time. In ranges of 250,000 the history of
# 1,000,000 runs was the build's peak (~571 MiB of the parent; 500 for the step alone), in
# ranges of 125,000 it takes ~470 (408 alone) and 0.5 s more: re-reading the unsorted rows once
# a range costs little, each range's sort, conversion and write the rest.
SORTED_WRITE_ROWS = 125_000
# Rows handed from DuckDB to the file at a time.
SORTED_WRITE_BATCH = 65_536


def _write_by_run_id(
    connection: duckdb.DuckDBPyConnection,
    query: str,
    parameters: dict[str, Any],
    table: str,
    target: Path,
    scratch: Path | None,
) -> int:
    """The rows of ``query`` written to ``target`` in ``table``'s slice order (which begins
    with run_id); returns how many. With a ``scratch`` folder, in bounded memory: the rows are
    written there unsorted first, then read back and written a run_id range at a time, each
    range of at most ~SORTED_WRITE_ROWS (run ids are hex digests, so their leading digits
    spread them evenly). Never held as one Arrow table: 1,000,000 rows at issue 16's scale."""
    order = schemas.slice_order(table)
    assert order.split(", ")[0] == "run_id", order
    schema = stored_schema(table)
    with pq.ParquetWriter(target, schema, compression="zstd") as writer:
        if scratch is None:
            return _append_sorted(
                writer, connection.sql(f"{query} ORDER BY {order}", params=parameters)
            )
        scratch.mkdir(parents=True, exist_ok=True)
        unsorted = scratch / f"{target.name}.unsorted"
        try:
            connection.sql(query, params=parameters).write_parquet(str(unsorted))
            rows = pq.read_metadata(unsorted).num_rows
            ranges = -(-rows // SORTED_WRITE_ROWS)
            written = 0
            for low, high in _run_id_ranges(ranges):
                where = " AND ".join(
                    f"run_id {op} {sql_literal(bound)}"
                    for op, bound in ((">=", low), ("<", high))
                    if bound is not None
                )
                written += _append_sorted(
                    writer,
                    connection.sql(
                        f"SELECT * FROM read_parquet({sql_literal(unsorted)}) "  # noqa: S608
                        f"WHERE {where or 'true'} ORDER BY {order}"
                    ),
                )
            # The ranges hold every string: a row short or over is a fault, never a history.
            if written != rows:
                raise RuntimeError(f"{table}: {written:,} rows sorted of {rows:,} written")
        finally:
            unsorted.unlink(missing_ok=True)
    return rows


def _columns_as_written(table: str) -> str:
    """The stored columns of ``table``, selected as ``_as_written`` takes them: a millisecond
    timestamp as its epoch milliseconds (DuckDB hands TIMESTAMPTZ over in microseconds)."""
    schema = stored_schema(table)
    return ", ".join(  # own names
        f'epoch_ms("{field.name}") AS "{field.name}"'
        if pa.types.is_timestamp(field.type) and field.type.unit == "ms"
        else f'"{field.name}"'
        for field in schema
    )


def _as_written(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` (DuckDB's columns, all nullable, of ``_columns_as_written``) in the file's
    ``schema``. Epoch milliseconds are viewed as the stored timestamp without a copy. A cast
    would do the same, but it imports pyarrow.compute: ~70 ms of a build after one changed
    file, for the few rows of its history. Any other difference is cast."""
    columns = []
    for column, field in zip(batch.columns, schema, strict=True):
        if column.type != field.type:
            if not (pa.types.is_timestamp(field.type) and pa.types.is_int64(column.type)):
                return batch.cast(schema)
            column = column.view(field.type)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _append_sorted(writer: pq.ParquetWriter, rows_in_order: duckdb.DuckDBPyRelation) -> int:
    rows = 0
    for batch in rows_in_order.to_arrow_reader(SORTED_WRITE_BATCH):
        writer.write_batch(_as_written(batch, writer.schema))
        rows += batch.num_rows
    return rows


def _run_id_ranges(count: int) -> list[tuple[str | None, str | None]]:
    """``count`` (at least one) ranges of run ids, in order, that together hold every string:
    split at two-hex-digit prefixes, the first open below and the last open above."""
    count = max(1, min(count, 256))
    cuts = [f"{256 * i // count:02x}" for i in range(1, count)]
    return list(zip([None, *cuts], [*cuts, None], strict=True))


def _recorded_history_rules(generation: Path | None) -> str | None:
    try:
        return (generation / HISTORY_RULES_FILE).read_text().strip() if generation else None
    except OSError:
        return None


def _rank(
    connection: duckdb.DuckDBPyConnection,
    warehouse: Warehouse,
    generation: Path,
    current: Path | None,
    memory: BuildMemory,
    checked: invariants.Checked = invariants.EVERYTHING,
) -> None:
    """run_rankings of every source of the generation (a bucket ``current`` holds as it is is
    linked from there), and its view again. The part of each bucket is recorded
    (RANKING_PARTS_FILE): a later build that only adds runs digests only their buckets. The
    ranking runs within ``memory.ranking`` of the connection's ``memory.assembly``."""
    rankings = base_folder(current, "run_rankings")
    rule = ranking_rule()
    scope = _ranking_scope(connection, current, rule, checked)
    connection.execute(f"SET memory_limit = '{memory.ranking}'")
    try:
        parts = write_ranking_parts(connection, warehouse, rankings, scope)
    finally:
        connection.execute(f"SET memory_limit = '{memory.assembly}'")
    place_parts(generation / "run_rankings.parquet", list(parts.values()), rankings)
    record = {"rule": rule, "parts": {bucket: part.name for bucket, part in parts.items()}}
    (generation / RANKING_PARTS_FILE).write_bytes(orjson.dumps(record, option=orjson.OPT_SORT_KEYS))
    write_empty_parts(generation)
    create_table_views(connection, generation, only=[schemas.RUN_RANKINGS.name])


# A generation's record of the part each ranking bucket has in it, and by which rule.
RANKING_PARTS_FILE = "ranking_parts.json"


def _ranking_scope(
    connection: duckdb.DuckDBPyConnection,
    current: Path | None,
    rule: str,
    checked: invariants.Checked,
) -> RankingScope | None:
    """What the ranking may take from ``current``: when the build checks only the rows it
    changed (``_changed_rows``: every other run is a file of ``current``, linked), dropped no
    run file, and ``current`` recorded its buckets by the same rule, the runs are ``current``'s
    plus those of ``checked.runs``."""
    if current is None or checked.everything:
        return None
    ((dropped,),) = connection.execute("SELECT count(*) FROM dropped_runs").fetchall()
    if dropped:
        return None
    try:
        record = orjson.loads((current / RANKING_PARTS_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(record, dict) or record.get("rule") != rule:
        return None
    parts = record.get("parts")
    return RankingScope(dict(parts), checked.runs) if isinstance(parts, dict) else None


def _checked_counts(
    connection: duckdb.DuckDBPyConnection,
    checks: dict[str, invariants.Outcome],
    checked: invariants.Checked = invariants.EVERYTHING,
) -> tuple[dict[str, int], dict[str, int]]:
    """The ranking invariants (refusing the generation when one fails), then every table's
    rows and the rejects by reason."""
    invariants.enforce(connection, invariants.RANKING_INVARIANTS, checks, checked)
    return _table_counts(connection), invariants.rejects_by_reason(connection)


def _table_counts(connection: duckdb.DuckDBPyConnection) -> dict[str, int]:
    # One query for every table: a query each took ~40 ms of a build after one changed file, this
    # ~30.
    counts = " UNION ALL ".join(
        f"SELECT {index} AS position, count(*) AS rows FROM {table}"  # noqa: S608  (own names)
        for index, table in enumerate(schemas.TABLES)
    )
    found = dict(connection.execute(counts).fetchall())
    return {table: found[index] for index, table in enumerate(schemas.TABLES)}


def _complete_and_publish(
    warehouse: Warehouse,
    generation: Path,
    base: Path | None,
    settings: Settings,
    counts: dict[str, int],
    checks: dict[str, invariants.Outcome],
    before_publish: Callable[[Path, dict[str, int], dict[str, invariants.Outcome]], None] | None,
    publish: Callable[[Warehouse, Path], None],
    views: ViewsInAdvance | UpdateInAdvance | None = None,
) -> None:
    """The last steps of every new generation: its DuckDB files (from the copies of ``base``'s
    where they can be; from ``views``, the sql/ views written beside the assembly, else), the
    publish guards, the completion marker, the atomic switch, and the parts no generation
    links any more."""
    write_duckdb_file(generation, settings, base, views)
    if before_publish is not None:
        before_publish(generation, counts, checks)
    (generation / ".complete").write_text(f"{IMPORTER_VERSION}\n")
    publish(warehouse, generation)
    remove_unlinked_parts(warehouse)


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
    return read_parquet_file(current / "source_snapshots.parquet").to_pylist()


def _snapshot_number(history: list[dict[str, Any]], name: str, snapshot: dict[str, Any]) -> int:
    """The source's number for this snapshot: its latest one's again when nothing changed (that
    row is then replaced, taken out of ``history``), else one more than its latest."""
    own = [row for row in history if row["source"] == name]
    if own and own[-1]["snapshot_id"] == snapshot["snapshot_id"]:
        history.remove(own[-1])
        return own[-1]["snapshot_number"]
    return max((row["snapshot_number"] for row in own), default=0) + 1


@_within_build_memory
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
    link_other_sources(current, generation, keep)
    write_generation_sources(generation, keep)
    for table in schemas.SOURCE_INDEPENDENT_TABLES:
        link_file(current / f"{table}.parquet", generation / f"{table}.parquet")
    history = [row for row in _snapshot_history(current) if row["source"] != name]
    pq.write_table(
        rows_to_arrow("source_snapshots", history),
        generation / "source_snapshots.parquet",
        compression="zstd",
    )
    # The generation shows the latest snapshot it holds.
    (generation / SNAPSHOT_FILE).write_text(history[-1]["snapshot_id"] + "\n")
    memory = BuildMemory.of(settings)
    connection = duckdb.connect(
        config={
            "threads": max(1, settings.workers),
            "memory_limit": memory.assembly,
            "temp_directory": str(warehouse.cache / DUCKDB_SPILL_DIR),
            "preserve_insertion_order": False,
        }
    )
    try:
        create_table_views(connection, generation)
        invariants.enforce(connection, invariants.RUN_INVARIANTS, checks)
        _rank(connection, warehouse, generation, current, memory)
        counts, rejects_by_reason = _checked_counts(connection, checks)
    finally:
        connection.close()
    _complete_and_publish(
        warehouse, generation, current, settings, counts, checks, before_publish, publish
    )
    return FinalizeOutcome(
        generation, counts, rejects_by_reason, history[-1]["snapshot_id"], checks
    )
