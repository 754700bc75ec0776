"""§8 ImplementationRevision: the identity body and digest of a solution at a dataset revision, and
the one rule for what a dataset revision (a git commit sha) looks like.
"""

from __future__ import annotations

import re
from typing import Any

from tracehouse.kernelindex.canonical import manifest_digest, text_digest, text_utf8
from tracehouse.kernelindex.errors import IdentityError
from tracehouse.kernelindex.transformations import (
    check_identifier,
    check_length,
    check_manifest_texts,
    dtype_token,
    hardware_identity,
    language_token,
    set_like,
)
from tracehouse.kernelindex.validation import validate_solution

DATASET_REPOSITORY = "https://huggingface.co/datasets/flashinfer-ai/flashinfer-trace"

# A git commit sha as KernelIndex records it (§8.1 projectRevision.commit): exactly 40 lowercase
# hex characters. `fullmatch`, so a trailing newline (which `$` would let through) is refused.
_COMMIT_SHA = re.compile(r"[0-9a-f]{40}")


def is_commit_sha(value: object) -> bool:
    """True when `value` is a full git commit sha: 40 lowercase hex characters, nothing more.

    The one rule for dataset revisions: the build's --revision, git HEAD reading and the
    implementation digest all use it.
    """
    return isinstance(value, str) and _COMMIT_SHA.fullmatch(value) is not None


def implementation_spec(
    solution: dict[str, Any], definition: dict[str, Any], operation_digest: str, revision: str
) -> dict[str, Any]:
    """The ImplementationRevision identity body of a solution (§8.1).

    `definition` is the definition named by the solution's own `definition` field and
    `operation_digest` its digest; `revision` the 40-hex dataset revision being imported.
    """
    validate_solution(solution)
    if not is_commit_sha(revision):
        raise IdentityError(
            "invalid_revision", f"dataset revision {revision!r} is not 40 lowercase hex"
        )
    check_manifest_texts(
        "implementation", "solution", solution["name"], solution.get("description")
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
    check_identifier(language, "language")
    callable_: dict[str, Any] = {"language": language}
    if primary is not None:
        check_length(primary["path"], 200 if code is not None else 500, "source path")
        callable_["path"] = primary["path"]
    if entry_symbol:
        check_length(entry_symbol, 200, "entry symbol")
        callable_["symbol"] = entry_symbol

    targets = [
        hardware_identity(name) for name in spec.get("target_hardware") or () if name != "LOCAL"
    ]
    architectures = set_like(target[2] for target in targets) or ["unknown"]
    products = set_like(target[1] for target in targets)
    for architecture in architectures:
        check_identifier(architecture, "architecture")
    for product in products:
        check_length(product, 100, "tested product")
    dtypes = set_like(dtype_token(argument["dtype"]) for argument in definition["inputs"].values())
    for dtype in dtypes:
        check_identifier(dtype, "dtype")

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
