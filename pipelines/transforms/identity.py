"""KernelIndex identities of FlashInfer-Trace data, as pure functions.

Implements docs/kernelindex-identity.md (in ../shared beside the checkout; "§n" below refers to
its sections): operation, workload, environment, protocol, implementation and run digests, the
correctness and comparison keys, eligibility, evidence levels, external ids, names and titles.
A pipeline that follows these functions reproduces KernelIndex's published values row by row
(tests/test_identity_golden.py checks all 1,490 lines of the golden corpus).

Everything KernelIndex would reject raises `IdentityError` with a short stable `code`
(`IDENTITY_REASON_CODES`). The quirks KernelIndex has are reproduced on purpose; each is marked
"Quirk" with its section number. Do not "fix" them: any change alters published digests.

Where JavaScript and Python disagree, JavaScript wins (KernelIndex runs on it): numbers are
IEEE-754 doubles (`bool` is never a number), string lengths count UTF-16 code units, sorting
compares UTF-16 code units, rounding is half-up.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json.encoder
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import orjson

from pipelines.transforms.canonical import (
    API_VERSION,
    CanonicalizationError,
    canonical_json,
    canonical_number,
    canonical_string,
    digest,
    manifest_digest,
    text_digest,
    text_utf8,
)

__all__ = [
    "API_VERSION",
    "CanonicalizationError",
    "DATASET_REPOSITORY",
    "IDENTITY_REASON_CODES",
    "NO_TOLERANCE_CORRECTNESS_KEY",
    "PARSER_VERSION",
    "PROTOCOL_DIGEST",
    "PROTOCOL_METADATA",
    "PROTOCOL_SPEC",
    "RUN_COMPARATOR",
    "STATUS_MAP",
    "WORKLOAD_COMPARATOR",
    "IdentityError",
    "TraceIdentity",
    "WorkloadIdentity",
    "argument_key",
    "axis_key",
    "canonical_json",
    "comparison_key",
    "correctness_key",
    "cuda_major",
    "digest",
    "dimension",
    "dtype_token",
    "eligibility_reasons",
    "environment_digest",
    "environment_metadata",
    "environment_spec",
    "environment_summary",
    "evidence_level",
    "format_latency_ns",
    "gpu_display",
    "hardware_identity",
    "identify_trace_line",
    "implementation_digest",
    "implementation_metadata",
    "implementation_spec",
    "js_round",
    "kebab",
    "language_token",
    "latency_ns",
    "manifest_digest",
    "metric_key",
    "observed_at",
    "operation_digest",
    "operation_metadata",
    "operation_spec",
    "operation_tags",
    "rank_line",
    "record_manifest",
    "RUN_TEMPLATE_SLOT",
    "run_body_template",
    "run_digest",
    "run_external_id",
    "run_metadata",
    "run_spec",
    "set_like",
    "source_native_line",
    "text_digest",
    "validate_definition",
    "validate_solution",
    "validate_trace_line",
    "workload_case_spec",
    "workload_digest",
    "workload_display",
    "workload_key",
    "workload_metadata",
]

# --------------------------------------------------------------------------------------------
# Errors and reason codes
# --------------------------------------------------------------------------------------------

IDENTITY_REASON_CODES: dict[str, str] = {
    # §2.3 field checks (a definition or solution failing them is skipped; a trace line rejected)
    "invalid_field_type": "a field KernelIndex reads has the wrong JSON type (§2.3)",
    "missing_field": "a field KernelIndex requires is absent (§2.3)",
    "numeric_lib_version": "an evaluation.environment.libs version is a number, not a string (§2.3)",
    "non_integer_value": "an integer field (axis value, shape dimension) holds a non-integral number (§2.3)",
    "integer_out_of_range": "an integer lies outside +-(2**53 - 1) (§1.2)",
    "non_finite_number": "a bare NaN/Infinity number; KernelIndex's strict JSON parser rejects it (§2.2)",
    "negative_tolerance": "workload.tolerance max_atol/max_rtol is negative (§2.3)",
    # §2.4 lookups
    "unknown_definition": "the line names a definition that is not in the import (§2.4 step 1)",
    "unknown_solution": "the line's solution is null or not in the import: skipped, no run (§2.4 step 2)",
    "missing_evaluation": "evaluation is null or absent (§2.4 step 3)",
    # manifest rules (§3.1, §4.4, §5.1, §8.1, §11.5)
    "invalid_name": "a name, key, dtype, language or architecture fails its pattern (§3.1, §4.4, §5.1, §8.1)",
    "empty_family": "the operation family slug is empty (§3.1)",
    "missing_const_value": "a const axis has no value (§3.1)",
    "invalid_expression": "a derived-axis expression is missing, malformed or not evaluable (§3.1, §4.2)",
    "missing_arguments": "the definition has no input or no output (§3.1)",
    "unbound_axis": "a shape or expression names an axis with no bound value (§4.2)",
    "invalid_shape": "a shape is empty or has a negative or non-integral dimension (§3.1, §4.4)",
    "value_too_long": "a version, product, path or symbol exceeds its length limit (§5.1, §8.1)",
    "title_too_long": "a manifest title exceeds 200 characters (§2.4, §11.5)",
    "description_too_long": "a manifest description exceeds 2,000 characters (§2.4)",
    "invalid_revision": "the dataset revision is not 40 lowercase hex characters (§8.1)",
    # §9 run rules
    "unknown_status": "evaluation.status is not in the exact, case-sensitive status map (§9.2)",
    "negative_error_bound": "max_absolute_error or max_relative_error is negative (§9.3)",
    "nonpositive_latency": "performance.latency_ms is not > 0 (§2.3, §9.4)",
    "bad_timestamp": "evaluation.timestamp is not an ISO-8601 date-time (§9.5)",
}


class IdentityError(ValueError):
    """KernelIndex gives the input no identity; `code` is a key of IDENTITY_REASON_CODES.

    `workload` is set when the line's own WorkloadCase was built before the failure: KernelIndex
    has then already fixed that workload key's digest (first line wins, §2.4 step 4), so a caller
    resolving that cache should record it even though this line is rejected.
    """

    def __init__(self, code: str, message: str, *, workload: WorkloadIdentity | None = None):
        if code not in IDENTITY_REASON_CODES:
            raise ValueError(f"unknown identity reason code {code!r}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.workload = workload


# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------

# §13: version 3 (current) accepts the error bound "NaN" as "no bound"; version 2 rejected it.
PARSER_VERSION = 3

DATASET_REPOSITORY = "https://huggingface.co/datasets/flashinfer-ai/flashinfer-trace"
HARNESS_NAME = "flashinfer-bench"

# Quirk §7: workload and run correctness name the SOL-ExecBench comparator (the mappers are shared)
# while the protocol names flashinfer_bench_eval. Both strings are hashed; keep them as they are.
WORKLOAD_COMPARATOR = "sol_execbench_eval"
RUN_COMPARATOR = "sol_execbench_eval"

PROTOCOL_SPEC: dict[str, Any] = {
    "harness": {
        "name": HARNESS_NAME,
        "repository": "https://github.com/flashinfer-ai/flashinfer-bench",
    },
    "measurement": {"timer": "harness_reported", "primaryStatistic": "mean"},
    "correctness": {
        "reference": "definition reference implementation",
        "comparator": "flashinfer_bench_eval",
    },
    "comparability": {"family": "flashinfer_bench_trace"},
}
PROTOCOL_DIGEST = manifest_digest("BenchmarkProtocol", PROTOCOL_SPEC)
PROTOCOL_METADATA: dict[str, str] = {
    "name": "flashinfer-bench-trace",
    "title": "FlashInfer-Bench trace harness",
}

NO_TOLERANCE_CORRECTNESS_KEY = digest({"correctness": {"comparator": WORKLOAD_COMPARATOR}})

METRIC_LATENCY = "latency:mean:ns"
METRIC_NONE = "none"

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

_MAX_SAFE_INTEGER = 2**53 - 1
_MAX_TITLE = 200
_MAX_DESCRIPTION = 2000
_SEP = " · "  # U+00B7 MIDDLE DOT with a space each side (§11.5)

_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*\Z")
_METADATA_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")
_KEBAB_RUN = re.compile(r"[^a-z0-9]+")
_NOT_TOKEN_CHAR = re.compile(r"[^a-z0-9_]")
_DIGITS = re.compile(r"[0-9]+\Z")
_REVISION = re.compile(r"[0-9a-f]{40}\Z")
_EXPRESSION_CHARS = re.compile(r"[a-z0-9_+\-*%/() ]*\Z")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_encode_string = json.encoder.encode_basestring
_OFFSET_SUFFIX = re.compile(r"[+-][0-9]{2}:[0-9]{2}\Z")
_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2})"
    r"(?::([0-9]{2})(?:\.([0-9]+))?)?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))\Z"
)


# --------------------------------------------------------------------------------------------
# JavaScript value semantics
# --------------------------------------------------------------------------------------------


def _is_number(value: object) -> bool:
    """A JSON number: int or float, never bool (§1.2: JavaScript keeps booleans apart)."""
    kind = type(value)
    return (
        kind is int
        or kind is float
        or (isinstance(value, int | float) and not isinstance(value, bool))
    )


def _js_number(value: Any, where: str) -> int | float:
    """The double JavaScript holds for a JSON number: big integer literals become doubles."""
    if type(value) is float:
        if value - value != 0.0:
            raise IdentityError("non_finite_number", f"{where} is {value!r}")
        return value
    if -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
        return int(value)
    try:
        return float(value)
    except OverflowError:
        raise IdentityError("non_finite_number", f"{where} overflows a double") from None


def _js_integer(value: Any, where: str) -> int:
    """An integral JS number within +-(2**53 - 1) (§2.3); `2.0` counts, `true` does not."""
    if not _is_number(value):
        raise IdentityError(
            "invalid_field_type", f"{where} must be an integer, got {_json_type(value)}"
        )
    if type(value) is not int:
        value = float(value)
        if value - value != 0.0:
            raise IdentityError("non_finite_number", f"{where} is {value!r}")
        if not value.is_integer():
            raise IdentityError("non_integer_value", f"{where} is {value!r}, not an integer")
        value = int(value)
    if not -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
        raise IdentityError("integer_out_of_range", f"{where} = {value} is outside +-(2**53 - 1)")
    return value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _js_length(text: str) -> int:
    """String length as JavaScript counts it (UTF-16 code units)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _js_slice(text: str, units: int) -> str:
    """The first `units` UTF-16 code units of `text` (JavaScript `slice(0, units)`)."""
    if text.isascii():
        return text[:units]
    encoded = text.encode("utf-16-le", "surrogatepass")[: 2 * units]
    return encoded.decode("utf-16-le", "surrogatepass")


def _utf16_key(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def _js_to_fixed(value: float, decimals: int) -> str:
    """JavaScript `Number.prototype.toFixed`: exact binary value, ties away from zero."""
    quantum = Decimal(1).scaleb(-decimals)
    return str(Decimal(value).quantize(quantum, rounding=ROUND_HALF_UP))


def _check_title(title: str, what: str) -> None:
    if _js_length(title) > _MAX_TITLE:
        raise IdentityError("title_too_long", f"{what} title exceeds {_MAX_TITLE} characters")


def _check_metadata_name(name: str, what: str) -> None:
    if not _METADATA_NAME.match(name):
        raise IdentityError(
            "invalid_name", f"{what} name {name!r} does not match [a-z0-9][a-z0-9._-]*"
        )


def _check_identifier(token: str, what: str) -> None:
    if not _IDENTIFIER.match(token):
        raise IdentityError("invalid_name", f"{what} {token!r} does not match [a-z][a-z0-9_]*")


def _check_length(value: str, limit: int, what: str) -> None:
    if _js_length(value) > limit:
        raise IdentityError("value_too_long", f"{what} exceeds {limit} characters")


# --------------------------------------------------------------------------------------------
# §1.3 Shared transformations
# --------------------------------------------------------------------------------------------


def kebab(text: str) -> str:
    """Lower-case, runs outside [a-z0-9] → one '-', strip '-', first 100 characters (§1.3)."""
    return _KEBAB_RUN.sub("-", text.lower()).strip("-")[:100]


def _sanitize_token(text: str) -> str:
    """Lower-case; every character outside [a-z0-9_] becomes '_'.

    KernelIndex's regex replaces UTF-16 code units, so a character above U+FFFF (two units)
    becomes '__'.
    """
    lowered = text.lower()
    if lowered.isascii():
        return _NOT_TOKEN_CHAR.sub("_", lowered)
    return _NOT_TOKEN_CHAR.sub(lambda m: "__" if ord(m.group()) > 0xFFFF else "_", lowered)


def axis_key(name: str) -> str:
    """Axis names are only lower-cased (§1.3): `M` → `m`."""
    return name.lower()


def argument_key(name: str) -> str:
    """Lower-case, outside [a-z0-9_] → '_', prefix `x_` unless it starts with a letter (§1.3)."""
    token = _sanitize_token(name)
    if not ("a" <= token[:1] <= "z"):
        token = "x_" + token
    return token


def dimension(value: Any) -> int | str:
    """A definition shape entry (§1.3): number stays, all-digit string → int, else axis key."""
    if isinstance(value, str):
        if _DIGITS.match(value):
            return int(value)
        return axis_key(value)
    return _js_integer(value, "shape dimension")


_DTYPE_TABLE = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "float64": "fp64",
    "double": "fp64",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "nvfp4": "nvfp4",
    "float4_e2m1": "fp4_e2m1",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "bool": "bool",
}

_LANGUAGE_TABLE = {
    "cuda_cpp": "cuda",
    "cute_dsl": "cute_dsl",
    "cutile": "cutile",
    "cutlass": "cutlass",
    "cudnn": "cudnn",
    "triton": "triton",
    "pytorch": "pytorch",
}

# Quirk §1.3: keyed by exact short names only. FlashInfer writes torch's device name
# ("NVIDIA B200"), which is not a key, so real traces get architecture "unknown".
_HARDWARE_TABLE: dict[str, tuple[str, str, str]] = {
    "B200": ("nvidia", "NVIDIA B200", "sm_100"),
    "NVIDIA_B200": ("nvidia", "NVIDIA B200", "sm_100"),
    "GB200": ("nvidia", "NVIDIA GB200", "sm_100"),
    "H200": ("nvidia", "NVIDIA H200", "sm_90"),
    "H100": ("nvidia", "NVIDIA H100", "sm_90"),
    "NVIDIA_H100": ("nvidia", "NVIDIA H100", "sm_90"),
    "A100": ("nvidia", "NVIDIA A100", "sm_80"),
}


@functools.lru_cache(maxsize=4096)
def dtype_token(name: str) -> str:
    """FlashInfer dtype name → KernelIndex token (§1.3): `bfloat16` → `bf16`."""
    token = _DTYPE_TABLE.get(name)
    return token if token is not None else _sanitize_token(name)


@functools.lru_cache(maxsize=1024)
def language_token(name: str) -> str:
    """Language or library name → KernelIndex token (§1.3): `cuda_cpp` → `cuda`."""
    token = _LANGUAGE_TABLE.get(name)
    return token if token is not None else _sanitize_token(name)


def hardware_identity(name: str) -> tuple[str, str, str]:
    """(vendor, product, architecture) of a hardware name (§1.3).

    Quirk §1.3: unknown names get vendor `nvidia` (even non-NVIDIA devices), the name with `_`
    replaced by spaces as product, and architecture `unknown`.
    """
    known = _HARDWARE_TABLE.get(name)
    if known is not None:
        return known
    return ("nvidia", name.replace("_", " "), "unknown")


def set_like(values: Iterable[str]) -> list[str]:
    """Remove duplicates and sort by UTF-16 code units (§1.3)."""
    return sorted(set(values), key=_utf16_key)


class _BoundedCache:
    """A dict cache that forgets its oldest entries beyond `maxsize` (FIFO)."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self.data: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        return self.data.get(key)

    def put(self, key: Any, value: Any) -> None:
        if len(self.data) >= self.maxsize:
            del self.data[next(iter(self.data))]
        self.data[key] = value

    def clear(self) -> None:
        self.data.clear()


# --------------------------------------------------------------------------------------------
# §2.3 Field checks
# --------------------------------------------------------------------------------------------


def _require_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        if value is None:
            raise IdentityError("missing_field", f"{where} is required")
        raise IdentityError(
            "invalid_field_type", f"{where} must be an object, got {_json_type(value)}"
        )
    return value


def _optional_object(value: Any, where: str) -> dict[str, Any] | None:
    if value is None or isinstance(value, dict):
        return value
    raise IdentityError(
        "invalid_field_type", f"{where} must be an object or null, got {_json_type(value)}"
    )


def _require_string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        if value is None:
            raise IdentityError("missing_field", f"{where} is required")
        raise IdentityError(
            "invalid_field_type", f"{where} must be a string, got {_json_type(value)}"
        )
    return value


def _check_optional_string(value: Any, where: str) -> None:
    if value is not None and not isinstance(value, str):
        raise IdentityError(
            "invalid_field_type", f"{where} must be a string or null, got {_json_type(value)}"
        )


def _check_optional_number(value: Any, where: str) -> None:
    if value is None:
        return
    if not _is_number(value):
        raise IdentityError(
            "invalid_field_type", f"{where} must be a number or null, got {_json_type(value)}"
        )
    _js_number(value, where)


def _check_optional_bool(value: Any, where: str) -> None:
    if value is not None and not isinstance(value, bool):
        raise IdentityError(
            "invalid_field_type", f"{where} must be a boolean or null, got {_json_type(value)}"
        )


def _check_string_list(value: Any, where: str) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise IdentityError("invalid_field_type", f"{where} must be an array of strings or null")


def _validate_workload(workload: Any) -> dict[str, Any]:
    """§2.3 checks of the `workload` member of a trace line."""
    workload = _require_object(workload, "workload")
    _check_optional_string(workload.get("uuid"), "workload.uuid")
    axes = _require_object(workload.get("axes"), "workload.axes")
    for name, value in axes.items():
        _js_integer(value, f"workload.axes.{name}")
    inputs = _optional_object(workload.get("inputs"), "workload.inputs")
    if inputs:
        for name, descriptor in inputs.items():
            where = f"workload.inputs.{name}"
            descriptor = _require_object(descriptor, where)
            _require_string(descriptor.get("type"), f"{where}.type")
            if "value" in descriptor:
                value = descriptor["value"]
                if not (isinstance(value, bool) or _is_number(value)):
                    raise IdentityError(
                        "invalid_field_type",
                        f"{where}.value must be a number or boolean, got {_json_type(value)}",
                    )
                if not isinstance(value, bool):
                    _js_number(value, f"{where}.value")
            for member in ("path", "tensor_key"):
                if member in descriptor and not isinstance(descriptor[member], str):
                    raise IdentityError("invalid_field_type", f"{where}.{member} must be a string")
    tolerance = _optional_object(workload.get("tolerance"), "workload.tolerance")
    if tolerance:
        for member in ("max_atol", "max_rtol"):
            if member in tolerance:
                value = tolerance[member]
                if not _is_number(value):
                    raise IdentityError(
                        "invalid_field_type", f"workload.tolerance.{member} must be a number"
                    )
                if _js_number(value, f"workload.tolerance.{member}") < 0:
                    raise IdentityError(
                        "negative_tolerance", f"workload.tolerance.{member} is negative"
                    )
    _check_optional_number(workload.get("baseline_latency_ms"), "workload.baseline_latency_ms")
    _check_optional_number(workload.get("sol_ms"), "workload.sol_ms")
    return workload


def _validate_error_bound(value: Any, where: str) -> None:
    if isinstance(value, str):
        if value not in ("Infinity", "NaN"):
            raise IdentityError(
                "invalid_field_type", f'{where} must be a number, "Infinity" or "NaN"'
            )
    elif not _is_number(value):
        raise IdentityError(
            "invalid_field_type", f"{where} must be a number, got {_json_type(value)}"
        )


def _validate_evaluation(evaluation: dict[str, Any]) -> None:
    _require_string(evaluation.get("status"), "evaluation.status")
    _check_optional_string(evaluation.get("log"), "evaluation.log")
    _require_string(evaluation.get("timestamp"), "evaluation.timestamp")
    environment = _require_object(evaluation.get("environment"), "evaluation.environment")
    _validate_environment(environment)
    correctness = _optional_object(evaluation.get("correctness"), "evaluation.correctness")
    if correctness is not None:
        for member in ("max_relative_error", "max_absolute_error"):
            if member not in correctness:
                raise IdentityError("missing_field", f"evaluation.correctness.{member} is required")
            _validate_error_bound(correctness[member], f"evaluation.correctness.{member}")
        _check_optional_bool(correctness.get("has_nan"), "evaluation.correctness.has_nan")
        _check_optional_bool(correctness.get("has_inf"), "evaluation.correctness.has_inf")
    performance = _optional_object(evaluation.get("performance"), "evaluation.performance")
    if performance is not None:
        latency = performance.get("latency_ms")
        if latency is None:
            raise IdentityError("missing_field", "evaluation.performance.latency_ms is required")
        if not _is_number(latency):
            raise IdentityError(
                "invalid_field_type", "evaluation.performance.latency_ms must be a number"
            )
        if not _js_number(latency, "evaluation.performance.latency_ms") > 0:
            raise IdentityError("nonpositive_latency", f"latency_ms = {latency!r} is not > 0")
        _check_optional_number(
            performance.get("reference_latency_ms"), "evaluation.performance.reference_latency_ms"
        )
        _check_optional_number(
            performance.get("speedup_factor"), "evaluation.performance.speedup_factor"
        )


def _validate_environment(environment: dict[str, Any]) -> None:
    _require_string(environment.get("hardware"), "evaluation.environment.hardware")
    libs = _require_object(environment.get("libs"), "evaluation.environment.libs")
    for name, version in libs.items():
        if not isinstance(version, str):
            if _is_number(version):
                raise IdentityError("numeric_lib_version", f"libs.{name} = {version!r} is a number")
            raise IdentityError(
                "invalid_field_type", f"libs.{name} must be a string, got {_json_type(version)}"
            )


def validate_trace_line(trace: dict[str, Any]) -> None:
    """Raise IdentityError when a trace line fails KernelIndex's field checks (§2.3).

    Only the fields KernelIndex reads are checked; everything else is ignored.
    """
    _validate_trace_line(trace)


def _validate_trace_line(trace: Any) -> bytes | None:
    """validate_trace_line; returns the workload's serialized bytes when they can key a cache."""
    if not isinstance(trace, dict):
        raise IdentityError("invalid_field_type", "a trace line must be a JSON object")
    _require_string(trace.get("definition"), "definition")
    _check_optional_string(trace.get("solution"), "solution")
    workload_bytes = _validated_workload_bytes(trace.get("workload"))
    evaluation = _optional_object(trace.get("evaluation"), "evaluation")
    if evaluation is not None:
        _validate_evaluation(evaluation)
    return workload_bytes


_VALID_WORKLOADS = _BoundedCache(65536)


def _validated_workload_bytes(workload: Any) -> bytes | None:
    """Check the workload (§2.3), remembering workloads already found valid by their bytes.

    The bytes are orjson's serialization in insertion order. orjson writes NaN and Infinity as
    `null`, so bytes holding `null` never count as already validated; an integer beyond 64 bits
    or a lone surrogate makes orjson raise, and such a workload is simply checked every time.
    """
    if type(workload) is dict:
        try:
            workload_bytes: bytes | None = orjson.dumps(workload)
        except TypeError:
            workload_bytes = None
        if workload_bytes is not None and b"null" not in workload_bytes:
            if _VALID_WORKLOADS.get(workload_bytes) is None:
                _validate_workload(workload)
                _VALID_WORKLOADS.put(workload_bytes, True)
            return workload_bytes
    _validate_workload(workload)
    return None


def validate_definition(definition: Any) -> None:
    """§2.3 checks of a definition; KernelIndex skips a definition that fails them.

    (A definition that passes them but breaks a manifest rule in `operation_spec` aborts the
    whole import instead, §2.4.)
    """
    definition = _require_object(definition, "definition")
    _require_string(definition.get("name"), "definition.name")
    axes = _require_object(definition.get("axes"), "definition.axes")
    for name, axis in axes.items():
        axis = _require_object(axis, f"axes.{name}")
        kind = axis.get("type")
        if kind not in ("var", "const", "expr"):
            raise IdentityError(
                "invalid_field_type", f"axes.{name}.type must be var, const or expr"
            )
        if "value" in axis:
            _js_integer(axis["value"], f"axes.{name}.value")
        _check_optional_string(axis.get("expression"), f"axes.{name}.expression")
    for group in ("inputs", "outputs"):
        arguments = _require_object(definition.get(group), f"definition.{group}")
        for name, argument in arguments.items():
            argument = _require_object(argument, f"{group}.{name}")
            _require_string(argument.get("dtype"), f"{group}.{name}.dtype")
            shape = argument.get("shape")
            if shape is not None:
                if not isinstance(shape, list):
                    raise IdentityError(
                        "invalid_field_type", f"{group}.{name}.shape must be an array or null"
                    )
                for entry in shape:
                    if not isinstance(entry, str):
                        _js_integer(entry, f"{group}.{name}.shape entry")
    for member in ("op_type", "description", "reference"):
        _check_optional_string(definition.get(member), f"definition.{member}")
    _check_string_list(definition.get("tags"), "definition.tags")


def validate_solution(solution: Any) -> None:
    """§2.3 checks of a solution; KernelIndex skips a solution that fails them."""
    solution = _require_object(solution, "solution")
    _require_string(solution.get("name"), "solution.name")
    _require_string(solution.get("definition"), "solution.definition")
    spec = _optional_object(solution.get("spec"), "solution.spec")
    if spec is not None:
        _check_optional_string(spec.get("language"), "solution.spec.language")
        _check_optional_string(spec.get("entry_point"), "solution.spec.entry_point")
        _check_string_list(spec.get("target_hardware"), "solution.spec.target_hardware")
    sources = solution.get("sources")
    if sources is not None:
        if not isinstance(sources, list):
            raise IdentityError("invalid_field_type", "solution.sources must be an array or null")
        for source in sources:
            source = _require_object(source, "solution.sources[]")
            _require_string(source.get("path"), "solution.sources[].path")
            _require_string(source.get("content"), "solution.sources[].content")


# --------------------------------------------------------------------------------------------
# §3 OperationSpec
# --------------------------------------------------------------------------------------------

_FAMILY_SKIPPED_TAGS = frozenset({"L1", "L2", "Quant", "FlashInfer-Bench"})


def _family(definition: Mapping[str, Any]) -> str:
    op_type = definition.get("op_type")
    if isinstance(op_type, str) and op_type:
        family = kebab(op_type)
    else:
        family = "uncategorized"
        for tag in definition.get("tags") or ():
            if tag not in _FAMILY_SKIPPED_TAGS and not tag.startswith("model:"):
                family = kebab(tag)
                break
    if not family:
        raise IdentityError("empty_family", "the operation family slug is empty")
    return family


def _argument_entry(name: str, argument: Mapping[str, Any]) -> dict[str, Any]:
    key = argument_key(name)
    _check_identifier(key, "argument name")
    dtype = dtype_token(argument["dtype"])
    _check_identifier(dtype, "dtype")
    shape = argument.get("shape")
    if not shape:
        # A 0-d tensor (shape null, absent or []) is a scalar (§3.1).
        return {"name": key, "scalar": {"dtype": dtype}}
    dims: list[int | str] = []
    for entry in shape:
        dim = dimension(entry)
        if isinstance(dim, str):
            _check_identifier(dim, "symbolic dimension")
        elif dim < 0:
            raise IdentityError("invalid_shape", f"{name} has a negative dimension {dim}")
        dims.append(dim)
    return {"name": key, "tensor": {"shape": dims, "dtype": dtype}}


def operation_spec(definition: dict[str, Any]) -> dict[str, Any]:
    """The OperationSpec identity body of a definition (§3.1).

    Raises IdentityError for §2.3 field errors (KernelIndex skips the definition) and for
    manifest rule violations (KernelIndex aborts the import).
    """
    validate_definition(definition)
    name = definition["name"]
    _check_metadata_name(kebab(name), "operation")
    _check_title(name, "operation")
    description = definition.get("description")
    if isinstance(description, str) and _js_length(description) > _MAX_DESCRIPTION:
        raise IdentityError(
            "description_too_long", "the definition description exceeds 2,000 characters"
        )

    axes: dict[str, Any] = {}
    for axis_name, axis in definition["axes"].items():
        key = axis_key(axis_name)
        _check_identifier(key, "axis key")
        kind = axis["type"]
        if kind == "const":
            if axis.get("value") is None:
                raise IdentityError("missing_const_value", f"const axis {axis_name!r} has no value")
            body: dict[str, Any] = {
                "role": "constant",
                "type": "integer",
                "value": _js_integer(axis["value"], key),
            }
        elif kind == "var":
            body = {"role": "variable", "type": "integer"}
        else:
            expression = axis.get("expression")
            if not isinstance(expression, str):
                raise IdentityError(
                    "invalid_expression", f"derived axis {axis_name!r} has no expression"
                )
            expression = expression.lower()
            if _js_length(expression) > 200 or not _EXPRESSION_CHARS.match(expression):
                raise IdentityError(
                    "invalid_expression", f"derived axis {axis_name!r}: {expression!r}"
                )
            body = {"role": "derived", "type": "integer", "expression": expression}
        # Two names that collide after lower-casing: the later one wins (§3.1).
        axes[key] = body

    inputs = [_argument_entry(n, a) for n, a in definition["inputs"].items()]
    outputs = [_argument_entry(n, a) for n, a in definition["outputs"].items()]
    if not inputs or not outputs:
        raise IdentityError(
            "missing_arguments", "a definition needs at least one input and one output"
        )
    spec: dict[str, Any] = {
        "family": _family(definition),
        "axes": axes,
        "inputs": inputs,
        "outputs": outputs,
        "semantics": {"mutation": "none", "determinism": "unspecified"},
    }
    reference = definition.get("reference")
    if isinstance(reference, str) and reference:
        spec["reference"] = {"language": "python"}
    return spec


def operation_digest(definition: dict[str, Any]) -> str:
    """Operation digest of a definition (§3); independent of its name, tags and description."""
    return manifest_digest("OperationSpec", operation_spec(definition))


_operation_digest_of = operation_digest  # for functions whose parameter shadows the name


# --------------------------------------------------------------------------------------------
# §4 WorkloadCase
# --------------------------------------------------------------------------------------------

# ICU root collation (JavaScript localeCompare) for the uuid-less workload key, §4.1.
# Primary order of ASCII in CLDR root with punctuation non-ignorable: whitespace, punctuation,
# symbols, currency, digits, then letters case-insensitively. Other controls are ignorable.
_ICU_ASCII_ORDER = (
    "\t\n\v\f\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz"
)
_ICU_PRIMARY = {ch: index + 1 for index, ch in enumerate(_ICU_ASCII_ORDER)}
for _index, _letter in enumerate("abcdefghijklmnopqrstuvwxyz"):
    _ICU_PRIMARY[_letter.upper()] = _ICU_PRIMARY[_letter]


def _icu_sort_key(name: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Collation key: primary (base characters), secondary (accents), tertiary (case).

    Exact for ASCII names - the only names that can yield an accepted workload, since axis keys
    must match [a-z][a-z0-9_]* after lower-casing. Other characters are decomposed (NFD), their
    accents compared at the secondary level, and placed after ASCII by code point (approximation).
    """
    primary: list[int] = []
    secondary: list[int] = []
    tertiary: list[int] = []
    text = name if name.isascii() else unicodedata.normalize("NFD", name)
    for ch in text:
        weight = _ICU_PRIMARY.get(ch)
        if weight is None:
            if ch.isascii() and (ch < " " or ch == "\x7f"):
                continue  # completely ignorable control character
            if unicodedata.combining(ch):
                secondary.append(ord(ch))
                continue
            weight = 1000 + ord(ch.lower()[0])
        primary.append(weight)
        secondary.append(0)
        # Lowercase first: only when names are equal ignoring case does case decide.
        tertiary.append(1 if ch != ch.lower() else 0)
    return tuple(primary), tuple(secondary), tuple(tertiary)


def _js_json_string(text: str) -> str:
    """JSON.stringify of a string: JCS escaping, raw non-ASCII, lone surrogates as \\udxxx."""
    escaped = _encode_string(text)
    if text.isascii():
        return escaped
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", escaped)


def workload_key(workload: Mapping[str, Any]) -> str:
    """The workload key (§4.1): the uuid verbatim, else 12 hex of the collated axes' SHA-256."""
    uuid = workload.get("uuid")
    if isinstance(uuid, str) and uuid:
        return uuid
    axes = workload.get("axes")
    if not isinstance(axes, dict):
        raise IdentityError("invalid_field_type", "workload.axes must be an object")
    for name, value in axes.items():
        if isinstance(value, bool):  # True == 1 would otherwise share a cache entry with 1
            raise IdentityError("invalid_field_type", f"workload.axes.{name} must be an integer")
    return _axes_workload_key(tuple(axes.items()))


@functools.lru_cache(maxsize=8192)
def _axes_workload_key(items: tuple[tuple[str, Any], ...]) -> str:
    # Quirk §4.1: members sorted by ICU root collation (JavaScript localeCompare), not code
    # points; original (not lower-cased) names; compact JSON; first 12 hex characters.
    ordered = sorted(items, key=lambda item: _icu_sort_key(item[0]))
    parts = [
        f"{_js_json_string(name)}:{_js_integer(value, f'workload.axes.{name}')}"
        for name, value in ordered
    ]
    text = "{" + ",".join(parts) + "}"
    return hashlib.sha256(text_utf8(text)).hexdigest()[:12]


class _ExpressionParser:
    """Integers, bound names, `+ -` (lowest), `* // %` (left associative), parentheses (§4.2)."""

    _TOKEN = re.compile(r"\s*(?:([0-9]+)|([a-z_][a-z0-9_]*)|(//|[-+*%()]))")

    def __init__(self, expression: str, bindings: Mapping[str, int], axis: str):
        self.tokens: list[tuple[str, Any]] = []
        self.axis = axis
        self.bindings = bindings
        position = 0
        expression = expression.rstrip()
        while position < len(expression):
            match = self._TOKEN.match(expression, position)
            if match is None:
                raise IdentityError(
                    "invalid_expression", f"axis {axis!r}: bad token at {expression[position:]!r}"
                )
            number, name, operator = match.groups()
            if number is not None:
                self.tokens.append(("int", int(number)))
            elif name is not None:
                self.tokens.append(("name", name))
            else:
                self.tokens.append(("op", operator))
            position = match.end()
        self.index = 0

    def evaluate(self) -> int:
        value = self._sum()
        if self.index != len(self.tokens):
            raise IdentityError(
                "invalid_expression", f"axis {self.axis!r}: trailing tokens in expression"
            )
        return value

    def _peek(self) -> tuple[str, Any] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def _sum(self) -> int:
        value = self._product()
        while (token := self._peek()) is not None and token in (("op", "+"), ("op", "-")):
            self.index += 1
            right = self._product()
            value = value + right if token[1] == "+" else value - right
        return value

    def _product(self) -> int:
        value = self._atom()
        while (
            (token := self._peek()) is not None
            and token[0] == "op"
            and token[1] in ("*", "//", "%")
        ):
            self.index += 1
            right = self._atom()
            if token[1] == "*":
                value *= right
            elif right == 0:
                raise IdentityError("invalid_expression", f"axis {self.axis!r}: division by zero")
            elif token[1] == "//":
                value //= right  # floor division
            else:
                # JavaScript %: the remainder takes the sign of the dividend.
                remainder = abs(value) % abs(right)
                value = -remainder if value < 0 else remainder
        return value

    def _atom(self) -> int:
        token = self._peek()
        if token is None:
            raise IdentityError(
                "invalid_expression", f"axis {self.axis!r}: unexpected end of expression"
            )
        self.index += 1
        kind, text = token
        if kind == "int":
            return text
        if kind == "name":
            if text not in self.bindings:
                raise IdentityError("unbound_axis", f"axis {self.axis!r}: {text!r} is not bound")
            return self.bindings[text]
        if text == "(":
            value = self._sum()
            if self._peek() != ("op", ")"):
                raise IdentityError("invalid_expression", f"axis {self.axis!r}: missing ')'")
            self.index += 1
            return value
        raise IdentityError("invalid_expression", f"axis {self.axis!r}: unexpected {text!r}")


@dataclass(frozen=True, slots=True)
class _PreparedDefinition:
    """What a WorkloadCase needs from a definition, computed once per definition."""

    name: str
    operation_digest: str
    consts: tuple[tuple[str, int], ...]
    exprs: tuple[tuple[str, str], ...]
    # (original input name, argument key, dtype token, shape entries or None when scalar-shaped)
    inputs: tuple[tuple[str, str, str, tuple[int | str, ...] | None], ...]


def _prepare_definition(
    definition: Mapping[str, Any], operation_digest: str
) -> _PreparedDefinition:
    consts: list[tuple[str, int]] = []
    exprs: list[tuple[str, str]] = []
    for axis_name, axis in definition.get("axes", {}).items():
        kind = axis.get("type")
        if kind == "const" and axis.get("value") is not None:
            consts.append((axis_key(axis_name), _js_integer(axis["value"], axis_name)))
        elif kind == "expr":
            expression = axis.get("expression")
            if not isinstance(expression, str):
                raise IdentityError(
                    "invalid_expression", f"derived axis {axis_name!r} has no expression"
                )
            exprs.append((axis_key(axis_name), expression.lower()))
    inputs = []
    for input_name, argument in definition.get("inputs", {}).items():
        shape = argument.get("shape")
        entries = tuple(dimension(entry) for entry in shape) if shape else None
        _check_identifier(argument_key(input_name), "input name")
        _check_identifier(dtype_token(argument["dtype"]), "dtype")
        inputs.append(
            (input_name, argument_key(input_name), dtype_token(argument["dtype"]), entries)
        )
    return _PreparedDefinition(
        definition["name"], operation_digest, tuple(consts), tuple(exprs), tuple(inputs)
    )


_PREPARED_DEFINITIONS = _BoundedCache(1024)
_WORKLOAD_CACHE = _BoundedCache(65536)


def _prepared(definition: Mapping[str, Any], operation_digest: str) -> _PreparedDefinition:
    # Everything the workload needs from the definition is in its operation digest except the
    # original (case-sensitive) input and axis names, so those complete the key.
    key = (
        definition.get("name"),
        operation_digest,
        tuple(definition.get("inputs", ())),
        tuple(definition.get("axes", ())),
    )
    prepared = _PREPARED_DEFINITIONS.get(key)
    if prepared is None:
        prepared = _prepare_definition(definition, operation_digest)
        _PREPARED_DEFINITIONS.put(key, prepared)
    return prepared


def _workload_correctness(workload: Mapping[str, Any]) -> dict[str, Any]:
    correctness: dict[str, Any] = {"comparator": WORKLOAD_COMPARATOR}
    tolerance = workload.get("tolerance")
    if tolerance:
        if "max_atol" in tolerance:
            correctness["maxAbsoluteError"] = _js_number(tolerance["max_atol"], "max_atol")
        if "max_rtol" in tolerance:
            correctness["maxRelativeError"] = _js_number(tolerance["max_rtol"], "max_rtol")
    return correctness


def _build_workload_case(
    workload: Mapping[str, Any], prepared: _PreparedDefinition
) -> dict[str, Any]:
    """§4.2-4.4 on an already field-checked workload."""
    key = workload_key(workload)
    _check_metadata_name(f"{kebab(prepared.name)}-{key[:8]}", "workload")

    raw_axes: dict[str, Any] = workload["axes"]
    axes: dict[str, int] = {}
    for name, value in raw_axes.items():
        lowered = axis_key(name)
        _check_identifier(lowered, "workload axis key")
        axes[lowered] = _js_integer(value, f"workload.axes.{name}")
    # Quirk §4.2: the definition's const axes override a workload axis of the same name.
    bindings = dict(axes)
    bindings.update(prepared.consts)
    for name, expression in prepared.exprs:
        if name not in bindings:
            bindings[name] = _ExpressionParser(expression, bindings, name).evaluate()

    descriptors: Mapping[str, Any] = workload.get("inputs") or {}
    tensors: dict[str, Any] = {}
    scalars: dict[str, Any] = {}
    for original, key_name, dtype, entries in prepared.inputs:
        descriptor = descriptors.get(original)
        if descriptor is not None and descriptor.get("type") == "scalar":
            value = descriptor.get("value")
            # Quirk §4.4: a numeric scalar descriptor wins even over a tensor shape; `true` is
            # a boolean, not a number, so it does not make a scalar.
            if value is not None and not isinstance(value, bool):
                scalars[key_name] = {
                    "dtype": dtype,
                    "value": _js_number(value, f"{original}.value"),
                }
                continue
        if entries is None:
            continue  # scalar-shaped input without a numeric value: dropped (§4.4)
        shape: list[int] = []
        for entry in entries:
            if isinstance(entry, str):
                bound = bindings.get(entry)
                if bound is None:
                    raise IdentityError(
                        "unbound_axis", f"input {original!r}: axis {entry!r} is not bound"
                    )
                entry = bound
            if entry < 0:
                raise IdentityError(
                    "invalid_shape", f"input {original!r}: negative dimension {entry}"
                )
            if entry > _MAX_SAFE_INTEGER:
                raise IdentityError(
                    "integer_out_of_range", f"input {original!r}: dimension {entry}"
                )
            shape.append(entry)
        tensor: dict[str, Any] = {"shape": shape, "dtype": dtype}
        if descriptor is not None:
            generator = "safetensors" if descriptor.get("type") == "safetensors" else "random"
            tensor["data"] = {"generator": generator}
        tensors[key_name] = tensor

    spec: dict[str, Any] = {
        "operationSpecDigest": prepared.operation_digest,
        "axes": axes,
        "tensors": tensors,
        "correctness": _workload_correctness(workload),
    }
    if scalars:
        spec["scalars"] = scalars
    return spec


def workload_case_spec(
    workload: dict[str, Any], definition: dict[str, Any], operation_digest: str
) -> dict[str, Any]:
    """The WorkloadCase identity body of a trace's embedded workload (§4.3).

    `operation_digest` is the digest of `definition` (the definition the line names).
    """
    _validate_workload(workload)
    return _build_workload_case(workload, _prepare_definition(definition, operation_digest))


def workload_digest(
    workload: dict[str, Any], definition: dict[str, Any], operation_digest: str
) -> str:
    """The workload digest of the line's own workload (no first-line-wins cache, §2.4 step 4)."""
    return manifest_digest(
        "WorkloadCase", workload_case_spec(workload, definition, operation_digest)
    )


def correctness_key(workload_case_spec: Mapping[str, Any]) -> str:
    """Digest of `{"correctness": <the workload's correctness>}`, no envelope (§7)."""
    correctness = workload_case_spec["correctness"]
    if correctness == {"comparator": WORKLOAD_COMPARATOR}:
        return NO_TOLERANCE_CORRECTNESS_KEY
    return digest({"correctness": correctness})


@dataclass(frozen=True, slots=True)
class WorkloadIdentity:
    """What the first-line-wins workload cache holds per workload key (§2.4 step 4)."""

    workload_digest: str
    operation_digest: str  # the workload's operationSpecDigest (may be another definition's)
    correctness_key: str


def _workload_identity(
    workload: Mapping[str, Any],
    definition: Mapping[str, Any],
    operation_digest: str,
    workload_bytes: bytes | None,
) -> WorkloadIdentity:
    prepared = _prepared(definition, operation_digest)
    # Without cacheable bytes (see _validated_workload_bytes) compute without caching.
    cache_key = (prepared, workload_bytes) if workload_bytes is not None else None
    if cache_key is not None:
        cached = _WORKLOAD_CACHE.get(cache_key)
        if cached is not None:
            return cached
    spec = _build_workload_case(workload, prepared)
    identity = WorkloadIdentity(
        manifest_digest("WorkloadCase", spec), operation_digest, correctness_key(spec)
    )
    if cache_key is not None:
        _WORKLOAD_CACHE.put(cache_key, identity)
    return identity


# --------------------------------------------------------------------------------------------
# §5 ExecutionEnvironment
# --------------------------------------------------------------------------------------------


def environment_spec(environment: dict[str, Any]) -> dict[str, Any]:
    """The ExecutionEnvironment identity body of `evaluation.environment` (§5.1)."""
    _validate_environment(_require_object(environment, "evaluation.environment"))
    return copy.deepcopy(
        _environment_parts(environment["hardware"], tuple(environment["libs"].items()))[0]
    )


def environment_digest(environment: dict[str, Any]) -> str:
    """The environment digest, which is also the run's environment key (§5)."""
    _validate_environment(_require_object(environment, "evaluation.environment"))
    return _environment_parts(environment["hardware"], tuple(environment["libs"].items()))[1]


@functools.lru_cache(maxsize=4096)
def _environment_parts(
    hardware: str, libs: tuple[tuple[str, str], ...]
) -> tuple[dict[str, Any], str, dict[str, str]]:
    vendor, product, architecture = hardware_identity(hardware)
    _check_length(product, 200, "hardware product")
    software: dict[str, Any] = {}
    libraries: dict[str, str] = {}
    for name, version in libs:
        # Only the exact keys "cuda" and "torch" are special; "CUDA" or "pytorch" are libraries.
        if name == "cuda":
            _check_length(version, 100, "cudaToolkit")
            software["cudaToolkit"] = version  # as written, even ""
        elif name == "torch":
            if version:
                _check_length(version, 100, "framework version")
                software["framework"] = {"name": "pytorch", "version": version}
        else:
            token = language_token(name)  # cuda_cpp → cuda, Triton → triton
            _check_identifier(token, "library key")
            _check_length(version, 100, f"library {name} version")
            libraries[token] = version  # later keys win on collision
    if libraries:
        software["libraries"] = libraries
    spec = {
        "hardware": {"vendor": vendor, "product": product, "architecture": architecture},
        "software": software,
    }
    metadata = _environment_metadata(hardware, libs, product)
    return spec, manifest_digest("ExecutionEnvironment", spec), metadata


def _environment_metadata(
    hardware: str, libs: tuple[tuple[str, str], ...], product: str
) -> dict[str, str]:
    name = kebab("sol-trace-" + hardware + "-" + "-".join(version for _, version in libs))
    title = product + " (trace-reported software)"
    _check_metadata_name(name, "environment")
    _check_title(title, "environment")
    return {"name": name, "title": title}


def environment_metadata(environment: dict[str, Any]) -> dict[str, str]:
    """Environment metadata name and title (§11.5); the libs values join in file order."""
    _validate_environment(_require_object(environment, "evaluation.environment"))
    return dict(_environment_parts(environment["hardware"], tuple(environment["libs"].items()))[2])


def environment_summary(environment_spec: Mapping[str, Any]) -> str:
    """`CUDA <toolkit> · <framework> <version> · flashinfer-bench`, each part only if present."""
    software = environment_spec.get("software", {})
    parts = []
    if software.get("cudaToolkit"):
        parts.append(f"CUDA {software['cudaToolkit']}")
    framework = software.get("framework")
    if framework:
        parts.append(f"{framework['name']} {framework['version']}")
    parts.append(PROTOCOL_SPEC["harness"]["name"])
    return _SEP.join(parts)


def cuda_major(environment_spec: Mapping[str, Any]) -> int | None:
    """Leading integer of `software.cudaToolkit` (`12.8` → 12), None without one (§10.3)."""
    match = _LEADING_INTEGER.match(environment_spec.get("software", {}).get("cudaToolkit", ""))
    return int(match.group()) if match else None


def gpu_display(environment_spec: Mapping[str, Any]) -> str:
    """`NVIDIA B200 (unknown)`: product and architecture, as the record page shows it (§12.4)."""
    hardware = environment_spec["hardware"]
    return f"{hardware['product']} ({hardware['architecture']})"


_LEADING_INTEGER = re.compile(r"[0-9]+")


# --------------------------------------------------------------------------------------------
# §8 ImplementationRevision
# --------------------------------------------------------------------------------------------


def implementation_spec(
    solution: dict[str, Any], definition: dict[str, Any], operation_digest: str, revision: str
) -> dict[str, Any]:
    """The ImplementationRevision identity body of a solution (§8.1).

    `definition` is the definition named by the solution's own `definition` field and
    `operation_digest` its digest; `revision` the 40-hex dataset revision being imported.
    """
    validate_solution(solution)
    if not isinstance(revision, str) or not _REVISION.match(revision):
        raise IdentityError(
            "invalid_revision", f"dataset revision {revision!r} is not 40 lowercase hex"
        )
    name = solution["name"]
    _check_metadata_name(kebab(name), "implementation")
    _check_title(name, "implementation")
    description = solution.get("description")
    if isinstance(description, str) and _js_length(description) > _MAX_DESCRIPTION:
        raise IdentityError(
            "description_too_long", "the solution description exceeds 2,000 characters"
        )

    spec = solution.get("spec") or {}
    entry = (spec.get("entry_point") or "").split("::")
    entry_path = entry[0]
    entry_symbol = entry[1] if len(entry) > 1 else ""
    sources = solution.get("sources") or []
    primary = next(
        (source for source in sources if source["path"] == entry_path),
        sources[0] if sources else None,
    )
    code = primary["content"] if primary is not None and primary["content"] else None

    language = language_token(
        spec.get("language") if spec.get("language") is not None else "unknown"
    )
    _check_identifier(language, "language")
    callable_: dict[str, Any] = {"language": language}
    if primary is not None:
        _check_length(primary["path"], 200 if code is not None else 500, "source path")
        callable_["path"] = primary["path"]
    if entry_symbol:
        _check_length(entry_symbol, 200, "entry symbol")
        callable_["symbol"] = entry_symbol

    targets = [
        hardware_identity(name) for name in spec.get("target_hardware") or () if name != "LOCAL"
    ]
    architectures = set_like(target[2] for target in targets) or ["unknown"]
    products = set_like(target[1] for target in targets)
    for architecture in architectures:
        _check_identifier(architecture, "architecture")
    for product in products:
        _check_length(product, 100, "tested product")
    dtypes = set_like(dtype_token(argument["dtype"]) for argument in definition["inputs"].values())
    for dtype in dtypes:
        _check_identifier(dtype, "dtype")

    body: dict[str, Any] = {
        "projectRevision": {"repository": DATASET_REPOSITORY, "commit": revision},
        "operation": {"specDigest": operation_digest},
        "callable": callable_,
        "support": {
            "hardwareArchitectures": architectures,
            "productsTested": products,
            "dtypes": dtypes,
        },
        "licensing": {"declared": "Apache-2.0", "concluded": "Apache-2.0"},
    }
    if code is not None and primary is not None:
        body["source"] = {
            "contentDigest": text_digest(code),
            "fileName": primary["path"],
            "sizeBytes": len(text_utf8(code)),
        }
    return body


def implementation_digest(
    solution: dict[str, Any], definition: dict[str, Any], operation_digest: str, revision: str
) -> str:
    """Implementation digest of a solution at a dataset revision (§8)."""
    return manifest_digest(
        "ImplementationRevision",
        implementation_spec(solution, definition, operation_digest, revision),
    )


# --------------------------------------------------------------------------------------------
# §9 BenchmarkRun
# --------------------------------------------------------------------------------------------


def js_round(value: float) -> int:
    """JavaScript Math.round: the nearest integer, an exact half going up (towards +inf).

    Python's round() is half-to-even (2.5 → 2, JavaScript 3), and floor(x + 0.5) is wrong for
    0.49999999999999994 (the sum rounds to 1.0; JavaScript gives 0).
    """
    floor = math.floor(value)
    return floor + 1 if value - floor >= 0.5 else floor


def latency_ns(latency_ms: float) -> int:
    """round-half-up(latency_ms × 1e6) with the IEEE double product, not decimal (§9.4)."""
    return js_round(latency_ms * 1e6)


@functools.lru_cache(maxsize=65536)
def observed_at(timestamp: str) -> str:
    """`evaluation.timestamp` → `YYYY-MM-DDTHH:MM:SS.mmmZ` (§9.5).

    Quirk §9.5: a timestamp without a zone is taken as UTC (FlashInfer writes naive local time;
    KernelIndex relabels it, it does not convert). The fraction is truncated to milliseconds.
    """
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
    if not _is_number(value):
        raise IdentityError(
            "invalid_field_type", f"{where} must be a number, got {_json_type(value)}"
        )
    if type(value) is float and value - value != 0.0:
        return None  # bare NaN/Infinity from a lenient parser: treated as no bound
    number = _js_number(value, where)
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


def _ki_status(status: Any) -> str:
    ki_status = STATUS_MAP.get(status) if isinstance(status, str) else None
    if ki_status is None:
        raise IdentityError("unknown_status", f"unknown trace status {status!r}")
    return ki_status


def _log_digest(evaluation: Mapping[str, Any]) -> str | None:
    log = evaluation.get("log")
    return text_digest(log) if isinstance(log, str) and log else None


def _build_run_spec(
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
        latency_ms = _js_number(performance["latency_ms"], "latency_ms")
        if not latency_ms > 0:
            raise IdentityError("nonpositive_latency", f"latency_ms = {latency_ms!r} is not > 0")
        nanoseconds = latency_ns(latency_ms)
        if nanoseconds > _MAX_SAFE_INTEGER:
            raise IdentityError("integer_out_of_range", f"latency of {latency_ms!r} ms overflows")
        spec["timing"] = {"primaryStatistic": "mean", "latencyNs": {"mean": nanoseconds}}
        metrics: dict[str, Any] = {"latency_ms": latency_ms}
        for member in ("reference_latency_ms", "speedup_factor"):
            value = performance.get(member)
            if value is not None and _is_number(value):  # null or missing is omitted; 0 is kept
                metrics[member] = _js_number(value, member)
        source_native["metrics"] = metrics
    spec["sourceNative"] = source_native
    if log_digest is not None:
        spec["evidence"] = {
            "logs": {"uri": f"kernelindex:artifact/{log_digest}", "digest": log_digest}
        }
    spec["observedAt"] = observed
    return spec


_RUN_PREFIX = f'{{"apiVersion":{canonical_string(API_VERSION)},"kind":"BenchmarkRun","spec":{{'


def _run_canonical_json(spec: Mapping[str, Any]) -> bytes:
    """canonical_json of the BenchmarkRun envelope, written member by member.

    Runs are hashed once per trace line, so their body (whose members this module builds and
    whose key order is therefore known) skips the generic sorter. Members are written in UTF-16
    order; tests check it against canonical_json on the golden corpus and generated variants.
    """
    try:
        return _run_canonical_text(spec).encode("utf-8")
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
    return _run_canonical_text(spec, template=True)


def _run_canonical_text(spec: Mapping[str, Any], *, template: bool = False) -> str:
    q = _encode_string  # = canonical_string, without the wrapper call
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
    return _RUN_PREFIX + ",".join(parts) + "}}"


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
    return _build_run_spec(
        trace,
        evaluation,
        implementation_digest=implementation_digest,
        workload_digest=workload_digest,
        environment_digest=environment_digest,
        status=_ki_status(evaluation["status"]),
        log_digest=_log_digest(evaluation),
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
    return "sha256:" + hashlib.sha256(_run_canonical_json(spec)).hexdigest()


# --------------------------------------------------------------------------------------------
# §10 Comparison key
# --------------------------------------------------------------------------------------------


def metric_key(has_timing: bool) -> str:
    """`latency:mean:ns` with timing, else the literal `none` (§10.1)."""
    return METRIC_LATENCY if has_timing else METRIC_NONE


@functools.lru_cache(maxsize=65536)
def comparison_key(
    operation_digest: str,
    workload_digest: str,
    environment_digest: str,
    correctness_key: str,
    has_timing: bool,
) -> str:
    """Digest of `{v, operation, workload, protocol, environment, correctness, metric}` (§10.2).

    `operation_digest` is the *workload's* operationSpecDigest, not the implementation's. The
    implementation is deliberately absent: implementations are what a cohort compares.
    """
    # The canonical text written member by member, in JCS key order (correctness, environment,
    # metric, operation, protocol, v, workload); tests check it against the generic serializer.
    q = _encode_string
    text = (
        '{"correctness":'
        + q(correctness_key)
        + ',"environment":'
        + q(environment_digest)
        + ',"metric":'
        + q(metric_key(has_timing))
        + ',"operation":'
        + q(operation_digest)
        + ',"protocol":'
        + q(PROTOCOL_DIGEST)
        + ',"v":1,"workload":'
        + q(workload_digest)
        + "}"
    )
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------
# §11 Eligibility, evidence, external ids
# --------------------------------------------------------------------------------------------


def eligibility_reasons(
    ki_status: str,
    has_timing: bool,
    *,
    published: bool = True,
    retracted: bool = False,
    superseded: bool = False,
) -> list[str]:
    """ranking-v1 reason codes, in order; a run ranks only when the list is empty (§11.1).

    Every imported FlashInfer run is published and none is retracted or superseded (the
    defaults), so for FlashInfer only STATUS_<STATUS> and MISSING_PRIMARY_METRIC occur.
    """
    reasons = []
    if not published:
        reasons.append("UNPUBLISHED")
    if ki_status != "passed":
        reasons.append("STATUS_" + ki_status.upper())
    if retracted:
        reasons.append("RETRACTED")
    if superseded:
        reasons.append("SUPERSEDED")
    if not has_timing:
        reasons.append("MISSING_PRIMARY_METRIC")
    return reasons


def evidence_level(log: Any) -> str:
    """`reproducible` exactly when the eval log is a non-empty string, else `reported` (§11.3)."""
    return "reproducible" if isinstance(log, str) and log else "reported"


def run_external_id(solution: str | None, workload_key: str) -> str:
    """`trace/<solution or unknown>/<workload key>` (§11.4); shared by re-runs, not a run key."""
    return f"trace/{solution or 'unknown'}/{workload_key}"


# --------------------------------------------------------------------------------------------
# §11.5, §12 Names, titles, display strings, stored record
# --------------------------------------------------------------------------------------------


def operation_metadata(definition: Mapping[str, Any]) -> dict[str, str]:
    metadata = {"name": kebab(definition["name"]), "title": definition["name"]}
    if isinstance(definition.get("description"), str):
        metadata["description"] = definition["description"]
    return metadata


def operation_tags(tags: Iterable[str] | None) -> list[str]:
    """Definition tags as display tags (§11.5): drop L1/L2/Quant/FlashInfer-Bench, kebab the rest."""
    result: list[str] = []
    for tag in tags or ():
        if tag in _FAMILY_SKIPPED_TAGS:
            continue
        shown = "model:" + kebab(tag[len("model:") :]) if tag.startswith("model:") else kebab(tag)
        if shown not in result:
            result.append(shown)
    return result


def workload_metadata(definition_name: str, workload: Mapping[str, Any]) -> dict[str, str]:
    """WorkloadCase name and title (§11.5); over 200 characters the title is cut to 199 + `…`."""
    key = workload_key(workload)
    pairs = ", ".join(f"{name}={value}" for name, value in workload.get("axes", {}).items())
    title = definition_name + _SEP + pairs
    if _js_length(title) > _MAX_TITLE:
        title = _js_slice(title, _MAX_TITLE - 1) + "…"
    return {"name": f"{kebab(definition_name)}-{key[:8]}", "title": title}


def implementation_metadata(
    solution: Mapping[str, Any], author_directory: str | None = None
) -> dict[str, Any]:
    """Implementation name, title, authors and role label (§11.5); metadata only."""
    metadata: dict[str, Any] = {"name": kebab(solution["name"]), "title": solution["name"]}
    author = solution.get("author")
    if isinstance(author, str):
        metadata["authors"] = [author]
    if author_directory is not None:
        if author_directory == "baseline":
            metadata["labels"] = {"role": "baseline"}
        else:
            metadata["labels"] = {"role": "llm-generated", "author": author_directory}
    return metadata


def implementation_slug(solution_name: str) -> str:
    return kebab("flashinfer-" + solution_name)


def project_slug(author: str | None) -> str:
    return "flashinfer-" + kebab(author or "unknown")


def project_name(author: str | None) -> str:
    return "FlashInfer-Bench baselines" if author == "baseline" else (author or "unknown")


def run_metadata(
    definition_name: str, solution_name: str | None, workload_key: str
) -> dict[str, str]:
    """BenchmarkRun name and title (§11.5). A title over 200 characters rejects the line."""
    title = f"{solution_name or 'unknown solution'}{_SEP}{definition_name}"
    _check_title(title, "run")  # no truncation here, unlike the workload title
    return {"name": _run_name(definition_name, workload_key[:8]), "title": title}


@functools.lru_cache(maxsize=65536)
def _run_name(definition_name: str, key_prefix: str) -> str:
    # kebab truncates to 100 characters, which can cut a long name before the key (§11.5).
    name = kebab(f"sol-trace-{definition_name}-{key_prefix}")
    _check_metadata_name(name, "run")
    return name


def format_latency_ns(ns: int) -> str:
    """Display latency (§11.5): 68857 → `68.9 µs`, 7667 → `7.67 µs`."""
    if ns < 1_000:
        return f"{ns} ns"
    if ns < 1_000_000:
        value, unit = ns / 1e3, "µs"
    elif ns < 1_000_000_000:
        value, unit = ns / 1e6, "ms"
    else:
        value, unit = ns / 1e9, "s"
    return f"{_js_to_fixed(value, 2 if value < 10 else 1)} {unit}"


def source_native_line(speedup_factor: float) -> str:
    """`3958.47× reference` (§11.5)."""
    return f"{_js_to_fixed(speedup_factor, 2)}× reference"


def rank_line(rank: int | None, observed_at: str, reasons: list[str]) -> str:
    """The record page's rank line (§11.5)."""
    if reasons or rank is None:
        return "Not eligible to rank: " + ", ".join(reasons)
    return f"Rank {rank} in its comparison group{_SEP}source-native comparison{_SEP}observed {observed_at[:10]}"


_INDEX_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "bool"})


def workload_display(
    workload_case_spec: Mapping[str, Any], axes_order: Iterable[str] | None = None
) -> str:
    """`total_q = 1954 · … · bf16`: axes, then the tensors' compute dtypes (§12.4).

    Integer index dtypes are hidden when a compute dtype exists. `axes_order` is the workload's
    original axis names (the spec's own keys are lower-cased).
    """
    axes = workload_case_spec["axes"]
    names = [axis_key(name) for name in axes_order] if axes_order is not None else list(axes)
    parts = [f"{name} = {axes[name]}" for name in names if name in axes]
    dtypes: list[str] = []
    for tensor in workload_case_spec.get("tensors", {}).values():
        if tensor["dtype"] not in dtypes:
            dtypes.append(tensor["dtype"])
    compute = [dtype for dtype in dtypes if dtype not in _INDEX_DTYPES]
    parts.extend(compute or dtypes)
    return _SEP.join(parts)


def record_manifest(
    run_spec: Mapping[str, Any],
    run_metadata: Mapping[str, Any],
    environment_spec: Mapping[str, Any],
    environment_metadata: Mapping[str, Any],
) -> dict[str, Any]:
    """The three full manifests KernelIndex stores with a run (§12.3)."""
    return {
        "run": {
            "apiVersion": API_VERSION,
            "kind": "BenchmarkRun",
            "metadata": dict(run_metadata),
            "spec": dict(run_spec),
        },
        "protocol": {
            "apiVersion": API_VERSION,
            "kind": "BenchmarkProtocol",
            "metadata": dict(PROTOCOL_METADATA),
            "spec": copy.deepcopy(PROTOCOL_SPEC),
        },
        "environment": {
            "apiVersion": API_VERSION,
            "kind": "ExecutionEnvironment",
            "metadata": dict(environment_metadata),
            "spec": dict(environment_spec),
        },
    }


# --------------------------------------------------------------------------------------------
# One trace line, end to end
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceIdentity:
    """Every KernelIndex identity of one evaluated trace line."""

    workload_key: str
    operation_digest: str  # the workload's operationSpecDigest (§10.2)
    workload_digest: str
    environment_digest: str  # = environment key
    protocol_digest: str  # = protocol key
    correctness_key: str
    comparison_key: str
    metric_key: str
    ki_status: str
    has_timing: bool
    latency_ns: int | None
    observed_at: str
    run_digest: str | None  # None without an implementation (KernelIndex skips such lines)
    eligibility_reasons: tuple[str, ...]
    evidence_level: str
    log_digest: str | None
    external_id: str
    run_name: str
    run_title: str
    max_absolute_error: int | float | None  # None: no recorded bound, or no correctness block
    max_relative_error: int | float | None
    workload: WorkloadIdentity
    # With run_body_template=True: the run body with the implementation and workload digests
    # left as slots (see run_body_template()); None otherwise.
    run_body_template: str | None = None

    @property
    def eligible(self) -> bool:
        return not self.eligibility_reasons

    @property
    def kernelindex_skip_reason(self) -> str | None:
        """`unknown_solution` when KernelIndex would skip the line (no implementation, §2.4)."""
        return "unknown_solution" if self.run_digest is None else None


def _new_trace_identity(**fields: Any) -> TraceIdentity:
    """TraceIdentity(**fields) without the frozen __init__'s per-field object.__setattr__ calls
    (a quarter of a warm line's cost). Tests check it equals the regular constructor."""
    identity = object.__new__(TraceIdentity)
    identity.__dict__.update(fields)
    return identity


def identify_trace_line(
    trace: dict[str, Any],
    *,
    definition: dict[str, Any] | None,
    operation_digest: str | None,
    implementation_digest: str | None,
    workload_digest_override: str | WorkloadIdentity | None = None,
    run_body_template: bool = False,
) -> TraceIdentity:
    """All identities of one trace line, or IdentityError when KernelIndex rejects it.

    - `definition` is the definition named by the line's `definition` (None: unknown), and
      `operation_digest` its digest (computed when None).
    - `implementation_digest` is that of the solution named by the line (None: KernelIndex skips
      the line; every other identity is still computed and `run_digest` is None).
    - `workload_digest_override` resolves Quirk §2.4 step 4: the first line of the whole import
      that produces a WorkloadCase for a workload key fixes its digest, and later lines with that
      key reuse it even from another definition. The caller keeps that cache and passes the
      cached `WorkloadIdentity` (`TraceIdentity.workload`, or `IdentityError.workload` for a line
      rejected after its workload was built). A bare digest string is accepted too; the
      operation digest and correctness key then come from this line.
    - `run_body_template=True` also returns the run body with slots for the two digests a
      warehouse may only resolve later (`run_body_template()`).
    """
    workload_bytes = _validate_trace_line(trace)
    if definition is None:
        raise IdentityError(
            "unknown_definition", f"definition {trace['definition']!r} is not in the import"
        )
    if operation_digest is None:
        operation_digest = _operation_digest_of(definition)
    evaluation = trace.get("evaluation")
    if evaluation is None:
        raise IdentityError("missing_evaluation", "the trace line has no evaluation")
    workload = trace["workload"]
    key = workload_key(workload)

    built: WorkloadIdentity | None = None
    if isinstance(workload_digest_override, WorkloadIdentity):
        cached = workload_digest_override
    elif isinstance(workload_digest_override, str):
        correctness = _workload_correctness(workload)
        key_of_correctness = (
            NO_TOLERANCE_CORRECTNESS_KEY
            if len(correctness) == 1
            else digest({"correctness": correctness})
        )
        cached = WorkloadIdentity(workload_digest_override, operation_digest, key_of_correctness)
    else:
        cached = built = _workload_identity(workload, definition, operation_digest, workload_bytes)

    try:
        return _identify_rest(
            trace, evaluation, key, cached, implementation_digest, run_body_template
        )
    except IdentityError as error:
        error.workload = built
        raise


def _identify_rest(
    trace: dict[str, Any],
    evaluation: dict[str, Any],
    key: str,
    workload: WorkloadIdentity,
    implementation_digest: str | None,
    with_template: bool,
) -> TraceIdentity:
    environment = evaluation["environment"]
    _, environment_key, _ = _environment_parts(
        environment["hardware"], tuple(environment["libs"].items())
    )
    status = _ki_status(evaluation["status"])
    observed = observed_at(evaluation["timestamp"])
    definition_name = trace["definition"]
    solution_name = trace.get("solution")
    metadata = run_metadata(definition_name, solution_name, key)
    log_digest = _log_digest(evaluation)

    spec = _build_run_spec(
        trace,
        evaluation,
        implementation_digest=implementation_digest or "",
        workload_digest=workload.workload_digest,
        environment_digest=environment_key,
        status=status,
        log_digest=log_digest,
        observed=observed,
    )
    run = None
    if implementation_digest is not None:
        run = "sha256:" + hashlib.sha256(_run_canonical_json(spec)).hexdigest()
    timing = spec.get("timing")
    has_timing = timing is not None
    run_correctness = spec.get("correctness", {})
    return _new_trace_identity(
        workload_key=key,
        operation_digest=workload.operation_digest,
        workload_digest=workload.workload_digest,
        environment_digest=environment_key,
        protocol_digest=PROTOCOL_DIGEST,
        correctness_key=workload.correctness_key,
        comparison_key=comparison_key(
            workload.operation_digest,
            workload.workload_digest,
            environment_key,
            workload.correctness_key,
            has_timing,
        ),
        metric_key=metric_key(has_timing),
        ki_status=status,
        has_timing=has_timing,
        latency_ns=timing["latencyNs"]["mean"] if timing is not None else None,
        observed_at=observed,
        run_digest=run,
        eligibility_reasons=tuple(eligibility_reasons(status, has_timing)),
        evidence_level="reproducible" if log_digest is not None else "reported",
        log_digest=log_digest,
        external_id=run_external_id(solution_name, key),
        run_name=metadata["name"],
        run_title=metadata["title"],
        max_absolute_error=run_correctness.get("maximumAbsoluteError"),
        max_relative_error=run_correctness.get("maximumRelativeError"),
        workload=workload,
        run_body_template=_run_canonical_text(spec, template=True) if with_template else None,
    )
