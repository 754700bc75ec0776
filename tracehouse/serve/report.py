"""The static HTML report: an overview page and one page per definition, written into a folder
that works offline (no CDN, no request to anywhere: the one script, Plotly's bundle, is written
beside the pages and loaded by a relative path; styles are inline).

Every number shown comes from the warehouse's views, read over a read-only connection; each
table cell also carries the exact value in ``data-value`` so a test can compare the page with
the SQL. The CLI (`tracehouse report --out DIR`) and the Dagster ``report`` asset both call
``write_report``.

This module writes the folder; the pages are made in ``report_overview`` (the first page),
``report_definition`` (a definition's page) and ``report_changes`` (what changed), from the
blocks of ``report_blocks``; ``record_page`` writes the page of each run they name.
"""

from __future__ import annotations

import html
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracehouse import interrupts
from tracehouse.files import write_atomically
from tracehouse.serve.output_folder import OutputKind, claimed
from tracehouse.serve.record_page import RECORD_FOLDER, write_record_pages
from tracehouse.serve.report_blocks import (
    PLOTLY_BUNDLE,
    ReportReader,
    chart_html,
    definition_page_name,
    page_html,
    table_html,
)
from tracehouse.serve.report_changes import what_changed_html, write_change_pages
from tracehouse.serve.report_definition import (
    COVERAGE_MAP_MAX_WORKLOADS,
    DEFINITION_COVERAGE_SQL,
    DEFINITION_FAST_P_SQL,
    DEFINITION_LEADERBOARD_SQL,
    DEFINITION_SPEEDUPS_SQL,
    DEFINITIONS_SQL,
    definition_page,
    grouped_by,
    record_holders,
)
from tracehouse.serve.report_overview import overview_page, top_per_definition
from tracehouse.settings import Settings
from tracehouse.warehouse import Warehouse


@dataclass
class ReportResult:
    out_dir: Path
    pages: list[Path] = field(default_factory=list)
    overview_rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def index(self) -> Path:
        return self.out_dir / "index.html"


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
    import plotly.io
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
    reader = ReportReader(settings)  # before the page folder: a refusal leaves nothing
    try:
        pages_dir.mkdir()
        # a page folder no index will link to: removed on the way out of an interrupt, also
        # when the watchdog ends the process because a query held the main thread past its grace
        interrupts.undo_on_interrupt(lambda: shutil.rmtree(pages_dir, ignore_errors=True))
        write_atomically(out_dir / PLOTLY_BUNDLE, plotly.offline.get_plotlyjs().encode())
        result = ReportResult(out_dir)
        reader.compute_shared_views()
        definitions = reader.rows(DEFINITIONS_SQL)
        # each view is read once and split by definition: one query per page would recompute
        # the views for every page
        leaderboard = reader.rows(DEFINITION_LEADERBOARD_SQL)
        top = top_per_definition(leaderboard)
        boards = grouped_by(leaderboard, "definition")
        del leaderboard  # held in boards, which gives each page's rows up once it is written
        curves = grouped_by(reader.rows(DEFINITION_FAST_P_SQL), "definition")
        speedups = grouped_by(reader.rows(DEFINITION_SPEEDUPS_SQL), "definition")
        cells = grouped_by(
            reader.rows(DEFINITION_COVERAGE_SQL, max_workloads=COVERAGE_MAP_MAX_WORKLOADS),
            "definition",
        )
        holders, holder_counts = record_holders(reader)
        named_runs: set[str] = set()
        for definition in definitions:
            name = definition["definition"]
            page = pages_dir / definition_page_name(name)
            records = holders.pop(name, [])
            named_runs.update(r["run_id"] for r in records)
            # each definition's rows are let go once its page is written: the views' rows of
            # the whole report are never held beside the pages that come after
            html_text = definition_page(
                definition,
                boards.pop(name, []),
                curves.pop(name, []),
                speedups.pop(name, []),
                cells.pop(name, []),
                records,
                holder_counts,
            )
            write_atomically(page, html_text.encode())
            result.pages.append(page)
        del boards, curves, speedups, cells, holders
        with_pages = {d["definition"] for d in definitions}
        changed = write_change_pages(
            reader.connection, settings, pages_dir, page_html, table_html, chart_html
        )
        result.pages += [path for _, path in changed.pages]
        result.pages += write_record_pages(
            reader.connection,
            named_runs | changed.run_ids(),
            pages_dir / RECORD_FOLDER,
            page_html,
            lambda run: _record_nav(run, with_pages),
        )
        overview, top_rows = overview_page(
            reader,
            definitions,
            top,
            pages_folder,
            what_changed_html(pages_folder, changed, table_html),
        )
    except BaseException as error:
        interrupts.undo_on_interrupt(None)
        shutil.rmtree(pages_dir, ignore_errors=True)
        from tracehouse.serve.queries import limit_error

        translated = (
            limit_error(error, settings, reader.memory_setting)
            if isinstance(error, Exception)
            else None
        )
        if translated is None:
            raise
        raise translated from None
    finally:
        reader.close()
    with interrupts.deferred():  # the switch: from here on readers see this report
        interrupts.undo_on_interrupt(None)  # the watchdog reads it only after the switch
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


def report_summary_line(result: ReportResult) -> str:
    return f"wrote {len(result.pages)} pages to {result.out_dir} (open {result.index})"
