"""§2.3 field checks: only the fields KernelIndex reads are checked, everything else is ignored.

A definition or solution failing them is skipped by KernelIndex; a trace line is rejected.
"""

from __future__ import annotations

from typing import Any

import orjson

from tracehouse.kernelindex.cache import WORKLOAD_CACHE_ENTRIES, BoundedCache
from tracehouse.kernelindex.errors import IdentityError, json_type
from tracehouse.kernelindex.numbers import is_number, js_integer, js_number


def require_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        if value is None:
            raise IdentityError("missing_field", f"{where} is required")
        raise IdentityError(
            "invalid_field_type", f"{where} must be an object, got {json_type(value)}"
        )
    return value


def _optional_object(value: Any, where: str) -> dict[str, Any] | None:
    if value is None or isinstance(value, dict):
        return value
    raise IdentityError(
        "invalid_field_type", f"{where} must be an object or null, got {json_type(value)}"
    )


def _require_string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        if value is None:
            raise IdentityError("missing_field", f"{where} is required")
        raise IdentityError(
            "invalid_field_type", f"{where} must be a string, got {json_type(value)}"
        )
    return value


def _check_optional_string(value: Any, where: str) -> None:
    if value is not None and not isinstance(value, str):
        raise IdentityError(
            "invalid_field_type", f"{where} must be a string or null, got {json_type(value)}"
        )


def _check_optional_number(value: Any, where: str) -> None:
    if value is None:
        return
    if not is_number(value):
        raise IdentityError(
            "invalid_field_type", f"{where} must be a number or null, got {json_type(value)}"
        )
    js_number(value, where)


def _check_optional_bool(value: Any, where: str) -> None:
    if value is not None and not isinstance(value, bool):
        raise IdentityError(
            "invalid_field_type", f"{where} must be a boolean or null, got {json_type(value)}"
        )


def _check_string_list(value: Any, where: str) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise IdentityError("invalid_field_type", f"{where} must be an array of strings or null")


def validate_workload(workload: Any) -> dict[str, Any]:
    """§2.3 checks of the `workload` member of a trace line."""
    workload = require_object(workload, "workload")
    _check_optional_string(workload.get("uuid"), "workload.uuid")
    axes = require_object(workload.get("axes"), "workload.axes")
    for name, value in axes.items():
        js_integer(value, f"workload.axes.{name}")
    inputs = _optional_object(workload.get("inputs"), "workload.inputs")
    if inputs:
        for name, descriptor in inputs.items():
            where = f"workload.inputs.{name}"
            descriptor = require_object(descriptor, where)
            _require_string(descriptor.get("type"), f"{where}.type")
            if "value" in descriptor:
                value = descriptor["value"]
                if not (isinstance(value, bool) or is_number(value)):
                    raise IdentityError(
                        "invalid_field_type",
                        f"{where}.value must be a number or boolean, got {json_type(value)}",
                    )
                if not isinstance(value, bool):
                    js_number(value, f"{where}.value")
            for member in ("path", "tensor_key"):
                if member in descriptor and not isinstance(descriptor[member], str):
                    raise IdentityError("invalid_field_type", f"{where}.{member} must be a string")
    tolerance = _optional_object(workload.get("tolerance"), "workload.tolerance")
    if tolerance:
        for member in ("max_atol", "max_rtol"):
            if member in tolerance:
                value = tolerance[member]
                if not is_number(value):
                    raise IdentityError(
                        "invalid_field_type", f"workload.tolerance.{member} must be a number"
                    )
                if js_number(value, f"workload.tolerance.{member}") < 0:
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
    elif not is_number(value):
        raise IdentityError(
            "invalid_field_type", f"{where} must be a number, got {json_type(value)}"
        )


def _validate_evaluation(evaluation: dict[str, Any]) -> None:
    _require_string(evaluation.get("status"), "evaluation.status")
    _check_optional_string(evaluation.get("log"), "evaluation.log")
    _require_string(evaluation.get("timestamp"), "evaluation.timestamp")
    environment = require_object(evaluation.get("environment"), "evaluation.environment")
    validate_environment(environment)
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
        if not is_number(latency):
            raise IdentityError(
                "invalid_field_type", "evaluation.performance.latency_ms must be a number"
            )
        if not js_number(latency, "evaluation.performance.latency_ms") > 0:
            raise IdentityError("nonpositive_latency", f"latency_ms = {latency!r} is not > 0")
        _check_optional_number(
            performance.get("reference_latency_ms"), "evaluation.performance.reference_latency_ms"
        )
        _check_optional_number(
            performance.get("speedup_factor"), "evaluation.performance.speedup_factor"
        )


def validate_environment(environment: dict[str, Any]) -> None:
    _require_string(environment.get("hardware"), "evaluation.environment.hardware")
    libs = require_object(environment.get("libs"), "evaluation.environment.libs")
    for name, version in libs.items():
        if not isinstance(version, str):
            if is_number(version):
                raise IdentityError("numeric_lib_version", f"libs.{name} = {version!r} is a number")
            raise IdentityError(
                "invalid_field_type", f"libs.{name} must be a string, got {json_type(version)}"
            )


def validate_trace_line(trace: dict[str, Any]) -> None:
    """Raise IdentityError when a trace line fails KernelIndex's field checks (§2.3).

    Only the fields KernelIndex reads are checked; everything else is ignored.
    """
    validate_trace_line_for_cache(trace)


def validate_trace_line_for_cache(trace: Any) -> bytes | None:
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


_VALID_WORKLOADS = BoundedCache(WORKLOAD_CACHE_ENTRIES)


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
                validate_workload(workload)
                _VALID_WORKLOADS.put(workload_bytes, True)
            return workload_bytes
    validate_workload(workload)
    return None


def validate_definition(definition: Any) -> None:
    """§2.3 checks of a definition; KernelIndex skips a definition that fails them.

    (A definition that passes them but breaks a manifest rule in `operation_spec` aborts the
    whole import instead, §2.4.)
    """
    definition = require_object(definition, "definition")
    _require_string(definition.get("name"), "definition.name")
    axes = require_object(definition.get("axes"), "definition.axes")
    for name, axis in axes.items():
        axis = require_object(axis, f"axes.{name}")
        kind = axis.get("type")
        if kind not in ("var", "const", "expr"):
            raise IdentityError(
                "invalid_field_type", f"axes.{name}.type must be var, const or expr"
            )
        if "value" in axis:
            js_integer(axis["value"], f"axes.{name}.value")
        _check_optional_string(axis.get("expression"), f"axes.{name}.expression")
    for group in ("inputs", "outputs"):
        arguments = require_object(definition.get(group), f"definition.{group}")
        for name, argument in arguments.items():
            argument = require_object(argument, f"{group}.{name}")
            _require_string(argument.get("dtype"), f"{group}.{name}.dtype")
            shape = argument.get("shape")
            if shape is not None:
                if not isinstance(shape, list):
                    raise IdentityError(
                        "invalid_field_type", f"{group}.{name}.shape must be an array or null"
                    )
                for entry in shape:
                    if not isinstance(entry, str):
                        js_integer(entry, f"{group}.{name}.shape entry")
    for member in ("op_type", "description", "reference"):
        _check_optional_string(definition.get(member), f"definition.{member}")
    _check_string_list(definition.get("tags"), "definition.tags")


def validate_solution(solution: Any) -> None:
    """§2.3 checks of a solution; KernelIndex skips a solution that fails them."""
    solution = require_object(solution, "solution")
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
            source = require_object(source, "solution.sources[]")
            _require_string(source.get("path"), "solution.sources[].path")
            _require_string(source.get("content"), "solution.sources[].content")
