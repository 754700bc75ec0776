"""§9 BenchmarkRun: status map, error bounds, latency in nanoseconds, observedAt, and the identity
body and digest of a trace line's run.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from tracehouse.kernelindex.canonical import (
    API_VERSION,
    canonical_number,
    canonical_string,
    encode_string,
    text_digest,
)
from tracehouse.kernelindex.errors import CanonicalizationError, IdentityError, json_type
from tracehouse.kernelindex.numbers import MAX_SAFE_INTEGER, is_number, js_number, js_round
from tracehouse.kernelindex.protocol import HARNESS_NAME, PROTOCOL_DIGEST, RUN_COMPARATOR
from tracehouse.kernelindex.validation import validate_trace_line

# §13: version 3 (current) accepts the error bound "NaN" as "no bound"; version 2 rejected it.
PARSER_VERSION = 3


STATUS_MAP: dict[str, str] = {
    "PASSED": "passed",
    "INCORRECT_SHAPE": "incorrect_shape",
    "INCORRECT_NUMERICAL": "incorrect_numerical",
    "INCORRECT_DTYPE": "incorrect_dtype",
    "RUNTIME_ERROR": "runtime_error",
    "COMPILE_ERROR": "compile_error",
    "TIMEOUT": "timeout",
    "REWARD_HACK": "suspected_reward_hack",
    "INVALID_REFERENCE": "invalid_reference",
}


_OFFSET_SUFFIX = re.compile(r"[+-][0-9]{2}:[0-9]{2}\Z")


_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2})"
    r"(?::([0-9]{2})(?:\.([0-9]+))?)?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))\Z"
)


def latency_ns(latency_ms: float) -> int:
    """round-half-up(latency_ms × 1e6) with the IEEE double product, not decimal (§9.4)."""
    return js_round(latency_ms * 1e6)


# The spelling nearly every line has (`2025-01-02T03:04:05[.ffffff][Z]`): the answer is a slice
# of the text once its date and time are valid, no regex groups or cache needed.
_PLAIN_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z?")


def plain_timestamp(timestamp: Any) -> bool | None:
    """Whether ``timestamp`` is a valid date-time of the plain spelling above (True), one of
    that spelling whose date or time does not exist (False), or of another (None)."""
    global _last_plain
    last = _last_plain
    if last[0] is timestamp:
        return last[1]
    if type(timestamp) is not str or _PLAIN_TIMESTAMP.fullmatch(timestamp) is None:
        return None
    try:  # the fields are digits: fromisoformat checks their ranges as datetime() does
        datetime.fromisoformat(timestamp[:19])
    except ValueError:
        return False
    _last_plain = (timestamp, True)
    return True


# The last timestamp found plain and valid (the very object, held here so its identity cannot
# be reused): a line's timestamp is asked about three times (the repeat branch's shape check,
# the run body, the runs table's observed_at), and the check was ~4% of a worker's time. The
# pair is replaced whole, so a thread never reads half of one. None gives None either way.
_last_plain: tuple[Any, bool | None] = (None, None)


def observed_at(timestamp: str) -> str:
    """`evaluation.timestamp` → `YYYY-MM-DDTHH:MM:SS.mmmZ` (§9.5).

    Quirk §9.5: a timestamp without a zone is taken as UTC (FlashInfer writes naive local time;
    KernelIndex relabels it, it does not convert). The fraction is truncated to milliseconds.
    """
    plain = plain_timestamp(timestamp)
    if plain is False:
        raise IdentityError("bad_timestamp", f"invalid date-time {timestamp!r}")
    if plain:
        fraction = timestamp[20:].rstrip("Z")
        return timestamp[:19] + "." + (fraction + "000")[:3] + "Z"
    return _observed_at(timestamp)


@functools.lru_cache(maxsize=65536)
def _observed_at(timestamp: str) -> str:
    if not isinstance(timestamp, str):
        raise IdentityError("bad_timestamp", f"timestamp {timestamp!r} is not a string")
    zoned = timestamp.endswith(("Z", "z")) or _OFFSET_SUFFIX.search(timestamp) is not None
    match = _TIMESTAMP.match(timestamp if zoned else timestamp + "Z")
    if match is None:
        raise IdentityError("bad_timestamp", f"cannot parse timestamp {timestamp!r}")
    year, month, day, hour, minute, second, fraction, sign, offset_h, offset_m = match.groups()
    second = second or "00"
    millis = (fraction or "")[:3].ljust(3, "0")  # truncated, never rounded
    try:
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second))
        if sign is None:  # UTC already: the validated fields are the answer
            return f"{year}-{month}-{day}T{hour}:{minute}:{second}.{millis}Z"
        if int(offset_h) > 23 or int(offset_m) > 59:
            raise ValueError("offset out of range")
        offset = timedelta(hours=int(offset_h), minutes=int(offset_m))
        moment = moment - offset if sign == "+" else moment + offset
    except (ValueError, OverflowError):
        raise IdentityError("bad_timestamp", f"invalid date-time {timestamp!r}") from None
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}.{millis}Z"
    )


def _error_bound(value: Any, where: str) -> int | float | None:
    """A run error bound (§9.3): None ("no recorded bound") for "Infinity"/"NaN"."""
    if isinstance(value, str):
        if value == "Infinity" or value == "NaN":
            return None
        raise IdentityError("invalid_field_type", f'{where} must be a number, "Infinity" or "NaN"')
    if not is_number(value):
        raise IdentityError(
            "invalid_field_type", f"{where} must be a number, got {json_type(value)}"
        )
    if type(value) is float and value - value != 0.0:
        return None  # bare NaN/Infinity from a lenient parser: treated as no bound
    number = js_number(value, where)
    if number < 0:
        raise IdentityError("negative_error_bound", f"{where} = {value!r} is negative")
    return number


def _run_correctness(correctness: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"comparator": RUN_COMPARATOR}
    absolute = _error_bound(correctness.get("max_absolute_error"), "max_absolute_error")
    relative = _error_bound(correctness.get("max_relative_error"), "max_relative_error")
    if absolute is not None:
        body["maximumAbsoluteError"] = absolute
    if relative is not None:
        body["maximumRelativeError"] = relative
    return body


def kernelindex_status(status: Any) -> str:
    ki_status = STATUS_MAP.get(status) if isinstance(status, str) else None
    if ki_status is None:
        raise IdentityError("unknown_status", f"unknown trace status {status!r}")
    return ki_status


def evaluation_log_digest(evaluation: Mapping[str, Any]) -> str | None:
    log = evaluation.get("log")
    return text_digest(log) if isinstance(log, str) and log else None


def build_run_spec(
    trace: Mapping[str, Any],
    evaluation: Mapping[str, Any],
    *,
    implementation_digest: str,
    workload_digest: str,
    environment_digest: str,
    status: str,
    log_digest: str | None,
    observed: str,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "implementationDigest": implementation_digest,
        "workloadDigest": workload_digest,
        "protocolDigest": PROTOCOL_DIGEST,
        "environmentDigest": environment_digest,
        "status": status,
    }
    correctness = evaluation.get("correctness")
    if correctness is not None:
        spec["correctness"] = _run_correctness(correctness)
    source_native: dict[str, Any] = {"source": HARNESS_NAME, "benchmark": trace["definition"]}
    performance = evaluation.get("performance")
    if performance is not None:
        latency_ms = js_number(performance["latency_ms"], "latency_ms")
        if not latency_ms > 0:
            raise IdentityError("nonpositive_latency", f"latency_ms = {latency_ms!r} is not > 0")
        # a product past the largest double (1e308 ms) is infinity, which no integer holds
        if not math.isfinite(latency_ms * 1e6):
            raise IdentityError("integer_out_of_range", f"latency of {latency_ms!r} ms overflows")
        nanoseconds = latency_ns(latency_ms)
        if nanoseconds > MAX_SAFE_INTEGER:
            raise IdentityError("integer_out_of_range", f"latency of {latency_ms!r} ms overflows")
        spec["timing"] = {"primaryStatistic": "mean", "latencyNs": {"mean": nanoseconds}}
        metrics: dict[str, Any] = {"latency_ms": latency_ms}
        for member in ("reference_latency_ms", "speedup_factor"):
            value = performance.get(member)
            if value is not None and is_number(value):  # null or missing is omitted; 0 is kept
                metrics[member] = js_number(value, member)
        source_native["metrics"] = metrics
    spec["sourceNative"] = source_native
    if log_digest is not None:
        spec["evidence"] = {
            "logs": {"uri": f"kernelindex:artifact/{log_digest}", "digest": log_digest}
        }
    spec["observedAt"] = observed
    return spec


RUN_ENVELOPE_PREFIX = (
    f'{{"apiVersion":{canonical_string(API_VERSION)},"kind":"BenchmarkRun","spec":{{'
)


def run_canonical_json(spec: Mapping[str, Any]) -> bytes:
    """canonical_json of the BenchmarkRun envelope, written member by member.

    Runs are hashed once per trace line, so their body (whose members this module builds and
    whose key order is therefore known) skips the generic sorter. Members are written in UTF-16
    order; tests check it against canonical_json on the golden corpus and generated variants.
    """
    try:
        return run_canonical_text(spec).encode("utf-8")
    except UnicodeEncodeError as error:
        raise CanonicalizationError("input contains a lone surrogate") from error


RUN_TEMPLATE_SLOT = "\0"


def run_body_template(spec: Mapping[str, Any]) -> str:
    """The canonical run envelope with its two late-bound digests left out.

    The text holds RUN_TEMPLATE_SLOT (chr(0), which canonical JSON always escapes, so it occurs
    nowhere else) where the implementation digest and then the workload digest go, inside
    their quotes: `parts = template.split(chr(0))`, and the run digest is the SHA-256 of
    `parts[0] + implementation_digest + parts[1] + workload_digest + parts[2]` (UTF-8). This
    lets a warehouse hash runs after it resolves solutions and the first-line-wins workload
    cache (§2.4) globally.
    """
    return run_canonical_text(spec, template=True)


def run_digest_from_template(
    template: str, implementation_digest: str, workload_digest: str
) -> str:
    """The run digest of a run body template (``run_body_template``) once its two digests are
    known: the SHA-256 of the template with each slot filled."""
    head, middle, tail = template.split(RUN_TEMPLATE_SLOT)
    text = head + implementation_digest + middle + workload_digest + tail
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def run_canonical_text(spec: Mapping[str, Any], *, template: bool = False) -> str:
    q = encode_string  # = canonical_string, without the wrapper call
    if template:
        implementation = workload = '"' + RUN_TEMPLATE_SLOT + '"'
    else:
        implementation = q(spec["implementationDigest"])
        workload = q(spec["workloadDigest"])
    parts = []
    correctness = spec.get("correctness")
    if correctness is not None:
        text = '"comparator":' + q(correctness["comparator"])
        if "maximumAbsoluteError" in correctness:
            text += ',"maximumAbsoluteError":' + canonical_number(
                correctness["maximumAbsoluteError"]
            )
        if "maximumRelativeError" in correctness:
            text += ',"maximumRelativeError":' + canonical_number(
                correctness["maximumRelativeError"]
            )
        parts.append('"correctness":{' + text + "}")
    parts.append('"environmentDigest":' + q(spec["environmentDigest"]))
    evidence = spec.get("evidence")
    if evidence is not None:
        logs = evidence["logs"]
        parts.append(
            f'"evidence":{{"logs":{{"digest":{q(logs["digest"])},"uri":{q(logs["uri"])}}}}}'
        )
    parts.append('"implementationDigest":' + implementation)
    parts.append('"observedAt":' + q(spec["observedAt"]))
    parts.append('"protocolDigest":' + q(spec["protocolDigest"]))
    source_native = spec["sourceNative"]
    text = '"benchmark":' + q(source_native["benchmark"])
    metrics = source_native.get("metrics")
    if metrics is not None:
        members = [f'"{n}":{canonical_number(metrics[n])}' for n in _METRIC_NAMES if n in metrics]
        text += ',"metrics":{' + ",".join(members) + "}"
    parts.append('"sourceNative":{' + text + ',"source":' + q(source_native["source"]) + "}")
    parts.append('"status":' + q(spec["status"]))
    timing = spec.get("timing")
    if timing is not None:
        mean = canonical_number(timing["latencyNs"]["mean"])
        parts.append(f'"timing":{{"latencyNs":{{"mean":{mean}}},"primaryStatistic":"mean"}}')
    parts.append('"workloadDigest":' + workload)
    return RUN_ENVELOPE_PREFIX + ",".join(parts) + "}}"


_METRIC_NAMES = ("latency_ms", "reference_latency_ms", "speedup_factor")  # UTF-16 order


def run_spec(
    trace: dict[str, Any],
    *,
    implementation_digest: str,
    workload_digest: str,
    environment_digest: str,
) -> dict[str, Any]:
    """The BenchmarkRun identity body of a trace line (§9.1).

    `workload_digest` is the one the first-line-wins cache resolves for the line's key (§2.4).
    """
    validate_trace_line(trace)
    evaluation = trace.get("evaluation")
    if evaluation is None:
        raise IdentityError("missing_evaluation", "the trace line has no evaluation")
    return build_run_spec(
        trace,
        evaluation,
        implementation_digest=implementation_digest,
        workload_digest=workload_digest,
        environment_digest=environment_digest,
        status=kernelindex_status(evaluation["status"]),
        log_digest=evaluation_log_digest(evaluation),
        observed=observed_at(evaluation["timestamp"]),
    )


def run_digest(
    trace: dict[str, Any],
    *,
    implementation_digest: str,
    workload_digest: str,
    environment_digest: str,
) -> str:
    """Run digest of a trace line (§9)."""
    spec = run_spec(
        trace,
        implementation_digest=implementation_digest,
        workload_digest=workload_digest,
        environment_digest=environment_digest,
    )
    return "sha256:" + hashlib.sha256(run_canonical_json(spec)).hexdigest()
