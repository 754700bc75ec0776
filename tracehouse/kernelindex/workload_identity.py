"""What the first-line-wins workload cache holds per workload key (§2.4 step 4).

A module of its own, importing nothing: ``errors`` (which every other module of the package
imports) annotates with it, and ``workload`` builds it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WorkloadIdentity:
    """What the first-line-wins workload cache holds per workload key (§2.4 step 4)."""

    workload_digest: str
    operation_digest: str  # the workload's operationSpecDigest (may be another definition's)
    correctness_key: str
