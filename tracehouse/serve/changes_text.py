"""What `tracehouse changes` prints: the report as text (an 80-column terminal by default), JSON
or CSV rows, and the one-line summary (and the `--fail-on-regression` line).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from tracehouse.serve.changes import ALL_SECTIONS, ChangeReport, Snapshot, Window, instant_text

_TITLES = {
    "regressions": "regressions",
    "improvements": "improvements",
    "history_too_short": "changes beyond the limit, history too short for a z-score",
    "newly_failing": "newly failing",
    "newly_passing": "newly passing",
    "solutions_appeared": "solutions appeared",
    "solutions_disappeared": "solutions disappeared",
    "workloads_appeared": "workloads appeared",
    "workloads_disappeared": "workloads disappeared",
    "record_holders": "new record holders",
    "leader_changes": "leader changes (rank-1 run replaced)",
}
# (key in the report, title), in the report's order
SECTIONS = tuple((section, _TITLES[section]) for section in ALL_SECTIONS)
# Sections whose entries are each worth a line; the others print their first few in text.
LISTED_IN_FULL = frozenset(
    {"regressions", "improvements", "history_too_short", "newly_failing", "newly_passing"}
)
TEXT_SAMPLE = 10
WIDTH = 80  # an 80-column terminal


def _latency(ns: float | None) -> str:
    from tracehouse.kernelindex import format_latency_ns

    return "—" if ns is None else format_latency_ns(round(ns))


def _percent(ratio_minus_one: float | None) -> str:
    return "—" if ratio_minus_one is None else f"{ratio_minus_one:+.1%}"


def workload_name(row: dict[str, Any], *, wide: bool = False) -> str:
    """A workload by its axes (``M=8``); its uuid only with ``wide``, or when it has no axes."""
    uuid = row.get("workload_uuid") or (row.get("name") if row.get("kind") else None) or "?"
    axes = row.get("workload_axes")
    if axes is None:
        return str(uuid)
    return f"{axes} (workload {uuid})" if wide else axes


def _where(row: dict[str, Any], wide: bool) -> str:
    return f"{row['definition']} · {workload_name(row, wide=wide)} · {row.get('hardware') or '?'}"


def _z(value: float | None) -> str:
    if value is None:
        return "—"
    if math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    return f"{value:+.1f}"


def verdict_lines(row: dict[str, Any], wide: bool = False) -> list[str]:
    """A judged result: who, where, the mean it is compared with -> its latency, the change."""
    figures = (
        f"{_latency(row['history_mean_ns'])} -> {_latency(row['latency_ns'])} "
        f"{_percent(row['relative_change'])}, vs the mean of {row['history_size']} earlier"
    )
    if row["verdict"] == "history too short":
        figures += ", too few for a z-score"
    else:
        figures += f", z {_z(row['z_score'])}"
    return [f"  {row['solution']}", f"    {_where(row, wide)}", f"    {figures}"]


def status_lines(row: dict[str, Any], wide: bool = False) -> list[str]:
    against = (
        f" (as source {row['compared_with']} had it)"
        if row.get("compared_with") not in (None, row["source"])
        else ""
    )
    return [
        f"  {row['solution']}",
        f"    {_where(row, wide)}: {row['status_before']} -> {row['status_after']}{against}",
    ]


def member_line(row: dict[str, Any], wide: bool = False) -> str:
    name = workload_name(row, wide=wide) if row["kind"] == "workload" else row["name"]
    return f"  {row['definition']} · {name}"


def record_holder_lines(row: dict[str, Any], wide: bool = False) -> list[str]:
    """One new record holder: who, how fast, where, from whom."""
    if row["previous_latency_ns"] is None:
        taken = "first result in its comparison group"
    else:
        change = row["latency_ns"] / row["previous_latency_ns"] - 1
        taken = (
            f"took it from {row['previous_solution']} {_latency(row['previous_latency_ns'])} "
            f"-> {_latency(row['latency_ns'])} {_percent(change)}"
        )
    return [
        f"  {row['solution']} {_latency(row['latency_ns'])}",
        f"    {_where(row, wide)}",
        f"    {taken}",
    ]


def leader_change_lines(row: dict[str, Any], wide: bool = False) -> list[str]:
    """One change of a comparison key's rank-1 run between builds: where, both solutions in
    full with their latencies, the change in percent."""
    where = _where(row, wide) if row.get("definition") is not None else row["comparison_key"][7:19]
    if wide:
        where += f" · key {row['comparison_key']}"
    if row["run_id"] is None:
        to = "no eligible run left"
    else:
        change = (
            row["latency_ns"] / row["previous_latency_ns"] - 1
            if row["previous_latency_ns"]
            else None
        )
        to = f"{row['solution']} {_latency(row['latency_ns'])} {_percent(change)}"
    return [
        f"  {where} (snapshot {row['snapshot_number']}, {row['cause']})",
        f"    {row['previous_solution']} {_latency(row['previous_latency_ns'])} -> {to}",
    ]


def _entry_lines(section: str, row: dict[str, Any], wide: bool) -> list[str]:
    if section in ("regressions", "improvements", "history_too_short"):
        return verdict_lines(row, wide)
    if section in ("newly_failing", "newly_passing"):
        return status_lines(row, wide)
    if section == "record_holders":
        return record_holder_lines(row, wide)
    if section == "leader_changes":
        return leader_change_lines(row, wide)
    return [member_line(row, wide)]


def window_heading(window: Window) -> list[str]:
    """Which two states of the source are compared, and how the later one came about."""
    from tracehouse.serve import render

    before = window.before
    lines = [
        f"source {window.source}: "
        + (
            f"snapshot {before.snapshot_number} -> {window.after.snapshot_number}"
            if before is not None
            else f"everything up to snapshot {window.after.snapshot_number}"
        ),
        f"  from {before.describe()}" if before is not None else "  from nothing (new)",
        f"  to   {window.after.describe()}",
    ]
    if window.returns_to is not None:
        lines.append(
            f"  went back: snapshot {window.after.snapshot_number} is the state of snapshot "
            f"{window.returns_to.snapshot_number} again"
        )
        lines.append("  (its results were seen then, and are not judged again)")
    if window.empty:
        lines.append("  no build of this source since then: nothing to compare")
    return [render.safe(line) for line in lines]


def report_text(report: ChangeReport, *, wide: bool = False, width: int = WIDTH) -> str:
    """What `tracehouse changes` prints: the one-line summary first, then each source's
    window and every section; wrapped to ``width`` (names are wrapped, never elided)."""
    from tracehouse.serve import render

    lines = [summary_line(report, wide=wide)]
    for window in report.windows:
        lines += window_heading(window)
    lines.append(f"judged: {report.thresholds.describe()}")
    for section, title in SECTIONS:
        entries = report.sections[section]
        left_out = report.within_noise.get(section, 0)
        if section == "leader_changes" and not entries and not left_out:
            continue  # only a warehouse that read several snapshots has any
        heading = f"{title}: {len(entries)}"
        if left_out:
            heading += f"; {left_out} more were a solution replacing itself within noise"
        lines += ["", heading]
        for source in sorted({e["source"] for e in entries}):
            own = [e for e in entries if e["source"] == source]
            if len(report.windows) > 1:
                lines.append(f" [{source}]")
            shown = own if section in LISTED_IN_FULL else own[:TEXT_SAMPLE]
            for entry in shown:
                lines += _entry_lines(section, entry, wide)
            if len(shown) < len(own):
                lines.append(f"  … and {len(own) - len(shown)} more (--format json lists all)")
    return "\n".join(render.fit_lines([render.safe(line) for line in lines], width))


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return instant_text(value)
    if isinstance(value, float) and math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"  # JSON has no infinite number
    return value


def _snapshot_document(snapshot: Snapshot | None) -> dict[str, Any] | None:
    if snapshot is None:
        return None
    return {
        "snapshot_id": snapshot.snapshot_id,
        "snapshot_number": snapshot.snapshot_number,
        "revision": snapshot.revision,
        "built_at": instant_text(snapshot.built_at),
    }


def report_json(report: ChangeReport) -> str:
    import json

    document = {
        "summary": summary_line(report),
        "windows": [
            {
                "source": w.source,
                "before": _snapshot_document(w.before),
                "after": _snapshot_document(w.after),
                "returns_to": _snapshot_document(w.returns_to),
            }
            for w in report.windows
        ],
        "since": report.since,
        "thresholds": {
            "min_history": report.thresholds.min_history,
            "min_change": report.thresholds.min_change,
            "z_threshold": report.thresholds.z_threshold,
        },
        "within_noise": report.within_noise,
        **{
            section: [{k: _jsonable(v) for k, v in row.items()} for row in entries]
            for section, entries in report.sections.items()
        },
    }
    return json.dumps(document, ensure_ascii=False, allow_nan=False)


# One row per entry of every section, for spreadsheets and scripts.
CSV_COLUMNS = (
    "section",
    "source",
    "solution",
    "definition",
    "workload_uuid",
    "workload_axes",
    "hardware",
    "comparison_key",
    "run_id",
    "latency_ns",
    "history_size",
    "history_mean_ns",
    "relative_change",
    "z_score",
    "status_before",
    "status_after",
    "previous_solution",
    "previous_latency_ns",
    "name",
)


def report_rows(report: ChangeReport) -> list[list[Any]]:
    return [
        [section, *(_jsonable(row.get(column)) for column in CSV_COLUMNS[1:])]
        for section, _ in SECTIONS
        for row in report.sections[section]
    ]


def summary_line(report: ChangeReport, *, wide: bool = False) -> str:
    """The one line `changes` starts with, and `--fail-on-regression` prints when it fails:
    how many regressions, in which sources, of which solutions, and the worst (its workload
    by its axes; the uuid too with ``wide``)."""
    found = report.sections["regressions"]
    if not found:
        sources = ", ".join(w.source for w in report.windows) or "-"
        return (
            f"no regression in source {sources}; {report.count('improvements')} "
            f"improvement(s), {report.count('newly_failing')} newly failing, "
            f"{report.count('newly_passing')} newly passing"
        )
    solutions = sorted({r["solution"] for r in found})
    sources = sorted({r["source"] for r in found})
    worst = found[0]  # worst first
    return (
        f"{len(found)} regression(s) in source {', '.join(sources)} of "
        f"{len(solutions)} solution(s) ({', '.join(solutions[:3])}"
        f"{', …' if len(solutions) > 3 else ''}); worst {worst['solution']} "
        f"{_percent(worst['relative_change'])} on {worst['definition']} "
        f"workload {workload_name(worst, wide=wide)}"
    )


def regression_failure_line(report: ChangeReport, *, wide: bool = False) -> str | None:
    """Why `--fail-on-regression` fails, in one line (``summary_line``); None when nothing
    regressed."""
    return summary_line(report, wide=wide) if report.sections["regressions"] else None
