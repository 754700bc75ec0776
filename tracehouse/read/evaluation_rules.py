"""Which trace records are real measurements: rules shared by every ingest path.

* ``not_evaluated``: a line whose ``evaluation`` is absent, null or ``{}`` is a workload-only
  record; any other value that is not an object is a trace with an invalid evaluation.
* ``was_evaluated``: FlashInfer-Bench's runner gives up on a solution after repeated build
  failures and then writes one record per remaining workload *without running it*: status
  ``COMPILE_ERROR`` and a log that starts ``Solution skipped after <N> failures.``
  (flashinfer-trace-format.md §2.5; samples/SOURCES.md §6). Those rows are kept and flagged
  ``evaluated = false`` so they can be told apart from failures that were measured.
* ``read_latency``: a latency as written. FlashInfer-Bench keeps a PASSED run whose latency is
  not a finite number (+inf even serialises as ``null``), so it is kept here too, with the
  value null and the reason in ``latency_special``; wrong types, negative and zero values are
  still rejected as ``invalid_latency``.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from tracehouse.kernelindex.numbers import MAX_SAFE_INTEGER, js_round

SKIPPED_LOG = re.compile(r"\s*Solution skipped after \d+ failures?\b")
SKIPPED_STATUS = "COMPILE_ERROR"
NON_FINITE_TEXT = {
    "NaN": "NaN",
    "nan": "NaN",
    "Infinity": "Infinity",
    "+Infinity": "Infinity",
    "inf": "Infinity",
    "-Infinity": "-Infinity",
    "-inf": "-Infinity",
}


def not_evaluated(evaluation: Any) -> bool:
    """Whether a trace line's ``evaluation`` (None when absent) makes it a workload-only record:
    absent or null, or ``{}`` as the HF v0 layout wrote one (flashinfer-trace-format.md §3 and
    its note 3 on missing evaluations). Every ingest path asks this; any other value that is not
    an object (``"x"``, ``true``, ``[1]``, ``0``) is a trace with an invalid evaluation, rejected
    by ``normalize.normalize_trace``, never a workload."""
    return evaluation is None or (type(evaluation) is dict and not evaluation)


def was_evaluated(status: str, log: str) -> bool:
    """False for FlashInfer-Bench's "Solution skipped after N failures" records."""
    return not (status == SKIPPED_STATUS and SKIPPED_LOG.match(log) is not None)


class Latency(NamedTuple):  # a tuple: read up to three times a trace line, built cheaply
    value: float | None  # finite and positive, or None
    special: str | None  # NaN, Infinity, -Infinity or absent when value is None


class LatencyProblem(ValueError):
    """A latency that is neither a usable number nor a non-finite one FlashInfer-Bench keeps."""


def read_latency(value: Any, field: str, *, required: bool) -> Latency:
    """``value`` as a latency. Non-finite values (NaN, ±Infinity, overflow, and ``null`` for a
    required one) are kept as ``special``; anything else that is not a positive number (zero
    allowed when not required) raises LatencyProblem."""
    if type(value) is float and 0 < value < math.inf:  # the usual case: the checks below pass
        return Latency(value, None)
    if value is None:
        return Latency(None, "absent")
    if isinstance(value, str):
        if value in NON_FINITE_TEXT:
            return Latency(None, NON_FINITE_TEXT[value])
        raise LatencyProblem(f"{field} is str {value[:40]!r}, not a number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LatencyProblem(f"{field} is {type(value).__name__} {str(value)[:40]!r}, not a number")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any double
        return Latency(None, "Infinity" if value > 0 else "-Infinity")
    if math.isnan(number):
        return Latency(None, "NaN")
    if math.isinf(number):
        return Latency(None, "Infinity" if number > 0 else "-Infinity")
    if number < 0 or (required and number == 0):
        raise LatencyProblem(f"{field} must be > 0, got {value}")
    return Latency(number, None)


def tolerance_bounds(workload: dict[str, Any]) -> tuple[float | None, float | None]:
    """A workload's ``tolerance`` as the correctness rows store it: (max_atol, max_rtol), each
    the JSON number as a float, else null (absent, a string, a boolean)."""
    tolerance = workload.get("tolerance") or {}
    return _tolerance_bound(tolerance.get("max_atol")), _tolerance_bound(tolerance.get("max_rtol"))


def _tolerance_bound(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def latency_ns_problem(latency_ms: float) -> str | None:
    """Why a finite ``latency_ms`` has no ``latency_ns`` the warehouse stores, or None.

    The one latency range rule of every ingest path. ``latency_ns`` is KernelIndex's
    ``timing.latencyNs.mean``: round-half-up of the IEEE product ``latency_ms * 1e6`` (§9.4),
    a whole number of nanoseconds from 1 to 2**53 - 1 (104 days; KernelIndex refuses larger
    integers, and JSON readers in JavaScript could not hold them). A latency that rounds to
    0 ns or lies beyond that range is one ``invalid_latency`` reject naming its file and line,
    never a publish invariant refusing its whole source.
    """
    if not latency_ms > 0:
        return f"latency_ms must be > 0, got {latency_ms!r}"
    product = latency_ms * 1e6
    if not math.isfinite(product) or product > MAX_SAFE_INTEGER:
        return (
            f"latency_ms {latency_ms!r} is beyond the {MAX_SAFE_INTEGER} ns (104 days) "
            "latency_ns holds"
        )
    if js_round(product) < 1:
        return f"latency_ms {latency_ms!r} rounds to 0 ns"
    return None
