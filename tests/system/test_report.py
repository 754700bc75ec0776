"""`tracehouse report` as a person sees it: the pages of the demo and of the golden corpus load in
headless Debian Chromium with no console error and no request beyond the report's own files,
the screenshots are not blank, and every number in the tables equals the warehouse's SQL."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import build, one_error_line, run_cli
from tests.fixtures.browser import Chromium, chromium_path, png_pixels
from tracehouse.serve.report_blocks import definition_page_name, format_value
from tracehouse.warehouse import Warehouse, connect_read_only

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
    from tracehouse.demo import generate_dataset

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
            assert cell["text"] == format_value(value, cell["column"]), (cell, value)


def not_blank(png: Path) -> None:
    width, height, pixels = png_pixels(png)
    # One count per colour (pixels.count per distinct colour took minutes a screenshot).
    colours = Counter(pixels)
    _, background_count = colours.most_common(1)[0]
    drawn = 1 - background_count / len(pixels)
    assert width > 100 and height > 100, (width, height)
    assert len(colours) > 50 and drawn > 0.05, (png, len(colours), drawn)


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


@pytest.fixture(scope="module")
def demo_report(demo_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo-report") / "report"
    render(demo_warehouse, out)
    return out


def definition_pages(out: Path) -> list[Path]:
    """The definition pages of a report (its page folder's own pages, not the change or
    record pages in the folders below it)."""
    return sorted(current_pages_folder(out).glob("*.html"))


def test_demo_report_in_chromium(demo_warehouse: Path, demo_report: Path, tmp_path: Path) -> None:
    pages = [demo_report / "index.html", *definition_pages(demo_report)]
    assert (
        len(pages) == 1 + sql_rows(demo_warehouse, "SELECT count(*) AS n FROM definitions")[0]["n"]
    )
    tables = check_pages(demo_warehouse, demo_report, pages, tmp_path)
    check_numbers(demo_warehouse, tables)


# The tick labels Plotly drew (the rendered SVG, not the figure's JSON) of one chart, each with
# its position on the page, and the chart's title box against the mode bar's.
TICKS_JS = """
((id, axis) => Array.from(document.getElementById(id).querySelectorAll(`.${axis}tick text`))
  .map(t => ({text: t.textContent, x: t.getBoundingClientRect().x,
              y: t.getBoundingClientRect().y})))
"""


def drawn_ticks(browser: Chromium, chart: str, axis: str) -> list[dict[str, Any]]:
    """The chart's tick labels once Plotly has drawn them (it may finish a moment after the
    SVG appears, on a busy machine)."""
    deadline = time.monotonic() + 30
    while True:
        ticks = browser.evaluate(f"{TICKS_JS}({chart!r}, {axis!r})")
        if ticks or time.monotonic() > deadline:
            return ticks
        time.sleep(0.2)


def tick_value(label: str) -> float:
    assert re.fullmatch(r"[0-9][0-9,]*(\.[0-9]+)?×", label), label
    return float(label.removesuffix("×").replace(",", ""))


def axes_values(label: str) -> tuple[float, ...]:
    """``num_tokens=8, num_pages=5118`` -> (8.0, 5118.0)."""
    return tuple(float(part.split("=", 1)[1]) for part in label.split(", "))


def test_speedup_ticks_and_coverage_order_in_chromium(demo_report: Path, tmp_path: Path) -> None:
    """Issue 27: the log axis reads 0.5×, 1×, 2× … upwards (Plotly's own labels read 0.3–0.7 as
    3 … 7), the coverage map's workloads run in their axes' numeric order (not M=1, M=11006,
    M=128), and no chart title lies under Plotly's mode bar."""
    checked_ticks = checked_order = 0
    with Chromium(tmp_path / "profile") as browser:
        for page in definition_pages(demo_report):
            visit = browser.visit(page.resolve().as_uri(), ready=CHARTS_READY_JS)
            assert visit.errors == [], visit.errors
            charts = browser.evaluate(
                "Array.from(document.querySelectorAll('.plotly-graph-div')).map(d => d.id)"
            )
            for chart in charts:
                if chart.startswith("speedups-"):
                    ticks = drawn_ticks(browser, chart, "y")
                    values = [tick_value(t["text"]) for t in ticks]
                    assert values, chart
                    for value in values:  # 1, 2 or 5 times a power of ten
                        assert re.fullmatch(r"[125]\.0+e[+-]\d+", f"{value:e}"), values
                    heights = sorted(zip([-t["y"] for t in ticks], values, strict=True))
                    assert [v for _, v in heights] == sorted(values), ticks  # larger higher up
                    checked_ticks += 1
                if (
                    chart.startswith("coverage-")
                    and browser.evaluate(f"document.getElementById({chart!r}).data[0].type")
                    == "heatmap"
                ):
                    ticks = drawn_ticks(browser, chart, "x")
                    labels = [t["text"] for t in sorted(ticks, key=lambda t: t["x"])]
                    assert [axes_values(label) for label in labels] == sorted(
                        axes_values(label) for label in labels
                    ), labels
                    checked_order += 1
            # every chart's title is page text above its figure, never inside it
            overlaps = browser.evaluate(
                "Array.from(document.querySelectorAll('.chart')).filter(box => {"
                " const title = box.querySelector('p.chart-title');"
                " const figure = box.querySelector('.plotly-graph-div');"
                " return !title || !figure || title.getBoundingClientRect().bottom >"
                " figure.getBoundingClientRect().top; }).map(box => box.id)"
            )
            assert overlaps == [], (page.name, overlaps)
            titles = browser.evaluate(
                "Array.from(document.querySelectorAll('.plotly-graph-div .gtitle')).length"
            )
            assert titles == 0, page.name
    assert checked_ticks > 0 and checked_order > 0, (checked_ticks, checked_order)


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

    from tests.fixtures.hostile_corpus import definition_object, solution_object, trace_object
    from tests.fixtures.shared_data import GOLDEN_DIR

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
    from tests.fixtures.shared_data import SHARED

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
                    assert layout["first_heading"] == "What changed"
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

    from tests.fixtures.hostile_corpus import definition_object, solution_object, trace_object
    from tracehouse.serve.report_definition import COVERAGE_MAP_MAX_WORKLOADS

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
        bars = browser.evaluate(
            "document.getElementById('coverage-0').data.map(t => [t.name, t.y, Array.from(t.x)])"
        )
        # counted in SQL: base passed every workload, alice_k failed to compile every third
        failed = len(range(0, workloads, 3))
        assert bars == [
            ["passed", ["alice_k", "base"], [workloads - failed, workloads]],
            ["compile error", ["alice_k", "base"], [failed, 0]],
        ], bars
    assert page in pages


# --------------------------------------------------------------------------------------------
# Issue 27: a regression is seen on the report's first page. Four git revisions of one source
# with about 3 % noise; in the last, one solution is 2x slower and a broken one is fixed
# (tests/system/test_history.py builds them the same way).

# Per table row of the overview's "What changed": each cell's text, its link and its box.
WHAT_CHANGED_JS = """
((id) => {
  const table = document.getElementById(id);
  if (!table) return null;
  return Array.from(table.querySelectorAll('tbody tr')).map(tr => Object.fromEntries(
    Array.from(tr.querySelectorAll('td')).map(td => {
      const box = td.getBoundingClientRect();
      const link = td.querySelector('a');
      return [td.dataset.column, {text: td.textContent, href: link ? link.href : null,
                                  right: box.right, bottom: box.bottom}];
    })));
})
"""
VIEWPORT_JS = "({width: window.innerWidth, height: window.innerHeight})"


@pytest.fixture(scope="module")
def history_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    from tests.system.test_history import build_series

    root = tmp_path_factory.mktemp("report-history")
    series = build_series(root)
    out = root / "report"
    render(series.warehouse, out)
    return series, out


def check_what_changed_on_the_first_screen(browser: Chromium, out: Path) -> dict[str, Any]:
    """The overview of a report of the four-run series (tests/system/test_history.py) at 1400 and 800
    px: "What changed" first, the slowed solution's regressions in percent, worst first, inside
    the first screen, the fixed one newly passing. Returns the worst regression's cells."""
    from tests.system.test_history import FIXED, SLOWED, WORKLOADS

    index = (out / "index.html").resolve().as_uri()
    worst: dict[str, Any] = {}
    for width in (1400, 800):
        browser.resize(width)
        visit = browser.visit(index, ready=CHARTS_READY_JS)
        assert visit.errors == [], visit.errors
        screen = browser.evaluate(VIEWPORT_JS)
        headings = browser.evaluate(
            "Array.from(document.querySelectorAll('h2')).map(h => h.textContent)"
        )
        assert headings[:2] == ["What changed", "Who is fastest where"], headings
        counts = browser.evaluate(
            "Object.fromEntries(Array.from(document.querySelectorAll('[data-count]'))"
            ".map(s => [s.dataset.count, s.textContent]))"
        )
        assert counts == {
            "regressions": f"{len(WORKLOADS)} regressions",
            "improvements": "0 improvements",
            "newly_passing": f"{len(WORKLOADS)} newly passing",
            "newly_failing": "0 newly failing",
        }, counts
        regressions = browser.evaluate(f"{WHAT_CHANGED_JS}('what-changed-regressions-0')")
        assert regressions is not None and len(regressions) == len(WORKLOADS), regressions
        changes = [row["relative_change"]["text"] for row in regressions]
        assert all(re.fullmatch(r"\+\d+\.\d%", c) for c in changes), changes
        assert [float(c[1:-1]) for c in changes] == sorted(
            (float(c[1:-1]) for c in changes), reverse=True
        )  # the worst first
        assert all(float(c[1:-1]) > 80 for c in changes), changes  # 2x slower: about +100%
        assert {row["solution"]["text"] for row in regressions} == {SLOWED}
        assert all(
            re.fullmatch(r"[\d.]+ µs → [\d.]+ µs", row["before_after"]["text"])
            for row in regressions
        ), regressions
        assert {row["workload"]["text"] for row in regressions} == {
            f"M={8 * (i + 1)}" for i in range(len(WORKLOADS))
        }
        worst = regressions[0]
        for column in ("relative_change", "before_after", "solution"):  # the first screen
            assert worst[column]["right"] <= screen["width"], (width, column, worst)
            assert worst[column]["bottom"] <= screen["height"], (width, column, worst)
        passing = browser.evaluate(f"{WHAT_CHANGED_JS}('what-changed-newly-passing-0')")
        assert passing is not None and {r["solution"]["text"] for r in passing} == {FIXED}
        assert {r["before_after"]["text"] for r in passing} == {"RUNTIME_ERROR → PASSED"}
    return worst


@pytest.mark.slow
def test_a_regression_is_on_the_first_screen_at_1400_and_800_pixels(
    history_report: tuple[Any, Path], tmp_path: Path
) -> None:
    from tests.system.test_history import SLOWED, WORKLOADS

    _, out = history_report
    with Chromium(tmp_path / "profile") as browser:
        worst = check_what_changed_on_the_first_screen(browser, out)
        # the worst row's change links to its chart of latency over the revisions
        chart_url = worst["relative_change"]["href"]
        assert chart_url and "#latency-" in chart_url, worst
        visit = browser.visit(chart_url, ready=CHARTS_READY_JS)
        assert visit.errors == [], visit.errors
        fragment = chart_url.split("#", 1)[1]
        chart = browser.evaluate(
            f"(() => {{ const box = document.getElementById({fragment!r}); return box && "
            "{title: box.querySelector('p.chart-title').textContent, "
            "points: box.querySelector('.plotly-graph-div').data[0].y.length}; })()"
        )
        assert chart is not None, fragment
        assert chart["title"].startswith(worst["relative_change"]["text"]), chart
        assert SLOWED in chart["title"] and worst["workload"]["text"] in chart["title"], chart
        assert chart["points"] == 4, chart  # one result per revision
        # the source's page: the change in percent, latencies with units, figures on screen
        browser.resize(800)
        visit = browser.visit(chart_url.split("#", 1)[0], ready=CHARTS_READY_JS)
        assert visit.errors == [], visit.errors
        rows = browser.evaluate(f"{WHAT_CHANGED_JS}('regressions-0')")
        assert rows is not None and len(rows) == len(WORKLOADS)
        for row in rows:
            assert re.fullmatch(r"\+\d+\.\d%", row["relative_change"]["text"]), row
            for column in ("history_mean_ns", "latency_ns"):
                assert re.fullmatch(r"[\d.]+ µs", row[column]["text"]), row
            for column in ("relative_change", "history_mean_ns", "latency_ns", "z_score"):
                assert row[column]["right"] <= 800, (column, row[column])
        # and the run a row names has its record page
        record_url = worst["run_id"]["href"]
        assert record_url and "/runs/" in record_url, worst
        visit = browser.visit(record_url)
        assert visit.errors == [], visit.errors
        facts = browser.evaluate(RECORD_FACTS_JS)
        assert facts["run"].startswith(SLOWED), facts
        assert facts["run id"] == worst["run_id"]["text"], facts


# A record page's facts, label -> value (continuation rows joined to their label's value).
RECORD_FACTS_JS = """
(() => {
  const facts = {};
  for (const tr of document.querySelectorAll('#record-facts tr')) {
    const label = tr.dataset.label, value = tr.querySelectorAll('td')[1].textContent;
    facts[label] = label in facts ? facts[label] + '\\n' + value : value;
  }
  return facts;
})()
"""


GOLDEN_RUN = "trace/flashinfer_wrapper_ea3787/892d1b8f-f6fe-40ad-aa3f-b6d391753bd3"
GOLDEN_RUN_DEFINITION = "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1"
GOLDEN_RUN_KEY = "sha256:04ea3f7140e33a224bf6eb0850cd25eac0ff008365448e7b65534897eebd1d6d"


def test_golden_record_page_is_reached_from_its_definition_page(
    golden_warehouse: Path, tmp_path: Path
) -> None:
    """Issue 27: the run's record page, as KernelIndex shows it — 68.9 µs, 3958.47×
    reference, rank 1 of 1, its comparison key and its manifest — linked from the record
    holders table of its definition's page; and `record ID --html OUT` writes the page of
    a run no table names, the same facts."""
    ((run,),) = [
        (r["run_id"],)
        for r in sql_rows(
            golden_warehouse, "SELECT run_id FROM runs WHERE external_id = $id", id=GOLDEN_RUN
        )
    ]
    out = tmp_path / "report"
    result = run_cli("report", "--out", str(out), "--warehouse", str(golden_warehouse))
    assert result.returncode == 0, result.stderr
    page = current_pages_folder(out) / definition_page_name(GOLDEN_RUN_DEFINITION)
    # a run ranked second is named by no table: its page is written on demand
    (other,) = [
        r["run_id"]
        for r in sql_rows(
            golden_warehouse, "SELECT run_id FROM run_rankings WHERE rank = 2 ORDER BY 1 LIMIT 1"
        )
    ]
    assert not (current_pages_folder(out) / "runs" / f"{other}.html").exists()
    single = tmp_path / "other.html"
    written = run_cli("record", other, "--html", str(single), "--warehouse", str(golden_warehouse))
    assert written.returncode == 0, written.stderr
    assert written.stdout == f"wrote the record page of run {other} to {single}\n"
    with Chromium(tmp_path / "profile") as browser:
        visit = browser.visit(page.resolve().as_uri(), ready=CHARTS_READY_JS)
        assert visit.errors == [], visit.errors
        links = browser.evaluate(
            "Array.from(document.querySelectorAll('table[id^=records-] td[data-column=run_id] a'))"
            ".map(a => ({run: a.parentElement.dataset.value, href: a.href}))"
        )
        (href,) = [link["href"] for link in links if link["run"] == run]
        visit = browser.visit(href)
        assert visit.errors == [], visit.errors
        assert [u for u in visit.requests if not u.startswith(f"file://{out.resolve()}/")] == []
        headline = browser.evaluate(
            "Object.fromEntries(Array.from(document.querySelectorAll('.headline div'))"
            ".map(d => [d.dataset.figure, d.querySelector('strong').textContent]))"
        )
        assert headline["mean latency"] == "68.9 µs", headline
        assert headline["source-native"] == "3958.47× reference", headline
        assert headline["in its comparison group"] == "rank 1 of 1", headline
        facts = browser.evaluate(RECORD_FACTS_JS)
        assert facts["comparison key"] == GOLDEN_RUN_KEY, facts
        assert facts["external id"] == GOLDEN_RUN, facts
        assert facts["rank"].startswith("rank 1 of 1"), facts
        assert facts["record history"].endswith("68.9 µs  ← this run"), facts
        assert facts["workload"].startswith("total_q=1954, num_pages=989669"), facts
        assert "sm_scale scalar" in facts["inputs"], facts
        assert facts["protocol"].startswith("FlashInfer-Bench trace harness"), facts
        assert (
            "NVIDIA B200" in facts["environment"] and "max absolute error" in facts["correctness"]
        )
        marked = browser.evaluate("document.querySelectorAll('#record-facts tr.this-run').length")
        assert marked == 1
        manifest = json.loads(browser.evaluate("document.getElementById('manifest').textContent"))
        assert manifest == json.loads(
            run_cli("record", run, "--json", "--warehouse", str(golden_warehouse)).stdout
        )
        # every fact `tracehouse record` prints is on the page, in its order
        printed = run_cli(
            "record", run, "--warehouse", str(golden_warehouse), env={"COLUMNS": "400"}
        )
        summary = printed.stdout.split("\n\n", 1)[0]
        labels = [line[:22].strip() for line in summary.splitlines() if line[:22].strip()]
        assert labels == [label for label in facts], (labels, list(facts))
        # back to the definition page
        back = browser.evaluate("Array.from(document.querySelectorAll('nav a')).map(a => a.href)")
        assert page.resolve().as_uri() in back, back
        visit = browser.visit(single.resolve().as_uri())
        assert visit.errors == [] and visit.requests == [single.resolve().as_uri()], visit
        facts = browser.evaluate(RECORD_FACTS_JS)
        assert facts["run id"] == other and facts["rank"].startswith("rank 2 of "), facts


def test_record_html_refuses_a_folder_and_a_missing_folder(
    golden_warehouse: Path, tmp_path: Path
) -> None:
    for target, reason in (
        (tmp_path, "is a folder"),
        (tmp_path / "no" / "x.html", "does not exist"),
    ):
        result = run_cli(
            "record", GOLDEN_RUN, "--html", str(target), "--warehouse", str(golden_warehouse)
        )
        line = one_error_line(result)
        assert "--html" in line and reason in line, line
    assert list(tmp_path.iterdir()) == []
