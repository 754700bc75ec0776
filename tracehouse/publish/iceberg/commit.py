"""Committing a finished build to the catalog: each table's rows cut into parts named by their
content, one Iceberg snapshot per changed table (retried when another writer wins the race),
then the publication row (the build's commit point) and the marts for other engines.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import random
import shutil
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracehouse import interrupts, schemas
from tracehouse.publish.iceberg.catalog import (
    COMMIT_ATTEMPTS,
    PROPERTY_PUBLICATION,
    PROPERTY_REVISION,
    PROPERTY_SNAPSHOT,
    PROPERTY_SOURCE,
    PUBLICATIONS,
    PUBLICATIONS_SCHEMA,
    SOURCE_COLUMN,
    PublishError,
    _backoff,
    _check_location,
    _ensure_namespace,
    _lost_race,
    _publication_rows,
    location,
    namespace_of,
    open_catalog,
)
from tracehouse.publish.iceberg.replica import reading_settings
from tracehouse.publish.iceberg.tables import (
    MARTS,
    PUBLISHED_TABLES,
    _evolve_schema,
    _load_or_create,
    declared_schema,
    table_order,
)
from tracehouse.settings import Settings
from tracehouse.storage import redact
from tracehouse.table_layout import VIEW_ADDED_COLUMNS
from tracehouse.warehouse import (
    COMPLETE_MARKER,
    PER_SOURCE_TABLES,
    SNAPSHOT_FILE,
    Warehouse,
    generation_sources,
    holds_sources,
    sql_literal,
    table_files,
    table_view_sql,
    write_sorted_table,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table as IcebergTable


PROPERTY_MARTS_OF = "tracehouse.marts-of-publication"  # the publication the marts were read at


@dataclass(frozen=True)
class Published:
    publication_id: str
    snapshot_id: str
    tables: int
    retries: int
    skipped: bool = False
    unchanged: int = 0  # tables that already held exactly these rows

    def summary_line(self, settings: Settings) -> str:
        where = location(settings)
        catalog = redact(settings.catalog or "")
        if self.skipped:
            return f"  published: snapshot {self.snapshot_id} is already in {catalog} ({where})"
        return (
            f"  published {self.tables} Iceberg tables to {where} ({self.unchanged} unchanged; "
            f"catalog {catalog}, publication {self.publication_id}, {self.retries} commit retries)"
        )


def publish_generation(
    settings: Settings, warehouse: Warehouse, *, source_name: str | None = None, force: bool = False
) -> Published:
    """Commit every table of the current generation of ``warehouse`` to the catalog: the rows
    of the source ``source_name`` (the build's own) in tables that hold several sources, the
    whole table otherwise; tables computed across sources are left to readers."""
    generation = warehouse.require_current()
    snapshot = _build_snapshot(generation, source_name)
    catalog = open_catalog(settings)
    with warnings.catch_warnings():
        # pyiceberg warns when a delete matches no rows (every first publish of a table)
        warnings.filterwarnings("ignore", "Delete operation did not match any records")
        _ensure_namespace(catalog)
        publications = _load_or_create(catalog, PUBLICATIONS, PUBLICATIONS_SCHEMA, False)
        _check_location(publications, settings)
        if not force and _already_published(publications, snapshot):
            return Published("", snapshot["snapshot_id"], 0, 0, skipped=True)
        publication_id = uuid.uuid4().hex
        properties = {
            PROPERTY_SNAPSHOT: snapshot["snapshot_id"],
            PROPERTY_SOURCE: snapshot["source"] or "",
            PROPERTY_REVISION: snapshot["revision"] or "",
            PROPERTY_PUBLICATION: publication_id,
        }
        work = warehouse.cache / "publish"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        committed: dict[str, list[int]] = {}
        retries = unchanged = 0
        try:
            for table in PUBLISHED_TABLES:
                parts = _table_parts(
                    generation, table, work, snapshot["source"], snapshot["snapshot_id"]
                )
                outcome = commit_parts(
                    catalog,
                    table,
                    declared_schema(table),
                    parts,
                    snapshot["source"],
                    properties,
                    SOURCE_COLUMN in schemas.TABLES[table].column_names,
                )
                if outcome.snapshot_id is not None:  # None: no source has rows there yet
                    committed[table] = [outcome.snapshot_id, outcome.sequence_number]
                retries += outcome.retries
                unchanged += outcome.unchanged
        finally:
            shutil.rmtree(work, ignore_errors=True)
        row = {
            "publication_id": publication_id,
            "published_at": datetime.now(UTC),
            "snapshot_id": snapshot["snapshot_id"],
            "source": snapshot["source"],
            "revision": snapshot["revision"],
            "generation": generation.name,
            "table_snapshots": json.dumps(committed, sort_keys=True),
        }
        # The commit point: Ctrl-C waits for this one short commit, so the interrupt line can
        # say for sure whether the build was published.
        with interrupts.deferred():
            retries += _append_with_retries(
                catalog, PUBLICATIONS, pa.Table.from_pylist([row], schema=PUBLICATIONS_SCHEMA)
            )
            if settings.object_store is not None:
                interrupts.note_published(generation.name)
        _publish_marts(settings, catalog, warehouse.cache / "publish-marts", properties)
    return Published(
        publication_id, snapshot["snapshot_id"], len(committed), retries, unchanged=unchanged
    )


def _publish_marts(
    settings: Settings, catalog: Catalog, work: Path, properties: dict[str, str]
) -> None:
    """Commit ``MARTS`` as Iceberg tables, read from the latest publication as a reader reads
    it (every source; ranks computed over all of them). Two builds publishing at once may leave
    the marts one publication behind until the next build; their snapshots name the
    publication they were read at (``tracehouse.marts-of-publication``)."""
    from tracehouse.warehouse import connect_read_only

    reading = reading_settings(replace(settings, as_of=None))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        connection = connect_read_only(Warehouse(reading.warehouse))
        try:
            for mart in MARTS:
                order = table_order(mart)
                rows = connection.sql(
                    f"SELECT * FROM {mart}" + (f" ORDER BY {order}" if order else "")  # noqa: S608  (own names)
                ).to_arrow_table()
                local = work / f"{mart}.parquet"
                pq.write_table(_plain_types(rows), local, compression="zstd")
                marts_of = {**properties, PROPERTY_MARTS_OF: _latest_publication_id(reading)}
                publish_table(catalog, mart, local, None, marts_of)
        finally:
            connection.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _latest_publication_id(reading: Settings) -> str:
    marker = Warehouse(reading.warehouse).current_generation()
    if marker is None or not (marker / COMPLETE_MARKER).exists():
        return ""
    # A replica generation's marker holds the publication it materialized; a folder
    # warehouse's holds the importer version (its marts are the generation just published).
    return (marker / COMPLETE_MARKER).read_text().strip()


def _plain_types(rows: pa.Table) -> pa.Table:
    """Arrow extension types (DuckDB's JSON) as their storage type, which Iceberg knows."""
    fields = [
        pa.field(f.name, f.type.storage_type, f.nullable, f.metadata)
        if isinstance(f.type, pa.ExtensionType)
        else f
        for f in rows.schema
    ]
    return rows.cast(pa.schema(fields))


def _build_snapshot(generation: Path, source_name: str | None) -> dict[str, Any]:
    """The tracehouse snapshot of the build's source in a generation: its id, and the source's
    name and revision."""
    if holds_sources(generation):  # one entry per source (sources.json)
        held = generation_sources(generation)
        own = [s for s in held if s.source == source_name] or (held if len(held) == 1 else [])
        if not own:
            raise LookupError(f"generation {generation} holds no source {source_name!r}")
        return {
            "snapshot_id": own[0].snapshot_id,
            "source": own[0].source,
            "revision": own[0].revision,
        }
    snapshot_id = (generation / SNAPSHOT_FILE).read_text().strip()
    history = pq.read_table(generation / "source_snapshots.parquet").to_pylist()
    own = next((r for r in reversed(history) if r.get("snapshot_id") == snapshot_id), {})
    return {
        "snapshot_id": snapshot_id,
        "source": own.get("source"),
        "revision": own.get("resolved_sha"),
    }


def _already_published(publications: IcebergTable, snapshot: dict[str, Any]) -> bool:
    """The latest publication of this source is this very snapshot (an up-to-date rebuild)."""
    rows = [r for r in _publication_rows(publications) if r["source"] == snapshot["source"]]
    return bool(rows) and rows[-1]["snapshot_id"] == snapshot["snapshot_id"]


def _table_file(generation: Path, table: str, work: Path, source: str | None) -> Path:
    """The one Parquet file to publish for a table a build does not store as parts of its
    source: the generation's own file where there is one (the bytes a local build wrote), else
    the table's rows as its view shows them, in the table's order; only this build's source's
    rows when the table holds several sources."""
    path = generation / f"{table}.parquet"
    if table in PER_SOURCE_TABLES and source is not None:  # a generation of the first layout
        path = work / f"{table}.parquet"
        _write_source_rows(generation, table, source, path)
        return path
    if path.is_dir():
        path = work / f"{table}.parquet"
        write_sorted_table(generation, table, path)
    names = pq.read_schema(path).names
    if SOURCE_COLUMN in names and source is not None:
        rows = pq.read_table(path)
        mine = rows.filter(pc.field(SOURCE_COLUMN) == source)
        if mine.num_rows != rows.num_rows:
            path = work / f"{table}.{SOURCE_COLUMN}.parquet"
            pq.write_table(mine, path, compression="zstd")
    return path


def _write_source_rows(generation: Path, table: str, source: str, target: Path) -> None:
    """One source's rows of a per-source table, with the columns its view adds, sorted."""
    import duckdb

    connection = duckdb.connect(config={"preserve_insertion_order": True, "threads": 1})
    try:
        connection.execute(
            f"COPY (SELECT * FROM ({table_view_sql(generation, table)}) s "  # noqa: S608
            f"WHERE source = $source ORDER BY {schemas.TABLE_ORDER[table]}) "
            f"TO {sql_literal(target)} (FORMAT parquet, COMPRESSION zstd)",
            {"source": source},
        )
    finally:
        connection.close()


@dataclass(frozen=True)
class Part:
    """Rows that become one data file of an Iceberg table (more than one past the table's
    target file size), named by a digest of their content: a commit writes only the parts the
    table does not hold yet and removes the files of the parts it no longer wants, so rows a
    build did not change keep their files."""

    digest: str  # of the rows, the table and the source partition they go to
    rows: Callable[[], pa.Table]  # read only when the part must be written

    @property
    def write_uuid(self) -> uuid.UUID:
        """The part's name in its data files' names (``00000-<n>-<uuid>.parquet``)."""
        return uuid.UUID(hex=self.digest[:32])


def _part_of(path: str) -> uuid.UUID | None:
    """The part a data file holds, from its name (None: a file tracehouse did not write so,
    such as one of an older publisher, which the next commit of its partition replaces)."""
    name = path.rsplit("/", 1)[-1].removesuffix(".parquet")
    fields = name.split("-", 2)
    try:
        return uuid.UUID(fields[2]) if len(fields) == 3 and fields[0] == "00000" else None
    except ValueError:
        return None


def _file_part(table: str, local: Path) -> list[Part]:
    """One local file as the one part of its table (none when it holds no row)."""
    if pq.read_metadata(local).num_rows == 0:
        return []
    digest = hashlib.sha256(f"{table}\0{_sha256(local)}".encode()).hexdigest()
    return [Part(digest, lambda: pq.read_table(local))]


def _table_parts(
    generation: Path, table: str, work: Path, source: str | None, snapshot_id: str
) -> list[Part]:
    """What to publish of ``table``: for a per-source table, one part per file the generation
    stores for the build's source (a group of trace files, a history delta: a build rewrites
    only the files whose rows changed); otherwise the table's one file (``_table_file``)."""
    if table not in PER_SOURCE_TABLES or source is None or not holds_sources(generation):
        return _file_part(table, _table_file(generation, table, work, source))
    key = next(s.key for s in generation_sources(generation) if s.source == source)
    parts = []
    for path in table_files(generation, table, key):
        if pq.read_metadata(path).num_rows == 0:  # the empty file beside history deltas
            continue
        content = _sha256(path)
        digest = hashlib.sha256(f"{table}\0{source}\0{content}".encode()).hexdigest()
        rows = functools.partial(_source_part_rows, path, table, source, snapshot_id)
        parts.append(Part(digest, rows))
    return parts


def _source_part_rows(path: Path, table: str, source: str, snapshot_id: str) -> pa.Table:
    """One stored file of a per-source table, with the ``source`` and ``snapshot_id`` its view
    adds (the snapshot of the build that writes the part: a part no build changed since keeps
    the snapshot that first published it), in the table's order."""
    import duckdb

    added = [c for c in VIEW_ADDED_COLUMNS if c in schemas.TABLES[table].column_names]
    constants = {SOURCE_COLUMN: source, "snapshot_id": snapshot_id}
    order = schemas.TABLE_ORDER.get(table)
    connection = duckdb.connect(config={"preserve_insertion_order": True, "threads": 1})
    try:
        columns = "".join(f", {sql_literal(constants[c])} AS {c}" for c in added)
        rows = connection.sql(
            f"SELECT *{columns} FROM read_parquet({sql_literal(path)})"  # noqa: S608  (own names, quoted values)
            + (f" ORDER BY {order}" if order else "")
        ).to_arrow_table()
    finally:
        connection.close()
    return _plain_types(rows)


@dataclass(frozen=True)
class TableCommit:
    snapshot_id: int | None  # None: the table has no snapshot yet (nothing to commit)
    sequence_number: int
    retries: int
    unchanged: bool  # the table already held exactly these rows: nothing was committed


def publish_table(
    catalog: Catalog, table: str, local: Path, source: str | None, properties: dict[str, str]
) -> TableCommit:
    """Commit one local file as the rows of ``table`` this source holds (all rows, for a
    table without a ``source`` column)."""
    found = pq.read_schema(local)
    # A mart spans every source in one file: one partition per source would not hold it.
    partitioned = SOURCE_COLUMN in found.names and table not in MARTS
    parts = _file_part(table, local)
    return commit_parts(
        catalog, table, declared_schema(table, found), parts, source, properties, partitioned
    )


def _live_files(table: IcebergTable, io: FileIO, source: str | None) -> list[DataFile]:
    """The live data files of the table's current snapshot (with ``source``, only those of that
    source's partition)."""
    from pyiceberg.manifest import ManifestContent

    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    specs = table.specs()
    files = []
    for manifest in snapshot.manifests(io):
        if manifest.content != ManifestContent.DATA:
            continue
        names = [field.name for field in specs[manifest.partition_spec_id].fields]
        position = names.index(SOURCE_COLUMN) if SOURCE_COLUMN in names else None
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
            if source is None or (
                position is not None and entry.data_file.partition[position] == source
            ):
                files.append(entry.data_file)
    return files


def commit_parts(
    catalog: Catalog,
    name: str,
    schema: pa.Schema,
    parts: list[Part],
    source: str | None,
    properties: dict[str, str],
    partitioned: bool,
) -> TableCommit:
    """Make this build's rows of one table (this source's partition in a table partitioned by
    source, else the whole table) exactly ``parts``, in one Iceberg snapshot: the files of the
    parts it does not hold yet are written (with the table's field IDs) and added, the files of
    parts no longer wanted removed, and a table that holds just these parts is not committed.
    Retried against a fresh table state when another writer committed first."""
    scope = source if partitioned else None
    wanted = {part.write_uuid: part for part in parts}
    for attempt in range(COMMIT_ATTEMPTS):
        table = _load_or_create(catalog, name, schema, partitioned)
        live = _live_files(table, table.io, scope)
        held = {_part_of(f.file_path) for f in live}
        stale = [f for f in live if _part_of(f.file_path) not in wanted]
        missing = [part for key, part in wanted.items() if key not in held]
        current = table.current_snapshot()
        if not stale and not missing:
            if current is None:  # a new table and this source has no rows: nothing to write
                return TableCommit(None, 0, attempt, False)
            return TableCommit(current.snapshot_id, current.sequence_number or 0, attempt, True)
        try:
            transaction = table.transaction()
            _evolve_schema(transaction, name, schema)
            written = [f for part in missing for f in _write_part(transaction, table, part)]
            # One snapshot removes and adds the files: every snapshot holds the whole table.
            with transaction.update_snapshot(snapshot_properties=properties).overwrite() as files:
                for data_file in stale:
                    files.delete_data_file(data_file)
                for data_file in written:
                    files.append_data_file(data_file)
            committed = transaction.commit_transaction()
        except Exception as error:
            if not _lost_race(error):
                raise
            _backoff(attempt)
            continue
        current = committed.current_snapshot()
        assert current is not None  # it just committed one
        return TableCommit(current.snapshot_id, current.sequence_number or 0, attempt, False)
    raise PublishError(
        f"could not commit table {name} after {COMMIT_ATTEMPTS} attempts: other writers kept "
        "changing it; run the build again"
    )


def _write_part(transaction: Any, table: IcebergTable, part: Part) -> list[DataFile]:
    """Write one part's rows as data files of the table with pyiceberg's own writer (each
    Parquet field carries its Iceberg field ID), named by the part."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files as write_data_files

    rows = part.rows()
    fields = {field.name: field for field in transaction.table_metadata.schema().fields}
    for column in rows.column_names:
        field = fields.get(column)
        if field is not None and field.required and rows.column(column).null_count:
            raise ValueError(f"table {table.name()[-1]}: required column {column} holds null")
    rows = rows.cast(
        pa.schema(
            [f.with_nullable(f.name not in fields or fields[f.name].optional) for f in rows.schema]
        )
    )
    # The name's number is new to each write: a build that lost the race to another build of
    # the same part (other snapshot_id values) never overwrites the file that build committed.
    number = itertools.count(random.getrandbits(40))
    metadata = transaction.table_metadata
    return list(
        write_data_files(metadata, rows, table.io, write_uuid=part.write_uuid, counter=number)
    )


def _append_with_retries(catalog: Catalog, name: str, rows: pa.Table) -> int:
    for attempt in range(COMMIT_ATTEMPTS):
        try:
            catalog.load_table((namespace_of(catalog), name)).append(rows)
            return attempt
        except Exception as error:
            if not _lost_race(error):
                raise
            _backoff(attempt)
    raise PublishError(f"could not append to {name} after {COMMIT_ATTEMPTS} attempts")


def _upload(io: FileIO, local: Path, target: str) -> None:
    with local.open("rb") as source, io.new_output(target).create(overwrite=True) as sink:
        shutil.copyfileobj(source, sink, 1 << 20)


def _sha256(path: Path) -> str:
    from tracehouse.files import sha256_file

    return sha256_file(path)
