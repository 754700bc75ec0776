"""The report's "what changed" pages: one per source, what `tracehouse changes` compares by
default (the source's previous snapshot and its current one) — regressions, improvements,
fixed (newly passing) and broken (newly failing) — with a chart of latency over the revisions
the warehouse has read for every flagged solution × workload.

Kept apart from the report's other pages (tracehouse/serve/report.py calls ``write_change_pages``);
every figure comes from ``tracehouse.serve.changes``, the same code the command and the Dagster check
use.
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracehouse.assemble.history import store_regression_thresholds
from tracehouse.files import write_atomically
from tracehouse.serve import changes, changes_text, render
from tracehouse.serve.report_blocks import trace
from tracehouse.settings import Settings

if TYPE_CHECKING:
    import duckdb

CHANGES_FOLDER = "changes"  # inside the report's page folder

# Every result of each flagged solution on its comparison key (the pairs given as the lists
# $solutions and $comparison_keys), in the order the warehouse saw them: one query for every
# chart, since each query computes the history view again. Lists, not a registered Arrow table:
# registering one imports pandas (0.3 s of the report).
LATENCY_SERIES_SQL = """
SELECT h.solution, h.comparison_key, h.source, h.first_snapshot_number, s.resolved_sha,
       s.requested_revision, h.latency_ns
FROM latency_history AS h
JOIN (
    SELECT unnest($solutions::VARCHAR[]) AS solution,
           unnest($comparison_keys::VARCHAR[]) AS comparison_key
) AS c USING (solution, comparison_key)
LEFT JOIN source_snapshots AS s
    ON s.source = h.source AND s.snapshot_number = h.first_snapshot_number
ORDER BY h.solution, h.comparison_key, h.first_seen_at, h.observed_at, h.run_id
"""

# The figures first, so that an 800-pixel window shows them without scrolling; names after.
VERDICT_COLUMNS = (
    ("relative_change", "change"),
    ("history_mean_ns", "earlier mean"),
    ("latency_ns", "now"),
    ("z_score", "z"),
    ("solution", "solution"),
    ("definition", "definition"),
    ("workload", "workload"),
    ("hardware", "hardware"),
    ("history_size", "earlier results"),
    ("run_id", "run"),
)
STATUS_COLUMNS = (
    ("status_before", "before"),
    ("status_after", "now"),
    ("solution", "solution"),
    ("definition", "definition"),
    ("workload", "workload"),
    ("hardware", "hardware"),
)
# The overview's "What changed": per source and section, a count and the worst few rows.
OVERVIEW_ROWS = 5
OVERVIEW_VERDICT_COLUMNS = (
    ("relative_change", "change"),
    ("before_after", "before → after"),
    ("solution", "solution"),
    ("definition", "definition"),
    ("workload", "workload"),
    ("hardware", "hardware"),
    ("run_id", "run"),
)
OVERVIEW_STATUS_COLUMNS = (
    ("before_after", "before → after"),
    ("solution", "solution"),
    ("definition", "definition"),
    ("workload", "workload"),
    ("hardware", "hardware"),
)
LABELLED_SECTIONS = (
    "regressions",
    "improvements",
    "history_too_short",
    "newly_passing",
    "newly_failing",
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


@dataclass
class ChangePages:
    """What ``write_change_pages`` wrote: (source, page) each, and the report they show."""

    pages: list[tuple[str, Path]]
    report: changes.ChangeReport

    def run_ids(self) -> set[str]:
        """The runs the change pages' tables name (each gets a record page)."""
        return {
            entry["run_id"]
            for section in ("regressions", "improvements")
            for entry in self.report.sections[section]
            if entry.get("run_id")
        }


def _sorted_section(report: changes.ChangeReport, section: str) -> list[dict[str, Any]]:
    """A section's entries, the largest change first (regressions: the slowest; improvements:
    the fastest); status changes as the report lists them."""
    entries = report.sections[section]
    if section == "regressions":
        return sorted(entries, key=lambda e: (-e["relative_change"], e["run_id"]))
    if section == "improvements":
        return sorted(entries, key=lambda e: (e["relative_change"], e["run_id"]))
    return list(entries)


def _label_workloads(report: changes.ChangeReport) -> None:
    """Each entry's ``workload``: its axes (``M=8``) where the warehouse knows them, named as
    the ``changes`` command names it (the change report read the axes already)."""
    for section in LABELLED_SECTIONS:
        for entry in report.sections[section]:
            entry["workload"] = changes_text.workload_name(entry)


def write_change_pages(
    connection: duckdb.DuckDBPyConnection,
    settings: Settings,
    pages_dir: Path,
    page: Any,
    table: Any,
    chart: Any,
) -> ChangePages:
    """One page per source in ``CHANGES_FOLDER`` of the report's ``pages_dir``;
    ``page``, ``table`` and ``chart`` are the report's own page frame, table and chart
    writers."""
    from tracehouse.serve.record_page import RECORD_FOLDER, record_page_name

    store_regression_thresholds(connection, settings, temporary=True)
    report = changes.change_report(
        connection,
        settings,
        since=None,
        source=None,
        sections=[section for section, _, _ in PAGE_SECTIONS],
    )
    _label_workloads(report)
    for section in ("regressions", "improvements"):
        for entry in report.sections[section]:
            if entry.get("run_id"):
                entry["run_page"] = f"../{RECORD_FOLDER}/{record_page_name(entry['run_id'])}"
    series = _latency_series(connection, report)
    folder = pages_dir / CHANGES_FOLDER
    folder.mkdir()
    written = []
    for number, window in enumerate(report.windows):
        path = folder / change_page_name(window.source)
        body = _change_page_body(report, window, number, series, table, chart)
        write_atomically(path, page(f"what changed · {window.source}", body, depth=2).encode())
        written.append((window.source, path))
    return ChangePages(written, report)


@dataclass
class _Series:
    """One flagged result's chart: each earlier and current result's latency in µs and its
    label (the snapshot that first brought it)."""

    labels: list[str]
    latencies_us: list[float]


def _latency_series(
    connection: duckdb.DuckDBPyConnection, report: changes.ChangeReport
) -> dict[tuple[str, str], _Series]:
    """The latency series of every flagged (solution, comparison key), read in one query."""
    wanted = sorted(
        {
            (entry["solution"], entry["comparison_key"])
            for section in ("regressions", "improvements")
            for entry in report.sections[section]
        }
    )
    rows = connection.execute(
        LATENCY_SERIES_SQL,
        {"solutions": [w[0] for w in wanted], "comparison_keys": [w[1] for w in wanted]},
    ).fetchall()
    series: dict[tuple[str, str], _Series] = {}
    for solution, key, source, snapshot, sha, revision, latency_ns in rows:
        found = series.setdefault((solution, key), _Series([], []))
        found.labels.append(f"{source} #{snapshot} {(sha or revision or '')[:8]}")
        found.latencies_us.append(latency_ns / 1000)
    return series


def _before_after(entry: dict[str, Any]) -> str:
    from tracehouse.kernelindex import format_latency_ns

    if "status_before" in entry:
        return f"{entry['status_before']} → {entry['status_after']}"
    return (
        f"{format_latency_ns(round(entry['history_mean_ns']))} → "
        f"{format_latency_ns(round(entry['latency_ns']))}"
    )


def what_changed_html(pages_folder: str, changed: ChangePages, table: Any) -> str:
    """The overview's first section: per source, how many regressions, improvements, newly
    passing and newly failing results its last build brought, and the worst few of each, each
    row linking to its chart of latency over revisions (or its place on the source's page)."""
    from tracehouse.serve.record_page import RECORD_FOLDER, record_page_name

    report = changed.report
    parts = [
        "<h2 id='what-changed'>What changed</h2>",
        "<p class='note'>Per source, its last build against the one before, as "
        "<code>tracehouse changes</code> compares them; judged on each solution's own latency: "
        f"{html.escape(report.thresholds.describe())}.</p>",
    ]
    for number, (window, (_, path)) in enumerate(zip(report.windows, changed.pages, strict=True)):
        page = f"{pages_folder}/{CHANGES_FOLDER}/{path.name}"
        counts = {
            section: [e for e in report.sections[section] if e["source"] == window.source]
            for section, _, _ in PAGE_SECTIONS
        }
        states = (
            f"snapshot {window.before.snapshot_number} → {window.after.snapshot_number}"
            if window.before is not None
            else f"first build (snapshot {window.after.snapshot_number}): nothing earlier to "
            "compare with"
        )
        summary = " · ".join(
            f"<span data-count='{section}'>{len(counts[section]):,} {html.escape(label)}</span>"
            for section, label in (
                ("regressions", "regressions"),
                ("improvements", "improvements"),
                ("newly_passing", "newly passing"),
                ("newly_failing", "newly failing"),
            )
        )
        parts.append(
            f"<h3><a href='{html.escape(page)}'>{html.escape(window.source)}</a>: "
            f"{html.escape(states)}</h3><p class='counts'>{summary}</p>"
        )
        for section, heading, _ in PAGE_SECTIONS:
            entries = [e for e in _sorted_section(report, section) if e["source"] == window.source]
            if not entries:
                continue
            shown = []
            for entry in entries[:OVERVIEW_ROWS]:
                row = dict(entry, before_after=_before_after(entry))
                anchor = entry.get("chart_id") or _section_id(section, number)
                row["chart_link"] = f"{page}#{anchor}"
                if entry.get("run_id"):
                    row["run_page"] = (
                        f"{pages_folder}/{RECORD_FOLDER}/{record_page_name(entry['run_id'])}"
                    )
                shown.append(row)
            verdicts = section in ("regressions", "improvements")
            more = len(entries) - len(shown)
            parts.append(
                f"<h4>{html.escape(heading)}: {len(entries):,}"
                + (f" (the {len(shown)} largest)" if verdicts and more else "")
                + "</h4>"
            )
            parts.append(
                table(
                    shown,
                    OVERVIEW_VERDICT_COLUMNS if verdicts else OVERVIEW_STATUS_COLUMNS,
                    table_id=f"what-changed-{_section_id(section, number)}",
                    links={
                        ("relative_change" if verdicts else "before_after"): "chart_link",
                        "run_id": "run_page",
                    },
                )
            )
            if more:
                parts.append(
                    f"<p class='note'><a href='{html.escape(page)}#{_section_id(section, number)}'>"
                    f"… and {more:,} more on the page of {html.escape(window.source)}</a></p>"
                )
    return "".join(parts)


def _section_id(section: str, page_number: int) -> str:
    return f"{section.replace('_', '-')}-{page_number}"


def _change_page_body(
    report: changes.ChangeReport,
    window: changes.Window,
    page_number: int,
    series: dict[tuple[str, str], _Series],
    table: Any,
    chart: Any,
) -> str:
    parts = [
        "<nav><a href='../../index.html'>← overview</a></nav>",
        f"<h1>What changed in {html.escape(window.source)}</h1>",
        *(
            f"<p class='note'>{html.escape(line.strip())}</p>"
            for line in changes_text.window_heading(window)[1:]
        ),
        f"<p class='note'>Judged on each solution's own latency (never the speedup): "
        f"{html.escape(report.thresholds.describe())}.</p>",
    ]
    flagged: list[dict[str, Any]] = []
    for section, heading, columns in PAGE_SECTIONS:
        entries = [e for e in _sorted_section(report, section) if e["source"] == window.source]
        if section in ("regressions", "improvements"):
            for index, entry in enumerate(entries, start=len(flagged)):
                entry["chart_id"] = f"latency-{page_number}-{index}-box"
                entry["chart_here"] = f"#{entry['chart_id']}"
            flagged += entries
        section_id = _section_id(section, page_number)
        parts.append(f"<h2 id='{section_id}-heading'>{html.escape(heading)}: {len(entries)}</h2>")
        parts.append(
            table(
                entries,
                columns,
                table_id=section_id,
                links={"relative_change": "chart_here", "run_id": "run_page"},
            )
        )
    if flagged:
        parts.append("<h2>Latency over revisions</h2>")
    for entry in flagged:
        results = series.get((entry["solution"], entry["comparison_key"]), _Series([], []))
        positions = list(range(len(results.labels)))
        data = [
            trace(
                "scatter",
                x=positions,
                y=results.latencies_us,
                mode="lines+markers",
                text=results.labels,
                hovertemplate="%{text}<br>%{y:.2f} µs<extra></extra>",
            )
        ]
        layout = {
            "xaxis": {
                "title": {"text": "result, in the order the warehouse saw them"},
                "tickvals": positions,
                "ticktext": results.labels,
            },
            "margin": {"l": 60, "r": 20, "t": 30, "b": 90},
            "yaxis": {"title": {"text": "latency µs"}},
            "height": 360,
        }
        title = (
            f"{render.percent_change(entry['relative_change'])}: {entry['solution']} · "
            f"{entry['definition']} · {entry['workload']} · {entry['hardware']}"
        )
        parts.append(chart(data, layout, entry["chart_id"].removesuffix("-box"), title))
    return "".join(parts)


def _rows(
    connection: duckdb.DuckDBPyConnection, sql: str, **parameters: Any
) -> list[dict[str, Any]]:
    relation = connection.sql(sql, params=parameters)
    names = relation.columns
    return [dict(zip(names, row, strict=True)) for row in relation.fetchall()]
