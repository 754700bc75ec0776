"""One trace line, end to end (§2.4): every KernelIndex identity of an evaluated trace line.

The quirks KernelIndex has are reproduced on purpose across this package; each is marked "Quirk"
with its section number. Do not "fix" them: any change alters published digests.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from tracehouse.kernelindex.canonical import digest
from tracehouse.kernelindex.comparison import (
    comparison_key,
    eligibility_reasons,
    metric_key,
    run_external_id,
)
from tracehouse.kernelindex.display import run_metadata
from tracehouse.kernelindex.environment import environment_parts
from tracehouse.kernelindex.errors import IdentityError
from tracehouse.kernelindex.operation import operation_digest_of
from tracehouse.kernelindex.protocol import (
    NO_TOLERANCE_CORRECTNESS_KEY,
    PROTOCOL_DIGEST,
)
from tracehouse.kernelindex.run import (
    build_run_spec,
    evaluation_log_digest,
    kernelindex_status,
    observed_at,
    run_canonical_json,
    run_canonical_text,
)
from tracehouse.kernelindex.validation import validate_trace_line_for_cache
from tracehouse.kernelindex.workload import (
    WorkloadIdentity,
    workload_correctness,
    workload_identity,
    workload_key,
)


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
    workload_bytes = validate_trace_line_for_cache(trace)
    if definition is None:
        raise IdentityError(
            "unknown_definition", f"definition {trace['definition']!r} is not in the import"
        )
    if operation_digest is None:
        operation_digest = operation_digest_of(definition)
    evaluation = trace.get("evaluation")
    if evaluation is None:
        raise IdentityError("missing_evaluation", "the trace line has no evaluation")
    workload = trace["workload"]
    key = workload_key(workload)

    built: WorkloadIdentity | None = None
    if isinstance(workload_digest_override, WorkloadIdentity):
        cached = workload_digest_override
    elif isinstance(workload_digest_override, str):
        correctness = workload_correctness(workload)
        key_of_correctness = (
            NO_TOLERANCE_CORRECTNESS_KEY
            if len(correctness) == 1
            else digest({"correctness": correctness})
        )
        cached = WorkloadIdentity(workload_digest_override, operation_digest, key_of_correctness)
    else:
        cached = built = workload_identity(workload, definition, operation_digest, workload_bytes)

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
    _, environment_key, _ = environment_parts(
        environment["hardware"], tuple(environment["libs"].items())
    )
    status = kernelindex_status(evaluation["status"])
    observed = observed_at(evaluation["timestamp"])
    definition_name = trace["definition"]
    solution_name = trace.get("solution")
    metadata = run_metadata(definition_name, solution_name, key)
    log_digest = evaluation_log_digest(evaluation)

    spec = build_run_spec(
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
        run = "sha256:" + hashlib.sha256(run_canonical_json(spec)).hexdigest()
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
        run_body_template=run_canonical_text(spec, template=True) if with_template else None,
    )
