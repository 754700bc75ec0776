"""§6 BenchmarkProtocol (one constant protocol) and §7 the correctness key with its
comparator-string quirk.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracehouse.kernelindex.canonical import digest, manifest_digest

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


def correctness_key(workload_case_spec: Mapping[str, Any]) -> str:
    """Digest of `{"correctness": <the workload's correctness>}`, no envelope (§7)."""
    correctness = workload_case_spec["correctness"]
    if correctness == {"comparator": WORKLOAD_COMPARATOR}:
        return NO_TOLERANCE_CORRECTNESS_KEY
    return digest({"correctness": correctness})
