"""`tracehouse report` as a person sees it: the pages of the demo and of the golden corpus load in
headless Debian Chromium with no console error and no request beyond the report's own files,
the screenshots are not blank, and every number in the tables equals the warehouse's SQL."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pipelines.report import definition_page_name, format_value
from pipelines.warehouse import Warehouse, connect_read_only
from tests.browser import Chromium, chromium_path, png_pixels
from tests.conftest import build, run_cli

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        chromium_path() is None,
        reason="chromium not installed (Debian: apt-get install chromium; .ci/run installs it)",
    ),
]

TABLES_JS = """
Object.fromEntries(Array.from(document.querySelectorAll('table[id]')).map(table => [
  table.id,
  Array.from(table.querySelectorAll('tbody tr')).filter(tr => !tr.querySelector('td.empty'))
    .map(tr => Array.from(tr.querySelectorAll('td')).map(td => ({
      column: td.dataset.column, value: td.dataset.value, text: td.textContent})))
]))
"""
# A page is ready once every chart div holds Plotly's rendered SVG.
CHARTS_READY_JS = (
    "Array.from(document.querySelectorAll('.plotly-graph-div'))"
    ".every(div => div.querySelector('svg.main-svg'))"
)


@pytest.fixture(scope="module")
def demo_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipelines.demo import generate_dataset

    root = tmp_path_factory.mktemp("report-demo")
    generate_dataset(root / "demo", seed=7)
    build(root / "demo", root / "warehouse")
    return root / "warehouse"


def sql_rows(warehouse: Path, sql: str, **parameters: Any) -> list[dict[str, Any]]:
    connection = connect_read_only(Warehouse(warehouse))
    try:
        relation = connection.sql(sql, params=parameters)
        return [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]
    finally:
        connection.close()


def exact(value: Any) -> str:
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def assert_table_equals_sql(shown: list[list[dict[str, str]]], rows: list[dict[str, Any]]) -> None:
    """Each shown cell holds the SQL value exactly (data-value) and shows it formatted."""
    assert len(shown) == len(rows), (len(shown), len(rows))
    for cells, row in zip(shown, rows, strict=True):
        for cell in cells:
            value = row[cell["column"]]
            assert cell["value"] == exact(value), (cell, value)
            assert cell["text"] == format_value(value), (cell, value)


def not_blank(png: Path) -> None:
    width, height, pixels = png_pixels(png)
    background = max(set(pixels), key=pixels.count)
    drawn = sum(1 for p in pixels if p != background) / len(pixels)
    assert width > 100 and height > 100, (width, height)
    assert len(set(pixels)) > 50 and drawn > 0.05, (png, len(set(pixels)), drawn)


def current_pages_folder(out: Path) -> Path:
    """The folder of definition pages the report's index links to."""
    folders = set(re.findall(r"href='(pages-[0-9a-f]+)/", (out / "index.html").read_text()))
    assert len(folders) == 1, folders
    return out / folders.pop()


def render(warehouse: Path, out: Path) -> list[Path]:
    result = run_cli("report", "--out", str(out), "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("wrote "), result.stdout
    pages = [out / "index.html", *sorted(current_pages_folder(out).glob("*.html"))]
    for page in pages:  # every script and style is the report's own: no URL to fetch
        text = page.read_text()
        assert "src='http" not in text and 'src="http' not in text and "href='http" not in text
    return pages


def check_pages(warehouse: Path, out: Path, pages: list[Path], shots: Path) -> dict[str, Any]:
    own_files = f"file://{out.resolve()}/"
    tables: dict[str, Any] = {}
    with Chromium(shots / "profile") as browser:
        for number, page in enumerate(pages):
            visit = browser.visit(page.resolve().as_uri(), ready=CHARTS_READY_JS)
            assert visit.errors == [], (page.name, visit.errors)
            foreign = [u for u in visit.requests if not u.startswith((own_files, "data:"))]
            assert foreign == [], (page.name, foreign)
            assert any(u.endswith("/plotly.min.js") for u in visit.requests), visit.requests
            tables[page.name] = browser.evaluate(TABLES_JS)
            if number < 2:  # the overview and one definition page
                full = browser.screenshot(shots / f"{out.name}-{number}.png")
                assert full.stat().st_size > 10_000
                small = browser.screenshot(shots / f"{out.name}-{number}-small.png", scale=0.2)
                not_blank(small)
    return tables


def check_numbers(warehouse: Path, tables: dict[str, Any]) -> None:
    overview = tables["index.html"]
    counts = {cells[0]["value"]: int(cells[1]["value"]) for cells in overview["table-counts"]}
    for table, shown in counts.items():
        assert shown == sql_rows(warehouse, f'SELECT count(*) AS n FROM "{table}"')[0]["n"]  # noqa: S608
    assert_table_equals_sql(
        overview["fib-author-ranking"],
        sql_rows(
            warehouse,
            "SELECT * FROM author_rankings WHERE hardware = 'all' AND scope_kind = 'all' "
            "ORDER BY rank NULLS FIRST",
        ),
    )
    assert_table_equals_sql(
        overview["top-per-definition"],
        sql_rows(
            warehouse,
            "SELECT * FROM leaderboard WHERE leaderboard_rank = 1 ORDER BY definition, hardware",
        ),
    )
    board = sql_rows(
        warehouse, "SELECT * FROM leaderboard ORDER BY definition, hardware, leaderboard_rank"
    )
    checked = 0
    for name in sorted({r["definition"] for r in board}):
        page = tables.get(definition_page_name(name))
        if page is None:
            continue
        rows = [r for r in board if r["definition"] == name]
        for index, gpu in enumerate(sorted({r["hardware"] for r in rows})):
            assert_table_equals_sql(
                page[f"leaderboard-{index}"], [r for r in rows if r["hardware"] == gpu]
            )
            checked += 1
    assert checked > 0


def test_demo_report_in_chromium(demo_warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "demo-report"
    pages = render(demo_warehouse, out)
    assert (
        len(pages) == 1 + sql_rows(demo_warehouse, "SELECT count(*) AS n FROM definitions")[0]["n"]
    )
    tables = check_pages(demo_warehouse, out, pages, tmp_path)
    check_numbers(demo_warehouse, tables)


def test_golden_corpus_report_in_chromium(golden_warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "golden-report"
    pages = render(golden_warehouse, out)
    busiest = [
        current_pages_folder(out) / definition_page_name(r["definition"])
        for r in sql_rows(
            golden_warehouse,
            "SELECT definition FROM runs GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 3",
        )
    ]
    tables = check_pages(golden_warehouse, out, [pages[0], *busiest], tmp_path)
    check_numbers(golden_warehouse, tables)


def test_report_refuses_a_file_as_out(demo_warehouse: Path, tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("not a folder")
    result = run_cli("report", "--out", str(target), "--warehouse", str(demo_warehouse))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "--out" in result.stderr, result.stderr
    assert target.read_text() == "not a folder"
