"""The report's first page: what changed, who is fastest where, the sources, FlashInfer-Bench's
author rankings (its report's rule and its web leaderboard's), the definitions, table counts
and rejects.
"""

from __future__ import annotations

import html
from typing import Any

from tracehouse.schemas import TABLES
from tracehouse.serve.report_blocks import ReportReader, definition_page_name, page_html, table_html

# What the page shows, as named read-only queries over the views (values bound, never formatted).
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
# Per definition and hardware, the solution ranked first: taken from the leaderboard the
# definition pages read (``top_per_definition``), not read from the view a second time.
TOP_PER_DEFINITION_COLUMNS = (
    "definition",
    "hardware",
    "solution",
    "author",
    "geomean_speedup",
    "coverage",
    "workloads_passed",
    "workloads_in_slice",
    "baseline_solution",
    "is_baseline",
)


def top_per_definition(leaderboard: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows ranked first of ``leaderboard`` (rows of the leaderboard view in definition,
    hardware order), with the overview's columns."""
    return [
        {name: row[name] for name in TOP_PER_DEFINITION_COLUMNS}
        for row in leaderboard
        if row["leaderboard_rank"] == 1
    ]


def overview_page(
    reader: ReportReader,
    definitions: list[dict[str, Any]],
    top: list[dict[str, Any]],
    pages_folder: str,
    what_changed: str,
) -> tuple[str, list[dict[str, Any]]]:
    """The first page, and its rows of who is fastest where; ``top`` is
    ``top_per_definition`` of the leaderboard."""
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
        table_html(
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
        table_html(
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
            table_html(
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
        table_html(
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
        table_html(
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
    parts.append(
        table_html(counts, [("table", "table"), ("rows", "rows")], table_id="table-counts")
    )
    parts.append("<h2>Rejects by reason</h2>")
    parts.append(
        table_html(
            rejects,
            [("source", "source"), ("reason", "reason"), ("records", "records")],
            table_id="rejects",
        )
    )
    return page_html("tracehouse report", "".join(parts), depth=0), top
