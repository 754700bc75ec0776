"""What FlashInfer-Bench itself reads from a trace line, kept beside tracehouse's own runs.

FlashInfer-Bench's leaderboard figures (``../shared/docs/fib-metrics.md``) are computed over
every line of ``traces/**/*.jsonl`` that carries a solution or an evaluation, including lines
tracehouse does not import as runs: an ``"evaluation": null`` line counts as a failed trace in
``report summary``, a PASSED line with latency 0 makes FlashInfer-Bench refuse to score the
solution, and a line naming an unknown definition still counts for its solution. So each such
line gets one ``trace_lines`` row with the fields those metrics read, as FlashInfer-Bench's
Python models and its web app's ``JSON.parse`` would see them. Pure; never raises.
"""

from __future__ import annotations

import math
from typing import Any

from tracehouse.read.records import Record

# Strings FlashInfer-Bench's pydantic models accept as floats (Python's float() spellings).
_SPECIAL_FLOATS = {"nan": math.nan, "infinity": math.inf, "inf": math.inf}


def _python_float(value: Any) -> float | None:
    """The float pydantic would read from a JSON value; None when it is not a number, and for
    NaN (as in the correctness table: every comparison FlashInfer-Bench makes with NaN is false,
    and so is SQL's with NULL)."""
    if type(value) is float:  # the usual case, first
        return None if value != value else value
    number: float | None = None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:
            number = math.inf if value > 0 else -math.inf
    elif isinstance(value, str):
        text = value.strip().lower()
        special = _SPECIAL_FLOATS.get(text.lstrip("+-"))
        if special is not None:
            number = -special if text.startswith("-") else special
    return None if number is None or math.isnan(number) else number


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def is_fib_trace_file(rel: str) -> bool:
    """FlashInfer-Bench's TraceSet reads ``traces/**/*.jsonl`` and nothing else."""
    return rel.startswith("traces/") and rel.endswith(".jsonl")


def fib_trace_line(rel: str, record: Record) -> dict[str, Any] | None:
    """The ``trace_lines`` row of one record of a trace file, or None when FlashInfer-Bench
    would not take it for a trace (no solution and no evaluation)."""
    value = record.value
    if not isinstance(value, dict):
        return None
    solution = value.get("solution")
    evaluation = value.get("evaluation")
    if not (isinstance(solution, str) and solution) and evaluation is None:
        return None
    # Absent and non-object blocks read as empty ones (one `if` each: this runs every line).
    evaluation = evaluation if isinstance(evaluation, dict) else {}
    environment = evaluation.get("environment")
    if not isinstance(environment, dict):
        environment = {}
    performance = evaluation.get("performance")
    metrics = performance if isinstance(performance, dict) else {}
    correctness = evaluation.get("correctness")
    if not isinstance(correctness, dict):
        correctness = {}
    workload = value.get("workload")
    latency = metrics.get("latency_ms")
    return {
        "source_file": rel,
        "source_line": record.line,
        "record_index": record.index,
        "json_parse_ok": record.strict and record.index == 0,
        "definition": _text(value.get("definition")),
        "solution": solution if isinstance(solution, str) and solution else None,
        "workload_uuid": _text(workload.get("uuid")) if isinstance(workload, dict) else None,
        "has_evaluation": bool(evaluation) or value.get("evaluation") is not None,
        "status": _text(evaluation.get("status")),
        "hardware": _text(environment.get("hardware")),
        "device": _text(environment.get("device")),
        "has_performance": isinstance(performance, dict),
        "latency_ms": _python_float(latency),
        "latency_is_json_number": isinstance(latency, int | float)
        and not isinstance(latency, bool),
        "speedup_factor": _python_float(metrics.get("speedup_factor")),
        "max_absolute_error": _python_float(correctness.get("max_absolute_error")),
        "max_relative_error": _python_float(correctness.get("max_relative_error")),
        "timestamp": _text(evaluation.get("timestamp")),
    }
