"""Schema-era normalisation: every historical variant of a record into one canonical shape.

Pure functions, no I/O. A record either normalises or raises ``RecordError`` with a reason
code from ``rejects.REJECT_REASONS``. The rules follow flashinfer-trace-format.md §2, §3 and §5:
``type``→``op_type``, ``device``→``hardware``, ``format``→``type``, ``log_file``/``error``→
``log``, top-level ``matched_ratio``→``extra``, capitalised languages, NaN/Infinity as strings
or bare tokens, ``""``/``{}`` as "no solution"/"no evaluation", numeric library versions.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any, TypeGuard

import orjson

from tracehouse.read.evaluation_rules import (
    LatencyProblem,
    latency_ns_problem,
    not_evaluated,
    read_latency,
)
from tracehouse.rejects import (
    FORBIDS_CORRECTNESS,
    NEEDS_CORRECTNESS,
    REJECT_REASONS,
    STATUSES,
    ReasonedError,
)

LOG_TRUNCATED_SUFFIX = "[log truncated]"
ERROR_WORDS = ("error", "exception", "traceback", "failed")
ERROR_LINE = re.compile("|".join(ERROR_WORDS), re.IGNORECASE)

TRACE_KEYS = frozenset({"definition", "solution", "workload", "evaluation"})
EVALUATION_KEYS = frozenset(
    {"status", "environment", "timestamp", "log", "correctness", "performance", "log_file", "error"}
)


class RecordError(ReasonedError):
    """A record that cannot be imported; ``reason`` is a REJECT_REASONS code."""

    REASONS = REJECT_REASONS


def to_json(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


def extra_json(obj: dict[str, Any], known: frozenset[str]) -> str | None:
    extra = {k: v for k, v in obj.items() if k not in known}
    return to_json(extra) if extra else None


def _require_object(value: Any, what: str) -> None:
    if not isinstance(value, dict):
        raise RecordError(
            "not_an_object", f"a {what} must be a JSON object, not {type(value).__name__}"
        )


def is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def classify(value: Any) -> str | None:
    """What a JSON object is, decided by its content, never by its path."""
    if not isinstance(value, dict):
        return None
    if "workload" in value and "definition" in value:
        return "workload" if not_evaluated(value.get("evaluation")) else "trace"
    if "sources" in value or ("spec" in value and "definition" in value):
        return "solution"
    if "axes" in value and ("inputs" in value or "outputs" in value):
        return "definition"
    return None


# --- definitions -------------------------------------------------------------------------------

DEFINITION_KEYS = frozenset(
    {
        "name",
        "op_type",
        "type",
        "description",
        "tags",
        "axes",
        "inputs",
        "outputs",
        "reference",
        "constraints",
    }
)


def _string_list(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError("invalid_field", f"{field} must be a list")
    return [v if isinstance(v, str) else to_json(v) for v in value]


def normalize_definition(value: dict[str, Any]) -> dict[str, Any]:
    _require_object(value, "definition")
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise RecordError("missing_field", "definition has no name")
    for key in ("axes", "inputs", "outputs"):
        if not isinstance(value.get(key), dict):
            raise RecordError("invalid_field", f"definition {name!r}: {key} must be an object")
    op_type = value.get("op_type")
    variant = "current"
    if not isinstance(op_type, str) or not op_type:
        legacy = value.get("type")
        op_type = legacy if isinstance(legacy, str) and legacy else None
        variant = "legacy_type_key" if op_type else "current"
    reference = value.get("reference")
    description = value.get("description")
    return {
        "definition": name,
        "op_type": op_type,
        "description": description if isinstance(description, str) else None,
        "tags": _string_list(value.get("tags"), "tags"),
        "axes_json": to_json(value["axes"]),
        "inputs_json": to_json(value["inputs"]),
        "outputs_json": to_json(value["outputs"]),
        "constraints": _string_list(value.get("constraints"), "constraints"),
        "reference_bytes": len(reference.encode()) if isinstance(reference, str) else None,
        "reference": reference if isinstance(reference, str) else None,
        "definition_json": to_json(value),
        "schema_variant": variant,
        "extra_json": extra_json(value, DEFINITION_KEYS),
    }


# --- solutions ---------------------------------------------------------------------------------

SOLUTION_KEYS = frozenset({"name", "definition", "author", "spec", "sources", "description"})
SPEC_KEYS = frozenset(
    {
        "language",
        "target_hardware",
        "entry_point",
        "dependencies",
        "destination_passing_style",
        "binding",
    }
)


def normalize_solution(value: dict[str, Any]) -> dict[str, Any]:
    _require_object(value, "solution")
    name = value.get("name")
    definition = value.get("definition")
    if not isinstance(name, str) or not name:
        raise RecordError("missing_field", "solution has no name")
    if not isinstance(definition, str) or not definition:
        raise RecordError("missing_field", f"solution {name!r} has no definition")
    spec = value.get("spec") or {}
    if not isinstance(spec, dict):
        raise RecordError("invalid_field", f"solution {name!r}: spec must be an object")
    sources = value.get("sources") or []
    if not isinstance(sources, list):
        raise RecordError("invalid_field", f"solution {name!r}: sources must be a list")
    source_bytes = 0
    source_entries = []
    kept_sources = []
    for source in sources:
        if not isinstance(source, dict):
            raise RecordError("invalid_field", f"solution {name!r}: a source is not an object")
        content = source.get("content")
        content_text = content if isinstance(content, str) else ""
        encoded = content_text.encode("utf-8", "surrogatepass")
        source_bytes += len(encoded)
        source_entries.append([str(source.get("path")), encoded])
        path = source.get("path")
        kept_sources.append(
            {
                "path": path if isinstance(path, str) or path is None else to_json(path),
                "content": content
                if isinstance(content, str) or content is None
                else to_json(content),
            }
        )
    language_raw = spec.get("language")
    author = value.get("author")
    dps = spec.get("destination_passing_style")
    binding = spec.get("binding")
    description = value.get("description")
    entry_point = spec.get("entry_point")
    return {
        "solution": name,
        "definition": definition,
        "author": author if isinstance(author, str) and author else None,
        "language": language_raw.lower() if isinstance(language_raw, str) else None,
        "language_raw": language_raw if isinstance(language_raw, str) else None,
        "entry_point": entry_point if isinstance(entry_point, str) else None,
        "target_hardware": _string_list(spec.get("target_hardware"), "target_hardware"),
        "dependencies": _string_list(spec.get("dependencies"), "dependencies"),
        "binding": binding if isinstance(binding, str) else None,
        "destination_passing_style": dps if isinstance(dps, bool) else None,
        "source_files": len(sources),
        "source_bytes": source_bytes,
        "_source_entries": source_entries,
        "sources": kept_sources,
        "spec_json": to_json(value["spec"]) if "spec" in value else None,
        "description": description if isinstance(description, str) else None,
        "extra_json": extra_json(value, SOLUTION_KEYS) or extra_json(spec, SPEC_KEYS),
    }


# --- traces and workloads ----------------------------------------------------------------------


@dataclass(slots=True)
class Bound:
    value: float | None
    special: str | None  # NaN, Infinity or absent when value is None


def error_bound(value: Any, field: str) -> Bound:
    if type(value) is float and 0 <= value < math.inf:  # the usual case: the checks below pass
        return Bound(value, None)
    if value is None:
        return Bound(None, "absent")
    if isinstance(value, str):
        if value in ("NaN", "nan"):
            return Bound(None, "NaN")
        if value in ("Infinity", "inf", "+Infinity"):
            return Bound(None, "Infinity")
        raise RecordError("invalid_error_bound", f"{field} is the string {value[:40]!r}")
    if not is_number(value):
        raise RecordError("invalid_error_bound", f"{field} is {type(value).__name__}, not a number")
    number = float(value)
    if math.isnan(number):
        return Bound(None, "NaN")
    if number < 0:
        raise RecordError("invalid_error_bound", f"{field} is negative ({value})")
    if math.isinf(number):
        return Bound(None, "Infinity")
    return Bound(number, None)


def _latency(value: Any, field: str, *, required: bool) -> tuple[float | None, str | None]:
    """(value, special): the rule is evaluation_rules.read_latency."""
    try:
        latency = read_latency(value, field, required=required)
    except LatencyProblem as problem:
        raise RecordError("invalid_latency", str(problem)) from None
    return latency.value, latency.special


def normalize_workload(workload: Any) -> tuple[dict[str, Any], list[str]]:
    """The canonical workload object, and the legacy features it needed."""
    variants: list[str] = []
    if not isinstance(workload, dict):
        raise RecordError("missing_field", "workload is missing or not an object")
    axes = workload.get("axes")
    if not isinstance(axes, dict):
        raise RecordError("missing_field", "workload.axes is missing or not an object")
    for axis, size in axes.items():
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise RecordError(
                "invalid_field", f"workload axis {axis!r} is not a non-negative integer"
            )
    inputs = workload.get("inputs")
    if inputs is None:
        inputs = {}
    if not isinstance(inputs, dict):
        raise RecordError("invalid_field", "workload.inputs is not an object")
    canonical_inputs: dict[str, Any] = {}
    for input_name, descriptor in inputs.items():
        if isinstance(descriptor, dict) and "type" not in descriptor:
            if "format" in descriptor:
                descriptor = {("type" if k == "format" else k): v for k, v in descriptor.items()}
                if "legacy_format_key" not in variants:
                    variants.append("legacy_format_key")
            elif "path" in descriptor:
                descriptor = {"type": "safetensors", **descriptor}
            elif "value" in descriptor:
                descriptor = {"type": "scalar", **descriptor}
        canonical_inputs[input_name] = descriptor
    uuid = workload.get("uuid")
    if not isinstance(uuid, str) or not uuid:
        uuid = None
        variants.append("no_uuid")
    normalized: dict[str, Any] = {"axes": axes, "inputs": canonical_inputs}
    if uuid is not None:
        normalized["uuid"] = uuid
    if isinstance(workload.get("tolerance"), dict):
        normalized["tolerance"] = workload["tolerance"]
    return normalized, variants


@dataclass(slots=True)
class Trace:
    """An evaluated trace line in canonical shape, plus the values the warehouse stores."""

    canonical: dict[str, Any]  # the record with current field names (input to identities)
    definition: str
    solution: str | None
    workload: dict[str, Any]
    status: str
    status_raw: str
    hardware: str
    libs: dict[str, str]
    environment_extra: dict[str, Any]
    timestamp: str
    log: str
    log_truncated: bool
    latency_ms: float | None
    reference_latency_ms: float | None
    speedup_factor: float | None
    correctness: dict[str, Any] | None
    absolute_error: Bound | None
    relative_error: Bound | None
    matched_ratio: float | None
    variants: list[str]
    extra_json: str | None
    latency_special: str | None = None  # why a PASSED run's latency_ms is null (kept, unranked)


def normalize_trace(value: dict[str, Any]) -> Trace:
    _require_object(value, "trace")
    definition = value.get("definition")
    if not isinstance(definition, str) or not definition:
        raise RecordError("missing_field", "trace has no definition")
    solution = value.get("solution")
    if solution is not None and not isinstance(solution, str):
        raise RecordError("invalid_field", "solution is not a string")
    workload, variants = normalize_workload(value.get("workload"))
    evaluation = value.get("evaluation")
    if evaluation is None:
        raise RecordError("missing_field", "evaluation is missing")
    if not isinstance(evaluation, dict):
        raise RecordError(
            "invalid_field",
            f"evaluation is {type(evaluation).__name__} {to_json(evaluation)[:40]}, not an object "
            "(null, absent or {} for a workload-only record)",
        )
    status_raw = evaluation.get("status")
    if not isinstance(status_raw, str) or not status_raw:
        raise RecordError("missing_field", "evaluation.status is missing")
    status = status_raw.strip().upper()
    if status not in STATUSES:
        raise RecordError("unknown_status", f"unknown status {status_raw[:40]!r}")
    if status != status_raw:
        variants.append("status_case")

    environment = evaluation.get("environment")
    if not isinstance(environment, dict):
        raise RecordError("missing_field", "evaluation.environment is missing")
    hardware = environment.get("hardware")
    if hardware is None and "device" in environment:
        hardware = environment.get("device")
        variants.append("device_key")
    if not isinstance(hardware, str) or not hardware.strip():
        raise RecordError("missing_field", "evaluation.environment.hardware is missing")
    raw_libs = environment.get("libs") or {}
    if not isinstance(raw_libs, dict):
        raise RecordError("invalid_field", "environment.libs is not an object")
    libs = {str(k): v if isinstance(v, str) else to_json(v) for k, v in raw_libs.items()}
    if any(not isinstance(v, str) for v in raw_libs.values()):
        variants.append("numeric_lib_version")
    environment_extra = {
        k: v for k, v in environment.items() if k not in ("hardware", "device", "libs")
    }

    return _read_run(
        value,
        evaluation,
        definition,
        solution,
        status,
        status_raw,
        _Entities(workload, hardware, raw_libs, libs, environment_extra),
        variants,
    )


@dataclass(slots=True, frozen=True)
class _Entities:
    """What normalize_trace reads of a line's workload and environment."""

    workload: dict[str, Any]
    hardware: str
    raw_libs: Any
    libs: dict[str, str]
    environment_extra: dict[str, Any]


# The variants normalize_trace finds in a line's workload and environment (the others come from
# its per-run members): the ones a repeat of the line shares with it.
ENTITY_VARIANTS = frozenset({"legacy_format_key", "no_uuid", "device_key", "numeric_lib_version"})


def _read_run(
    value: dict[str, Any],
    evaluation: dict[str, Any],
    definition: str,
    solution: str | None,
    status: str,
    status_raw: str,
    entities: _Entities,
    variants: list[str],
) -> Trace:
    """The per-run members of a trace line (timestamp, log, blocks, numbers), and the Trace."""
    workload, hardware, raw_libs = entities.workload, entities.hardware, entities.raw_libs
    libs, environment_extra = entities.libs, entities.environment_extra
    timestamp = evaluation.get("timestamp")
    if timestamp is None or timestamp == "":
        raise RecordError("missing_field", "evaluation.timestamp is missing")
    if not isinstance(timestamp, str):  # an epoch number, say: said as what it is
        raise RecordError(
            "invalid_field",
            f"evaluation.timestamp is {type(timestamp).__name__} {str(timestamp)[:40]!r}, "
            "not an ISO 8601 string",
        )

    log = evaluation.get("log")
    if log is None:
        for legacy in ("error",):
            if isinstance(evaluation.get(legacy), str):
                log = evaluation[legacy]
                variants.append("error_key")
        if "log_file" in evaluation:
            variants.append("log_file")
    if log is None:
        log = ""
    if not isinstance(log, str):
        raise RecordError("invalid_field", "evaluation.log is not a string")

    correctness = evaluation.get("correctness")
    performance = evaluation.get("performance")
    if correctness is not None and not isinstance(correctness, dict):
        raise RecordError("invalid_field", "evaluation.correctness is not an object")
    if performance is not None and not isinstance(performance, dict):
        raise RecordError("invalid_field", "evaluation.performance is not an object")
    if status == "PASSED" and performance is None:
        raise RecordError("status_field_mismatch", "PASSED without performance")
    if status in NEEDS_CORRECTNESS and correctness is None:
        raise RecordError("status_field_mismatch", f"{status} without correctness")
    if status != "PASSED" and performance is not None:
        raise RecordError("status_field_mismatch", f"{status} with a performance block")
    if status in FORBIDS_CORRECTNESS and correctness is not None:
        raise RecordError("status_field_mismatch", f"{status} with a correctness block")

    latency_ms = reference_ms = speedup = latency_special = None
    if performance is not None:
        latency_ms, latency_special = _latency(
            performance.get("latency_ms"), "latency_ms", required=True
        )
        if latency_ms is not None and (problem := latency_ns_problem(latency_ms)) is not None:
            raise RecordError("invalid_latency", problem)
        reference_ms, _ = _latency(
            performance.get("reference_latency_ms"), "reference_latency_ms", required=False
        )
        speedup, _ = _latency(performance.get("speedup_factor"), "speedup_factor", required=False)

    absolute = relative = None
    ratio = None
    if correctness is not None:
        absolute = error_bound(correctness.get("max_absolute_error"), "max_absolute_error")
        relative = error_bound(correctness.get("max_relative_error"), "max_relative_error")
        ratio, legacy_key = matched_ratio(correctness)
        if legacy_key:
            variants.append("matched_ratio_key")

    canonical_evaluation: dict[str, Any] = {
        "status": status,
        # raw library values: a numeric version stays numeric, so identities refuse it as
        # KernelIndex does (identity doc §2.3) instead of inventing a string for it
        "environment": {"hardware": hardware, "libs": raw_libs},
        "timestamp": timestamp,
        "log": log,
        "correctness": correctness,
        "performance": performance,
    }
    canonical = {
        "definition": definition,
        "workload": workload,
        "solution": solution or None,
        "evaluation": canonical_evaluation,
    }
    return Trace(
        canonical=canonical,
        definition=definition,
        solution=solution or None,
        workload=workload,
        status=status,
        status_raw=status_raw,
        hardware=hardware,
        libs=libs,
        environment_extra=environment_extra,
        timestamp=timestamp,
        log=log,
        log_truncated=log_truncated(log),
        latency_ms=latency_ms,
        reference_latency_ms=reference_ms,
        speedup_factor=speedup,
        correctness=correctness,
        absolute_error=absolute,
        relative_error=relative,
        matched_ratio=ratio,
        variants=variants,
        extra_json=trace_extra_json(value, evaluation, environment_extra),
        latency_special=latency_special,
    )


def trace_extra_json(
    value: dict[str, Any], evaluation: dict[str, Any], environment_extra: dict[str, Any]
) -> str | None:
    """``runs.extra_json``: what a trace line holds beyond the members the warehouse reads."""
    # Most lines have no member beyond the known ones: one set comparison, no comprehension.
    record_extra: dict[str, Any] = (
        {}
        if value.keys() <= TRACE_KEYS
        else {k: v for k, v in value.items() if k not in TRACE_KEYS}
    )
    evaluation_extra = (
        {}
        if evaluation.keys() <= EVALUATION_KEYS
        else {k: v for k, v in evaluation.items() if k not in EVALUATION_KEYS}
    )
    if evaluation_extra:
        record_extra["evaluation"] = evaluation_extra
    if environment_extra:
        record_extra["environment"] = environment_extra
    if "log_file" in evaluation:
        record_extra["log_file"] = evaluation["log_file"]
    return to_json(record_extra) if record_extra else None


def matched_ratio(correctness: dict[str, Any]) -> tuple[float | None, bool]:
    """A correctness block's matched ratio, and whether it was written under the legacy
    top-level ``matched_ratio`` key rather than in ``extra``."""
    extra = correctness.get("extra")
    ratio = correctness.get("matched_ratio")
    legacy_key = False
    if isinstance(extra, dict) and is_number(extra.get("matched_ratio")):
        ratio = extra["matched_ratio"]
    elif ratio is not None:
        legacy_key = True
    return (float(ratio) if is_number(ratio) else None), legacy_key


def log_truncated(log: str) -> bool:
    """Whether the harness cut the log (it ends with its truncation marker)."""
    return log[-64:].rstrip().endswith(LOG_TRUNCATED_SUFFIX)


def kept_log(log: str | None) -> str | None:
    """The full log a run keeps (``runs.log``, zstd in Parquet): the text as written, null when
    empty. The one rule, on every trace line."""
    return log or None


def log_excerpt(log: str) -> str | None:
    """The first log line that mentions an error, so failures can be skimmed without logs."""
    if not log:
        return None
    head = log[:65536]
    if head.isascii():
        # Same answer as ERROR_LINE without the regex engine (a quarter of a failed line's
        # cost): in ASCII text case-folding is `lower()`, position for position, and every
        # alternative found at the earliest position lies on the same line.
        lowered = head.lower()
        first = len(lowered)
        for word in ERROR_WORDS:  # each only up to the earliest match so far
            found = lowered.find(word, 0, first - 1 + len(word))
            if found >= 0:
                first = found
        if first == len(lowered):
            return None
        line_end = head.find("\n", first)
    else:
        match = ERROR_LINE.search(head)
        if match is None:
            return None
        first = match.start()
        line_end = head.find("\n", match.end())
    start = head.rfind("\n", 0, first) + 1
    end = line_end
    return head[start : end if end >= 0 else len(head)].strip()[:300]


# --- hardware ----------------------------------------------------------------------------------

_PRODUCT = re.compile(
    r"\b(GB200|GB300|B300|B200|B100|H200|H100|H800|H20|A100|A800|A10G|A10|L40S|L40|L4|T4|V100|"
    r"RTX \d{4}(?: TI)?|RTX PRO \d{4}|ARC [AB]\d{3}|MAX \d{4}|MI\d{3}X?)\b"
)


@functools.lru_cache(maxsize=4096)
def normalize_hardware(raw: str) -> tuple[str, str]:
    """(vendor, product) from a torch device name or a hand-written tag (format doc §5.6)."""
    text = raw.upper().replace("_", " ").replace("(R)", "").replace("(TM)", "")
    text = " ".join(text.split())
    if any(word in text for word in ("NVIDIA", "GEFORCE", "TESLA", "QUADRO")):
        vendor = "nvidia"
    elif "INTEL" in text or text.startswith("ARC") or " ARC " in f" {text} ":
        vendor = "intel"
    elif "AMD" in text or "RADEON" in text or "INSTINCT" in text:
        vendor = "amd"
    elif "APPLE" in text or "MPS" in text:
        vendor = "apple"
    elif text in ("CPU", "X86", "ARM64") or "XEON" in text or "EPYC" in text:
        vendor = "cpu"
    else:
        vendor = "unknown"
    match = _PRODUCT.search(text)
    if match:
        product = match.group(1)
        if vendor == "unknown" and product[0] in "ABGHLTV":
            vendor = "nvidia"
        if vendor == "unknown" and product.startswith("MI"):
            vendor = "amd"
    else:
        for word in ("NVIDIA", "INTEL", "AMD", "GRAPHICS", "CORPORATION"):
            text = text.replace(word, "")
        product = " ".join(text.split()) or raw
    return vendor, product
