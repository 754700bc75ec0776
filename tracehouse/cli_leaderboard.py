"""The leaderboard as a terminal table (``tracehouse leaderboard``, and the board ``tracehouse
demo`` ends with): one block per hardware, speed and coverage side by side, each row's change
since the previous snapshot noted under it; ``--wide`` shows every column in full instead.
"""

from __future__ import annotations

import sys
from typing import Any

# The leaderboard as a terminal table: one block per hardware, speed and coverage side by side;
# (column, short header, how the value is written). --wide shows every column in full instead.
LEADERBOARD_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("rank", "#", "count"),
    ("solution", "solution", "name"),
    ("geomean_speedup", "geo×", "ratio"),
    ("coverage", "cov", "percent"),
    ("passed", "passed", "text"),
    ("win_rate", "win", "percent"),
    ("latency_us", "µs", "number"),
    ("fib_all_gpus_avg_speedup", "fib×", "ratio"),
    ("note", "note", "name"),
)

LEADERBOARD_LEGEND = (
    "geo× geometric-mean speedup over the baseline on the workloads both passed · cov "
    "workloads passed of the slice's · win share of them faster · µs geometric mean of the "
    "median latency · fib× FlashInfer-Bench's score, every GPU mixed · --wide: every column"
)

LEADERBOARD_CHANGE_LEGEND = (
    "regressed / faster / newly passing: what `tracehouse changes` finds in the latest results "
    "(each source's previous snapshot against its current one); `was` is the figure with those "
    "workloads at the mean of their earlier results"
)
LEADERBOARD_FIB_ZERO = (
    "fib× 0.000: FlashInfer-Bench scores 0 for a solution with any failed workload "
    "(get_solution_score), whatever its speed elsewhere"
)


def _leaderboard_cell(kind: str, value: Any) -> str:
    from tracehouse.serve import render

    if value is None:
        return "-"
    if kind == "count":
        return f"{value:,}"
    if kind == "ratio":
        return f"{value:,.3f}"
    if kind == "percent":
        return f"{value:.0%}"
    if kind == "number":
        return f"{value:,.2f}" if value < 1000 else f"{value:,.0f}"
    return render.text(value)


def _change_note(row: dict[str, Any]) -> list[str]:
    """What the latest `changes` comparison found (queries.LEADERBOARD_CHANGE_COLUMNS), with the
    figure as it was before: ``regressed: was 0.440×``."""
    if row["earlier_geomean_speedup"] is not None:
        was = f"was {row['earlier_geomean_speedup']:,.3f}×"
    elif row["earlier_latency_us"] is not None:
        was = f"was {_leaderboard_cell('number', row['earlier_latency_us'])} µs"
    else:
        was = None
    notes = []
    if row["regressed_workloads"]:
        notes.append(f"regressed: {was}" if was else "regressed")
    if row["improved_workloads"]:
        notes.append(f"faster: {was}" if was and not row["regressed_workloads"] else "faster")
    if row["newly_passing_workloads"]:
        notes.append(f"newly passing {row['newly_passing_workloads']:,}")
    if row["newly_failing_workloads"]:
        notes.append(f"newly failing {row['newly_failing_workloads']:,}")
    return notes


def _leaderboard_note(row: dict[str, Any]) -> str:
    """What the speed figure does not say: the baseline, why there is no speedup, skipped
    records, a FlashInfer-Bench score zeroed by a failure (the change note comes first)."""
    notes = []
    if row["is_baseline"] or row["solution"] == row["baseline_solution"]:
        notes.append("baseline")
    if row["speedup_reason"]:
        notes.append(str(row["speedup_reason"]))
    if row["runs_not_evaluated"]:
        notes.append(f"{row['runs_not_evaluated']:,} skipped")
    if row["fib_all_gpus_avg_speedup"] == 0:
        notes.append("fib× 0: a failure")
    return ", ".join(notes)


def _print_leaderboard(result: Any, wide: bool) -> None:
    import textwrap

    from tracehouse.serve import render
    from tracehouse.serve.queries import LEADERBOARD_ORDER_RULE

    if wide:
        print("\n".join(render.table(result.columns, result.rows, width=10**9)))
        print(LEADERBOARD_ORDER_RULE)
        return
    width = render.terminal_width(sys.stdout)
    rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
    for row in rows:
        row["change_note"] = ", ".join(_change_note(row))
        row["other_notes"] = _leaderboard_note(row)
    headers = [header for _, header, _ in LEADERBOARD_COLUMNS]
    right = [
        kind in ("count", "ratio", "percent", "number") or name == "passed"
        for name, _, kind in LEADERBOARD_COLUMNS
    ]
    elidable = [i for i, (_, _, kind) in enumerate(LEADERBOARD_COLUMNS) if kind == "name"]
    blocks = list(dict.fromkeys(row["hardware"] for row in rows))
    for number, hardware in enumerate(blocks):
        block = [row for row in rows if row["hardware"] == hardware]
        baseline = block[0]["baseline_solution"]
        heading = f"{hardware}: baseline {baseline}" if baseline else f"{hardware}: no baseline"
        if number:
            print()
        print(render.fit_lines([render.safe(heading)], width)[0][:width])
        print("\n".join(_leaderboard_block(block, headers, right, elidable, width)))
    print(textwrap.fill(LEADERBOARD_ORDER_RULE, width=width))
    print(textwrap.fill(LEADERBOARD_LEGEND, width=width))
    if any(row["latest_change"] for row in rows):
        print(textwrap.fill(LEADERBOARD_CHANGE_LEGEND, width=width))
    if any(row["fib_all_gpus_avg_speedup"] == 0 for row in rows):
        print(textwrap.fill(LEADERBOARD_FIB_ZERO, width=width))


def _leaderboard_block(
    block: list[dict[str, Any]],
    headers: list[str],
    right: list[bool],
    elidable: list[int],
    width: int,
) -> list[str]:
    """One hardware's grid in ``width``. A change note (``regressed: was 0.440×``) is never
    elided: the other notes give way first, then the solution names; only when that cannot fit
    is the note elided like any name."""
    from tracehouse.serve import render

    def grid(other_notes: bool, columns: list[int]) -> list[str]:
        cells = []
        for row in block:
            notes = [row["change_note"], row["other_notes"] if other_notes else ""]
            row["note"] = ", ".join(note for note in notes if note)
            cells.append(
                [_leaderboard_cell(kind, row[name]) for name, _, kind in LEADERBOARD_COLUMNS]
            )
        return render.fitted_table(headers, cells, width=width, right=right, elidable=columns)

    if any(row["change_note"] for row in block):
        names_only = [i for i in elidable if LEADERBOARD_COLUMNS[i][0] != "note"]
        for other_notes in (True, False):
            table = grid(other_notes, names_only)
            if all(len(line) <= width for line in table):
                return table
    return grid(True, elidable)
