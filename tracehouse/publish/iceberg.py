"""The published form of a warehouse: one Apache Iceberg table per tracehouse table, in a
catalog, on object storage (or in ``<folder>/iceberg`` beside a local warehouse).

Writing. A build works in a local folder exactly as a folder warehouse does (staging parts,
generations, invariants, publish guards). Once its generation is complete, every table is
committed to Iceberg, one commit per table:

- the build's rows of the table are cut into parts (``Part``): one per file the generation
  stores for the build's source in a per-source table (a group of trace files, a history
  delta), with the ``source`` and ``snapshot_id`` columns its view adds; ``source_snapshots``'
  rows of that source; the generation's own file for the rest. Each part is named by a digest
  of its content, and its data files by that name.
- one snapshot (an ``overwrite`` of files, in one transaction with any schema, doc or sort
  order change) removes the files of parts the table no longer wants and adds those of the
  parts it does not hold yet, written by pyiceberg's own writer (field IDs in every file); a
  table that holds exactly its parts is not committed. Tables with a ``source`` column are
  partitioned by it and a build touches only its own source's partition, so builds of
  different sources touch disjoint partitions; tables without one are replaced whole. Every
  snapshot therefore holds the whole table (no empty snapshot between a delete and an append).
- A commit that loses the race against another writer (``CommitFailedException``) reloads the
  table and tries again, so two builds from two machines both land.
- Tables computed across every source (``run_rankings``) are not published as part of a
  publication: a build sees only the sources of its own staging folder, so readers compute them
  over the union. After its publication row, a build commits them and the main marts
  (``MARTS``) for other engines, read from the latest publication as a reader reads it.

Every Iceberg snapshot carries the tracehouse snapshot id, source and revision in its summary
properties. After the last table, one row is appended to ``tracehouse_publications``: the
tracehouse snapshot, its revision, and the Iceberg snapshot each table got. That row is the
commit point of the whole build: readers only ever look at snapshots a publication names, so a
build killed half way through its tables changes nothing they see.

Reading. A reader picks the publication (the latest, or the latest of a revision or snapshot id
for time travel); for each table it takes, among the snapshots that publication and the earlier
ones name, the one with the highest sequence number (snapshots of a table form one line, so that
one holds every earlier published commit, whichever source made it). The data files of those
snapshots are downloaded as they are into a local replica folder laid out as a generation of
several sources (``sources.json`` from each source's latest ``source_snapshots`` row, each
source's files in its own folder; ``protocols`` and ``baseline_map`` written from their rows as
a build writes them, the bytes an export copies), ``run_rankings`` is ranked there over every source with the
build's own SQL, and the usual DuckDB views are created over it; so every read command works
unchanged, and an unchanged warehouse is not downloaded twice.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import os
import random
import shutil
import time
import uuid
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracehouse import interrupts, schemas
from tracehouse.files import replace_atomically, symlink_atomically
from tracehouse.publish.generations import record_generation_files, remove_generation_unless_open
from tracehouse.schemas import (
    HISTORY_TABLES,
    ICEBERG_MARTS,
    PARTED_TABLES,
    PER_SOURCE_TABLES,
    PUBLISHED_TABLES,
    VIEW_ADDED_COLUMNS,
)
from tracehouse.settings import Settings, SettingsError
from tracehouse.storage import (
    REST_CATALOG_SCHEMES,
    file_io_properties,
    redact,
    uri_scheme,
)
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
    table_files,
    table_view_sql,
    write_generation_sources,
    write_sorted_table,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table as IcebergTable

CATALOG_NAME = "tracehouse"  # pyiceberg's name for the catalog (SQL catalogs key rows by it)
PUBLICATIONS = "tracehouse_publications"
SOURCE_COLUMN = "source"  # tables with this column hold several sources (issue "sources")
# Tables computed across every source (COMPUTED_TABLES) are never published: each reader
# computes them over the union of the sources the catalog holds (a build sees only the sources
# of its own staging). The others are PUBLISHED_TABLES.
# The product an Iceberg user queries, computed after each publication over every source of the
# latest one (as a reader computes them) and each replaced whole: ranks and the main marts.
# tracehouse's own readers never read these back (they rank and run the views themselves).
MARTS = ICEBERG_MARTS
# The order of a mart's rows (and its Iceberg sort order) where schemas.TABLE_ORDER has none:
# its key.
MART_ORDER = {name: ", ".join(schemas.VIEWS[name].key) for name in MARTS if name in schemas.VIEWS}
# The columns of a mart that is a view which never hold null (View.never_null).
MART_REQUIRED = {name: schemas.VIEWS[name].never_null for name in MARTS if name in schemas.VIEWS}
PROPERTY_MARTS_OF = "tracehouse.marts-of-publication"  # the publication the marts were read at
# Per-source tables a build stores as several files per source: group parts (and the rejects
# found before the ingest), history deltas (beside an empty first file).
MULTI_FILE_TABLES = (frozenset(PARTED_TABLES) & frozenset(PER_SOURCE_TABLES)) | frozenset(
    HISTORY_TABLES
)
# Summary properties every Iceberg snapshot of a build carries.
PROPERTY_SNAPSHOT = "tracehouse.snapshot-id"
PROPERTY_SOURCE = "tracehouse.source"
PROPERTY_REVISION = "tracehouse.revision"
PROPERTY_PUBLICATION = "tracehouse.publication-id"
COMMIT_ATTEMPTS = 20  # optimistic concurrency: tries per table before giving up
# pyiceberg would retry a conflicting commit itself by re-basing the same delete and files on
# the new state; ours re-plans the whole replacement from a fresh table instead (so a build
# racing another build of the *same* source still removes that build's rows), so its own
# retries are off.
TABLE_PROPERTIES = {"commit.retry.num-retries": "0"}
REPLICA_FOLDER = "replica"
KEEP_REPLICAS = 2

PUBLICATIONS_SCHEMA = pa.schema(
    [
        pa.field("publication_id", pa.string(), nullable=False),
        pa.field("published_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("snapshot_id", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("revision", pa.string()),
        pa.field("generation", pa.string()),
        # {table: [iceberg snapshot id, sequence number]} of this build's own commits
        pa.field("table_snapshots", pa.string(), nullable=False),
    ]
)


class PublishError(ConnectionError):
    """Committing to the catalog failed for good (after every retry): a one-line error."""


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


def catalog_errors() -> tuple[type[BaseException], ...]:
    """Errors a catalog or object store answers with that are about the user's setup (an
    unreachable or refusing catalog database, a REST catalog's refusal): one line, exit 2."""
    from pyiceberg.exceptions import RESTError
    from sqlalchemy.exc import DBAPIError

    return (RESTError, DBAPIError)


class WrongWarehouse(LookupError):
    """The catalog's tables live somewhere else than the warehouse named."""


def _check_location(table: IcebergTable, settings: Settings) -> None:
    """A namespace of the catalog serves one warehouse: its tables must live below the
    warehouse given (another warehouse takes another --namespace)."""
    expected = location(settings).rstrip("/") + "/"
    if not table.location().startswith(expected):
        where = table.location().rsplit(f"/{settings.namespace}/", 1)[0]
        raise WrongWarehouse(
            f"--catalog {redact(settings.catalog or '')} holds the warehouse at {where} in "
            f"namespace {settings.namespace!r}, not {expected.rstrip('/')}: give that "
            "--warehouse, or another --namespace for this one"
        )


def location(settings: Settings) -> str:
    """Where the Iceberg tables' files live."""
    if settings.object_store is not None:
        return settings.object_store.rstrip("/")
    return (settings.warehouse.resolve() / "iceberg").as_uri()


# The namespace each catalog opened for a warehouse holds its tables in (settings.namespace):
# one catalog serves several warehouses, each in a namespace of its own.
_NAMESPACES: weakref.WeakKeyDictionary[Catalog, str] = weakref.WeakKeyDictionary()


def open_catalog(settings: Settings) -> Catalog:
    """The catalog of ``settings.catalog`` (sqlite://, postgresql://, or an Iceberg REST URI),
    for the tables of the warehouse's namespace."""
    catalog = _open_catalog(settings)
    _NAMESPACES[catalog] = settings.namespace
    return catalog


def namespace_of(catalog: Catalog) -> str:
    return _NAMESPACES.get(catalog, Settings.namespace)


def _open_catalog(settings: Settings) -> Catalog:
    """The catalog of ``settings.catalog`` (sqlite://, postgresql://, or an Iceberg REST URI)."""
    uri = settings.catalog
    if uri is None:
        raise SettingsError("no catalog: pass --catalog or set TRACEHOUSE_CATALOG")
    properties = {"warehouse": location(settings)}
    if settings.object_store is not None:
        properties.update(file_io_properties())
    scheme = uri_scheme(uri)
    if scheme in REST_CATALOG_SCHEMES:
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(CATALOG_NAME, uri=uri, **properties)
    from pyiceberg.catalog.sql import SqlCatalog

    if scheme == "sqlite":
        folder = Path(uri.removeprefix("sqlite:///")).parent
        if not folder.is_dir():
            raise SettingsError(f"--catalog {uri}: folder {folder} does not exist")
    elif scheme == "postgresql":
        uri = "postgresql+psycopg2://" + uri.split("://", 1)[1]
    from sqlalchemy.exc import OperationalError

    for attempt in range(COMMIT_ATTEMPTS):
        try:
            return SqlCatalog(CATALOG_NAME, uri=uri, **properties)
        except OperationalError as error:
            # A new catalog database: the catalog creates its own tables, and a second writer
            # doing the same at that moment finds them there (or the database locked).
            if "already exists" not in str(error) and "database is locked" not in str(error):
                raise
            _backoff(attempt)
    return SqlCatalog(CATALOG_NAME, uri=uri, **properties)


# ---------------------------------------------------------------------------------------------
# writing


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


def declared_schema(table: str, found: pa.Schema | None = None) -> pa.Schema:
    """The Arrow schema an Iceberg table is created with and kept at: ``schemas``' columns
    (for a table it declares) or those ``found`` in the rows (a mart), each required where
    tracehouse guarantees a value (``required_columns``)."""
    declared = schemas.TABLES.get(table)
    fields = list(declared.arrow_schema if declared is not None else found or pa.schema([]))
    required = set(required_columns(table))
    return pa.schema([f.with_nullable(f.name not in required) for f in fields])


def required_columns(table: str) -> tuple[str, ...]:
    """The columns of ``table`` that never hold null: as ``schemas`` declares them, or, for a
    mart that is a view, its key and the columns it passes through from a required column."""
    declared = schemas.TABLES.get(table)
    if declared is not None:
        return tuple(c.name for c in declared.columns if not c.nullable)
    return MART_REQUIRED.get(table, ())


def table_order(table: str) -> str | None:
    """The order of every data file of ``table`` (``schemas.TABLE_ORDER``, or a mart's key)."""
    return schemas.TABLE_ORDER.get(table) or MART_ORDER.get(table)


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


def _evolve_schema(transaction: Any, name: str, schema: pa.Schema) -> None:
    """Bring the table's schema, docs and sort order to what this build declares (each only
    where it differs: an unchanged table gets no schema change)."""
    with transaction.update_schema() as update:
        update.union_by_name(schema)  # a column added by a newer importer
    _require_columns(transaction, schema)
    _document_columns(transaction, name)
    if transaction.table_metadata.sort_order().is_unsorted:  # a table made before
        _declare_sort_order(transaction, name)


def _require_columns(transaction: Any, schema: pa.Schema) -> None:
    """Declare required the columns ``schema`` requires that a table made by an older
    publisher holds as optional (its rows hold no null there: the build's checks say so)."""
    current = transaction.table_metadata.schema()
    names = {field.name: field for field in current.fields}
    loose = [
        f.name for f in schema if not f.nullable and f.name in names and names[f.name].optional
    ]
    if not loose:
        return
    with transaction.update_schema(allow_incompatible_changes=True) as update:
        for column in loose:
            update.update_column(column, required=True)


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


def column_docs(table: str) -> dict[str, str]:
    """Each column's meaning, as ``schemas`` declares it (what `tracehouse tables` prints)."""
    declared = schemas.TABLES.get(table) or schemas.VIEWS.get(table)
    return {} if declared is None else {c.name: c.doc for c in declared.columns}


def sort_terms(table: str) -> list[tuple[str, bool]]:
    """(column, nulls first) of the order every file of ``table`` is written in
    (``schemas.TABLE_ORDER``, ascending; DuckDB puts nulls last unless told otherwise)."""
    order = table_order(table)
    if order is None:
        return []
    terms = [term.strip().split() for term in order.split(",")]
    return [(words[0], words[1:] == ["NULLS", "FIRST"]) for words in terms]


def _declare_sort_order(transaction: Any, table: str) -> None:
    """The table's sort order: how each of its data files is sorted, for engines that plan
    merges and range filters by it."""
    from pyiceberg.table.sorting import NullOrder
    from pyiceberg.transforms import IdentityTransform

    terms = sort_terms(table)
    if not terms:
        return
    with transaction.update_sort_order() as order:
        for column, nulls_first in terms:
            order.asc(
                column,
                IdentityTransform(),
                NullOrder.NULLS_FIRST if nulls_first else NullOrder.NULLS_LAST,
            )


def _document_columns(transaction: Any, table: str) -> None:
    """Give every column of the table its doc from ``schemas`` (in the commit's transaction,
    and only where one differs: an unchanged table gets no schema change), so an Iceberg user
    reading the catalog sees each field's meaning."""
    docs = column_docs(table)
    current = transaction.table_metadata.schema()
    stale = [
        (field.name, docs[field.name])
        for field in current.fields
        if field.name in docs and field.doc != docs[field.name]
    ]
    if not stale:
        return
    with transaction.update_schema() as update:
        for column, doc in stale:
            update.update_column(column, doc=doc)


def _lost_race(error: Exception) -> bool:
    """Another writer committed first (the catalog refused our base), or held a SQLite
    catalog's write lock longer than its busy timeout: try again from a fresh state."""
    from pyiceberg.exceptions import CommitFailedException
    from sqlalchemy.exc import OperationalError

    if isinstance(error, CommitFailedException):
        return True
    return isinstance(error, OperationalError) and "database is locked" in str(error)


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


def _backoff(attempt: int) -> None:
    time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.5))


def _ensure_namespace(catalog: Catalog) -> None:
    from pyiceberg.exceptions import NamespaceAlreadyExistsError
    from sqlalchemy.exc import IntegrityError

    # Two writers creating it at once: the loser's insert breaks the SQL catalog's unique key.
    with contextlib.suppress(NamespaceAlreadyExistsError, IntegrityError):
        catalog.create_namespace_if_not_exists(namespace_of(catalog))


def _load_or_create(
    catalog: Catalog, name: str, schema: pa.Schema, partition_by_source: bool
) -> IcebergTable:
    """The table, created on first use (another writer creating it at the same time is fine)."""
    from pyiceberg.exceptions import (
        CommitFailedException,
        NoSuchTableError,
        TableAlreadyExistsError,
    )

    identifier = (namespace_of(catalog), name)
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        pass
    # Each source its own partition (replacing one source's rows drops whole files), set in
    # the transaction that creates the table: no writer ever sees it unpartitioned.
    creation = catalog.create_table_transaction(
        identifier, schema=schema, properties=TABLE_PROPERTIES
    )
    if partition_by_source:
        with creation.update_spec() as spec:
            spec.add_identity(SOURCE_COLUMN)
    _declare_sort_order(creation, name)
    _document_columns(creation, name)
    # Another writer created it first: the catalog says so either way, by the kind of catalog.
    with contextlib.suppress(TableAlreadyExistsError, CommitFailedException):
        creation.commit_transaction()
    return catalog.load_table(identifier)


def _upload(io: FileIO, local: Path, target: str) -> None:
    with local.open("rb") as source, io.new_output(target).create(overwrite=True) as sink:
        shutil.copyfileobj(source, sink, 1 << 20)


def _download(io: FileIO, source: str, local: Path) -> None:
    with io.new_input(source).open() as stream, local.open("wb") as sink:
        shutil.copyfileobj(stream, sink, 1 << 20)  # type: ignore[arg-type]


def _sha256(path: Path) -> str:
    from tracehouse.files import sha256_file

    return sha256_file(path)


# ---------------------------------------------------------------------------------------------
# reading


def _publication_rows(publications: IcebergTable) -> list[dict[str, Any]]:
    rows = publications.scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: (r["published_at"], r["publication_id"]))


def publications(settings: Settings, catalog: Catalog | None = None) -> list[dict[str, Any]]:
    """Every publication of the warehouse, oldest first."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    catalog = catalog or open_catalog(settings)
    try:
        table = catalog.load_table((namespace_of(catalog), PUBLICATIONS))
    except (NoSuchTableError, NoSuchNamespaceError):
        return []
    _check_location(table, settings)
    return _publication_rows(table)


def publication_lines(settings: Settings) -> list[dict[str, Any]]:
    """`tracehouse generations` of an object-store warehouse: its publications, newest last."""
    rows = publications(settings)
    if not rows:
        raise LookupError(f"no publication in catalog {redact(settings.catalog or '')}")
    return [
        {
            "publication": row["publication_id"],
            "current": "*" if i == len(rows) - 1 else "",
            "published_at": row["published_at"].strftime("%Y-%m-%d %H:%M:%S"),
            "source": row["source"],
            "revision": row["revision"],
            "snapshot_id": row["snapshot_id"],
        }
        for i, row in enumerate(rows)
    ]


def chosen_snapshots(
    rows: list[dict[str, Any]], as_of: str | None
) -> tuple[dict[str, Any], dict[str, int]]:
    """The publication a reader shows and, per table, the Iceberg snapshot to read: the
    newest (by sequence number) that this publication or an earlier one committed."""
    if not rows:
        raise LookupError("no publication")
    if as_of is None:
        cutoff = len(rows) - 1
    else:
        matches = [i for i, r in enumerate(rows) if as_of in (r["revision"], r["snapshot_id"])]
        if not matches:
            known = ", ".join(sorted({r["revision"] or r["snapshot_id"] for r in rows}))
            raise LookupError(
                f"--as-of {as_of}: no publication of that revision or snapshot id (published: {known})"
            )
        cutoff = matches[-1]
    best: dict[str, tuple[int, int]] = {}
    for row in rows[: cutoff + 1]:
        for table, (snapshot_id, sequence) in json.loads(row["table_snapshots"]).items():
            if table not in best or sequence > best[table][1]:
                best[table] = (snapshot_id, sequence)
    return rows[cutoff], {table: snapshot for table, (snapshot, _) in best.items()}


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
    from tracehouse.assemble.finalize import write_duckdb_file as write_duckdb_file

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
    from tracehouse.assemble.finalize import rows_to_arrow as rows_to_arrow

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
    from tracehouse.assemble.finalize import stored_schema as stored_schema

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

    from tracehouse.assemble.finalize import (
        place_parts as place_parts,
    )
    from tracehouse.assemble.finalize import (
        write_empty_parts as write_empty_parts,
    )
    from tracehouse.assemble.finalize import (
        write_ranking_parts as write_ranking_parts,
    )
    from tracehouse.warehouse import create_table_views

    connection = duckdb.connect(config={"threads": 1, "preserve_insertion_order": False})
    try:
        create_table_views(connection, generation)
        parts = write_ranking_parts(connection, replica, None)
    finally:
        connection.close()
    place_parts(generation / "run_rankings.parquet", parts, None)
    write_empty_parts(generation)


def _download_table(catalog: Catalog, table: str, snapshot_id: int | None, folder: Path) -> None:
    """A table the build holds in one file (``protocols``, ``baseline_map``), written from the
    snapshot's rows (none: a table never committed, empty) as the build writes it (its stored schema, sorted and written by DuckDB):
    the build's very bytes for the same rows, which an export copies as they are, whatever
    writer made the data files."""
    import duckdb

    from tracehouse.assemble.finalize import stored_schema as stored_schema

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
