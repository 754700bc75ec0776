"""A build after a change starts from the base generation's DuckDB files (issue 26): the reader
file keeps its sql/ views, the published file changes only the tables whose files changed.

Each build here is checked against today's full write of the same generation (the files
written afresh from its Parquet files, in a copy of the folder): every table the same rows
(EXCEPT ALL both ways) and, where a full write has an order, the same physical order; the
same views and settings tables, the same comments.
The last state is also built from scratch into another warehouse, whose tables must hold the
same rows but for the history of builds (snapshots, run_history)."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import build
from tracehouse import schemas
from tracehouse.assemble import duckdb_files, finalize
from tracehouse.assemble.duckdb_files import (
    COLUMNS_SQL,
    RELATIONS_SQL,
    DuckdbFilesWrite,
    comparable_view_sql,
    write_duckdb_file,
)
from tracehouse.demo import generate_dataset
from tracehouse.settings import Settings, load_settings
from tracehouse.warehouse import (
    DUCKDB_FILE,
    READER_DUCKDB_FILE,
    Warehouse,
    generation_tables,
    table_view_sql,
)

pytestmark = pytest.mark.integration

REVISION = "ab" * 20


class Spy:
    """What each build's write_duckdb_file did, and how often the sql/ views were created."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.writes: list[DuckdbFilesWrite] = []
        self.views_created = 0
        create_sql_views = duckdb_files.create_sql_views

        def counting_create_sql_views(connection: Any, settings: Settings) -> None:
            self.views_created += 1
            create_sql_views(connection, settings)

        def recording_write(
            generation: Path,
            settings: Settings,
            base: Path | None = None,
            views: duckdb_files.ViewsInAdvance | duckdb_files.UpdateInAdvance | None = None,
        ) -> DuckdbFilesWrite:
            written = write_duckdb_file(generation, settings, base, views)
            self.writes.append(written)
            return written

        self.updates: list[duckdb_files.UpdateInAdvance] = []
        begin_update = duckdb_files.UpdateInAdvance.begin_tables

        def recording_begin_update(update: duckdb_files.UpdateInAdvance, generation: Path) -> None:
            begin_update(update, generation)
            self.updates.append(update)

        monkeypatch.setattr(duckdb_files, "create_sql_views", counting_create_sql_views)
        monkeypatch.setattr(finalize, "write_duckdb_file", recording_write)
        monkeypatch.setattr(duckdb_files.UpdateInAdvance, "begin_tables", recording_begin_update)

    def build(self, source: Path, warehouse: Path, **settings: object) -> DuckdbFilesWrite:
        before = len(self.writes)
        self.views_created = 0
        build(source, warehouse, revision=REVISION, **settings)
        assert len(self.writes) == before + 1
        return self.writes[-1]


def _drop_last_line_of_first_trace(source: Path) -> None:
    """The change most tests here make: a run goes from the source's first trace file."""
    trace = sorted((source / "traces").rglob("*.jsonl"))[0]
    trace.write_text("".join(trace.read_text().splitlines(keepends=True)[:-1]))


def _built_then_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> tuple[Path, Path, Spy]:
    """A demo source built once through a Spy, then changed (its first trace file's last line
    dropped), so that the next build has a base to update."""
    source, warehouse = tmp_path / "demo", tmp_path / "wh"
    generate_dataset(source, seed=seed, definitions=2, workloads_per_definition=3)
    spy = Spy(monkeypatch)
    spy.build(source, warehouse)
    _drop_last_line_of_first_trace(source)
    return source, warehouse, spy


def _full_write(generation: Path, into: Path, **settings: Any) -> Path:
    """Today's full write of ``generation``'s DuckDB files, in a copy of its folder (the Parquet
    files linked, nothing of the generation written to)."""
    copy = into / generation.name
    shutil.copytree(
        generation,
        copy,
        copy_function=os.link,
        ignore=shutil.ignore_patterns("*.duckdb", "*.wal", duckdb_files.VIEWS_FINGERPRINT_FILE),
    )
    written = write_duckdb_file(copy, _settings(into, **settings))
    assert not written.reused_base
    return copy


def _settings(warehouse: Path, **settings: Any) -> Settings:
    return load_settings(environ={}, warehouse=warehouse, **settings)


def _attached(a: Path, b: Path) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect(config={"threads": 1})  # rows come in their stored order
    connection.execute(f"ATTACH '{a}' AS a (READ_ONLY)")
    connection.execute(f"ATTACH '{b}' AS b (READ_ONLY)")
    return connection


def _differing_rows(connection: duckdb.DuckDBPyConnection, relation: str) -> list[int]:
    return [
        connection.execute(  # type: ignore[index]
            f"SELECT count(*) FROM (FROM {x}.main.{relation} EXCEPT ALL FROM {y}.main.{relation})"  # noqa: S608
        ).fetchone()[0]
        for x, y in (("a", "b"), ("b", "a"))
    ]


def _catalog(connection: duckdb.DuckDBPyConnection, database: str, folder: Path) -> list[list[Any]]:
    def shown(sql: str | None) -> str | None:
        # The reader's table views name their generation's files.
        comparable = comparable_view_sql(sql)
        return comparable and comparable.replace(str(folder.resolve()), "<generation>")

    relations = [
        (name, kind, shown(sql), comment)
        for name, kind, sql, comment in connection.execute(
            RELATIONS_SQL, {"database": database}
        ).fetchall()
    ]
    columns = connection.execute(COLUMNS_SQL, {"database": database}).fetchall()
    return [sorted(relations, key=repr), sorted(columns, key=repr)]


def _assert_same_files(generation: Path, reference: Path) -> None:
    """Both DuckDB files of ``generation`` hold what those of ``reference`` (a full write) do."""
    for name in (DUCKDB_FILE, READER_DUCKDB_FILE):
        connection = _attached(generation / name, reference / name)
        try:
            found = _catalog(connection, "a", generation)
            assert found == _catalog(connection, "b", reference), name
            # The views are the same SQL over the same rows (comparing their rows too takes
            # minutes on one thread).
            for relation in [*schemas.TABLES, *schemas.SETTING_TABLES]:
                assert _differing_rows(connection, relation) == [0, 0], (name, relation)
            if name != DUCKDB_FILE:
                continue
            for table, declared in schemas.TABLES.items():
                if declared.parted:
                    continue  # rows in no order across parts
                rows_in_order = (
                    "SELECT md5(string_agg(CAST(t AS VARCHAR), chr(10) ORDER BY rowid)) "
                    "FROM {}.main.{} AS t"
                )
                digests = [
                    connection.execute(rows_in_order.format(db, table)).fetchone()
                    for db in ("a", "b")
                ]
                assert digests[0] == digests[1], table
        finally:
            connection.close()


def _failing_clean_up(*args: Any) -> None:
    """In place of the clean-up of unlinked parts, which comes after publishing."""
    raise OSError("input/output error")


def _current(warehouse: Path) -> Path:
    return Warehouse(warehouse).require_current()


def test_a_build_after_a_change_updates_the_base_files_as_a_full_write_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, warehouse = tmp_path / "demo", tmp_path / "wh"
    generate_dataset(source, seed=5, definitions=3, workloads_per_definition=3)
    traces = sorted((source / "traces").rglob("*.jsonl"))
    spy = Spy(monkeypatch)

    cold = spy.build(source, warehouse)
    assert not cold.reused_base and spy.views_created == 1

    changed = traces[0]
    lines = changed.read_text().splitlines(keepends=True)
    changed.write_text("".join(lines[:-1]))
    removed, kept = traces[1], traces[1].read_bytes()
    steps = [
        ("one file changed", lambda: None),
        ("one file removed", removed.unlink),
        ("one file added", lambda: removed.write_bytes(kept)),
    ]
    for step, (what, change) in enumerate(steps):
        change()
        written = spy.build(source, warehouse)
        assert written.reused_base, what
        assert spy.views_created == 0, what  # the sql/ views were kept, not created again
        # Begun beside the ranking (UpdateInAdvance), the rankings and history changed last.
        assert spy.updates and spy.updates[-1].begun, what
        assert set(written.changed_tables) - set(spy.updates[-1].names) <= {
            "run_rankings",
            *schemas.HISTORY_TABLES,
        }, (what, written)
        assert written.changed_tables.get("runs") == "updated", (what, written)
        assert "definitions" not in written.changed_tables, (what, written)  # same file
        generation = _current(warehouse)
        _assert_same_files(generation, _full_write(generation, tmp_path / f"full-{step}"))

    # The same final state from scratch: the same rows, but for the history of the builds.
    scratch = tmp_path / "scratch"
    build(source, scratch, revision=REVISION)
    connection = _attached(_current(warehouse) / DUCKDB_FILE, _current(scratch) / DUCKDB_FILE)
    try:
        history = {"source_snapshots", *schemas.HISTORY_TABLES}
        for table in schemas.TABLES:
            if table not in history:
                assert _differing_rows(connection, table) == [0, 0], table
    finally:
        connection.close()


def test_another_regression_threshold_writes_the_files_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, warehouse, spy = _built_then_changed(tmp_path, monkeypatch, seed=6)

    written = spy.build(source, warehouse, regression_min_history=7)
    assert not written.reused_base
    assert spy.views_created == 1
    generation = _current(warehouse)
    reference = _full_write(generation, tmp_path / "full", regression_min_history=7)
    _assert_same_files(generation, reference)
    connection = duckdb.connect(str(generation / DUCKDB_FILE), read_only=True)
    try:
        stored = connection.execute("SELECT min_history FROM regression_thresholds").fetchone()
    finally:
        connection.close()
    assert stored == (7,)


def test_a_failed_copy_beside_the_others_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The published file's runs are copied in a thread beside the build's other steps
    # (TablesInAdvance, when the files are written afresh); its failure fails the build, whose
    # generation is never published: readers keep the previous warehouse, whole.
    source, warehouse = tmp_path / "demo", tmp_path / "wh"
    generate_dataset(source, seed=7, definitions=2, workloads_per_definition=3)
    runs = build(source, warehouse, revision=REVISION).table_counts["runs"]
    before = _current(warehouse)
    _drop_last_line_of_first_trace(source)
    store_table = duckdb_files._store_table
    copied_beside: list[str] = []

    def failing_runs(
        connection: duckdb.DuckDBPyConnection, name: str, source: str | None = None
    ) -> None:
        if name == "runs":
            copied_beside.append(threading.current_thread().name)
            raise OSError("no space left on device")
        store_table(connection, name, source)

    monkeypatch.setattr(duckdb_files, "_store_table", failing_runs)
    with pytest.raises(OSError, match="no space left"):
        # Another threshold: the files are written afresh, not updated from the base's.
        build(source, warehouse, revision=REVISION, regression_min_history=7)
    assert copied_beside and copied_beside[0] != threading.main_thread().name
    assert _current(warehouse) == before
    connection = duckdb.connect(str(before / DUCKDB_FILE), read_only=True)
    try:
        assert connection.execute("SELECT count(*) FROM runs").fetchone() == (runs,)
    finally:
        connection.close()


@pytest.mark.timeout(120)  # without the interrupt, the copy beside would run for hours
def test_an_error_beside_the_copy_interrupts_it_before_the_file_is_closed() -> None:
    # The block fails while the copy beside it still runs (here a query of hours): the copy is
    # interrupted and waited for, so the caller closes an idle database and sees its own error.
    connection = duckdb.connect(config={"threads": 1})
    started = threading.Event()

    def endless(cursor: duckdb.DuckDBPyConnection, names: list[str]) -> None:
        started.set()
        cursor.execute("SELECT count(*) FROM range(10000000000000) a, range(1000) b").fetchall()

    try:
        with (
            pytest.raises(ValueError, match="the block's own"),
            duckdb_files._beside(connection, endless, []),
        ):
            assert started.wait(60)
            raise ValueError("the block's own error")
        assert connection.execute("SELECT 42").fetchone() == (42,)
    finally:
        connection.close()


def test_the_views_are_bound_over_the_types_the_files_hold(tmp_path: Path) -> None:
    """The sql/ views are created over stand-ins made from the declared schemas (so that a
    build binds them beside its assembly, before any file exists): each table's declared
    columns and types are those DuckDB reads from the generation's files, which the views
    read once the stand-ins give way."""
    source, warehouse = tmp_path / "demo", tmp_path / "wh"
    generate_dataset(source, seed=8, definitions=2, workloads_per_definition=3)
    build(source, warehouse, revision=REVISION)
    generation = _current(warehouse)
    connection = duckdb.connect()
    try:
        for name in generation_tables(generation):
            over_files = connection.execute(
                f"DESCRIBE {table_view_sql(generation, name)}"
            ).fetchall()
            connection.register("declared", schemas.TABLES[name].arrow_schema.empty_table())
            declared = connection.execute("DESCRIBE SELECT * FROM declared").fetchall()
            connection.unregister("declared")
            assert [row[:2] for row in declared] == [row[:2] for row in over_files], name
        assert generation_tables(generation) == list(schemas.TABLES)
    finally:
        connection.close()
    # The views file was handed over as the reader file: nothing of it is left beside.
    assert not (generation / duckdb_files.VIEWS_FILE).exists()


def test_views_written_in_advance_are_dropped_when_not_used(tmp_path: Path) -> None:
    """A build that fails stops the thread and removes its file before its generation's folder
    goes; a generation without every table writes its views again, for the tables it holds."""
    settings = _settings(tmp_path / "wh")
    stopped = duckdb_files.ViewsInAdvance(tmp_path, settings)
    stopped.discard()  # at once: mid-statement, or before the thread began
    assert not list(tmp_path.iterdir())

    unused = duckdb_files.ViewsInAdvance(tmp_path, settings)
    assert unused.result(list(schemas.TABLES)[:-1]) is None
    assert not list(tmp_path.iterdir())

    used = duckdb_files.ViewsInAdvance(tmp_path, settings)
    handed = used.result(list(schemas.TABLES))
    assert handed == tmp_path / duckdb_files.VIEWS_FILE and handed.is_file()
    connection = duckdb.connect(str(handed), read_only=True)
    try:
        views = {
            name
            for (name,) in connection.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal"
            ).fetchall()
        }
        tables = {
            name
            for (name,) in connection.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        }
    finally:
        connection.close()
    assert set(schemas.VIEWS) <= views and not tables & set(schemas.TABLES)


def test_a_failure_while_the_published_file_is_begun_stops_its_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The published file's tables are copied in a thread while the build ranks (TablesInAdvance):
    a step failing meanwhile stops the copy, and the failed generation leaves nothing behind
    (no thread still writing into its folder, no folder)."""
    source, warehouse = tmp_path / "demo", tmp_path / "wh"
    generate_dataset(source, seed=9, definitions=2, workloads_per_definition=3)
    begun: list[duckdb_files.TablesInAdvance] = []
    begin_tables = duckdb_files.ViewsInAdvance.begin_tables

    def recording_begin(views: duckdb_files.ViewsInAdvance, generation: Path) -> None:
        begin_tables(views, generation)
        assert views.tables is not None
        begun.append(views.tables)

    def failing_rankings(*args: Any, **kwargs: Any) -> Any:
        raise OSError("no space left on device")

    monkeypatch.setattr(duckdb_files.ViewsInAdvance, "begin_tables", recording_begin)
    monkeypatch.setattr(finalize, "write_ranking_parts", failing_rankings)
    with pytest.raises(OSError, match="no space left"):
        build(source, warehouse, revision=REVISION)
    assert begun and not begun[0].path.exists()
    assert not any(
        t.name.startswith(("published-file", "views-in-advance")) for t in threading.enumerate()
    )
    assert not (warehouse / "generations").exists() or not list(
        (warehouse / "generations").iterdir()
    )


def test_the_tables_the_published_files_thread_has_not_begun_are_copied_by_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the build reaches the end while the published file's thread is still copying (on a
    cold build of the bench corpus it is in ``runs`` then), ``finish`` copies the tables the
    thread has not begun beside it, each table is copied once, and the file holds what a full
    write holds."""
    source, warehouse = tmp_path / "demo", tmp_path / "wh"
    generate_dataset(source, seed=12, definitions=2, workloads_per_definition=3)
    late = {*schemas.HISTORY_TABLES, schemas.RUN_RANKINGS.name}  # finish's own tables
    copied: list[tuple[str, str]] = []
    runs_begun, taken_by_finish = threading.Event(), threading.Event()
    store = duckdb_files._store_table

    def held_store(connection: Any, name: str, source: str | None = None) -> None:
        in_thread = threading.current_thread().name.startswith("published-file")
        if in_thread and name == "runs":  # the thread stays in runs until finish has taken one
            runs_begun.set()
            assert taken_by_finish.wait(60)
        elif not in_thread and name not in late:
            assert runs_begun.wait(60)
        store(connection, name, source)
        copied.append((name, "thread" if in_thread else "finish"))
        if not in_thread and name not in late:
            taken_by_finish.set()

    monkeypatch.setattr(duckdb_files, "_store_table", held_store)
    build(source, warehouse, revision=REVISION)
    generation = _current(warehouse)
    by = dict(copied)
    assert sorted(name for name, _ in copied) == sorted(generation_tables(generation))
    assert by["runs"] == "thread" and by["definitions"] == "thread"
    assert by["correctness"] == by["trace_lines"] == by["run_rankings"] == "finish"
    _assert_same_files(generation, _full_write(generation, tmp_path / "full"))


@pytest.mark.parametrize("how", ["out_of_memory", "row_groups_too_big", "too_many_runs"])
def test_the_published_file_is_written_the_usual_way_when_it_cannot_be_begun_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The copy in advance has a small memory budget: where the runs parts' row groups are too
    big for it, or the runs too many to copy beside the assembly, it is not begun, and should it
    run out of memory anyway it is dropped; either way the published file is written whole at
    the end, as a full write writes it."""
    source, warehouse = tmp_path / "demo", tmp_path / "wh"
    generate_dataset(source, seed=10, definitions=2, workloads_per_definition=3)
    begun: list[duckdb_files.TablesInAdvance] = []
    init = duckdb_files.TablesInAdvance.__init__

    def recording_init(tables: duckdb_files.TablesInAdvance, *args: Any) -> None:
        init(tables, *args)
        begun.append(tables)

    monkeypatch.setattr(duckdb_files.TablesInAdvance, "__init__", recording_init)
    if how == "out_of_memory":

        def out_of_memory(tables: duckdb_files.TablesInAdvance, generation: Path) -> None:
            raise duckdb.OutOfMemoryException("failed to allocate data of size 64.0 MiB")

        monkeypatch.setattr(duckdb_files.TablesInAdvance, "_copy", out_of_memory)
    elif how == "row_groups_too_big":
        monkeypatch.setattr(duckdb_files, "ADVANCE_ROW_GROUP_BYTES", 0)
    else:
        monkeypatch.setattr(duckdb_files, "ADVANCE_MAX_RUNS", 0)
    result = build(source, warehouse, revision=REVISION)
    assert len(begun) == (1 if how == "out_of_memory" else 0)
    generation = _current(warehouse)
    _assert_same_files(generation, _full_write(generation, tmp_path / "full"))
    connection = duckdb.connect(str(generation / DUCKDB_FILE), read_only=True)
    try:
        assert connection.execute("SELECT count(*) FROM runs").fetchone() == (
            result.table_counts["runs"],
        )
    finally:
        connection.close()


def test_a_failure_after_publishing_leaves_the_published_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The published file begun in advance is the generation's once whole: a failure after the
    generation is published (here the clean-up of unlinked parts) must not remove it."""
    source, warehouse = tmp_path / "demo", tmp_path / "wh"
    generate_dataset(source, seed=11, definitions=2, workloads_per_definition=3)

    monkeypatch.setattr(finalize, "remove_unlinked_parts", _failing_clean_up)
    with pytest.raises(OSError, match="input/output error"):
        build(source, warehouse, revision=REVISION)
    generation = _current(warehouse)  # published before the clean-up failed
    connection = duckdb.connect(str(generation / DUCKDB_FILE), read_only=True)
    try:
        (runs,) = connection.execute("SELECT count(*) FROM runs").fetchone() or (0,)
    finally:
        connection.close()
    assert runs > 0


def test_a_build_after_a_change_writes_the_files_whole_when_the_update_in_advance_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base's published file is updated in a thread while the build ranks (UpdateInAdvance):
    should that update fail (out of its small memory budget, say), the files are written whole
    at the end, as a full write writes them, and no thread is left."""
    source, warehouse, spy = _built_then_changed(tmp_path, monkeypatch, seed=11)

    def out_of_memory(update: duckdb_files.UpdateInAdvance, *args: Any) -> None:
        raise duckdb.OutOfMemoryException("failed to allocate data of size 64.0 MiB")

    monkeypatch.setattr(duckdb_files.UpdateInAdvance, "_update", out_of_memory)
    written = spy.build(source, warehouse)
    assert spy.updates and spy.updates[-1].begun
    assert not written.reused_base and spy.views_created == 1
    generation = _current(warehouse)
    _assert_same_files(generation, _full_write(generation, tmp_path / "full"))
    assert not any(t.name.startswith("published-file") for t in threading.enumerate())


def test_a_failure_while_the_base_update_is_begun_stops_it_and_keeps_the_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step failing while the base's published file is being updated in the thread stops the
    update; the failed generation leaves nothing behind and the base stays current, whole."""
    source, warehouse, spy = _built_then_changed(tmp_path, monkeypatch, seed=12)
    base = _current(warehouse)

    def failing_rankings(*args: Any, **kwargs: Any) -> Any:
        raise OSError("no space left on device")

    monkeypatch.setattr(finalize, "write_ranking_parts", failing_rankings)
    with pytest.raises(OSError, match="no space left"):
        build(source, warehouse, revision=REVISION)
    assert spy.updates and spy.updates[-1].begun
    assert not any(t.name.startswith("published-file") for t in threading.enumerate())
    assert _current(warehouse) == base
    assert sorted((warehouse / "generations").iterdir()) == [base]
    connection = duckdb.connect(str(base / DUCKDB_FILE), read_only=True)
    try:
        assert connection.execute("SELECT count(*) FROM runs").fetchone()[0] > 0  # type: ignore[index]
    finally:
        connection.close()


def test_a_base_file_held_open_and_written_is_not_begun_and_the_build_writes_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client holding the base's published file open read-write, having written to it, leaves
    a write-ahead log beside it: the file alone is not whole, so no update is begun from it in
    advance, and the build writes the new files whole, as a full write does."""
    source, warehouse, spy = _built_then_changed(tmp_path, monkeypatch, seed=13)
    base = _current(warehouse)
    published = base / DUCKDB_FILE
    published.chmod(0o644)  # sealed read-only: a client with the rights may still open it so
    holder = duckdb.connect(str(published))
    try:
        holder.execute("CREATE TABLE main.notes AS SELECT 1 AS note")
        assert Path(f"{published}.wal").exists()
        written = spy.build(source, warehouse)
    finally:
        holder.close()
    assert spy.updates and not spy.updates[-1].begun
    assert not written.reused_base
    generation = _current(warehouse)
    assert generation != base
    _assert_same_files(generation, _full_write(generation, tmp_path / "full"))
    assert not any(t.name.startswith("published-file") for t in threading.enumerate())


def test_a_base_beyond_the_advance_bounds_is_updated_from_the_copy_begun_with_finalize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy of the base's published file is begun (and written to disk) as finalize
    starts. Where the update is not begun beside the ranking (a generation beyond its bounds),
    the end of the build updates that copy as it would a copy of its own; and once the copy is
    the build's, a failure after publishing (here the clean-up of unlinked parts) leaves the
    published file whole."""
    source, warehouse, spy = _built_then_changed(tmp_path, monkeypatch, seed=14)
    monkeypatch.setattr(duckdb_files, "ADVANCE_MAX_RUNS", 0)
    copies: list[tuple[Path, Path]] = []
    copy_to_disk = duckdb_files._copy_to_disk

    def recording_copy(source_file: Path, target: Path) -> None:
        copy_to_disk(source_file, target)
        copies.append((source_file, target))

    monkeypatch.setattr(duckdb_files, "_copy_to_disk", recording_copy)
    base = _current(warehouse)
    written = spy.build(source, warehouse)
    assert spy.updates and not spy.updates[-1].begun
    assert written.reused_base and written.changed_tables.get("runs") == "updated"
    generation = _current(warehouse)
    assert copies == [(base / DUCKDB_FILE, generation / DUCKDB_FILE)]
    _assert_same_files(generation, _full_write(generation, tmp_path / "full"))
    assert not any(t.name.startswith("published-file") for t in threading.enumerate())

    _drop_last_line_of_first_trace(source)
    monkeypatch.setattr(finalize, "remove_unlinked_parts", _failing_clean_up)
    with pytest.raises(OSError, match="input/output error"):
        build(source, warehouse, revision=REVISION)
    published = _current(warehouse)
    assert published != generation
    connection = duckdb.connect(str(published / DUCKDB_FILE), read_only=True)
    try:
        (runs,) = connection.execute("SELECT count(*) FROM runs").fetchone() or (0,)
    finally:
        connection.close()
    assert runs > 0
