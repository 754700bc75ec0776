"""The parted tables of a generation: each group of source files' resolved parts (runs,
correctness, rejects, trace_lines) and each ranking bucket's run_rankings part, written once
into the cache (cache/parts/<table>/<name>/) and reused while their inputs are unchanged; and
placing them into a generation, linked from the base generation where it holds them."""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tracehouse import kernelindex, schemas
from tracehouse.files import sha256_file
from tracehouse.ingest.manifest import FileEntry
from tracehouse.ingest.worker import PART_TABLES
from tracehouse.schemas import GROUP_PARTED_TABLES, PARTED_TABLES, PER_SOURCE_TABLES
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


# run_id in the assembled parts is qualified by the source's name, so the same trace line read
# from two sources (a dataset and its fork) is two runs with two ids; the staged id is the
# path, line and bytes of the record.
# (COPY takes no bound parameters, so the name comes from a one-row temp table.)
QUALIFIED_RUN_ID = "substr(sha256((SELECT name FROM build_source) || chr(10) || s.run_id), 1, 32)"


def resolution_digest(connection: duckdb.DuckDBPyConnection) -> str:
    """A digest of everything resolution takes from outside a group: solutions, the workload
    cache and the files KernelIndex cannot read. A group's resolved runs part is reused while
    its own content and this digest are unchanged."""
    ((digest,),) = connection.execute(sql_text("assemble/resolution_digest")).fetchall()
    return digest


@dataclass(frozen=True)
class _Piece:
    """One staging part of a group, and the name of the resolved part written from it."""

    staged: str  # the staging part's path
    name: str


def write_group_parts(
    connection: duckdb.DuckDBPyConnection,
    warehouse: Warehouse,
    groups: list[_Group],
    resolution: str,
    source_name: str,
    base: Path | None,
    key: str,
) -> dict[str, list[Path]]:
    """The resolved parts of every group for each parted table, one for each of the group's
    staging parts: reused when it exists, else assembled by SQL — one statement per table for
    each batch of the staging parts that need it (_write_batches), its rows split into one part
    folder per staging part as they stream out (_write_partitioned).

    One resolved part per staging part, not per group: a group whose file only grew keeps its
    older staging parts and gains one for the new lines (plan.KEPT_PARTS_MAX), so it keeps its
    older resolved parts too, and only the new lines' rows are resolved, placed and copied into
    the published file.

    A part is a folder (cache/parts/<table>/<name>/), complete once renamed into place (one
    written by an older version, with DuckDB's partitioned write, may hold several files). Part
    names are keyed by (source, staging part), so the parts of one source are never another's,
    and a build of one source leaves every other source's parts as they are. A staging part's
    name says what its rows follow from (its group's files and the dataset context).

    A part the base generation ``base`` already holds (in ``<table>.parquet/<key>/``; the
    build checked it byte for byte) is linked from there; any other is copied from the
    cache, whose copy is checked against its recorded digests first and written again from
    the staging parts when it does not match.
    """

    def name(*terms: str) -> str:
        return hashlib.sha256("\n".join([source_name, *terms]).encode()).hexdigest()[:32]

    written: dict[str, list[Path]] = {}
    for table in GROUP_PARTED_TABLES:
        # A runs part depends on the resolution too; the others on their staging part only.
        terms = (resolution,) if table == schemas.RUNS.name else ()
        staged = dict.fromkeys(path for group in groups for path in group.parts.get(table, []))
        pieces = [_Piece(path, name(Path(path).name, *terms)) for path in staged]
        held = held_parts(base_folder(base, table, key))
        missing = [
            piece
            for piece in pieces
            if piece.name not in held and not _intact_part(warehouse.parts / table / piece.name)
        ]
        for batch in _write_batches(missing):
            _write_missing_parts(connection, warehouse, table, batch, source_name)
        written[table] = [warehouse.parts / table / piece.name for piece in pieces]
    return written


# At most about this much staged data (uncompressed) per statement. One statement
# over every group held the resolved rows' hash joins (the workload cache, comparison keys)
# and the partitioned write's buffers at once, and at 1M runs that outgrew
# FINALIZE_MEMORY_LIMIT with no operator left to spill (issue 16); a batch of staging parts
# bounds all three, and the comparison keys of a batch are only its own.
PARTED_WRITE_BATCH_BYTES = 256 * 1024 * 1024


def _write_batches(pieces: list[_Piece]) -> list[list[_Piece]]:
    """``pieces`` in order, cut into batches of about PARTED_WRITE_BATCH_BYTES of staged rows
    (by the parts' Parquet footers; a bigger staging part is a batch of its own)."""
    batches: list[list[_Piece]] = []
    size = 0
    for piece in pieces:
        metadata = pq.read_metadata(piece.staged)
        piece_size = sum(
            metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)
        )
        if not batches or size + piece_size > PARTED_WRITE_BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(piece)
        size += piece_size
    return batches


def _write_missing_parts(
    connection: duckdb.DuckDBPyConnection,
    warehouse: Warehouse,
    table: str,
    pieces: list[_Piece],
    source_name: str,
) -> None:
    connection.execute(
        "CREATE OR REPLACE TEMP TABLE build_source AS SELECT $name::VARCHAR AS name",
        {"name": source_name},
    )
    connection.register(
        "part_of_file",
        pa.table(
            {
                "filename": pa.array([p.staged for p in pieces], type=pa.string()),
                "part": pa.array([p.name for p in pieces], type=pa.string()),
            }
        ),
    )
    # Each table's assembly reads its own staged rows only (sql/assemble/<table>.sql).
    staged_view(
        connection, table, PART_TABLES[table], [p.staged for p in pieces], with_filename=True
    )
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
    rows = connection.sql(
        f"SELECT {columns}, p.part FROM ({sql_text(f'assemble/{table}')}) s "  # noqa: S608
        "JOIN part_of_file p USING (filename)"
    ).to_arrow_reader(STREAMED_ROWS)
    _write_partitioned(rows, out, table)
    for piece in pieces:
        written = out / f"part={piece.name}"
        if not written.is_dir():  # a staging part without rows
            written.mkdir(parents=True)
        _record_part_digests(written)
        os.replace(written, warehouse.parts / table / piece.name)
    shutil.rmtree(out, ignore_errors=True)
    connection.unregister("part_of_file")


# Rows DuckDB hands over at a time (one of its chunks: the rows of one staging file, so of one
# part, nearly always), and the bytes gathered for one part before they are one row group.
STREAMED_ROWS = 2048
PART_ROW_GROUP_BYTES = 16 * 1024 * 1024
# What every part's gathered rows may hold together before the largest is written out.
PARTED_BUFFER_BYTES = 64 * 1024 * 1024


def _write_partitioned(rows: pa.RecordBatchReader, out: Path, table: str) -> None:
    """The rows of ``rows`` into ``out/part=<part>/data_0.parquet``, one file for each value of
    their ``part`` column, in the table's stored schema.

    Not DuckDB's partitioned COPY: it wrote each part as one row group (whatever the row-group
    options said) and took ~2.4 s for the bench corpus's runs, where the same rows go into one
    file in ~0.7 s; pyarrow writes them as they come, a part's rows gathered into row groups of
    about PART_ROW_GROUP_BYTES. Long text columns (``schemas.ZSTD_COLUMNS``) get neither a
    dictionary nor statistics (a dictionary of logs is dropped anyway, and a log as the min or max
    of a row group would only make the footer large); level 1 zstd, as before."""
    schema = stored_schema(table)
    long_text = set(schemas.ZSTD_COLUMNS.get(table, ()))
    short = [name for name in schema.names if name not in long_text]
    # (pyarrow takes a list of columns for both; its stubs say a bool)
    per_column: dict[str, Any] = {"use_dictionary": short, "write_statistics": short}
    writers: dict[str, pq.ParquetWriter] = {}
    gathered: dict[str, list[pa.RecordBatch]] = {}
    sizes: dict[str, int] = {}

    def write(part: str) -> None:
        batches = gathered.pop(part)
        sizes.pop(part)
        if part not in writers:
            folder = out / f"part={part}"
            folder.mkdir(parents=True, exist_ok=True)
            writers[part] = pq.ParquetWriter(
                folder / "data_0.parquet",
                schema,
                compression="zstd",
                compression_level=1,
                **per_column,
            )
        writers[part].write_table(pa.Table.from_batches(batches, schema=schema))

    try:
        for batch in rows:
            parts = batch.column(batch.num_columns - 1)
            stored = pa.RecordBatch.from_arrays(
                batch.columns[:-1], names=batch.schema.names[:-1]
            ).cast(schema)
            values = parts.unique().to_pylist()
            for part in values:
                one = stored if len(values) == 1 else _rows_of_part(stored, parts, part)
                gathered.setdefault(part, []).append(one)
                sizes[part] = sizes.get(part, 0) + one.nbytes
                if sizes[part] >= PART_ROW_GROUP_BYTES:
                    write(part)
            while sum(sizes.values()) > PARTED_BUFFER_BYTES:
                write(max(sizes, key=lambda part: sizes[part]))
        for part in list(gathered):
            write(part)
    finally:
        for writer in writers.values():
            writer.close()
        pa.default_memory_pool().release_unused()


def _rows_of_part(batch: pa.RecordBatch, parts: pa.Array, part: str) -> pa.RecordBatch:
    # Imported here only: pyarrow.compute costs ~45 ms to import, and a build after one
    # changed file writes batches of one part each.
    import pyarrow.compute as pc

    return batch.filter(pc.call_function("equal", [parts, pa.scalar(part)]))


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
        listed = ", ".join(sql_literal(bucket) for (bucket,) in touched) or "NULL"
        digests = f"SELECT * FROM ({digests}) WHERE ranking_bucket IN ({listed})"  # noqa: S608
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
    return {bucket: folder / name for bucket, name in name_of.items()}


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
