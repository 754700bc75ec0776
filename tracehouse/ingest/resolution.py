"""A run's resolved columns: the one place they follow from what its line gave (its keys) and
what only the whole source fixes. A worker completes every run with what it knows (the
source's solutions, its file so far, no other line's workload case), so its runs part is the
table's part as it is; finalize resolves again only the parts of runs whose assumptions the
whole source does not bear out (``sql/assemble/unresolved_parts.sql``), with the same function.

What the whole source fixes (identity doc §2.4, §9, §10):
- the solution a run names, when its definition is the source's: author and implementation
  digest, else the run is ``unknown_solution``;
- whether KernelIndex reads the run's file at all (every line strict JSON), else the run is
  ``file_not_strict_json``;
- the workload cache: the first accepted line of the whole import with the run's workload key
  fixes its workload digest, operation digest and correctness key (``sql/assemble/first_case``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracehouse import kernelindex

# What resolving sets on a run, in this order (``resolve_run``'s result).
RESOLVED_COLUMNS = (
    "author",
    "implementation_digest",
    "workload_digest",
    "operation_digest",
    "correctness_key",
    "identity_error",
    "run_digest",
    "comparison_key",
)

# A solution as runs take it: (author, implementation digest or None).
KnownSolution = tuple[str | None, str | None]
# The workload cache's case for a workload key: (workload digest, operation digest,
# correctness key) of its first accepted line.
FirstCase = tuple[str | None, str | None, str | None]


def resolve_run(
    keys: Mapping[str, Any],
    known: KnownSolution | None,
    file_unreadable: bool,
    first: FirstCase | None,
) -> tuple[Any, ...]:
    """The RESOLVED_COLUMNS of a run from its ``keys`` (a run_keys row: the line's own
    digests and identity error, its template, environment and timing), the solution it
    names (None: not among the source's), whether its file is one KernelIndex cannot read,
    and its workload key's first case (None: none, or the line itself)."""
    workload = keys.get("workload_digest")
    operation = keys.get("operation_digest")
    correctness = keys.get("correctness_key")
    if workload is not None and first is not None:
        first_workload, first_operation, first_correctness = first
        if first_workload is not None:
            workload = first_workload
        if first_operation is not None:
            operation = first_operation
        if first_correctness is not None:
            correctness = first_correctness
    author, implementation = known if known is not None else (None, None)
    error = keys.get("line_identity_error")
    if error is None and file_unreadable:
        error = "file_not_strict_json"
    if error is None and known is None:
        error = "unknown_solution"
    template = keys.get("run_body_template")
    run_digest = (
        kernelindex.run_digest_from_template(template, implementation, workload)
        if implementation is not None and template is not None and workload is not None
        else None
    )
    environment = keys.get("environment_digest")
    comparison_key = (
        kernelindex.comparison_key(
            operation, workload, environment, correctness, bool(keys.get("has_timing"))
        )
        if workload is not None
        and environment is not None
        and operation is not None
        and correctness is not None
        else None
    )
    return (
        author,
        implementation,
        workload,
        operation,
        correctness,
        error,
        run_digest,
        comparison_key,
    )
