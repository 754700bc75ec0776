"""The static HTML report: an overview page and one page per definition, written into a folder
that works offline (no CDN, no request to anywhere: the one script, Plotly's bundle, is written
beside the pages and loaded by a relative path; styles are inline).

Every number shown comes from the warehouse's views, read over a read-only connection; each
table cell also carries the exact value in ``data-value`` so a test can compare the page with
the SQL. The CLI (`tracehouse report --out DIR`) and the Dagster ``report`` asset both call
``write_report``.
"""

from __future__ import annotations

import hashlib
import html
import math
import re
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracehouse import interrupts, rejects
from tracehouse.files import write_atomically
from tracehouse.schemas import TABLES
from tracehouse.serve import changes, render
from tracehouse.serve.output_folder import OutputKind, claimed
from tracehouse.serve.record_page import RECORD_FOLDER, record_page_name, write_record_pages
from tracehouse.serve.report_changes import what_changed_html, write_change_pages
from tracehouse.settings import Settings
from tracehouse.warehouse import Warehouse

PLOTLY_BUNDLE = "plotly.min.js"
# One colour per status of a (solution, workload) cell, each failure kind its own, so that a
# compile error, a wrong result and a record never evaluated never look the same. The statuses
# come from their one home (rejects.STATUSES); the colours are assigned in name order.
PASSED_COLOUR, NOT_RUN_COLOUR = "#2e7d32", "#eceff1"
FAILURE_PALETTE = (
    "#6a1b9a",
    "#c62828",
    "#8d6e63",
    "#ef6c00",
    "#f9a825",
    "#1565c0",
    "#ad1457",
    "#00838f",
    "#4e342e",
    "#9e9d24",
)
NOT_EVALUATED, OTHER_FAILURE, NOT_RUN = "NOT_EVALUATED", "other failure", "not run"
STATUS_COLOURS: dict[str, str] = {
    "PASSED": PASSED_COLOUR,
    **{
        status: FAILURE_PALETTE[i % len(FAILURE_PALETTE)]
        for i, status in enumerate(sorted(s for s in rejects.STATUSES if s != "PASSED"))
    },
    NOT_EVALUATED: "#90a4ae",
    OTHER_FAILURE: "#000000",
    NOT_RUN: NOT_RUN_COLOUR,
}
STATUS_LABELS = {
    status: "skipped (not evaluated)"
    if status == NOT_EVALUATED
    else status.lower().replace("_", " ")
    for status in STATUS_COLOURS
}
# One colour per solution on a definition's page, the same in every chart and table of it.
SOLUTION_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#7b4173",
    "#3182bd",
    "#e6550d",
    "#31a354",
    "#756bb1",
    "#636363",
)
# Above this many workloads a definition's coverage is summarised (status counts per solution)
# instead of drawn cell by cell, and its speedup chart shows the distribution without points.
COVERAGE_MAP_MAX_WORKLOADS = 60
SPEEDUP_POINTS_MAX = 2_000

# What each page shows, as named read-only queries over the views (values bound, never formatted).
SOURCES_SQL = """
SELECT source, uri, revision, snapshot_id, built_at, definitions, solutions, runs, rejects
FROM source_summary ORDER BY source
"""
UNION_LEFT_OUT_SQL = """
SELECT definition, reason, array_to_string(sources, ', ') AS sources
FROM fib_union_definitions WHERE NOT in_union ORDER BY definition
"""
REJECTS_SQL = """
SELECT source, reason, count(*) AS records FROM rejects GROUP BY ALL ORDER BY source, reason
"""
FIB_RANKING_SQL = """
SELECT source, outcome, reason, rank, author, avg_speedup, success_rate, win_rate, workloads,
       definitions
FROM author_rankings WHERE hardware = 'all' AND scope_kind = 'all'
ORDER BY source, rank NULLS FIRST
"""
WEB_RANKING_SQL = """
SELECT source, rank, author, avg_speedup, success_rate, win_rate, workloads, definitions, ui_hidden
FROM web_author_rankings WHERE baseline_map = $map AND hardware = 'all' ORDER BY source, rank
"""
WEB_MAP_SQL = """
SELECT baseline_map FROM web_map_names ORDER BY baseline_map = 'baselines_file' DESC LIMIT 1
"""
TOP_PER_DEFINITION_SQL = """
SELECT definition, hardware, solution, author, geomean_speedup, coverage, workloads_passed,
       workloads_in_slice, baseline_solution, is_baseline
FROM leaderboard WHERE leaderboard_rank = 1 ORDER BY definition, hardware
"""
DEFINITIONS_SQL = """
SELECT d.definition, any_value(d.op_type) AS op_type, count(DISTINCT r.solution) AS solutions,
       count(DISTINCT r.run_id) AS runs
FROM definitions AS d LEFT JOIN runs AS r ON r.definition = d.definition AND r.source = d.source
GROUP BY d.definition ORDER BY d.definition
"""
DEFINITION_LEADERBOARD_SQL = """
SELECT definition, hardware, leaderboard_rank, solution, author, is_baseline, baseline_solution,
       baseline_choice, workloads_passed, workloads_in_slice, coverage, workloads_compared,
       geomean_speedup, win_rate, speedup_reason, latency_us_geomean, rerun_spread_median,
       sort_tier, fib_all_gpus_avg_speedup, fib_all_gpus_win_rate, fib_reason
FROM leaderboard ORDER BY definition, hardware, leaderboard_rank
"""
DEFINITION_FAST_P_SQL = """
SELECT definition, hardware, solution, p, fast_p FROM leaderboard_fast_p
ORDER BY definition, hardware, solution, p
"""
DEFINITION_SPEEDUPS_SQL = """
SELECT definition, hardware, solution, workload_key, speedup FROM leaderboard_speedups
WHERE speedup IS NOT NULL ORDER BY definition, hardware, solution, workload_key
"""
# Per (solution, workload): PASSED when any run passed, else the failure kind (the first by name
# when several), NOT_EVALUATED when FlashInfer-Bench skipped every record; 'not run' where the
# solution has no run of a workload that others ran. Labelled by the workload's axes.
DEFINITION_COVERAGE_SQL = """
WITH cells AS (
    SELECT definition, hardware, solution, workload_key,
           CASE
               WHEN bool_or(status = 'PASSED') THEN 'PASSED'
               WHEN bool_and(NOT evaluated) THEN 'NOT_EVALUATED'
               ELSE coalesce(min(status) FILTER (WHERE evaluated), 'other failure')
           END AS status
    FROM runs
    WHERE solution IS NOT NULL
    GROUP BY ALL
),
axes AS (
    SELECT definition, workload_key, min(axes_json) AS axes_json
    FROM workloads GROUP BY ALL
),
grid AS (
    SELECT s.definition, s.hardware, s.solution, w.workload_key
    FROM (SELECT DISTINCT definition, hardware, solution FROM cells) AS s
    JOIN (SELECT DISTINCT definition, hardware, workload_key FROM cells) AS w
        USING (definition, hardware)
)
SELECT g.definition, g.hardware, g.solution, g.workload_key, a.axes_json,
       coalesce(c.status, 'not run') AS status
FROM grid AS g
LEFT JOIN cells AS c USING (definition, hardware, solution, workload_key)
LEFT JOIN axes AS a USING (definition, workload_key)
ORDER BY g.definition, g.hardware, g.solution, g.workload_key
"""

# Per comparison group (definition, workload, hardware, environment, protocol), the run ranked
# first: the runs the definition pages name, each with its record page. Read as a stream, so
# that only RECORD_ROWS_MAX rows per definition and hardware are held (the first by workload
# order: see record_holders).
RECORD_HOLDERS_SQL = """
SELECT r.definition, r.hardware, r.workload_key, w.axes_json, r.solution, r.latency_ns,
       r.speedup_factor, k.cohort_size, r.run_id
FROM runs AS r
JOIN run_rankings AS k USING (run_id)
LEFT JOIN workloads AS w
    ON w.source = r.source AND w.definition = r.definition AND w.workload_key = r.workload_key
WHERE k.rank = 1
QUALIFY row_number() OVER (PARTITION BY r.comparison_key ORDER BY r.observed_at, r.run_id) = 1
"""
RECORD_ROWS_MAX = 60
RECORD_COLUMNS = (
    ("workload", "workload"),
    ("solution", "record holder"),
    ("latency_ns", "latency"),
    ("source_native", "source-native"),
    ("rank", "rank"),
    ("run_id", "run"),
)

# Speed and coverage side by side, right after the name.
LEADERBOARD_COLUMNS = (
    ("leaderboard_rank", "#"),
    ("solution", "solution"),
    ("geomean_speedup", "geomean speedup"),
    ("coverage", "coverage"),
    ("workloads_passed", "passed"),
    ("workloads_in_slice", "of"),
    ("win_rate", "win rate"),
    ("workloads_compared", "compared"),
    ("speedup_reason", "why no speedup"),
    ("author", "author"),
    ("latency_us_geomean", "latency (geomean)"),
    ("rerun_spread_median", "re-run spread"),
    ("fib_all_gpus_avg_speedup", "FIB avg speedup (all GPUs)"),
    ("fib_reason", "FIB: why none"),
)


@dataclass
class ReportResult:
    out_dir: Path
    pages: list[Path] = field(default_factory=list)
    overview_rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def index(self) -> Path:
        return self.out_dir / "index.html"


def definition_page_name(definition: str) -> str:
    """A file name for a definition's page: safe characters kept, a digest keeps it unique."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", definition)[:80]
    digest = hashlib.sha256(definition.encode()).hexdigest()[:8]
    return f"{safe}-{digest}.html"


# How a column's values are written, the CLI's formats (``tracehouse leaderboard``): speedups
# ``1.000×``, shares ``100%``, latencies with their unit (``68.9 µs``), changes in percent.
RATIO_COLUMNS = frozenset({"geomean_speedup", "avg_speedup", "fib_all_gpus_avg_speedup"})
SHARE_COLUMNS = frozenset(
    {"coverage", "win_rate", "success_rate", "fib_all_gpus_win_rate", "fib_all_gpus_success_rate"}
)
LATENCY_US_COLUMNS = frozenset({"latency_us_geomean"})
LATENCY_NS_COLUMNS = frozenset({"latency_ns", "history_mean_ns", "previous_latency_ns"})
CHANGE_COLUMNS = frozenset({"relative_change"})
Z_COLUMNS = frozenset({"z_score"})


def format_value(value: Any, column: str = "") -> str:
    """How a cell shows a value: by its column's kind (above), else counts with thousands
    separators and other floats with 4 significant digits; NULL as an en dash."""
    from tracehouse.kernelindex import format_latency_ns
    from tracehouse.serve.render import percent_change, z_text

    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            if column in Z_COLUMNS:
                return z_text(value)
            return "NaN" if math.isnan(value) else ("∞" if value > 0 else "−∞")
        if column in RATIO_COLUMNS:
            return f"{value:,.3f}×"
        if column in SHARE_COLUMNS:
            return f"{value:.0%}"
        if column in LATENCY_US_COLUMNS:
            return format_latency_ns(round(value * 1000))
        if column in LATENCY_NS_COLUMNS:
            return format_latency_ns(round(value))
        if column in CHANGE_COLUMNS:
            return percent_change(value)
        if column in Z_COLUMNS:
            return z_text(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.4e}"
    return str(value)


def _exact(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _table(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[tuple[str, str]],
    *,
    table_id: str,
    css_class: str = "",
    links: dict[str, str] | None = None,
    swatches: dict[str, dict[str, str]] | None = None,
) -> str:
    """A table in a horizontally scrolling box (never cut, whatever the window's width).
    ``links``: column -> row key holding the page a cell links to; ``swatches``: column ->
    {value: colour} drawn before the cell's text (a solution's colour in the charts)."""
    links, swatches = links or {}, swatches or {}
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label in columns)
    body = []
    for row in rows:
        cells = []
        for name, _ in columns:
            shown = html.escape(format_value(row[name], name))
            if name in links and row.get(links[name]):
                shown = f"<a href='{html.escape(row[links[name]])}'>{shown}</a>"
            colour = swatches.get(name, {}).get(row[name])
            if colour:
                shown = f"<span class='swatch' style='background:{colour}'></span>{shown}"
            cells.append(
                f'<td data-column="{html.escape(name)}" '
                f'data-value="{html.escape(_exact(row[name]))}">{shown}</td>'
            )
        body.append(f"<tr>{''.join(cells)}</tr>")
    if not rows:
        body.append(f'<tr><td colspan="{len(columns)}" class="empty">no rows</td></tr>')
    return (
        f'<div class=\'scroll\'><table id="{html.escape(table_id)}" class="{css_class}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _page(title: str, body: str, *, depth: int) -> str:
    prefix = "../" * depth
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>"
        # no favicon request: the page asks for nothing it does not ship
        "<link rel='icon' href='data:,'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<style>{render.PAGE_STYLE}</style>"
        f"<script src='{prefix}{PLOTLY_BUNDLE}'></script>"
        f"</head><body>{body}</body></html>\n"
    )


def _figure_html(figure: Any, div_id: str) -> str:
    """A chart's div and script. Its title is never Plotly's (the mode bar, drawn over the
    figure's top right, covers that): ``_chart`` writes it as a heading above the figure."""
    return str(
        figure.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=div_id,
            config={"displaylogo": False, "responsive": True},
        )
    )


def _chart(figure: Any, div_id: str, title: str, *, before: str = "") -> str:
    """A chart under its title, a heading of the page (never covered, wrapped when narrow)."""
    return (
        f"<div class='chart' id='{html.escape(div_id)}-box'>"
        f"<p class='chart-title'>{html.escape(title)}</p>{before}"
        f"{_figure_html(figure, div_id)}</div>"
    )


def log_axis_ticks(values: Iterable[float]) -> tuple[list[float], list[str], list[float]]:
    """Ticks of a log-scale ratio axis at 1, 2 and 5 times the powers of ten (only the powers
    when the values span more than six decades), labelled ``0.5×``, ``1×``, ``2×`` (Plotly's
    own log ticks label 0.3–0.7 as ``3 … 7``), and the axis range (in log10) from the tick
    at or below the smallest value to the one at or above the largest, so that at least two
    labelled ticks show however narrow the values are."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if not positive:
        return [], [], []
    smallest, largest = min(positive), max(positive)
    low = math.floor(math.log10(smallest))
    high = math.ceil(math.log10(largest))
    steps = (1, 2, 5) if high - low <= 6 else (1,)
    grid = [m * 10.0**e for e in range(low - 1, high + 1) for m in steps]
    below = max(t for t in grid if t <= smallest * (1 + 1e-12))
    above = min(t for t in grid if t >= largest * (1 - 1e-12))
    if above <= below:  # every value on one tick: the next one up shows too
        above = min(t for t in grid if t > below)
    ticks = [t for t in grid if below <= t <= above]
    pad = 0.02 * max(1.0, math.log10(above / below))
    axis_range = [math.log10(below) - pad, math.log10(above) + pad]
    return ticks, [ratio_tick(t) for t in ticks], axis_range


def ratio_tick(value: float) -> str:
    """``0.05×``, ``0.2×``, ``1×``, ``2,000×``: as many decimals as the value needs."""
    if value >= 1:
        return f"{value:,.0f}×"
    digits = -math.floor(math.log10(value) + 1e-9)
    return f"{value:.{digits}f}×"


class _Reader:
    def __init__(self, settings: Settings) -> None:
        from tracehouse.serve.queries import reader

        self.connection = reader(settings)  # within the read commands' memory and spill limits

    def rows(self, sql: str, **parameters: Any) -> list[dict[str, Any]]:
        relation = self.connection.sql(sql, params=parameters)
        names = relation.columns
        return [dict(zip(names, row, strict=True)) for row in relation.fetchall()]

    def close(self) -> None:
        self.connection.close()


def write_report(settings: Settings, out_dir: Path) -> ReportResult:
    """Write the report of the current warehouse into ``out_dir``, a folder the report owns.

    ``out_dir`` must be new, empty, or a report folder this function wrote before (it carries
    ``REPORT_MARKER`` with its exact content); any other folder is refused, so a report never
    deletes or overwrites a user's files. One report at a time writes into a folder (it holds
    the marker's lock; the CLI and the Dagster asset both come here). The pages of one report
    go into a folder of their own (``pages-<token>``) and ``index.html``, written last and
    atomically, is the one switch: until it is replaced, readers (and an interrupted report)
    see the previous index with all of its pages. Only then are the previous reports' page
    folders removed.
    """
    # imported before the first page is written, so that nothing slow stands between the
    # pages and the switch (a Ctrl-C that arrives during an import waits for it to finish)
    import plotly.graph_objects
    import plotly.offline  # noqa: F401

    warehouse = Warehouse(settings.warehouse)
    warehouse.require_current()
    with claimed(REPORT_FOLDER, out_dir, settings.lock_timeout_s):
        result, top_rows = _write_report_into(settings, warehouse, out_dir)
    result.pages.insert(0, result.index)
    result.overview_rows = top_rows
    return result


def _write_report_into(
    settings: Settings, warehouse: Warehouse, out_dir: Path
) -> tuple[ReportResult, list[dict[str, Any]]]:
    """The report's pages, bundle and index, written into ``out_dir`` while holding it."""
    import plotly.offline

    earlier_pages = _earlier_pages(out_dir)
    pages_folder = f"{PAGES_PREFIX}{time.time_ns():x}"
    pages_dir = out_dir / pages_folder
    pages_dir.mkdir()
    reader = _Reader(settings)
    try:
        write_atomically(out_dir / PLOTLY_BUNDLE, plotly.offline.get_plotlyjs().encode())
        result = ReportResult(out_dir)
        definitions = reader.rows(DEFINITIONS_SQL)
        # each view is read once and split by definition: one query per page would recompute
        # the views for every page
        boards = _grouped(reader.rows(DEFINITION_LEADERBOARD_SQL), "definition")
        curves = _grouped(reader.rows(DEFINITION_FAST_P_SQL), "definition")
        speedups = _grouped(reader.rows(DEFINITION_SPEEDUPS_SQL), "definition")
        cells = _grouped(reader.rows(DEFINITION_COVERAGE_SQL), "definition")
        holders, holder_counts = record_holders(reader)
        named_runs: set[str] = set()
        for definition in definitions:
            name = definition["definition"]
            page = pages_dir / definition_page_name(name)
            records = holders.get(name, [])
            named_runs.update(r["run_id"] for r in records)
            html_text = _definition_page(
                definition,
                boards.get(name, []),
                curves.get(name, []),
                speedups.get(name, []),
                cells.get(name, []),
                records,
                holder_counts,
            )
            write_atomically(page, html_text.encode())
            result.pages.append(page)
        with_pages = {d["definition"] for d in definitions}
        changed = write_change_pages(reader.connection, settings, pages_dir, _page, _table, _chart)
        result.pages += [path for _, path in changed.pages]
        result.pages += write_record_pages(
            reader.connection,
            named_runs | changed.run_ids(),
            pages_dir / RECORD_FOLDER,
            _page,
            lambda run: _record_nav(run, with_pages),
        )
        overview, top_rows = _overview_page(
            reader, definitions, pages_folder, what_changed_html(pages_folder, changed, _table)
        )
    except BaseException as error:
        shutil.rmtree(pages_dir, ignore_errors=True)  # a page folder no index will link to
        from tracehouse.serve.queries import limit_error

        translated = limit_error(error, settings) if isinstance(error, Exception) else None
        if translated is None:
            raise
        raise translated from None
    finally:
        reader.close()
    with interrupts.deferred():  # the switch: from here on readers see this report
        write_atomically(result.index, overview.encode())
    for earlier in earlier_pages:
        shutil.rmtree(earlier, ignore_errors=True)
    return result, top_rows


# The marker that says a folder holds a report tracehouse wrote, and so is the report's to
# replace (and the lock one report at a time holds on it); the page folders of one report each.
# A folder an older tracehouse wrote (index.html, definitions/*.html, no marker) is refused like
# any other: it looks exactly like a folder of someone's own pages.
REPORT_FOLDER = OutputKind(
    command="tracehouse report",
    flag="--out",
    marker=".tracehouse-report.json",
    marker_bytes=b'{"written_by": "tracehouse report"}\n',
)
REPORT_MARKER = REPORT_FOLDER.marker
PAGES_PREFIX = "pages-"


def _earlier_pages(out_dir: Path) -> list[Path]:
    """The page folders of earlier (or interrupted) reports in ``out_dir``: every one there
    while this report holds the folder, since only the report holding it writes pages."""
    return [
        entry
        for entry in out_dir.iterdir()
        if entry.name.startswith(PAGES_PREFIX) and entry.is_dir() and not entry.is_symlink()
    ]


def _record_nav(run: dict[str, Any], with_pages: set[str]) -> str:
    """A record page's links back: the overview and the run's definition page (when its
    definition has one: runs of a definition file that was rejected have none)."""
    links = "<a href='../../index.html'>← overview</a>"
    if run["definition"] in with_pages:
        page = html.escape(definition_page_name(run["definition"]))
        links += f"<a href='../{page}'>← {html.escape(run['definition'])}</a>"
    return f"<nav>{links}</nav>"


def record_holders(
    reader: _Reader,
) -> tuple[dict[str, list[dict[str, Any]]], dict[tuple[str, str], int]]:
    """Per definition, the record holders its page names: per hardware the first
    RECORD_ROWS_MAX comparison groups in workload order (``workload_order``), read in batches
    so that no more are held; and how many groups each (definition, hardware) has."""
    import heapq
    import itertools

    from tracehouse.kernelindex import source_native_line

    kept: dict[tuple[str, str], list[tuple[Any, int, dict[str, Any]]]] = {}
    counts: dict[tuple[str, str], int] = {}
    order = itertools.count()
    cursor = reader.connection.execute(RECORD_HOLDERS_SQL)
    names = [d[0] for d in cursor.description or []]
    while batch := cursor.fetchmany(10_000):
        for values in batch:
            row = dict(zip(names, values, strict=True))
            group = (row["definition"], row["hardware"])
            counts[group] = counts.get(group, 0) + 1
            # a max-heap of the smallest keys: the negated order is not comparable, so the
            # heap holds (inverted key, tie, row) with the key wrapped to sort backwards
            entry = (
                _Backwards(workload_order(row["axes_json"], row["workload_key"])),
                next(order),
                row,
            )
            heap = kept.setdefault(group, [])
            if len(heap) < RECORD_ROWS_MAX:
                heapq.heappush(heap, entry)
            elif entry[0] > heap[0][0]:
                heapq.heapreplace(heap, entry)
    by_definition: dict[str, list[dict[str, Any]]] = {}
    for (definition, _), heap in sorted(kept.items()):
        for _, _, row in sorted(heap, key=lambda e: e[0].key):
            row["workload"] = changes.workload_label(row["axes_json"], row["workload_key"])
            row["source_native"] = (
                source_native_line(row["speedup_factor"])
                if row["speedup_factor"] is not None
                else None
            )
            row["rank"] = f"1 of {row['cohort_size']:,}"
            row["run_page"] = f"{RECORD_FOLDER}/{record_page_name(row['run_id'])}"
            by_definition.setdefault(definition, []).append(row)
    return by_definition, counts


@dataclass(frozen=True)
class _Backwards:
    """A sort key compared the other way round (a min-heap of these keeps the largest keys
    on top, to be replaced by smaller ones)."""

    key: Any

    def __lt__(self, other: _Backwards) -> bool:
        return self.key > other.key

    def __gt__(self, other: _Backwards) -> bool:
        return self.key < other.key


def _overview_page(
    reader: _Reader, definitions: list[dict[str, Any]], pages_folder: str, what_changed: str
) -> tuple[str, list[dict[str, Any]]]:
    from tracehouse.serve.queries import LEADERBOARD_ORDER_RULE

    sources = reader.rows(SOURCES_SQL)
    left_out = reader.rows(UNION_LEFT_OUT_SQL)
    counts = [
        {"table": name, "rows": reader.rows(f'SELECT count(*) AS n FROM "{name}"')[0]["n"]}  # noqa: S608  (own table names)
        for name in TABLES
    ]
    rejects = reader.rows(REJECTS_SQL)
    fib_ranking = reader.rows(FIB_RANKING_SQL)
    web_map = reader.rows(WEB_MAP_SQL)[0]["baseline_map"]
    web_ranking = reader.rows(WEB_RANKING_SQL, map=web_map)
    top = reader.rows(TOP_PER_DEFINITION_SQL)
    for row in top:
        row["page"] = f"{pages_folder}/{definition_page_name(row['definition'])}"

    parts = ["<h1>tracehouse report</h1>"]
    # The first screen answers "what changed" (a regression is seen first), then "who is
    # fastest where".
    parts.append(what_changed)
    parts.append("<h2>Who is fastest where</h2>")
    parts.append(
        "<p class='note'>Per definition and hardware, the solution ranked first: its "
        "geometric-mean speedup over that hardware's baseline on the workloads both passed "
        "(the baseline reads 1.0 and is first when nothing beats it), and its coverage, the "
        f"share of the slice's workloads it passed. {html.escape(LEADERBOARD_ORDER_RULE)}.</p>"
    )
    parts.append(
        _table(
            top,
            [
                # the answer first, so that a narrow window still shows it without scrolling
                ("definition", "definition"),
                ("hardware", "hardware"),
                ("geomean_speedup", "speedup"),
                ("coverage", "coverage"),
                ("solution", "best solution"),
                ("workloads_passed", "passed"),
                ("workloads_in_slice", "of"),
                ("baseline_solution", "baseline"),
                ("author", "author"),
            ],
            table_id="top-per-definition",
            links={"definition": "page"},
        )
    )
    parts.append(f"<h2>Sources ({len(sources)})</h2>")
    parts.append(
        "<p class='note'>Every source the warehouse holds, at its current snapshot. "
        "FlashInfer-Bench's figures below are per source, and over the union "
        "<code>(all sources)</code> of the definitions the sources agree on.</p>"
    )
    parts.append(
        _table(
            sources,
            [
                ("source", "source"),
                ("uri", "location"),
                ("revision", "revision"),
                ("snapshot_id", "snapshot"),
                ("built_at", "built at"),
                ("definitions", "definitions"),
                ("solutions", "solutions"),
                ("runs", "runs"),
                ("rejects", "rejects"),
            ],
            table_id="sources",
        )
    )
    if left_out:  # where the sources disagree, the union says so instead of mixing them
        parts.append(
            "<p class='note'>Left out of <code>(all sources)</code>: definitions the sources "
            "disagree on (their operation digests differ); their figures are per source only.</p>"
        )
        parts.append(
            _table(
                left_out,
                [("definition", "definition"), ("reason", "why"), ("sources", "sources")],
                table_id="union-left-out",
            )
        )
    parts.append("<h2>Author ranking, FlashInfer-Bench's rule (all GPUs mixed), per source</h2>")
    parts.append(
        "<p class='note'><code>flashinfer-bench report summary</code>: per author the best "
        "solution per definition by arithmetic mean speedup over the author-<code>baseline</code> "
        "solution, every GPU mixed; any failed run zeroes a solution. Where FlashInfer-Bench "
        "raises, the row says why instead of a number.</p>"
    )
    parts.append(
        _table(
            fib_ranking,
            [
                ("source", "source"),
                ("rank", "#"),
                ("author", "author"),
                ("avg_speedup", "avg speedup"),
                ("success_rate", "success rate"),
                ("win_rate", "win rate"),
                ("workloads", "workloads"),
                ("definitions", "definitions"),
                ("outcome", "outcome"),
                ("reason", "why none"),
            ],
            table_id="fib-author-ranking",
        )
    )
    parts.append(
        "<h2>Author ranking, FlashInfer-Bench web leaderboard "
        f"(map <code>{html.escape(web_map)}</code>), per source</h2>"
    )
    parts.append(
        _table(
            web_ranking,
            [
                ("source", "source"),
                ("rank", "#"),
                ("author", "author"),
                ("avg_speedup", "avg speedup"),
                ("success_rate", "resolved"),
                ("win_rate", "win rate"),
                ("workloads", "workloads"),
                ("definitions", "definitions"),
                ("ui_hidden", "hidden on the site"),
            ],
            table_id="web-author-ranking",
        )
    )
    links = "".join(
        f"<li><a href='{pages_folder}/{html.escape(definition_page_name(d['definition']))}'>"
        f"{html.escape(d['definition'])}</a> ({d['solutions']:,} solutions, {d['runs']:,} runs)</li>"
        for d in definitions
    )
    parts.append(f"<h2>Definitions</h2><ul>{links}</ul>")
    parts.append("<h2>Tables</h2>")
    parts.append(_table(counts, [("table", "table"), ("rows", "rows")], table_id="table-counts"))
    parts.append("<h2>Rejects by reason</h2>")
    parts.append(
        _table(
            rejects,
            [("source", "source"), ("reason", "reason"), ("records", "records")],
            table_id="rejects",
        )
    )
    return _page("tracehouse report", "".join(parts), depth=0), top


def plotly_label(value: Any) -> str:
    """A label handed to Plotly, which reads <a>, <b>, <br> … in labels as markup: ``&`` and
    ``<`` as entities, so a solution named ``<a href=…>`` shows as text and links nowhere."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def solution_colours(solutions: Iterable[str]) -> dict[str, str]:
    """One colour per solution of a page, by name order: the same in every chart and table."""
    ordered = sorted(set(solutions))
    return {name: SOLUTION_PALETTE[i % len(SOLUTION_PALETTE)] for i, name in enumerate(ordered)}


def workload_order(axes_json: str | None, workload_key: str) -> tuple[Any, ...]:
    """A sort key that orders workloads by their axis values as numbers (``M=1, M=128,
    M=11006``, not text order), axis by axis; text values after numbers; the key breaks ties."""
    import json

    try:
        axes = json.loads(axes_json) if axes_json else None
    except ValueError:
        axes = None
    values: list[tuple[int, float, str]] = []
    if isinstance(axes, dict):
        for value in axes.values():
            if isinstance(value, int | float) and not isinstance(value, bool):
                values.append((0, float(value), ""))
            else:
                values.append((1, 0.0, str(value)))
    return (len(values) == 0, tuple(values), workload_key)


def _definition_page(
    definition: dict[str, Any],
    board: list[dict[str, Any]],
    curves: list[dict[str, Any]],
    speedups: list[dict[str, Any]],
    cells: list[dict[str, Any]],
    records: list[dict[str, Any]],
    record_counts: dict[tuple[str, str], int],
) -> str:
    import plotly.graph_objects as go

    from tracehouse.serve.queries import LEADERBOARD_ORDER_RULE

    name = definition["definition"]
    parts = [
        "<nav><a href='../index.html'>← overview</a></nav>",
        f"<h1>{html.escape(name)}</h1>",
        f"<p class='note'>op_type {html.escape(str(definition['op_type']))}; "
        f"{definition['solutions']:,} solutions, {definition['runs']:,} runs.</p>",
    ]
    colours = solution_colours(r["solution"] for r in board)
    hardware_list = sorted({row["hardware"] for row in board})
    if not hardware_list:
        parts.append("<p class='note'>No runs of this definition in the warehouse.</p>")
    for index, hardware in enumerate(hardware_list):
        rows = [r for r in board if r["hardware"] == hardware]
        baseline = rows[0]["baseline_solution"]
        choice = rows[0]["baseline_choice"]
        parts.append(f"<h2>{html.escape(hardware)}</h2>")
        parts.append(
            "<p class='note'>Baseline: "
            + (
                f"<code>{html.escape(baseline)}</code> ({html.escape(str(choice))})"
                if baseline
                else "none, so no speedups"
            )
            + f". {html.escape(LEADERBOARD_ORDER_RULE)}.</p>"
        )
        parts.append(
            _table(
                rows,
                LEADERBOARD_COLUMNS,
                table_id=f"leaderboard-{index}",
                css_class="leaderboard",
                swatches={"solution": colours},
            )
        )
        parts.append(
            _fast_p_chart(go, [c for c in curves if c["hardware"] == hardware], index, colours)
        )
        parts.append(
            _speedup_chart(go, [s for s in speedups if s["hardware"] == hardware], index, colours)
        )
        parts.append(_coverage_chart(go, [c for c in cells if c["hardware"] == hardware], index))
        parts.append(_records_table(records, record_counts, name, hardware, index, colours))
    return _page(name, "".join(parts), depth=1)


def _records_table(
    records: list[dict[str, Any]],
    counts: dict[tuple[str, str], int],
    definition: str,
    hardware: str,
    index: int,
    colours: dict[str, str],
) -> str:
    rows = [r for r in records if r["hardware"] == hardware]
    total = counts.get((definition, hardware), 0)
    note = (
        f"The run ranked first in each of the {total:,} comparison groups (a workload on one "
        "environment and protocol), by workload; each links to its record page."
    )
    if total > len(rows):
        note += (
            f" The first {len(rows):,} by workload are shown; <code>tracehouse record ID "
            "--html OUT</code> writes the page of any other run."
        )
    return f"<p class='chart-title'>Record holders</p><p class='note'>{note}</p>" + _table(
        rows,
        RECORD_COLUMNS,
        table_id=f"records-{index}",
        links={"run_id": "run_page"},
        swatches={"solution": colours},
    )


def _grouped(rows: Iterable[dict[str, Any]], key: str) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row[key], []).append(row)
    return groups


def _fast_p_chart(
    go: Any, curves: list[dict[str, Any]], index: int, colours: dict[str, str]
) -> str:
    if not curves:
        return "<p class='note'>fast_p: no baseline workloads to compare with.</p>"
    figure = go.Figure()
    for solution, points in _grouped(curves, "solution").items():
        figure.add_trace(
            go.Scatter(
                x=[p["p"] for p in points],
                y=[p["fast_p"] for p in points],
                mode="lines",
                name=plotly_label(solution),
                line={"shape": "hv", "color": colours.get(solution)},
            )
        )
    figure.update_layout(
        xaxis_title="p (speedup threshold)",
        yaxis_title="fast_p",
        yaxis_range=[0, 1.05],
        height=380,
        margin={"t": 30, "b": 40},
        legend={"font": {"size": 10}},
    )
    title = "fast_p: share of the baseline's workloads passed with speedup ≥ p"
    return _chart(figure, f"fast-p-{index}", title)


def _speedup_chart(
    go: Any, speedups: list[dict[str, Any]], index: int, colours: dict[str, str]
) -> str:
    if not speedups:
        return "<p class='note'>Speedup distribution: no workload both passed.</p>"
    figure = go.Figure()
    many = len(speedups) > SPEEDUP_POINTS_MAX  # a distribution, not 200,000 points
    for solution, points in _grouped(speedups, "solution").items():
        figure.add_trace(
            go.Box(
                y=[p["speedup"] for p in points],
                name=plotly_label(solution),
                boxpoints="outliers" if many else "all",
                jitter=0.3,
                marker={"color": colours.get(solution)},
                text=None if many else [plotly_label(p["workload_key"]) for p in points],
            )
        )
    tickvals, ticktext, axis_range = log_axis_ticks(p["speedup"] for p in speedups)
    figure.update_layout(
        yaxis={
            "type": "log",
            "title": "baseline / solution latency",
            "tickvals": tickvals,
            "ticktext": ticktext,
            "range": axis_range,
        },
        showlegend=False,
        height=420,
        margin={"t": 30, "b": 120},
    )
    title = "Speedup over the baseline, per workload (log scale)"
    return _chart(figure, f"speedups-{index}", title)


def _status_legend(statuses: Iterable[str], index: int) -> str:
    items = "".join(
        f"<li data-status='{html.escape(s)}'><span class='swatch' "
        f"style='background:{STATUS_COLOURS[s]}'></span>{html.escape(STATUS_LABELS[s])}</li>"
        for s in STATUS_COLOURS
        if s in set(statuses)
    )
    return f"<ul class='legend' id='coverage-legend-{index}'>{items}</ul>"


def _coverage_chart(go: Any, cells: list[dict[str, Any]], index: int) -> str:
    if not cells:
        return ""
    solutions = sorted({c["solution"] for c in cells})
    known = {c["status"] if c["status"] in STATUS_COLOURS else "other failure" for c in cells}
    present = [s for s in STATUS_COLOURS if s in known]
    legend = _status_legend(present, index)
    status_of = {
        (c["solution"], c["workload_key"]): (
            c["status"] if c["status"] in STATUS_COLOURS else "other failure"
        )
        for c in cells
    }
    labels = _workload_labels(cells)
    axes_of = {c["workload_key"]: c.get("axes_json") for c in cells}
    workloads = sorted(labels, key=lambda key: workload_order(axes_of[key], key))
    if len(workloads) > COVERAGE_MAP_MAX_WORKLOADS:
        # A large definition: how many workloads each solution passed / failed how / did not
        # run, one stacked bar per solution (a histogram of statuses), not a map of every cell.
        figure = go.Figure()
        for status in present:
            figure.add_trace(
                go.Bar(
                    y=[plotly_label(s) for s in solutions],
                    x=[sum(1 for w in workloads if status_of[(s, w)] == status) for s in solutions],
                    name=STATUS_LABELS[status],
                    orientation="h",
                    marker={"color": STATUS_COLOURS[status]},
                )
            )
        figure.update_layout(
            barmode="stack",
            height=max(260, 26 * len(solutions) + 160),
            margin={"t": 30, "l": 10},
            yaxis={"automargin": True},
            xaxis={"title": "workloads"},
        )
        title = f"Coverage: {len(workloads):,} workloads, counted per solution and status"
        return _chart(figure, f"coverage-{index}", title, before=legend)
    codes = {status: position for position, status in enumerate(present)}
    z = [[codes[status_of[(s, w)]] for w in workloads] for s in solutions]
    text = [[STATUS_LABELS[status_of[(s, w)]] for w in workloads] for s in solutions]
    # One flat band of the colour scale per status; code k sits in the middle of band k.
    bands = len(present)
    scale = [
        [edge, STATUS_COLOURS[status]]
        for position, status in enumerate(present)
        for edge in (position / bands, (position + 1) / bands)
    ]
    figure = go.Figure(
        go.Heatmap(
            z=z,
            x=[plotly_label(labels[w]) for w in workloads],
            y=[plotly_label(s) for s in solutions],
            text=text,
            hovertemplate="%{y}<br>workload %{x}: %{text}<extra></extra>",
            zmin=-0.5,
            zmax=bands - 0.5,
            colorscale=scale,
            showscale=False,
            xgap=1,
            ygap=1,
        )
    )
    figure.update_layout(
        height=max(260, 28 * len(solutions) + 160),
        margin={"t": 30, "l": 10},
        yaxis={"automargin": True},
        xaxis={
            "title": "workload (axes, in their numeric order)",
            "automargin": True,
            "tickangle": -45,
        },
    )
    title = "Coverage: solutions × workloads, by status"
    return _chart(figure, f"coverage-{index}", title, before=legend)


def _workload_labels(cells: list[dict[str, Any]]) -> dict[str, str]:
    """Each workload key's label by its axes, made unique (workloads of the same axes get the
    first characters of their key beside them), since the chart's categories are its labels."""
    by_key: dict[str, str] = {}
    for cell in cells:
        by_key.setdefault(
            cell["workload_key"],
            changes.workload_label(cell.get("axes_json"), cell["workload_key"]),
        )
    seen: dict[str, list[str]] = {}
    for key in sorted(by_key):
        seen.setdefault(by_key[key], []).append(key)
    for label, keys in seen.items():
        if len(keys) > 1:
            for key in keys:
                by_key[key] = f"{label} · {key[:8]}" if label != key[:8] else key
    return by_key


def report_summary_line(result: ReportResult) -> str:
    return f"wrote {len(result.pages)} pages to {result.out_dir} (open {result.index})"
