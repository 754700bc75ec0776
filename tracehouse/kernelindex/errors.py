"""What KernelIndex refuses, and why: the reason codes and the two exceptions of the spec.

`IdentityError.code` is a key of `IDENTITY_REASON_CODES`; `CanonicalizationError` is a value
with no RFC 8785 form. "§n" refers to the sections of docs/kernelindex-identity.md (in ../shared
beside the checkout), as everywhere in this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only for the annotation
    from tracehouse.kernelindex.workload_identity import WorkloadIdentity

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


def json_type(value: object) -> str:
    """The JSON type name of a value, as error messages say it."""
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


class CanonicalizationError(ValueError):
    """The value has no RFC 8785 form (NaN/Infinity, unsafe integer, lone surrogate, bad type)."""
