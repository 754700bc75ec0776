"""Reading a published warehouse: the chosen publication's table snapshots downloaded into a
local replica folder laid out as a generation of several sources (ranks computed there over
every source), which every read command then reads as it reads a folder warehouse; and the
check before a build that its local staging agrees with the catalog.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracehouse import schemas
from tracehouse.files import replace_atomically, symlink_atomically
from tracehouse.publish.generations import record_generation_files, remove_generation_unless_open
from tracehouse.publish.iceberg.catalog import (
    SOURCE_COLUMN,
    chosen_snapshots,
    location,
    namespace_of,
    open_catalog,
    publications,
)
from tracehouse.schemas import HISTORY_TABLES, PARTED_TABLES, PER_SOURCE_TABLES, PUBLISHED_TABLES
from tracehouse.settings import Settings, SettingsError
from tracehouse.storage import redact
from tracehouse.warehouse import (
    COMPLETE_MARKER,
    DUCKDB_FILE,
    SNAPSHOT_FILE,
    GenerationSource,
    Warehouse,
    WarehouseMissing,
    discard_reusable_cache,
    generation_sources,
    holds_sources,
    source_key,
    sql_literal,
    write_generation_sources,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.io import FileIO


# Per-source tables a build stores as several files per source: group parts (and the rejects
# found before the ingest), history deltas (beside an empty first file).
MULTI_FILE_TABLES = (frozenset(PARTED_TABLES) & frozenset(PER_SOURCE_TABLES)) | frozenset(
    HISTORY_TABLES
)
REPLICA_FOLDER = "replica"
KEEP_REPLICAS = 2


def _download(io: FileIO, source: str, local: Path) -> None:
    with io.new_input(source).open() as stream, local.open("wb") as sink:
        shutil.copyfileobj(stream, sink, 1 << 20)  # type: ignore[arg-type]


def discard_stale_staging(settings: Settings, staging: Warehouse) -> str | None:
    """Before a build into an object-store warehouse: discard the local staging folder when it
    disagrees with the catalog, and say so in one line (None when it agrees).

    A staging disagrees when it holds a source that the catalog's latest publication does not
    hold under that name from that location: it was built for another catalog (one since
    replaced by a new, empty one, say). Building on it would refuse a source under a name the
    catalog never gave away, continue that source's snapshots and run history from states the
    catalog never published, and publish its whole tables (``protocols``) from them. Its
    generations and build cache go (the Hub cache and the read replica, which is the
    catalog's own state, stay), and the build reads its source afresh. A staging whose first
    publication of a source never landed (killed before its publication row) disagrees too,
    and is rebuilt the same way.
    """
    current = staging.current_generation()
    if current is None or not holds_sources(current):
        return None
    try:
        held = generation_sources(current)
    except (ValueError, OSError):  # damaged: the build repairs it as for any folder
        return None
    catalog = open_catalog(settings)
    rows = publications(settings, catalog)
    published = (
        {s.source: s.uri for s in _published_sources(catalog, chosen_snapshots(rows, None)[1])}
        if rows
        else {}
    )
    stale = [s for s in held if published.get(s.source) != s.uri]
    if not stale:
        return None
    for generation in sorted(staging.generations.iterdir()) if staging.generations.is_dir() else []:
        if not remove_generation_unless_open(generation):
            raise SettingsError(
                f"--warehouse {settings.object_store}: the local staging {staging.root} disagrees "
                f"with catalog {redact(settings.catalog or '')} and must be rebuilt, but "
                f"generation {generation.name} is open in another process; close it and build "
                "again"
            )
    for link in (staging.current, staging.duckdb_path):
        link.unlink(missing_ok=True)
    discard_reusable_cache(staging)
    first = stale[0]
    others = f" (and {len(stale) - 1} more)" if len(stale) > 1 else ""
    return (
        f"the local staging {staging.root} held source {first.source!r} ({first.uri}){others}, "
        f"which catalog {redact(settings.catalog or '')} does not: discarded it"
    )


def reading_settings(settings: Settings) -> Settings:
    """Settings whose ``warehouse`` is a local replica of the published state, for read
    commands of an object-store warehouse (or any catalog warehouse read ``--as-of``)."""
    if settings.object_store is None and settings.as_of is None:
        return settings
    if settings.catalog is None:
        raise SettingsError(
            f"--as-of {settings.as_of}: time travel reads the Iceberg catalog; pass --catalog "
            "or set TRACEHOUSE_CATALOG"
        )
    catalog = open_catalog(settings)
    rows = publications(settings, catalog)
    if not rows:
        where = settings.object_store or str(settings.warehouse)
        raise WarehouseMissing(
            f"no warehouse published at {where} (catalog {redact(settings.catalog)}): run "
            "`tracehouse build` with the same --warehouse and --catalog first"
        )
    publication, snapshots = chosen_snapshots(rows, settings.as_of)
    replica = Warehouse(settings.warehouse / REPLICA_FOLDER)
    _materialize(settings, catalog, replica, publication, snapshots)
    return replace(settings, warehouse=replica.root)


def _materialize(
    settings: Settings,
    catalog: Catalog,
    replica: Warehouse,
    publication: dict[str, Any],
    snapshots: dict[str, int],
) -> None:
    """Download the chosen snapshots' files into a generation folder of ``replica`` (once per
    distinct state), laid out as a build lays out a generation of several sources, compute the
    tables that span every source, and make it current."""
    from tracehouse.assemble.duckdb_files import write_duckdb_file

    key = json.dumps([publication["snapshot_id"], sorted(snapshots.items())])
    name = hashlib.sha256(key.encode()).hexdigest()[:16]
    folder = replica.generations / name
    if not (folder / COMPLETE_MARKER).exists():
        io = catalog._load_file_io(location=location(settings))

        def fill(temporary: Path) -> None:
            shutil.rmtree(temporary, ignore_errors=True)
            temporary.mkdir(parents=True)
            sources = _write_source_snapshots(catalog, snapshots, temporary)
            write_generation_sources(temporary, sources)
            for table in PUBLISHED_TABLES:
                if table == "source_snapshots":
                    continue
                snapshot_id = snapshots.get(table)
                if table in PER_SOURCE_TABLES:
                    _download_source_slices(catalog, io, table, snapshot_id, temporary, sources)
                else:
                    _download_table(catalog, table, snapshot_id, temporary)
            _compute_rankings(replica, temporary)
            (temporary / SNAPSHOT_FILE).write_text(publication["snapshot_id"] + "\n")
            write_duckdb_file(temporary, settings)
            (temporary / COMPLETE_MARKER).write_text(publication["publication_id"] + "\n")
            # Its files, their digests and the schema version, as a build records them: what
            # reads check the replica against.
            record_generation_files(temporary)

        try:
            replace_atomically(folder, fill)
        except OSError:  # another reader materialized the same state first
            if not (folder / COMPLETE_MARKER).exists():
                raise
    symlink_atomically(replica.current, os.path.relpath(folder, replica.root))
    _remove_old_replicas(replica, folder)


def _scan_files(
    catalog: Catalog, io: FileIO, table: str, snapshot_id: int
) -> list[tuple[str, str | None]] | None:
    """The live data files of one table snapshot, each with the ``source`` its partition holds
    (None in a table not partitioned by source); None when the snapshot has delete files
    (which another engine may write: its rows must then be read through a scan)."""
    from pyiceberg.manifest import ManifestContent

    iceberg = catalog.load_table((namespace_of(catalog), table))
    snapshot = iceberg.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise LookupError(f"table {table} has no snapshot {snapshot_id} any more (expired?)")
    manifests = snapshot.manifests(io)
    if any(m.content == ManifestContent.DELETES for m in manifests):
        return None
    specs = iceberg.specs()
    files = []
    for manifest in manifests:
        names = [field.name for field in specs[manifest.partition_spec_id].fields]
        position = names.index(SOURCE_COLUMN) if SOURCE_COLUMN in names else None
        # Every live data file, empty ones included (a scan plans no task for a file of no rows).
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
            partition = entry.data_file.partition
            source = None if position is None else partition[position]
            files.append((entry.data_file.file_path, source))
    return sorted(files)


def _scan_rows(catalog: Catalog, table: str, snapshot_id: int) -> pa.Table:
    """A table snapshot's rows through a scan, with the declared schema (columns it never had
    as nulls)."""
    arrow_schema = schemas.TABLES[table].arrow_schema
    rows = (
        catalog.load_table((namespace_of(catalog), table)).scan(snapshot_id=snapshot_id).to_arrow()
    )
    for spec in arrow_schema:
        if spec.name not in rows.column_names:
            rows = rows.append_column(spec, pa.nulls(rows.num_rows, spec.type))
    return rows.select(arrow_schema.names).cast(arrow_schema)


def _write_source_snapshots(
    catalog: Catalog, snapshots: dict[str, int], folder: Path
) -> list[GenerationSource]:
    """source_snapshots of every source, in build order (each source's rows come from its own
    builds; the order across sources is when they ran), written as a build writes it; and the
    sources the replica holds, each at its latest snapshot (the generation's sources.json)."""
    from tracehouse.assemble.finalize import rows_to_arrow

    snapshot_id = snapshots.get("source_snapshots")
    rows = (
        []
        if snapshot_id is None
        else _scan_rows(catalog, "source_snapshots", snapshot_id).to_pylist()
    )
    history = sorted(rows, key=lambda r: (r["built_at"], r["source"], r["snapshot_number"]))
    pq.write_table(
        rows_to_arrow("source_snapshots", history),
        folder / "source_snapshots.parquet",
        compression="zstd",
    )
    return _latest_sources(history)


def _published_sources(catalog: Catalog, snapshots: dict[str, int]) -> list[GenerationSource]:
    """The sources a publication holds (its ``snapshots``), each at its latest snapshot."""
    snapshot_id = snapshots.get("source_snapshots")
    if snapshot_id is None:
        return []
    return _latest_sources(_scan_rows(catalog, "source_snapshots", snapshot_id).to_pylist())


def _latest_sources(history: list[dict[str, Any]]) -> list[GenerationSource]:
    """Each source of ``source_snapshots`` rows at its latest snapshot, by name."""
    latest: dict[str, dict[str, Any]] = {}
    for row in history:
        if (
            row["source"] not in latest
            or row["snapshot_number"] > latest[row["source"]]["snapshot_number"]
        ):
            latest[row["source"]] = row
    return [
        GenerationSource(
            name,
            # sources.json names a Hub source without its @revision
            row["uri"].split("@", 1)[0] if row["uri"].startswith("hf://") else row["uri"],
            source_key(name),
            row["snapshot_id"],
            row["snapshot_number"],
            row["resolved_sha"],
        )
        for name, row in sorted(latest.items())
    ]


def _download_source_slices(
    catalog: Catalog,
    io: FileIO,
    table: str,
    snapshot_id: int | None,
    folder: Path,
    sources: list[GenerationSource],
) -> None:
    """A per-source table as a build stores it: ``<table>.parquet/<source key>/`` per source,
    holding that source's data files as they are (they also carry ``source`` and
    ``snapshot_id``, which the views set from sources.json anyway); an empty file for a source
    without rows (a view needs one)."""
    from tracehouse.assemble.parts import stored_schema

    keys = {s.source: s.key for s in sources}
    root = folder / f"{table}.parquet"
    for source in sources:
        (root / source.key).mkdir(parents=True)
    paths = None if snapshot_id is None else _scan_files(catalog, io, table, snapshot_id)
    if paths is None and snapshot_id is not None:  # delete files: split the scanned rows
        rows = _scan_rows(catalog, table, snapshot_id)
        for source in sources:
            mine = rows.filter(pc.field(SOURCE_COLUMN) == source.source)
            if mine.num_rows:
                pq.write_table(mine, root / source.key / "scan.parquet", compression="zstd")
    for index, (path, partition) in enumerate(paths or []):
        if partition in keys:  # the one source of the file's partition
            _download(io, path, root / keys[partition] / f"{index:06d}.parquet")
            continue
        # A file of no source partition (another engine's layout): split by the column.
        local = root / f".{index:06d}.parquet"
        _download(io, path, local)
        rows = pq.read_table(local)
        for source in sources:
            mine = rows.filter(pc.field(SOURCE_COLUMN) == source.source)
            if mine.num_rows:
                pq.write_table(mine, root / source.key / f"{index:06d}.parquet", compression="zstd")
        local.unlink()
    for source in sources:
        files = sorted((root / source.key).iterdir())
        if not files:
            pq.write_table(stored_schema(table).empty_table(), root / source.key / "empty.parquet")
        elif len(files) == 1 and table in MULTI_FILE_TABLES:
            # A build stores these as several files, and DuckDB declares a column NOT NULL
            # when one file's statistics show no null: an empty file beside it keeps the
            # views' (and so the exports') schema the build's.
            pq.write_table(
                pq.read_schema(files[0]).empty_table(), root / source.key / "empty.parquet"
            )


def _compute_rankings(replica: Warehouse, generation: Path) -> None:
    """run_rankings over every source of the replica, as a build ranks them (one part per
    ranking bucket, kept in the replica's cache: an unchanged bucket is not ranked again)."""
    import duckdb

    from tracehouse.assemble.parts import place_parts, write_empty_parts, write_ranking_parts
    from tracehouse.warehouse import create_table_views

    connection = duckdb.connect(config={"threads": 1, "preserve_insertion_order": False})
    try:
        create_table_views(connection, generation)
        parts = write_ranking_parts(connection, replica, None)
    finally:
        connection.close()
    place_parts(generation / "run_rankings.parquet", list(parts.values()), None)
    write_empty_parts(generation)


def _download_table(catalog: Catalog, table: str, snapshot_id: int | None, folder: Path) -> None:
    """A table the build holds in one file (``protocols``, ``baseline_map``), written from the
    snapshot's rows (none: a table never committed, empty) as the build writes it (its stored schema, sorted and written by DuckDB):
    the build's very bytes for the same rows, which an export copies as they are, whatever
    writer made the data files."""
    import duckdb

    from tracehouse.assemble.parts import stored_schema

    target = folder / f"{table}.parquet"
    staged = folder / f"_{table}.parquet"
    stored = stored_schema(table)
    rows = (
        stored.empty_table()
        if snapshot_id is None
        else _scan_rows(catalog, table, snapshot_id).select(stored.names).cast(stored)
    )
    pq.write_table(rows, staged, compression="zstd")
    connection = duckdb.connect(config={"threads": 1})
    try:
        connection.sql(
            f"SELECT * FROM read_parquet({sql_literal(staged)}) "  # noqa: S608  (own names)
            f"ORDER BY {schemas.TABLE_ORDER[table]}"
        ).write_parquet(str(target), compression="zstd")
    finally:
        connection.close()
    staged.unlink()


def _remove_old_replicas(replica: Warehouse, current: Path) -> None:
    folders = sorted(
        (
            p
            for p in replica.generations.iterdir()
            if not p.name.startswith(".") and (p / COMPLETE_MARKER).exists()  # not in flight
        ),
        key=lambda p: p.stat().st_mtime,
    )
    keep = {current, *folders[-KEEP_REPLICAS:]}
    for folder in folders:
        if folder not in keep:
            remove_generation_unless_open(folder)  # a reader may still have it open
    if not (replica.root / DUCKDB_FILE).is_symlink():
        symlink_atomically(replica.root / DUCKDB_FILE, f"current/{DUCKDB_FILE}")
