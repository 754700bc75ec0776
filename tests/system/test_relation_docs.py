"""Every table and view explains itself: each column of tracehouse.duckdb carries the comment
declared for it in tracehouse/schemas.py, and `tracehouse tables NAME` prints it."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

from tests.conftest import run_cli
from tracehouse import schemas
from tracehouse.assemble.duckdb_files import create_sql_views
from tracehouse.settings import load_settings

DECLARED = {**schemas.TABLES, **schemas.VIEWS, **schemas.SETTING_TABLES}


def test_every_column_of_every_table_and_view_has_its_comment(golden_warehouse: Path) -> None:
    connection = duckdb.connect(str(golden_warehouse / "tracehouse.duckdb"), read_only=True)
    try:
        undocumented = connection.execute(
            "SELECT table_name, column_name FROM duckdb_columns() "
            "WHERE NOT internal AND (comment IS NULL OR trim(comment) = '') "
            "ORDER BY table_name, column_index"
        ).fetchall()
        assert undocumented == [], "columns without a comment (declare them in schemas.py)"
        relations = connection.execute(
            "SELECT table_name, comment FROM duckdb_tables() WHERE NOT internal "
            "UNION ALL SELECT view_name, comment FROM duckdb_views() WHERE NOT internal"
        ).fetchall()
        assert {name for name, _ in relations} == set(DECLARED) - _missing_tables(golden_warehouse)
        assert all(comment for _, comment in relations), relations
        # The stored comments are schemas.py's, column for column, in the order DESCRIBE gives.
        for name, comment in relations:
            declared = DECLARED[name]
            assert comment == declared.doc, name
            stored = connection.execute(
                "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = $name "
                "ORDER BY column_index",
                {"name": name},
            ).fetchall()
            assert stored == [(c.name, c.doc) for c in declared.columns], name
    finally:
        connection.close()


def _missing_tables(warehouse: Path) -> set[str]:
    """Tables this build wrote no file of (the published file holds only those it has)."""
    current = warehouse / "current"
    return {name for name in schemas.TABLES if not (current / f"{name}.parquet").exists()}


def test_no_column_doc_just_repeats_its_name() -> None:
    for relation in DECLARED.values():
        for column in relation.columns:
            words = column.doc.strip(" .").lower().replace("_", " ")
            assert words not in (column.name.lower(), column.name.lower().replace("_", " ")), (
                relation.name,
                column.name,
            )


def test_tables_author_rankings_prints_its_columns_with_docs() -> None:
    result = run_cli("tables", "author_rankings", "--wide")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("author_rankings (view, sql/flashinfer/author_rankings.sql): ")
    columns = schemas.VIEWS["author_rankings"].columns
    assert [line.strip() for line in lines[1::2]] == [c.name for c in columns]
    assert [line.strip() for line in lines[2::2]] == [c.doc for c in columns]
    assert "avg_speedup" in [c.name for c in columns]


def test_recreating_the_views_keeps_their_comments(golden_warehouse: Path, tmp_path: Path) -> None:
    # The Dagster view assets recreate every view in a copy of the published file
    # (create_sql_views); CREATE OR REPLACE VIEW drops a view's comments unless they are
    # written again with it.
    copy = tmp_path / "tracehouse.duckdb"
    shutil.copyfile(golden_warehouse / "tracehouse.duckdb", copy)
    copy.chmod(0o644)
    connection = duckdb.connect(str(copy))
    try:
        create_sql_views(connection, load_settings({}, warehouse=str(tmp_path / "unused")))
        undocumented = connection.execute(
            "SELECT table_name, column_name FROM duckdb_columns() "
            "WHERE NOT internal AND (comment IS NULL OR trim(comment) = '')"
        ).fetchall()
        assert undocumented == []
        (comment,) = connection.execute(
            "SELECT comment FROM duckdb_views() WHERE view_name = 'author_rankings'"
        ).fetchone() or (None,)
        assert comment == schemas.VIEWS["author_rankings"].doc
    finally:
        connection.close()
