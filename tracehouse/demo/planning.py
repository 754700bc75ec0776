"""How many definitions, workloads and solutions give about N trace lines."""

from __future__ import annotations

from tracehouse.demo.catalog import CATALOG_SIZE
from tracehouse.demo.solutions import TRANSIENT_SHARE
from tracehouse.demo.traces import RERUN_SESSION_SHARE, RERUN_WORKLOAD_SHARE


def plan_for_target(
    target_trace_lines: int, *, hardware_count: int = 3, runs_per_workload: int = 1
) -> tuple[int, int, int]:
    """(definitions, workloads_per_definition, solutions_per_definition) for about N trace lines."""
    if target_trace_lines <= 0:
        raise ValueError("target_trace_lines must be positive")
    growth = 1 + (RERUN_SESSION_SHARE + TRANSIENT_SHARE) * RERUN_WORKLOAD_SHARE
    per_hw = target_trace_lines / (max(1, hardware_count) * max(1, runs_per_workload) * growth)
    root = per_hw ** (1 / 3)
    definitions = max(2, min(CATALOG_SIZE, round(root * 1.3)))
    preferred = max(2, min(48, round(root * 0.65)))
    best: tuple[float, int, int] | None = None
    for workloads in range(max(2, preferred - 4), preferred + 5):
        solutions = max(2, round(per_hw / (definitions * workloads)))
        error = abs(definitions * workloads * solutions - per_hw) + abs(workloads - preferred)
        if best is None or error < best[0]:
            best = (error, workloads, solutions)
    assert best is not None
    return definitions, best[1], best[2]
