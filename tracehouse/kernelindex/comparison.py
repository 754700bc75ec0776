"""§10 comparison key and metric key; §11.1 eligibility reasons, §11.3 evidence levels and §11.4
external ids.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from tracehouse.kernelindex.canonical import encode_string
from tracehouse.kernelindex.protocol import PROTOCOL_DIGEST

METRIC_LATENCY = "latency:mean:ns"


METRIC_NONE = "none"


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
    q = encode_string
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
