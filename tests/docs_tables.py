"""docs/tables.md, generated from ``tracehouse/schemas.py`` (which gathers the one declaration of every
table and view, ``tracehouse/tables/``), as ``tracehouse tables`` prints it. Regenerate after changing a schema::

    .venv/bin/python -m tests.docs_tables > docs/tables.md

``tests/test_readme.py`` fails while the committed page differs from what this writes.
"""

from __future__ import annotations

from pathlib import Path

from tracehouse.schemas import SETTING_TABLES, TABLES, VIEWS, Table, View
from tracehouse.sql_files import sql_dir

INTRO = """\
# Tables and views

Generated from `tracehouse/schemas.py` by `python -m tests.docs_tables`; do not edit by hand.
`tracehouse tables` prints the same, column by column.

Every table is in the current generation (`<warehouse>/current/<table>.parquet`): one Parquet
file for the tables that span the warehouse, a folder with one subfolder per source for the
others (their views add `source` and `snapshot_id` from the generation's `sources.json`). Units
are in the names (`latency_ms`, `latency_ns`). The views are stored in `tracehouse.duckdb`, one
SELECT per file under `sql/`. What the figures mean is in [metrics.md](metrics.md); how a run's
identities are derived, in [identities.md](identities.md).
"""


def cell(text: str) -> str:
    """A Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def sql_file(name: str) -> str:
    """``sql/<...>/<name>.sql`` as it is in the repository, wherever its folder."""
    root = sql_dir()
    found = sorted(root.glob(f"{name}.sql")) + sorted(root.glob(f"*/{name}.sql"))
    return "sql/" + found[0].relative_to(root).as_posix() if found else f"sql/{name}.sql"


def table_traits(table: Table) -> list[str]:
    """What a table is, in words: the fields of its declaration after its columns."""
    said = [
        "stored per source (one folder of files each; the view adds `source` and `snapshot_id`)"
        if table.per_source
        else "spans the warehouse"
    ]
    if table.parted == "file_group":
        said.append("parted: one part per group of a source's files")
    elif table.parted == "ranking_bucket":
        said.append("parted: one part per ranking bucket")
    if table.history:
        said.append("keeps every build's files")
    if table.staged:
        said.append("staged by the ingest workers")
    if table.computed:
        said.append("computed over every source (an Iceberg reader computes it too)")
    if table.iceberg_mart:
        said.append("an Iceberg mart")
    if table.source_independent:
        said.append("from no source (kept as it is when a source is removed)")
    if table.order:
        said.append(f"rows in the order `{table.order}`")
    if table.zstd_columns:
        said.append("zstd: " + ", ".join(f"`{c}`" for c in table.zstd_columns))
    return said


def view_traits(view: View) -> list[str]:
    said = [f"key: {', '.join(f'`{k}`' for k in view.key)}"] if view.key else []
    if view.iceberg_mart:
        said.append("an Iceberg mart")
    if view.product:
        said.append("a product (Dagster says when it is overdue)")
    return said


def page() -> str:
    out = [INTRO, "\n## Tables\n\n| table | what it holds |\n|---|---|\n"]
    out += [f"| `{t.name}` | {cell(t.doc)} |\n" for t in TABLES.values()]
    out.append("\n## Views\n\n| view | what it returns |\n|---|---|\n")
    out += [f"| `{v.name}` | {cell(v.doc)} |\n" for v in VIEWS.values()]
    out.append("\n## Settings tables\n\n| table | what it holds |\n|---|---|\n")
    out += [f"| `{t.name}` | {cell(t.doc)} |\n" for t in SETTING_TABLES.values()]
    for table in TABLES.values():
        out.append(f"\n### `{table.name}`\n\n{cell(table.doc)}\n\n")
        if table.key:
            out.append(f"Key: {', '.join(f'`{k}`' for k in table.key)}.\n\n")
        out.append(f"What it is: {'; '.join(table_traits(table))}.\n\n")
        out.append("| column | type | null | meaning |\n|---|---|---|---|\n")
        out += [
            f"| `{c.name}` | `{c.type}` | {'yes' if c.nullable else 'no'} | {cell(c.doc)} |\n"
            for c in table.columns
        ]
    for view in VIEWS.values():
        out.append(f"\n### `{view.name}` (view, `{sql_file(view.name)}`)\n\n{cell(view.doc)}\n\n")
        if view_traits(view):
            said = "; ".join(view_traits(view))
            out.append(f"{said[0].upper()}{said[1:]}.\n\n")
        out.append("| column | meaning |\n|---|---|\n")
        out += [f"| `{c.name}` | {cell(c.doc)} |\n" for c in view.columns]
    for table in SETTING_TABLES.values():
        out.append(
            f"\n### `{table.name}` (table, `{sql_file(table.name)}`)\n\n{cell(table.doc)}\n\n"
        )
        out.append("| column | meaning |\n|---|---|\n")
        out += [f"| `{c.name}` | {cell(c.doc)} |\n" for c in table.columns]
    return "".join(out)


def committed() -> str:
    return (Path(__file__).resolve().parents[1] / "docs" / "tables.md").read_text()


if __name__ == "__main__":
    print(page(), end="")
