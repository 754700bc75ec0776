"""§5 ExecutionEnvironment: the identity body, digest (= environment key) and metadata of
`evaluation.environment`, and the CUDA major version derived from it (§10.3).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping
from typing import Any

from tracehouse.kernelindex.canonical import manifest_digest
from tracehouse.kernelindex.transformations import (
    check_identifier,
    check_length,
    check_metadata_name,
    check_title,
    hardware_identity,
    kebab,
    language_token,
)
from tracehouse.kernelindex.validation import require_object, validate_environment


def environment_spec(environment: dict[str, Any]) -> dict[str, Any]:
    """The ExecutionEnvironment identity body of `evaluation.environment` (§5.1)."""
    validate_environment(require_object(environment, "evaluation.environment"))
    return copy.deepcopy(
        environment_parts(environment["hardware"], tuple(environment["libs"].items()))[0]
    )


def environment_digest(environment: dict[str, Any]) -> str:
    """The environment digest, which is also the run's environment key (§5)."""
    validate_environment(require_object(environment, "evaluation.environment"))
    return environment_parts(environment["hardware"], tuple(environment["libs"].items()))[1]


@functools.lru_cache(maxsize=4096)
def environment_parts(
    hardware: str, libs: tuple[tuple[str, str], ...]
) -> tuple[dict[str, Any], str, dict[str, str]]:
    vendor, product, architecture = hardware_identity(hardware)
    check_length(product, 200, "hardware product")
    software: dict[str, Any] = {}
    libraries: dict[str, str] = {}
    for name, version in libs:
        # Only the exact keys "cuda" and "torch" are special; "CUDA" or "pytorch" are libraries.
        if name == "cuda":
            check_length(version, 100, "cudaToolkit")
            software["cudaToolkit"] = version  # as written, even ""
        elif name == "torch":
            if version:
                check_length(version, 100, "framework version")
                software["framework"] = {"name": "pytorch", "version": version}
        else:
            token = language_token(name)  # cuda_cpp → cuda, Triton → triton
            check_identifier(token, "library key")
            check_length(version, 100, f"library {name} version")
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
    check_metadata_name(name, "environment")
    check_title(title, "environment")
    return {"name": name, "title": title}


def environment_metadata(environment: dict[str, Any]) -> dict[str, str]:
    """Environment metadata name and title (§11.5); the libs values join in file order."""
    validate_environment(require_object(environment, "evaluation.environment"))
    return dict(environment_parts(environment["hardware"], tuple(environment["libs"].items()))[2])


def cuda_major(environment_spec: Mapping[str, Any]) -> int | None:
    """Leading integer of `software.cudaToolkit` (`12.8` → 12), None without one (§10.3)."""
    match = _LEADING_INTEGER.match(environment_spec.get("software", {}).get("cudaToolkit", ""))
    return int(match.group()) if match else None


_LEADING_INTEGER = re.compile(r"[0-9]+")
