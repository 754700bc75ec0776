"""What trace lines share: their entities, derived once per distinct content.

A trace line's identity outside its per-run fields depends only on (definition, workload,
environment, scope). The first line of each such combination takes the full derivation
(``kernelindex.identify_trace_line`` with the workload built from scratch); every later line of
the same combination whose per-run fields have a shape KernelIndex accepts whenever it accepted
the first line's (``repeatable_shape``) reuses the first line's entity columns and derives only
its own run: status, latency, observed time, log digest and the canonical run envelope, with
KernelIndex's own ``build_run_spec`` and ``run_body_template`` (the one place those rules live).

Lines of any other shape (legacy spellings, lenient JSON, unknown members, values outside the
ranges checked below) take the full derivation every time: a branch, not a second
implementation. Both branches write the same row through ``FileIngester``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tracehouse import kernelindex
from tracehouse.kernelindex.cache import WORKLOAD_CACHE_ENTRIES, BoundedCache
from tracehouse.kernelindex.run import plain_timestamp
from tracehouse.read.evaluation_rules import latency_ns_problem
from tracehouse.rejects import FORBIDS_CORRECTNESS

# Members of a trace line, its evaluation, correctness and performance blocks the repeat branch
# takes; any other member may change what KernelIndex accepts, so the line takes the full one.
TRACE_MEMBERS = frozenset({"definition", "solution", "workload", "evaluation"})
# (A line naming a `log_file` takes the full one: its variant and extra JSON are its own.)
EVALUATION_MEMBERS = frozenset(
    {"status", "environment", "timestamp", "log", "correctness", "performance"}
)
CORRECTNESS_MEMBERS = frozenset({"max_absolute_error", "max_relative_error", "extra"})
PERFORMANCE_MEMBERS = frozenset({"latency_ms", "reference_latency_ms", "speedup_factor"})
ERROR_BOUND_WORDS = frozenset({"NaN", "Infinity"})
MAX_SAFE_INTEGER = 2**53 - 1


def _number(value: Any) -> float | None:
    """A finite JSON number as a float, or None when the repeat branch must not take it."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return float(value)
    return None


def repeatable_shape(value: Any, definitions: dict[str, Any]) -> bool:
    """True when a parsed line is an evaluated trace whose per-run fields KernelIndex accepts
    exactly when it accepts its combination's entities: such a line may reuse them.

    Lines it refuses are not wrong: they take the full derivation, which imports or rejects them.
    """
    if type(value) is not dict or not value.keys() <= TRACE_MEMBERS:
        return False
    definition = value.get("definition")
    if type(definition) is not str or definition not in definitions:
        return False
    solution = value.get("solution")
    if solution is not None and (type(solution) is not str or not solution):
        return False
    evaluation = value.get("evaluation")
    if type(value.get("workload")) is not dict or type(evaluation) is not dict or not evaluation:
        return False
    if not evaluation.keys() <= EVALUATION_MEMBERS:
        return False
    status = evaluation.get("status")
    if type(status) is not str or status not in kernelindex.STATUS_MAP:
        return False
    if type(evaluation.get("environment")) is not dict:
        return False
    # `YYYY-MM-DDTHH:MM:SS[.fraction][Z]`, a valid date and time: KernelIndex relabels it as UTC
    # and truncates the fraction (identity doc §9.5). Offsets and other spellings take the full
    # branch.
    if not plain_timestamp(evaluation.get("timestamp")):
        return False
    log = evaluation.get("log")
    if log is not None and type(log) is not str:
        return False
    correctness = evaluation.get("correctness")
    performance = evaluation.get("performance")
    if status == "PASSED":
        if performance is None or correctness is None:
            return False
    elif performance is not None:
        return False
    if status == "INCORRECT_NUMERICAL" and correctness is None:
        return False
    if status in FORBIDS_CORRECTNESS and correctness is not None:
        return False
    if correctness is not None:
        if type(correctness) is not dict or not correctness.keys() <= CORRECTNESS_MEMBERS:
            return False
        for member in ("max_absolute_error", "max_relative_error"):
            bound = correctness.get(member)
            if type(bound) is str and bound in ERROR_BOUND_WORDS:
                continue
            number = _number(bound)
            if number is None or number < 0:
                return False
        extra = correctness.get("extra")
        if extra is not None and type(extra) is not dict:
            return False
    if performance is not None:
        if type(performance) is not dict or not performance.keys() <= PERFORMANCE_MEMBERS:
            return False
        latency = _number(performance.get("latency_ms"))
        # Outside latency_ns's range the full branch rejects the line, by the same rule.
        if latency is None or latency_ns_problem(latency) is not None:
            return False
        for member in ("reference_latency_ms", "speedup_factor"):
            other = performance.get(member)
            if other is not None and (_number(other) is None or other < 0):
                return False
    return True


# The runs columns a combination's lines share, copied from its first line's row.
ENTITY_COLUMNS = (
    "hardware",
    "environment_id",
    "workload_key",
    "operation_digest",
    "workload_digest",
    "environment_digest",
    "protocol_digest",
    "correctness_key",
    "line_identity_error",
    "identity_complete",
)


@dataclass(frozen=True, slots=True)
class Combination:
    """What a repeat takes from its combination's first line as it is: the runs columns every
    repeat shares with it (its entity columns among them), whether KernelIndex identified it
    (then every repeat gets the per-run identity columns too), its environments row, its
    workload as normalised, the workload's tolerance bounds and its workload row's columns."""

    identified: bool
    environment: dict[str, Any]  # the environments row of the combination's environment
    workload: dict[str, Any]
    # The runs columns every repeat has as the first line has them: ENTITY_COLUMNS, and those that
    # follow from the definition, workload, environment and scope alone given the repeatable
    # shape (no per-run variant, no member outside the known ones).
    shared: dict[str, Any]
    tolerance: tuple[float | None, float | None]
    # The workload row's columns (FileIngester.workload_columns): a repeat in a file that has
    # not had the workload yet takes them as they are, instead of looking its bytes up again.
    workload_columns: dict[str, Any]


# Combinations per process and dataset context: entities repeat across the files a worker
# parses. Keyed by (definition, workload bytes, environment bytes, KernelIndex scope); bounded
# like the other per-workload caches (a forgotten combination's next line takes the full
# derivation again, with the same result).
_COMBINATIONS: dict[str, BoundedCache] = {}


def combination_cache(fingerprint: str) -> BoundedCache:
    cache = _COMBINATIONS.get(fingerprint)
    if cache is None:
        _COMBINATIONS.clear()  # a new context: earlier derivations may no longer hold
        cache = _COMBINATIONS[fingerprint] = BoundedCache(WORKLOAD_CACHE_ENTRIES)
    return cache


# The canonical text of a number (kernelindex.canonical_number), kept per distinct value: error
# bounds repeat across runs (on the bench corpus 99.8% of absolute and 35% of relative bounds
# were found). The values are finite floats and safe integers (the repeatable shape), for which
# equal values have equal texts (1 == 1.0, 0.0 == -0.0). Latencies, reference latencies (4%
# found) and speedups are nearly always new: kept too, they filled the dict to its bound and
# cleared it again every ~60,000 runs (~25 MB a worker).
_NUMBER_TEXTS: dict[float, str] = {}
_NUMBER_TEXTS_MAX = 20_000  # a clear costs only the values that repeat, found again at once


def _number_text(value: float) -> str:
    text = _NUMBER_TEXTS.get(value)
    if text is None:
        if len(_NUMBER_TEXTS) >= _NUMBER_TEXTS_MAX:
            _NUMBER_TEXTS.clear()
        text = _NUMBER_TEXTS[value] = kernelindex.canonical_number(value)
    return text


_SLOT = '"' + kernelindex.RUN_TEMPLATE_SLOT + '"'
_CORRECTNESS_HEAD = '"correctness":{"comparator":' + kernelindex.canonical_string(
    kernelindex.RUN_COMPARATOR
)
_PROTOCOL = ',"protocolDigest":' + kernelindex.canonical_string(kernelindex.PROTOCOL_DIGEST)
_SOURCE_TAIL = ',"source":' + kernelindex.canonical_string(kernelindex.HARNESS_NAME) + "}"


def _run_template(
    source: dict[str, Any],
    evaluation: dict[str, Any],
    environment_digest: str,
    ki_status: str,
    log_digest: str | None,
    observed: str,
) -> tuple[str, int | None]:
    """KernelIndex's canonical run envelope with its two late slots (``run_body_template``), and
    the latency in nanoseconds, for a line of repeatable shape: the members
    ``kernelindex.run.build_run_spec`` writes, in the order ``run_canonical_text`` writes them
    (tests/unit/test_line_path.py holds the two equal)."""
    parts = []
    correctness = evaluation.get("correctness")
    if correctness is not None:
        text = _CORRECTNESS_HEAD
        absolute = correctness.get("max_absolute_error")
        if type(absolute) is not str:  # the words "NaN" and "Infinity" record no bound
            text += ',"maximumAbsoluteError":' + _number_text(absolute)
        relative = correctness.get("max_relative_error")
        if type(relative) is not str:
            text += ',"maximumRelativeError":' + _number_text(relative)
        parts.append(text + "}")
    parts.append('"environmentDigest":"' + environment_digest + '"')
    if log_digest is not None:
        parts.append(
            '"evidence":{"logs":{"digest":"'
            + log_digest
            + '","uri":"kernelindex:artifact/'
            + log_digest
            + '"}}'
        )
    parts.append('"implementationDigest":' + _SLOT)
    text = (
        '"observedAt":"'
        + observed
        + '"'
        + _PROTOCOL
        + ',"sourceNative":{"benchmark":'
        + kernelindex.canonical_string(source["definition"])
    )
    performance = evaluation.get("performance")
    nanoseconds = None
    if performance is not None:
        latency = performance["latency_ms"]
        nanoseconds = kernelindex.latency_ns(latency)
        text += ',"metrics":{"latency_ms":' + kernelindex.canonical_number(latency)
        reference = performance.get("reference_latency_ms")
        if reference is not None:
            text += ',"reference_latency_ms":' + kernelindex.canonical_number(reference)
        speedup = performance.get("speedup_factor")
        if speedup is not None:
            text += ',"speedup_factor":' + kernelindex.canonical_number(speedup)
        text += "}"
    text += _SOURCE_TAIL + ',"status":"' + ki_status + '"'
    if nanoseconds is not None:
        text += (
            ',"timing":{"latencyNs":{"mean":' + str(nanoseconds) + '},"primaryStatistic":"mean"}'
        )
    parts.append(text + ',"workloadDigest":' + _SLOT)
    return kernelindex.RUN_ENVELOPE_PREFIX + ",".join(parts) + "}}", nanoseconds


def run_identity(source: dict[str, Any], combination: Combination, row: dict[str, Any]) -> None:
    """Set the per-run identity columns of a repeat line's ``row``, as ``identify_trace_line``
    derives them for the combination's first line."""
    evaluation = source["evaluation"]
    log = evaluation.get("log")
    log_digest = kernelindex.text_digest(log) if log else None
    ki_status = row["ki_status"] = kernelindex.STATUS_MAP[evaluation["status"]]
    row["log_digest"] = log_digest
    if not combination.identified:
        performance = evaluation.get("performance")
        row["latency_ns"] = (
            None
            if performance is None
            else kernelindex.latency_ns(float(performance["latency_ms"]))
        )
        return
    row["run_body_template"], row["latency_ns"] = _run_template(
        source,
        evaluation,
        combination.shared["environment_digest"],
        ki_status,
        log_digest,
        kernelindex.observed_at(evaluation["timestamp"]),
    )
    row["evidence_level"] = "reproducible" if log_digest is not None else "reported"
    row["external_id"] = kernelindex.run_external_id(
        source.get("solution"), combination.shared["workload_key"]
    )
