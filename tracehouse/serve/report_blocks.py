"""What every page of the HTML report is made of: the read-only reader of the views, how a
value is written (a column's kind), tables that carry each cell's exact value, charts under
their heading, log-axis ticks, and the page frame that loads the one bundled script.
"""

from __future__ import annotations

import functools
import hashlib
import html
import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tracehouse.serve import render
from tracehouse.settings import Settings

if TYPE_CHECKING:
    from tracehouse.serve.queries import MemorySetting

PLOTLY_BUNDLE = "plotly.min.js"


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


def table_html(
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


def page_html(title: str, body: str, *, depth: int) -> str:
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


# A chart is handed to Plotly.js as the plain figure JSON of its schema (data: a list of traces,
# layout), built by the pages themselves: constructing and validating Plotly's Python figure
# objects cost most of a large report's time, and wrote the same JSON. A trace's keys are in
# name order with its type last, as Plotly's own figures serialise them.
def trace(kind: str, **properties: Any) -> dict[str, Any]:
    """A trace of type ``kind`` with the properties given; a property given as None is left
    unset (Plotly's default), as are None values inside a nested property, and a nested
    property left with nothing set."""
    shown = {}
    for name in sorted(properties):
        value = properties[name]
        if isinstance(value, dict):
            value = {key: value[key] for key in sorted(value) if value[key] is not None} or None
        if value is not None:
            shown[name] = value
    return {**shown, "type": kind}


@functools.cache
def _default_template() -> dict[str, Any]:
    """Plotly's default template (its colours, grid and fonts), written into every figure's
    layout as a Plotly figure carries it."""
    import plotly.io

    template = plotly.io.templates[plotly.io.templates.default]
    return template.to_plotly_json()


def _figure_html(data: list[dict[str, Any]], layout: dict[str, Any], div_id: str) -> str:
    """A chart's div and script. Its title is never Plotly's (the mode bar, drawn over the
    figure's top right, covers that): ``chart_html`` writes it as a heading above the figure."""
    import plotly.io

    figure = {"data": data, "layout": {"template": _default_template(), **layout}}
    return str(
        plotly.io.to_html(
            figure,
            full_html=False,
            include_plotlyjs=False,
            div_id=div_id,
            config={"displaylogo": False, "responsive": True},
            validate=False,
        )
    )


def chart_html(
    data: list[dict[str, Any]],
    layout: dict[str, Any],
    div_id: str,
    title: str,
    *,
    before: str = "",
) -> str:
    """A chart (its traces and layout, see ``trace``) under its title, a heading of the page
    (never covered, wrapped when narrow)."""
    return (
        f"<div class='chart' id='{html.escape(div_id)}-box'>"
        f"<p class='chart-title'>{html.escape(title)}</p>{before}"
        f"{_figure_html(data, layout, div_id)}</div>"
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


# Views that several of the report's queries read, directly or through other views, in the
# order they depend on each other. DuckDB computes a view again wherever it is named, and
# resolves a name to the connection's temporary tables before the database's views, so each is
# computed once into a temporary table of its own name that every later query reads in its
# place (as the regression thresholds are, tracehouse.assemble.history). At 1,000,000 runs the
# overview's web ranking alone computed web_scoped_traces six times over (26 s, 4 GB).
SHARED_VIEWS = (
    "solution_workload_latency",
    "leaderboard_baselines",
    "leaderboard_speedups",
    "fib_scoped_traces",
    "fib_solution_scores",
    "web_traces",
    "web_groups",
    "web_definition_scopes",
    "web_solution_scores",
    "latency_history",
)


class ReportReader:
    """The report's one read-only connection, within the read commands' spill limit and the
    report's memory (``report_memory_mb``)."""

    # the setting its memory comes from, which an out-of-memory error names (report.py)
    memory_setting: MemorySetting = "report_memory_mb"

    def __init__(self, settings: Settings) -> None:
        from tracehouse.serve.queries import reader

        self.connection = reader(settings, self.memory_setting, batch=True)

    def compute_shared_views(self) -> None:
        """Each of SHARED_VIEWS into a temporary table of its name (spilled like any query)."""
        for view in SHARED_VIEWS:
            self.connection.execute(f'CREATE TEMP TABLE "{view}" AS FROM "{view}"')

    def rows(self, sql: str, **parameters: Any) -> list[dict[str, Any]]:
        relation = self.connection.sql(sql, params=parameters)
        names = relation.columns
        return [dict(zip(names, row, strict=True)) for row in relation.fetchall()]

    def close(self) -> None:
        self.connection.close()


def plotly_label(value: Any) -> str:
    """A label handed to Plotly, which reads <a>, <b>, <br> … in labels as markup: ``&`` and
    ``<`` as entities, so a solution named ``<a href=…>`` shows as text and links nowhere."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
