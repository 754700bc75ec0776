"""A run's record page, as KernelIndex shows one: the same facts `tracehouse record` prints
(tracehouse/serve/export.py ``record_facts``), its primary measurement first, then the canonical
manifest. The report writes one for every run its tables name (``write_record_pages``, a
bounded number); `tracehouse record ID --html OUT` writes any other one on demand.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from tracehouse import kernelindex
from tracehouse.files import write_atomically
from tracehouse.serve import export, render

RECORD_FOLDER = "runs"  # inside the report's page folder
# Records read per query while writing the report's pages: memory is bounded by one batch.
RECORD_BATCH = 5_000

RECORD_STYLE = """
.headline { display: flex; flex-wrap: wrap; gap: .6rem 2.5rem; margin: .8rem 0 1.2rem; }
.headline div { font-size: .85rem; color: #4b5563; }
.headline strong { display: block; font-size: 1.4rem; color: #1d2330; }
table.facts td { white-space: pre-wrap; overflow-wrap: anywhere; vertical-align: top; }
table.facts td.label { white-space: nowrap; color: #4b5563; }
table.facts tr.this-run td { background: #fff8e1; font-weight: 600; }
pre.manifest { background: white; border: 1px solid #d5d9e0; padding: .6rem; font-size: .78rem;
               overflow-x: auto; max-width: 100%; }
"""


def record_page_name(run_id: str) -> str:
    """The page of one run in RECORD_FOLDER (run ids are 32 hex characters: safe names)."""
    return f"{run_id}.html"


def _headline(row: dict[str, Any]) -> str:
    """The primary measurement, its source-native figure and its rank, as large figures."""
    figures = []
    if row["latency_ns"] is not None:
        figures.append(("mean latency", kernelindex.format_latency_ns(row["latency_ns"])))
    else:
        figures.append(("mean latency", "none"))
    if row["speedup_factor"] is not None:
        figures.append(("source-native", kernelindex.source_native_line(row["speedup_factor"])))
    if row["rank"] is not None:
        rank = f"rank {row['rank']} of {row['cohort_size']}"
    else:
        rank = "not ranked"
    figures.append(("in its comparison group", rank))
    figures.append(("status", str(row["ki_status"])))
    items = "".join(
        f"<div data-figure='{html.escape(label)}'><strong>{html.escape(value)}</strong>"
        f"{html.escape(label)}</div>"
        for label, value in figures
    )
    return f"<div class='headline'>{items}</div>"


def record_body(row: dict[str, Any], events: list[dict[str, Any]], *, nav: str = "") -> str:
    """The page's body: headline, every fact of `tracehouse record`, the manifest."""
    facts = export.record_facts(row, events)
    rows = []
    label = ""
    for shown, value in facts:
        label = shown or label
        this_run = value.endswith(export.THIS_RUN_MARKER)
        rows.append(
            f"<tr data-label='{html.escape(label)}'{' class=this-run' if this_run else ''}>"
            f"<td class='label'>{html.escape(shown)}</td><td>{html.escape(value)}</td></tr>"
        )
    manifest, missing = export.record_manifest_or_why(row)
    if manifest is None:
        manifest_html = "".join(f"<p class='note'>{html.escape(line)}</p>" for line in missing)
    else:
        text = render.indented_json(manifest)
        manifest_html = (
            "<p class='note'>The canonical manifest {run, protocol, environment}; "
            "<code>tracehouse record --json</code> prints it as RFC 8785 bytes.</p>"
            f"<pre class='manifest' id='manifest'>{html.escape(text)}</pre>"
        )
    return (
        f"{nav}<h1>{html.escape(str(row['solution']))} · {html.escape(str(row['definition']))}</h1>"
        f"<p class='note'>Run <code>{html.escape(row['run_id'])}</code> of source "
        f"<code>{html.escape(str(row['source']))}</code>: what <code>tracehouse record "
        f"{html.escape(row['run_id'])}</code> prints.</p>"
        f"{_headline(row)}"
        "<div class='scroll'><table class='facts' id='record-facts'><tbody>"
        f"{''.join(rows)}</tbody></table></div>"
        f"<h2>Manifest</h2>{manifest_html}"
    )


def standalone_page(row: dict[str, Any], events: list[dict[str, Any]], style: str) -> str:
    """A record page on its own (`tracehouse record ID --html OUT`): no script, no link."""
    title = f"record · {row['solution']} · {row['definition']}"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><link rel='icon' href='data:,'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<style>{style}{RECORD_STYLE}</style></head>"
        f"<body>{record_body(row, events)}</body></html>\n"
    )


def write_record_html(settings: Any, run_or_external_id: str, out: Path) -> dict[str, Any]:
    """`tracehouse record ID --html OUT`: the run's page written (atomically) to ``out``."""

    row = export.find_run(settings, run_or_external_id)
    events = export.record_history(settings, row["comparison_key"]) if row["eligible"] else []
    write_atomically(out, standalone_page(row, events, render.PAGE_STYLE).encode())
    return row


def _batches(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def write_record_pages(
    connection: Any,
    run_ids: Iterable[str],
    folder: Path,
    page: Callable[..., str],
    nav: Callable[[dict[str, Any]], str],
) -> list[Path]:
    """One page per run of ``run_ids`` in ``folder``, read RECORD_BATCH runs at a time over
    the report's connection; ``page`` is the report's page frame, ``nav`` a run's links back."""
    folder.mkdir(exist_ok=True)
    written = []
    for batch in _batches(sorted(set(run_ids)), RECORD_BATCH):
        # a list parameter, not a registered Arrow table (which imports pandas)
        rows = export.run_rows_on(
            connection,
            "r.run_id IN (SELECT unnest($run_ids::VARCHAR[])) "
            "QUALIFY row_number() OVER (PARTITION BY r.run_id ORDER BY r.source) = 1",
            {"run_ids": batch},
        )
        keys = sorted({row["comparison_key"] for row in rows if row["eligible"]})
        histories = export.record_histories_on(connection, keys)
        for row in rows:
            events = histories.get(row["comparison_key"], []) if row["eligible"] else []
            body = record_body(row, events, nav=nav(row))
            path = folder / record_page_name(row["run_id"])
            title = f"record · {row['solution']} · {row['definition']}"
            html_text = page(title, body, depth=2).replace("</style>", f"{RECORD_STYLE}</style>", 1)
            write_atomically(path, html_text.encode())
            written.append(path)
    return written
