"""The parted tables of a generation: each group of source files' resolved parts (runs,
correctness, rejects, trace_lines) and each ranking bucket's run_rankings part, written once
into the cache (cache/parts/<table>/<name>/) and reused while their inputs are unchanged; and
placing them into a generation, linked from the base generation where it holds them."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tracehouse import schemas
from tracehouse.files import sha256_file
from tracehouse.ingest.manifest import FileEntry
from tracehouse.ingest.resolution import (
    RESOLVED_COLUMNS,
    FirstCase,
    KnownSolution,
    resolve_run,
)
from tracehouse.ingest.worker import parquet_writer, part_file_name
from tracehouse.schemas import (
    GROUP_PARTED_TABLES,
    PARTED_TABLES,
    PER_SOURCE_TABLES,
    STAGING_RUN_KEYS,
)
from tracehouse.sql_files import sql_text
from tracehouse.warehouse import (
    GenerationSource,
    Warehouse,
    sql_literal,
    table_files,
)


def stored_schema(table: str) -> pa.Schema:
    """The Arrow schema of what ``table``'s files hold (per-source tables store no source)."""
    declared = schemas.TABLES[table].arrow_schema
    return pa.schema([declared.field(name) for name in schemas.stored_columns(table)])


def staged_view(
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


def staged_groups(warehouse: Warehouse, file_entries: dict[str, FileEntry]) -> list[_Group]:
    found: dict[str, dict[str, list[str]]] = {}
    for entry in file_entries.values():
        # The files of one group share their parts: each group is read once.
        if entry.group_key is not None and entry.group_key not in found:
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


def resolution_digest(connection: duckdb.DuckDBPyConnection) -> str:
    """A digest of everything resolution takes from outside a group: solutions, the workload
    cache and the files KernelIndex cannot read. A runs part resolved again is reused while
    its own content and this digest are unchanged."""
    ((digest,),) = connection.execute(sql_text("assemble/resolution_digest")).fetchall()
    return digest


@dataclass(frozen=True)
class _Piece:
    """One staging part of a group, and the name of the part of its table written from it."""

    staged: str  # the staging part's path
    name: str
    resolved: bool = False  # a runs part whose runs finalize resolves again


@dataclass(frozen=True)
class SourceResolution:
    """What only the whole source fixes, as resolution.resolve_run takes it: the solutions
    (``DatasetContext.solutions``) and the files KernelIndex cannot read. The workload cache is
    read from the connection's ``first_case``."""

    solutions: dict[str, KnownSolution]
    unreadable_files: frozenset[str]


def run_keys_part(runs_part: str) -> str:
    """The run keys staging part written beside a runs staging part (the same writer writes
    both, row for row: worker.PartWriter)."""
    folder, _, file_name = runs_part.rpartition("/")
    part_key = file_name.split(".", 1)[0]
    assert file_name == part_file_name(part_key, schemas.RUNS.name), runs_part
    return f"{folder}/{part_file_name(part_key, STAGING_RUN_KEYS.name)}"


def write_group_parts(
    connection: duckdb.DuckDBPyConnection,
    warehouse: Warehouse,
    groups: list[_Group],
    resolution: SourceResolution,
    source_name: str,
    base: Path | None,
    key: str,
) -> dict[str, list[Path]]:
    """The part of every group's staging part for each parted table: reused when it exists,
    else the staging part as its worker wrote it (a worker writes the parted tables as they
    are stored, its runs completed: ingest/resolution.py), or, for a runs part whose worker
    assumed something of the whole source that does not hold (sql/assemble/unresolved_parts),
    its runs resolved again (``_resolve_runs_part``).

    One part per staging part, not per group: a group whose file only grew keeps its older
    staging parts and gains one for the new lines (plan.KEPT_PARTS_MAX), so it keeps its older
    parts too, and only the new lines' rows are placed and copied into the published file.

    A part is a folder (cache/parts/<table>/<name>/), complete once renamed into place (one
    written by an older version may hold several files). Part names are keyed by (source,
    staging part), so the parts of one source are never another's, and a build of one source
    leaves every other source's parts as they are. A staging part's name says what its rows
    follow from (its group's files, the dataset context and the source's name); a runs part
    resolved again is named by what resolved it too (``resolution_digest``).

    A part the base generation ``base`` already holds (in ``<table>.parquet/<key>/``; the
    build checked it byte for byte) is linked from there; any other is copied from the
    cache, whose copy is checked against its recorded digests first and written again from
    the staging parts when it does not match.
    """

    def name(*terms: str) -> str:
        return hashlib.sha256("\n".join([source_name, *terms]).encode()).hexdigest()[:32]

    unresolved = {
        filename
        for (filename,) in connection.execute(sql_text("assemble/unresolved_parts")).fetchall()
    }
    digest = resolution_digest(connection) if unresolved else ""
    written: dict[str, list[Path]] = {}
    for table in GROUP_PARTED_TABLES:
        staged = dict.fromkeys(path for group in groups for path in group.parts.get(table, []))
        pieces = []
        for path in staged:
            if table == schemas.RUNS.name and run_keys_part(path) in unresolved:
                pieces.append(_Piece(path, name(Path(path).name, digest), resolved=True))
            else:
                pieces.append(_Piece(path, name(Path(path).name)))
        held = held_parts(base_folder(base, table, key))
        missing = [
            piece
            for piece in pieces
            if piece.name not in held and not _intact_part(warehouse.parts / table / piece.name)
        ]
        first_cases = _first_cases(connection, [p for p in missing if p.resolved])
        for piece in missing:
            _write_part(warehouse, table, piece, resolution, first_cases)
        if any(piece.resolved for piece in missing):
            # Arrow's allocator keeps the pages of the row groups it read and wrote: given
            # back, finalize's next steps start ~130 MiB lower (the parts of a 1,000,000-line
            # source resolved again).
            pa.default_memory_pool().release_unused()
        written[table] = [warehouse.parts / table / piece.name for piece in pieces]
    return written


def _first_cases(
    connection: duckdb.DuckDBPyConnection, pieces: list[_Piece]
) -> dict[str, FirstCase]:
    """The workload cache's case of every workload key the runs of ``pieces`` name."""
    if not pieces:
        return {}
    connection.register(
        "resolved_run_keys_parts",
        pa.table({"filename": pa.array([run_keys_part(p.staged) for p in pieces], pa.string())}),
    )
    try:
        rows = connection.execute(
            "SELECT workload_key, first.wd, first.op, first.ck FROM first_case "
            "WHERE workload_key IN (SELECT workload_key FROM staged_run_keys "
            "WHERE filename IN (SELECT filename FROM resolved_run_keys_parts))"
        ).fetchall()
    finally:
        connection.unregister("resolved_run_keys_parts")
    return {workload_key: (wd, op, ck) for workload_key, wd, op, ck in rows}


def _write_part(
    warehouse: Warehouse,
    table: str,
    piece: _Piece,
    resolution: SourceResolution,
    first_cases: dict[str, FirstCase],
) -> None:
    """The part of ``piece`` into the cache: written beside, its digests recorded, then renamed
    into place."""
    out = warehouse.parts / table / f".write.{os.getpid()}.tmp"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    try:
        if piece.resolved:
            _resolve_runs_part(Path(piece.staged), out / "data_0.parquet", resolution, first_cases)
        else:
            # A copy, not a link: damage to a staging part must not reach the cache's.
            shutil.copyfile(piece.staged, out / "data_0.parquet")
        _record_part_digests(out)
        os.replace(out, warehouse.parts / table / piece.name)
    finally:
        shutil.rmtree(out, ignore_errors=True)


# Run keys read and resolved at a time while a runs part is resolved again: the resolved
# columns of about one runs row group are held, whatever the size of the part. Both parts are
# read on this thread (``use_threads=False``): resolving the 72 runs parts of a 1,000,000-line
# source, pyarrow's decoding threads took the process to 449-559 MiB, and to 372-387 without
# them, in the same time.
RESOLVED_BATCH_ROWS = 4_096


def _resolve_runs_part(
    staged: Path,
    target: Path,
    resolution: SourceResolution,
    first_cases: dict[str, FirstCase],
) -> None:
    """A runs staging part with every run's resolved columns set again by
    resolution.resolve_run from its run keys and the whole source's inputs, a row group at a
    time.

    The run keys part holds the runs part's runs in the same order (``run_keys_part``), so
    both are read side by side, and memory is a row group's and a batch of run keys, not the
    part's: with the resolved columns of every run held at once, resolving the parts of a
    1,000,000-line source (tasks of ~250,000 runs) took finalize 300 MiB higher. Should the
    two orders ever differ, the part is written again with the run keys looked up by id."""
    try:
        _write_resolved(staged, target, resolution, first_cases, by_id=False)
    except _KeysOutOfOrder:
        _write_resolved(staged, target, resolution, first_cases, by_id=True)


class _KeysOutOfOrder(Exception):
    """The run keys part does not list the runs part's runs in its order."""


def _resolved_keys(
    keys_file: pq.ParquetFile, resolution: SourceResolution, first_cases: dict[str, FirstCase]
) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """(run id, resolved columns) of every run of ``keys_file``, in its order."""
    solutions, unreadable = resolution.solutions, resolution.unreadable_files
    columns = list(STAGING_RUN_KEYS.column_names)
    for batch in keys_file.iter_batches(
        batch_size=RESOLVED_BATCH_ROWS, columns=columns, use_threads=False
    ):
        for keys in batch.to_pylist():
            yield (
                keys["run_id"],
                resolve_run(
                    keys,
                    solutions.get(keys["solution"]),
                    keys["source_file"] in unreadable,
                    first_cases.get(keys["workload_key"]),
                ),
            )


def _write_resolved(
    staged: Path,
    target: Path,
    resolution: SourceResolution,
    first_cases: dict[str, FirstCase],
    *,
    by_id: bool,
) -> None:
    """The runs part ``target``: each row group of ``staged`` with its resolved columns set,
    run for run, from the run keys read beside it in the same order (raising _KeysOutOfOrder
    where they are not), or, ``by_id``, all looked up by run id."""
    schema = stored_schema(schemas.RUNS.name)
    fields = [(schema.get_field_index(c), schema.field(c)) for c in RESOLVED_COLUMNS]
    with (
        pq.ParquetFile(run_keys_part(str(staged))) as keys_file,
        pq.ParquetFile(staged) as runs_file,
        parquet_writer(target, schema, schemas.RUNS.name) as writer,
    ):
        resolved = _resolved_keys(keys_file, resolution, first_cases)
        by_run_id = dict(resolved) if by_id else {}
        for index in range(runs_file.num_row_groups):
            rows = runs_file.read_row_group(index, use_threads=False).cast(schema)
            run_ids = rows.column("run_id").to_pylist()
            if by_id:
                values = [by_run_id[run_id] for run_id in run_ids]
            else:
                values = []
                for run_id in run_ids:
                    key_id, columns = next(resolved, (None, ()))
                    if key_id != run_id:
                        raise _KeysOutOfOrder
                    values.append(columns)
            for position, (column, field) in enumerate(fields):
                rows = rows.set_column(
                    column, field, pa.array([v[position] for v in values], type=field.type)
                )
            writer.write_table(rows)
        if not by_id and next(resolved, None) is not None:
            raise _KeysOutOfOrder


def ranking_rule() -> str:
    """The digest of the ranking rule: the part names of run_rankings depend on it."""
    return hashlib.sha256(
        (sql_text("ranking_inputs") + sql_text("run_rankings")).encode()
    ).hexdigest()


def write_ranking_parts(
    connection: duckdb.DuckDBPyConnection,
    warehouse: Warehouse,
    base: Path | None,
    kept: RankingScope | None = None,
) -> dict[str, Path]:
    """run_rankings as one part per ranking bucket (sql/rank/ranking_inputs.sql): a part is named by
    the ranking rule and its bucket's inputs, so a bucket whose runs did not change keeps its
    part, and only the others are ranked, by sql/rank/run_rankings.sql over just their runs. As in
    write_group_parts, a part the base generation holds (``base``: its run_rankings.parquet folder)
    or an intact cache copy of it is reused. Returns the part of every bucket.

    With ``kept`` (a build that only added runs to a base's: ``RankingScope``) only the buckets
    of the added runs are digested; every other bucket keeps the base's name. Digesting every
    bucket reads all runs (~0.15 s of a build after one changed file of the bench corpus)."""
    connection.execute(
        f"CREATE OR REPLACE TEMP VIEW all_ranking_inputs AS {sql_text('ranking_inputs')}"
    )
    rule = ranking_rule()
    digests = sql_text("assemble/ranking_buckets")
    name_of: dict[str, str] = {}
    if kept is not None:
        touched = connection.execute(
            "SELECT DISTINCT ranking_bucket FROM all_ranking_inputs "  # noqa: S608  (own names)
            f"WHERE run_id IN (SELECT run_id FROM {kept.added_runs})"
        ).fetchall()
        digests = f"SELECT * FROM ({digests}) WHERE {_in_buckets(b for (b,) in touched)}"  # noqa: S608
        name_of.update(kept.names)
    for bucket, digest in connection.execute(digests).fetchall():
        name_of[bucket] = hashlib.sha256(f"{rule}\n{bucket}\n{digest}".encode()).hexdigest()[:32]
    folder = warehouse.parts / "run_rankings"
    held = held_parts(base)
    stale = {
        bucket: name
        for bucket, name in name_of.items()
        if name not in held and not _intact_part(folder / name)
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
        # The stale buckets as a filter DuckDB takes into the scan of the runs, not a join: the
        # runs of the other buckets are then never read whole (a build after one changed file
        # ranked its one bucket in 0.22 s, ~0.05 s of it per read of the inputs as a join).
        where = f" WHERE {_in_buckets(stale)}" if len(stale) < len(name_of) else ""
        connection.execute(
            f"CREATE OR REPLACE TEMP VIEW ranking_inputs AS SELECT * FROM all_ranking_inputs{where}"  # noqa: S608  (own names, literals)
        )
        out = folder / f".write.{os.getpid()}.tmp"
        shutil.rmtree(out, ignore_errors=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        columns = ", ".join(f'k."{c}"' for c in PART_COLUMNS["run_rankings"])  # own names
        connection.execute(
            f"COPY (SELECT {columns}, b.part FROM ({sql_text('run_rankings')}) k "  # noqa: S608
            "JOIN stale_ranking_buckets b USING (ranking_bucket)) "
            f"TO {sql_literal(out)} (FORMAT parquet, PARTITION_BY (part), COMPRESSION zstd)"
        )
        for name in stale.values():
            _record_part_digests(out / f"part={name}")
            os.replace(out / f"part={name}", folder / name)
        shutil.rmtree(out, ignore_errors=True)
        connection.unregister("stale_ranking_buckets")
    return {bucket: folder / name for bucket, name in name_of.items()}


def _in_buckets(buckets: Iterable[str]) -> str:
    """A condition on ``ranking_bucket`` that holds for ``buckets`` only (none: for no row)."""
    listed = ", ".join(sql_literal(bucket) for bucket in buckets) or "NULL"
    return f"ranking_bucket IN ({listed})"


@dataclass(frozen=True)
class RankingScope:
    """What a build's ranking may take from its base generation: the part name of each bucket
    there (``names``), when the build's runs are the base's plus the runs of the relation
    ``added_runs`` (no run dropped, none changed in place, the same ranking rule). A bucket
    without an added run then has the inputs it had there."""

    names: dict[str, str]
    added_runs: str


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


def held_parts(base: Path | None) -> dict[str, list[Path]]:
    """The files of each part a base generation's folder holds (``<part>-<file>``, place_parts),
    listed once: a glob per part cost ~0.1 s of a one-file build over a few hundred parts."""
    held: dict[str, list[Path]] = {}
    if base is None:
        return held
    try:
        entries = sorted(os.scandir(base), key=lambda entry: entry.name)
    except OSError:  # no such folder: the base holds none of this table's parts
        return held
    for entry in entries:
        part, dash, _ = entry.name.partition("-")
        if dash and entry.name.endswith(".parquet"):
            held.setdefault(part, []).append(Path(entry.path))
    return held


def base_folder(current: Path | None, table: str, key: str | None = None) -> Path | None:
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
    held_by_base = held_parts(base)
    for part in parts:
        held = held_by_base.get(part.name, [])
        for path in held:
            link_file(path, folder / path.name)
        if not held:
            for source in sorted(part.glob("*.parquet")):
                shutil.copyfile(source, folder / f"{part.name}-{source.name}")


def link_file(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def link_other_sources(
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
                link_file(path, target)


def remove_unlinked_parts(warehouse: Warehouse) -> None:
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
