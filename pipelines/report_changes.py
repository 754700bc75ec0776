"""The report's "what changed" pages: one per source, what `tracehouse changes` compares by
default (the source's previous snapshot and its current one) — regressions, improvements,
fixed (newly passing) and broken (newly failing) — with a chart of latency over the revisions
the warehouse has read for every flagged solution × workload.

Kept apart from the report's other pages (pipelines/report.py calls ``write_change_pages``);
every figure comes from ``pipelines.changes``, the same code the command and the Dagster check
use.
"""

from __future__ import annotations

import hashlib
import html
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines import changes
from pipelines.files import write_atomically
from pipelines.settings import Settings

if TYPE_CHECKING:
    import duckdb

CHANGES_FOLDER = "changes"  # inside the report's page folder

# Every result of one solution on one comparison key, in the order the warehouse saw them.
LATENCY_SERIES_SQL = """
SELECT h.first_seen_at, h.source, h.first_snapshot_number, s.resolved_sha,
       s.requested_revision, h.observed_at, h.latency_ns, h.run_id
FROM latency_history AS h
LEFT JOIN source_snapshots AS s
    ON s.source = h.source AND s.snapshot_number = h.first_snapshot_number
WHERE h.solution = $solution AND h.comparison_key = $comparison_key
ORDER BY h.first_seen_at, h.observed_at, h.run_id
"""

VERDICT_COLUMNS = (
    ("solution", "solution"),
    ("definition", "definition"),
    ("workload_uuid", "workload"),
    ("hardware", "hardware"),
    ("latency_ns", "latency ns"),
    ("history_mean_ns", "earlier mean ns"),
    ("history_size", "earlier results"),
    ("relative_change", "change"),
    ("z_score", "z-score"),
)
STATUS_COLUMNS = (
    ("solution", "solution"),
    ("definition", "definition"),
    ("workload_uuid", "workload"),
    ("hardware", "hardware"),
    ("status_before", "before"),
    ("status_after", "now"),
)
# (section of the change report, heading, columns)
PAGE_SECTIONS = (
    ("regressions", "Regressions", VERDICT_COLUMNS),
    ("improvements", "Improvements", VERDICT_COLUMNS),
    ("newly_passing", "Fixed (newly passing)", STATUS_COLUMNS),
    ("newly_failing", "Broken (newly failing)", STATUS_COLUMNS),
)


def change_page_name(source: str) -> str:
    """The page of one source in CHANGES_FOLDER."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", source)[:80]
    return f"{safe}-{hashlib.sha256(source.encode()).hexdigest()[:8]}.html"


def write_change_pages(
    connection: duckdb.DuckDBPyConnection,
    settings: Settings,
    pages_dir: Path,
    page: Any,
    table: Any,
    figure_html: Any,
) -> list[tuple[str, Path]]:
    """One page per source in ``CHANGES_FOLDER`` of the report's ``pages_dir``;
    ``page``, ``table`` and ``figure_html`` are the report's own page frame, table and chart
    writers. Returns (source, page)."""
    changes.store_regression_thresholds(connection, settings, temporary=True)
    report = changes.change_report(connection, settings, since=None, source=None)
    folder = pages_dir / CHANGES_FOLDER
    folder.mkdir()
    written = []
    for number, window in enumerate(report.windows):
        body = _change_page_body(connection, report, window, number, table, figure_html)
        path = folder / change_page_name(window.source)
        write_atomically(path, page(f"what changed · {window.source}", body, depth=2).encode())
        written.append((window.source, path))
    return written


def change_links_html(pages_folder: str, pages: list[tuple[str, Path]]) -> str:
    """The overview's links to the change pages."""
    links = " ".join(
        f"<a href='{html.escape(pages_folder)}/{CHANGES_FOLDER}/{html.escape(path.name)}'>{html.escape(source)}</a>"
        for source, path in pages
    )
    return f"<nav class='changes'>What changed: {links}</nav>" if pages else ""


def _change_page_body(
    connection: duckdb.DuckDBPyConnection,
    report: changes.ChangeReport,
    window: changes.Window,
    page_number: int,
    table: Any,
    figure_html: Any,
) -> str:
    import plotly.graph_objects as go

    parts = [
        "<nav><a href='../../index.html'>← overview</a></nav>",
        f"<h1>What changed in {html.escape(window.source)}</h1>",
        *(
            f"<p class='note'>{html.escape(line.strip())}</p>"
            for line in changes.window_heading(window)[1:]
        ),
        f"<p class='note'>Judged on each solution's own latency (never the speedup): "
        f"{html.escape(report.thresholds.describe())}.</p>",
    ]
    flagged: list[dict[str, Any]] = []
    for section, heading, columns in PAGE_SECTIONS:
        entries = [e for e in report.sections[section] if e["source"] == window.source]
        parts.append(f"<h2>{html.escape(heading)}: {len(entries)}</h2>")
        parts.append(table(entries, columns, table_id=f"{section.replace('_', '-')}-{page_number}"))
        if section in ("regressions", "improvements"):
            flagged += entries
    if flagged:
        parts.append("<h2>Latency over revisions</h2>")
    for index, entry in enumerate(flagged):
        series = _rows(
            connection,
            LATENCY_SERIES_SQL,
            solution=entry["solution"],
            comparison_key=entry["comparison_key"],
        )
        labels = [
            f"{row['source']} #{row['first_snapshot_number']} "
            f"{(row['resolved_sha'] or row['requested_revision'] or '')[:8]}"
            for row in series
        ]
        figure = go.Figure(
            go.Scatter(
                x=list(range(len(series))),
                y=[row["latency_ns"] / 1000 for row in series],
                mode="lines+markers",
                text=labels,
                hovertemplate="%{text}<br>%{y:.2f} µs<extra></extra>",
            )
        )
        figure.update_layout(
            title=f"{entry['solution']} · {entry['definition']} · {entry['workload_uuid']} · "
            f"{entry['hardware']}",
            xaxis={
                "title": "result, in the order the warehouse saw them",
                "tickvals": list(range(len(series))),
                "ticktext": labels,
            },
            yaxis={"title": "latency µs"},
            height=360,
            margin={"l": 60, "r": 20, "t": 50, "b": 90},
        )
        parts.append(
            f"<div class='chart'>{figure_html(figure, f'latency-{page_number}-{index}')}</div>"
        )
    return "".join(parts)


def _rows(
    connection: duckdb.DuckDBPyConnection, sql: str, **parameters: Any
) -> list[dict[str, Any]]:
    relation = connection.sql(sql, params=parameters)
    names = relation.columns
    return [dict(zip(names, row, strict=True)) for row in relation.fetchall()]
