"""A definition's page of the report: its leaderboard per hardware, the fast_p curves, the
speedup distribution, the coverage map (one colour per status, each failure kind its own)
and the record holders, each linked to its record page.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable
from typing import Any

from tracehouse import rejects
from tracehouse.serve import changes
from tracehouse.serve.record_page import RECORD_FOLDER, record_page_name
from tracehouse.serve.report_blocks import (
    ReportReader,
    chart_html,
    log_axis_ticks,
    page_html,
    plotly_label,
    table_html,
    trace,
)

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

# What the pages show, as named read-only queries over the views (values bound, never
# formatted), each view read once for every page: the definitions that get a page, then per
# definition its leaderboard, fast_p curves, speedups and coverage cells.
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
# The curves and speedups come as one row per (definition, hardware, solution) holding its
# points as lists: a chart's points, never a Python object per point.
DEFINITION_FAST_P_SQL = """
SELECT definition, hardware, solution, list(p ORDER BY p) AS p, list(fast_p ORDER BY p) AS fast_p
FROM leaderboard_fast_p GROUP BY ALL ORDER BY definition, hardware, solution
"""
DEFINITION_SPEEDUPS_SQL = """
SELECT definition, hardware, solution, list(workload_key ORDER BY workload_key) AS workload_key,
       list(speedup ORDER BY workload_key) AS speedup
FROM leaderboard_speedups WHERE speedup IS NOT NULL
GROUP BY ALL ORDER BY definition, hardware, solution
"""
# Per (solution, workload): PASSED when any run passed, else the failure kind (the first by name
# when several), NOT_EVALUATED when FlashInfer-Bench skipped every record; 'not run' where the
# solution has no run of a workload that others ran. Labelled by the workload's axes. A
# (definition, hardware) of more than $max_workloads workloads is drawn as counts per solution
# and status (_coverage_chart), so it comes counted (`cells` grid cells a row, no workload):
# 1,000,000 cells held as Python rows took the report of 200,000 workloads past 4 GB. Only the
# drawn definitions have their grid built; a counted one's 'not run' is its workloads less
# the solution's cells.
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
slices AS (
    SELECT definition, hardware, count(DISTINCT workload_key) AS n_workloads
    FROM cells GROUP BY ALL
),
mapped AS (
    SELECT s.definition, s.hardware, s.solution, w.workload_key, n.n_workloads
    FROM slices AS n
    JOIN (SELECT DISTINCT definition, hardware, solution FROM cells) AS s
        USING (definition, hardware)
    JOIN (SELECT DISTINCT definition, hardware, workload_key FROM cells) AS w
        USING (definition, hardware)
    WHERE n.n_workloads <= $max_workloads
),
counted AS (
    SELECT c.definition, c.hardware, c.solution, c.status, n.n_workloads
    FROM cells AS c
    JOIN slices AS n USING (definition, hardware)
    WHERE n.n_workloads > $max_workloads
)
SELECT m.definition, m.hardware, m.solution, m.workload_key, a.axes_json,
       coalesce(c.status, 'not run') AS status, 1 AS cells, m.n_workloads
FROM mapped AS m
LEFT JOIN cells AS c USING (definition, hardware, solution, workload_key)
LEFT JOIN axes AS a USING (definition, workload_key)
UNION ALL
SELECT definition, hardware, solution, NULL, NULL, status, count(*), any_value(n_workloads)
FROM counted
GROUP BY definition, hardware, solution, status
UNION ALL
SELECT definition, hardware, solution, NULL, NULL, 'not run',
       any_value(n_workloads) - count(*), any_value(n_workloads)
FROM counted
GROUP BY definition, hardware, solution
HAVING any_value(n_workloads) > count(*)
ORDER BY definition, hardware, solution, workload_key, status
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


def record_holders(
    reader: ReportReader,
) -> tuple[dict[str, list[dict[str, Any]]], dict[tuple[str, str], int]]:
    """Per definition, the record holders its page names: per hardware the first
    RECORD_ROWS_MAX comparison groups in workload order (``workload_order``), read in batches
    so that no more are held; and how many groups each (definition, hardware) has."""
    import itertools

    from tracehouse.kernelindex import source_native_line

    # per (definition, hardware): (workload order, arrival, row values), cut back to the first
    # RECORD_ROWS_MAX whenever it reaches twice that: sorting tuples costs no Python comparison
    # per pair, where a heap of reversed keys called one for every push (200,000 groups)
    kept: dict[tuple[str, str], list[tuple[Any, int, tuple[Any, ...]]]] = {}
    counts: dict[tuple[str, str], int] = {}
    arrival = itertools.count()
    cursor = reader.connection.execute(RECORD_HOLDERS_SQL)
    names = [d[0] for d in cursor.description or []]
    at = {name: i for i, name in enumerate(names)}
    definition_at, hardware_at = at["definition"], at["hardware"]
    axes_at, key_at = at["axes_json"], at["workload_key"]
    while batch := cursor.fetchmany(10_000):
        for values in batch:
            group = (values[definition_at], values[hardware_at])
            counts[group] = counts.get(group, 0) + 1
            entries = kept.setdefault(group, [])
            entries.append((workload_order(values[axes_at], values[key_at]), next(arrival), values))
            if len(entries) >= 2 * RECORD_ROWS_MAX:
                entries.sort()
                del entries[RECORD_ROWS_MAX:]
    by_definition: dict[str, list[dict[str, Any]]] = {}
    for (definition, _), entries in sorted(kept.items()):
        entries.sort()
        for _, _, values in entries[:RECORD_ROWS_MAX]:
            row = dict(zip(names, values, strict=True))
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


def solution_colours(solutions: Iterable[str]) -> dict[str, str]:
    """One colour per solution of a page, by name order: the same in every chart and table."""
    ordered = sorted(set(solutions))
    return {name: SOLUTION_PALETTE[i % len(SOLUTION_PALETTE)] for i, name in enumerate(ordered)}


def workload_order(axes_json: str | None, workload_key: str) -> tuple[Any, ...]:
    """A sort key that orders workloads by their axis values as numbers (``M=1, M=128,
    M=11006``, not text order), axis by axis; text values after numbers; the key breaks ties."""
    axes = changes.parse_axes(axes_json)
    values: list[tuple[int, float, str]] = []
    if axes is not None:
        for value in axes.values():
            if isinstance(value, int | float) and not isinstance(value, bool):
                values.append((0, float(value), ""))
            else:
                values.append((1, 0.0, str(value)))
    return (len(values) == 0, tuple(values), workload_key)


def definition_page(
    definition: dict[str, Any],
    board: list[dict[str, Any]],
    curves: list[dict[str, Any]],
    speedups: list[dict[str, Any]],
    cells: list[dict[str, Any]],
    records: list[dict[str, Any]],
    record_counts: dict[tuple[str, str], int],
) -> str:
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
            table_html(
                rows,
                LEADERBOARD_COLUMNS,
                table_id=f"leaderboard-{index}",
                css_class="leaderboard",
                swatches={"solution": colours},
            )
        )
        parts.append(
            _fast_p_chart([c for c in curves if c["hardware"] == hardware], index, colours)
        )
        parts.append(
            _speedup_chart([s for s in speedups if s["hardware"] == hardware], index, colours)
        )
        parts.append(_coverage_chart([c for c in cells if c["hardware"] == hardware], index))
        parts.append(_records_table(records, record_counts, name, hardware, index, colours))
    return page_html(name, "".join(parts), depth=1)


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
    return f"<p class='chart-title'>Record holders</p><p class='note'>{note}</p>" + table_html(
        rows,
        RECORD_COLUMNS,
        table_id=f"records-{index}",
        links={"run_id": "run_page"},
        swatches={"solution": colours},
    )


def grouped_by(rows: Iterable[dict[str, Any]], key: str) -> dict[str, list[dict[str, Any]]]:
    """The rows by their value of ``key``, each group in the rows' order."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row[key], []).append(row)
    return groups


def _fast_p_chart(curves: list[dict[str, Any]], index: int, colours: dict[str, str]) -> str:
    """The fast_p curves of one hardware: a row per solution (DEFINITION_FAST_P_SQL)."""
    if not curves:
        return "<p class='note'>fast_p: no baseline workloads to compare with.</p>"
    data = [
        trace(
            "scatter",
            x=curve["p"],
            y=curve["fast_p"],
            mode="lines",
            name=plotly_label(curve["solution"]),
            line={"shape": "hv", "color": colours.get(curve["solution"])},
        )
        for curve in curves
    ]
    layout = {
        "yaxis": {"title": {"text": "fast_p"}, "range": [0, 1.05]},
        "margin": {"t": 30, "b": 40},
        "legend": {"font": {"size": 10}},
        "xaxis": {"title": {"text": "p (speedup threshold)"}},
        "height": 380,
    }
    title = "fast_p: share of the baseline's workloads passed with speedup ≥ p"
    return chart_html(data, layout, f"fast-p-{index}", title)


def _speedup_chart(speedups: list[dict[str, Any]], index: int, colours: dict[str, str]) -> str:
    """The speedups of one hardware: a row per solution (DEFINITION_SPEEDUPS_SQL)."""
    if not speedups:
        return "<p class='note'>Speedup distribution: no workload both passed.</p>"
    # a distribution, not 200,000 points
    many = sum(len(row["speedup"]) for row in speedups) > SPEEDUP_POINTS_MAX
    data = [
        trace(
            "box",
            y=row["speedup"],
            name=plotly_label(row["solution"]),
            boxpoints="outliers" if many else "all",
            jitter=0.3,
            marker={"color": colours.get(row["solution"])},
            text=None if many else [plotly_label(key) for key in row["workload_key"]],
        )
        for row in speedups
    ]
    tickvals, ticktext, axis_range = log_axis_ticks(
        speedup for row in speedups for speedup in row["speedup"]
    )
    layout = {
        "yaxis": {
            "type": "log",
            "title": {"text": "baseline / solution latency"},
            "tickvals": tickvals,
            "ticktext": ticktext,
            "range": axis_range,
        },
        "margin": {"t": 30, "b": 120},
        "showlegend": False,
        "height": 420,
    }
    title = "Speedup over the baseline, per workload (log scale)"
    return chart_html(data, layout, f"speedups-{index}", title)


def _status_legend(statuses: Iterable[str], index: int) -> str:
    items = "".join(
        f"<li data-status='{html.escape(s)}'><span class='swatch' "
        f"style='background:{STATUS_COLOURS[s]}'></span>{html.escape(STATUS_LABELS[s])}</li>"
        for s in STATUS_COLOURS
        if s in set(statuses)
    )
    return f"<ul class='legend' id='coverage-legend-{index}'>{items}</ul>"


def _coverage_chart(cells: list[dict[str, Any]], index: int) -> str:
    """The coverage of one (definition, hardware): a map of every (solution, workload) cell,
    or above COVERAGE_MAP_MAX_WORKLOADS workloads the counted rows DEFINITION_COVERAGE_SQL
    gives instead, one stacked bar per solution."""
    if not cells:
        return ""
    solutions = sorted({c["solution"] for c in cells})

    def shown(status: str) -> str:
        return status if status in STATUS_COLOURS else "other failure"

    known = {shown(c["status"]) for c in cells}
    present = [s for s in STATUS_COLOURS if s in known]
    legend = _status_legend(present, index)
    workload_count = cells[0]["n_workloads"]
    if workload_count > COVERAGE_MAP_MAX_WORKLOADS:
        # A large definition: how many workloads each solution passed / failed how / did not
        # run, one stacked bar per solution (a histogram of statuses), not a map of every cell.
        counts: Counter[tuple[str, str]] = Counter()
        for cell in cells:
            counts[(cell["solution"], shown(cell["status"]))] += cell["cells"]
        data = [
            trace(
                "bar",
                y=[plotly_label(s) for s in solutions],
                x=[counts[(s, status)] for s in solutions],
                name=STATUS_LABELS[status],
                orientation="h",
                marker={"color": STATUS_COLOURS[status]},
            )
            for status in present
        ]
        layout = {
            "margin": {"t": 30, "l": 10},
            "yaxis": {"automargin": True},
            "barmode": "stack",
            "height": max(260, 26 * len(solutions) + 160),
            "xaxis": {"title": {"text": "workloads"}},
        }
        title = f"Coverage: {workload_count:,} workloads, counted per solution and status"
        return chart_html(data, layout, f"coverage-{index}", title, before=legend)
    status_of = {(c["solution"], c["workload_key"]): shown(c["status"]) for c in cells}
    labels = _workload_labels(cells)
    axes_of = {c["workload_key"]: c.get("axes_json") for c in cells}
    workloads = sorted(labels, key=lambda key: workload_order(axes_of[key], key))
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
    data = [
        trace(
            "heatmap",
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
    ]
    layout = {
        "margin": {"t": 30, "l": 10},
        "yaxis": {"automargin": True},
        "xaxis": {
            "title": {"text": "workload (axes, in their numeric order)"},
            "automargin": True,
            "tickangle": -45,
        },
        "height": max(260, 28 * len(solutions) + 160),
    }
    title = "Coverage: solutions × workloads, by status"
    return chart_html(data, layout, f"coverage-{index}", title, before=legend)


def _workload_labels(cells: list[dict[str, Any]]) -> dict[str, str]:
    """Each workload key's label by its axes, made unique (workloads of the same axes get the
    first characters of their key beside them), since the chart's categories are its labels."""
    by_key: dict[str, str] = {}
    for cell in cells:
        key = cell["workload_key"]
        if key not in by_key:  # a workload has a cell per solution: its label is made once
            by_key[key] = changes.workload_label(cell.get("axes_json"), key)
    seen: dict[str, list[str]] = {}
    for key in sorted(by_key):
        seen.setdefault(by_key[key], []).append(key)
    for label, keys in seen.items():
        if len(keys) > 1:
            for key in keys:
                by_key[key] = f"{label} · {key[:8]}" if label != key[:8] else key
    return by_key
