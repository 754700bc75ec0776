"""The KernelIndex identity spec of FlashInfer-Trace data, as pure functions.

Implements docs/kernelindex-identity.md (in ../shared beside the checkout; "§n" in this package
refers to its sections): operation, workload, environment, protocol, implementation and run
digests, the correctness and comparison keys, eligibility, evidence levels, external ids, names
and titles. A pipeline that follows these functions reproduces KernelIndex's published values
row by row (tests/contract/test_identity_golden.py checks all 1,490 lines of the golden corpus).

The package imports nothing else of the project. One module per part of the spec:

- `canonical`: RFC 8785 text and the digests on it (§1.1, §1.2)
- `numbers`: JavaScript number semantics and ECMAScript number formatting (§1.2)
- `transformations`: the §1.3 shared transformations and manifest name rules
- `validation`: the §2.3 field checks
- `operation` §3, `workload` §4, `environment` §5, `protocol` §6-§7, `implementation` §8,
  `run` §9, `comparison` §10-§11.4, `display` §11.5-§12
- `trace_line`: one trace line, end to end (§2.4)
- `errors`: `IdentityError` with its reason codes (`IDENTITY_REASON_CODES`), and
  `CanonicalizationError`; `cache`: the bounded caches

Everything KernelIndex would reject raises `IdentityError` with a short stable `code`. Where
JavaScript and Python disagree, JavaScript wins (KernelIndex runs on it): numbers are IEEE-754
doubles (`bool` is never a number), string lengths count UTF-16 code units, sorting compares
UTF-16 code units, rounding is half-up.
"""

from __future__ import annotations

from tracehouse.kernelindex.canonical import (
    API_VERSION,
    canonical_json,
    canonical_number,
    canonical_string,
    digest,
    manifest_digest,
    text_digest,
    text_utf8,
)
from tracehouse.kernelindex.comparison import (
    METRIC_LATENCY,
    METRIC_NONE,
    comparison_key,
    eligibility_reasons,
    evidence_level,
    metric_key,
    run_external_id,
)
from tracehouse.kernelindex.display import (
    environment_summary,
    format_latency_ns,
    gpu_display,
    implementation_metadata,
    implementation_slug,
    operation_metadata,
    operation_tags,
    project_name,
    project_slug,
    rank_line,
    record_manifest,
    run_metadata,
    source_native_line,
    workload_display,
    workload_metadata,
)
from tracehouse.kernelindex.environment import (
    cuda_major,
    environment_digest,
    environment_metadata,
    environment_spec,
)
from tracehouse.kernelindex.errors import (
    IDENTITY_REASON_CODES,
    CanonicalizationError,
    IdentityError,
)
from tracehouse.kernelindex.implementation import (
    DATASET_REPOSITORY,
    implementation_digest,
    implementation_spec,
    is_commit_sha,
)
from tracehouse.kernelindex.numbers import js_round
from tracehouse.kernelindex.operation import operation_digest, operation_spec
from tracehouse.kernelindex.protocol import (
    HARNESS_NAME,
    NO_TOLERANCE_CORRECTNESS_KEY,
    PROTOCOL_DIGEST,
    PROTOCOL_METADATA,
    PROTOCOL_SPEC,
    RUN_COMPARATOR,
    WORKLOAD_COMPARATOR,
    correctness_key,
)
from tracehouse.kernelindex.run import (
    PARSER_VERSION,
    RUN_ENVELOPE_PREFIX,
    RUN_TEMPLATE_SLOT,
    STATUS_MAP,
    latency_ns,
    observed_at,
    run_body_template,
    run_digest,
    run_digest_from_template,
    run_spec,
)
from tracehouse.kernelindex.trace_line import TraceIdentity, identify_trace_line
from tracehouse.kernelindex.transformations import (
    argument_key,
    axis_key,
    dimension,
    dtype_token,
    hardware_identity,
    kebab,
    language_token,
    set_like,
)
from tracehouse.kernelindex.validation import (
    validate_definition,
    validate_solution,
    validate_trace_line,
)
from tracehouse.kernelindex.workload import (
    WorkloadIdentity,
    workload_case_identity,
    workload_case_spec,
    workload_digest,
    workload_key,
)

__all__ = [
    "API_VERSION",
    "CanonicalizationError",
    "DATASET_REPOSITORY",
    "HARNESS_NAME",
    "IDENTITY_REASON_CODES",
    "IdentityError",
    "METRIC_LATENCY",
    "METRIC_NONE",
    "NO_TOLERANCE_CORRECTNESS_KEY",
    "PARSER_VERSION",
    "PROTOCOL_DIGEST",
    "PROTOCOL_METADATA",
    "PROTOCOL_SPEC",
    "RUN_COMPARATOR",
    "RUN_ENVELOPE_PREFIX",
    "RUN_TEMPLATE_SLOT",
    "STATUS_MAP",
    "TraceIdentity",
    "WORKLOAD_COMPARATOR",
    "WorkloadIdentity",
    "argument_key",
    "axis_key",
    "canonical_json",
    "canonical_number",
    "canonical_string",
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
    "implementation_slug",
    "implementation_spec",
    "is_commit_sha",
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
    "project_name",
    "project_slug",
    "rank_line",
    "record_manifest",
    "run_body_template",
    "run_digest_from_template",
    "run_digest",
    "run_external_id",
    "run_metadata",
    "run_spec",
    "set_like",
    "source_native_line",
    "text_digest",
    "text_utf8",
    "validate_definition",
    "validate_solution",
    "validate_trace_line",
    "workload_case_identity",
    "workload_case_spec",
    "workload_digest",
    "workload_display",
    "workload_key",
    "workload_metadata",
]
