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
            "ORDER BY source, rank NULLS FIRST",
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


# Per table: its width against the box it scrolls in, and whether the box scrolls; and the
# page's own width against the window's (a page wider than the window cuts what is beyond).
LAYOUT_JS = """
({
  window: window.innerWidth,
  page: document.documentElement.scrollWidth,
  tables: Array.from(document.querySelectorAll('table[id]')).map(table => {
    const box = table.parentElement;
    return {id: table.id, width: table.scrollWidth, box: box.clientWidth,
            scrolls: ['auto', 'scroll'].includes(getComputedStyle(box).overflowX)};
  }),
  legend: Array.from(document.querySelectorAll('ul.legend li')).map(li => ({
    status: li.dataset.status,
    colour: getComputedStyle(li.querySelector('.swatch')).backgroundColor})),
  sources: Array.from(document.querySelectorAll('#sources td[data-column=source]'))
    .map(td => td.dataset.value),
  first_heading: document.querySelector('h2').textContent,
})
"""


def _two_source_warehouse(root: Path) -> Path:
    """The golden corpus and a dataset of every status: one definition, three solutions, a
    passed, a compile error, a wrong result, a skipped record and a workload never run."""
    import json

    from tests.hostile_corpus import definition_object, solution_object, trace_object
    from tests.shared_data import GOLDEN_DIR

    dataset = root / "statuses"
    definition = "gemm_n4_k4"
    (dataset / "definitions/gemm").mkdir(parents=True)
    (dataset / "definitions/gemm" / f"{definition}.json").write_text(
        json.dumps(definition_object(definition))
    )
    plan = {
        "baseline_gemm": ("baseline", ["PASSED"] * 4),
        "alice_gemm": ("alice", ["PASSED", "COMPILE_ERROR", "INCORRECT_NUMERICAL", None]),
        # a name that would be a live link if Plotly read it as markup
        '<a href="https://example.com">x</a>': ("mallory", ["RUNTIME_ERROR", "PASSED", None, None]),
    }
    for number, (name, (author, statuses)) in enumerate(plan.items()):
        folder = dataset / "solutions" / f"a{number}" / "gemm" / definition
        folder.mkdir(parents=True)
        (folder / "s.json").write_text(json.dumps(solution_object(name, author, definition)))
        lines = []
        for workload, status in enumerate(statuses):
            if status is None:
                continue
            lines.append(
                json.dumps(
                    trace_object(
                        f"w{workload}", definition=definition, solution=name, status=status
                    )
                )
            )
        traces = dataset / "traces" / f"a{number}" / "gemm"
        traces.mkdir(parents=True)
        (traces / f"{definition}.jsonl").write_text("\n".join(lines) + "\n")
    warehouse = root / "warehouse"
    for name, source in (("golden", GOLDEN_DIR / "dataset"), ("statuses", dataset)):
        built = run_cli(
            "build", "--source", str(source), "--source-name", name, "--warehouse", str(warehouse)
        )
        assert built.returncode == 0, built.stderr
    return warehouse


def test_two_source_report_at_1400_and_800_pixels(tmp_path: Path) -> None:
    from tests.shared_data import SHARED

    if SHARED is None:
        pytest.skip("../shared not found beside the checkout")
    warehouse = _two_source_warehouse(tmp_path)
    out = tmp_path / "report"
    pages = render(warehouse, out)
    statuses_page = current_pages_folder(out) / definition_page_name("gemm_n4_k4")
    text = statuses_page.read_text()
    assert '<a href=\\"https://example.com\\"' not in text and "&lt;a href" in text
    with Chromium(tmp_path / "profile") as browser:
        for width in (1400, 800):
            browser.resize(width)
            for page in (pages[0], statuses_page):
                visit = browser.visit(page.resolve().as_uri(), ready=CHARTS_READY_JS)
                assert visit.errors == [], visit.errors
                layout = browser.evaluate(LAYOUT_JS)
                # nothing is cut: the page fits the window, a wider table scrolls in its box
                assert layout["page"] <= layout["window"], (page.name, width, layout["page"])
                for table in layout["tables"]:
                    assert table["width"] <= table["box"] or table["scrolls"], (width, table)
                shot = browser.screenshot(tmp_path / f"{page.stem}-{width}.png", full_page=False)
                not_blank(shot)
                if page == pages[0]:
                    assert layout["first_heading"] == "Who is fastest where"
                    assert layout["sources"] == ["golden", "statuses"]
                else:
                    legend = {item["status"]: item["colour"] for item in layout["legend"]}
                    assert set(legend) == {
                        "PASSED",
                        "COMPILE_ERROR",
                        "INCORRECT_NUMERICAL",
                        "RUNTIME_ERROR",
                        "not run",
                    }, legend
                    assert len(set(legend.values())) == len(legend)  # each its own colour
            # no link a dataset could plant: every anchor on the page is the report's own
            anchors = browser.evaluate(
                "Array.from(document.querySelectorAll('a')).map(a => a.getAttribute('href'))"
            )
            assert not [a for a in anchors if a and a.startswith("http")], anchors
    print(f"screenshots in {tmp_path}")


def test_a_large_definition_is_summarised_not_drawn_cell_by_cell(tmp_path: Path) -> None:
    """Above COVERAGE_MAP_MAX_WORKLOADS workloads the coverage is status counts per solution
    (issue 16: a 40,000-workload-wide heat map helps nobody), and the page still loads."""
    import json

    from pipelines.report import COVERAGE_MAP_MAX_WORKLOADS
    from tests.hostile_corpus import definition_object, solution_object, trace_object

    dataset, definition = tmp_path / "large", "gemm_n4_k4"
    (dataset / "definitions/gemm").mkdir(parents=True)
    (dataset / "definitions/gemm" / f"{definition}.json").write_text(
        json.dumps(definition_object(definition))
    )
    workloads = COVERAGE_MAP_MAX_WORKLOADS + 20
    for number, (name, author) in enumerate((("base", "baseline"), ("alice_k", "alice"))):
        folder = dataset / "solutions" / author / "gemm" / definition
        folder.mkdir(parents=True)
        (folder / f"{name}.json").write_text(json.dumps(solution_object(name, author, definition)))
        lines = [
            json.dumps(
                trace_object(
                    f"w{i}",
                    definition=definition,
                    solution=name,
                    status="PASSED" if number == 0 or i % 3 else "COMPILE_ERROR",
                )
            )
            for i in range(workloads)
        ]
        traces = dataset / "traces" / author / "gemm"
        traces.mkdir(parents=True)
        (traces / f"{definition}.jsonl").write_text("\n".join(lines) + "\n")
    built = run_cli("build", "--source", str(dataset), "--warehouse", str(tmp_path / "w"))
    assert built.returncode == 0, built.stderr
    out = tmp_path / "report"
    pages = render(tmp_path / "w", out)
    page = current_pages_folder(out) / definition_page_name(definition)
    text = page.read_text()
    assert f"Coverage: {workloads:,} workloads, counted per solution and status" in text
    with Chromium(tmp_path / "profile") as browser:
        visit = browser.visit(page.resolve().as_uri(), ready=CHARTS_READY_JS)
        assert visit.errors == [], visit.errors
        legend = browser.evaluate(
            "Array.from(document.querySelectorAll('ul.legend li')).map(li => li.dataset.status)"
        )
        assert legend == ["PASSED", "COMPILE_ERROR"]
        kinds = browser.evaluate(
            "document.getElementById('coverage-0').data.map(trace => trace.type)"
        )
        assert kinds == ["bar", "bar"], kinds  # one bar per status, no cell map
    assert page in pages
