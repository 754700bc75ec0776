"""§11.5 and §12 names, titles and display strings (metadata, never in a digest) and the stored
record.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping
from typing import Any

from tracehouse.kernelindex.canonical import API_VERSION
from tracehouse.kernelindex.numbers import js_to_fixed
from tracehouse.kernelindex.operation import FAMILY_SKIPPED_TAGS
from tracehouse.kernelindex.protocol import PROTOCOL_METADATA, PROTOCOL_SPEC
from tracehouse.kernelindex.transformations import (
    MAX_TITLE,
    axis_key,
    check_metadata_name,
    check_title,
    js_length,
    js_slice,
    kebab,
)
from tracehouse.kernelindex.workload import workload_key

_SEP = " · "  # U+00B7 MIDDLE DOT with a space each side (§11.5)


def environment_summary(environment_spec: Mapping[str, Any]) -> str:
    """`CUDA <toolkit> · <framework> <version> · flashinfer-bench`, each part only if present."""
    software = environment_spec.get("software", {})
    parts = []
    if software.get("cudaToolkit"):
        parts.append(f"CUDA {software['cudaToolkit']}")
    framework = software.get("framework")
    if framework:
        parts.append(f"{framework['name']} {framework['version']}")
    parts.append(PROTOCOL_SPEC["harness"]["name"])
    return _SEP.join(parts)


def gpu_display(environment_spec: Mapping[str, Any]) -> str:
    """`NVIDIA B200 (unknown)`: product and architecture, as the record page shows it (§12.4)."""
    hardware = environment_spec["hardware"]
    return f"{hardware['product']} ({hardware['architecture']})"


def operation_metadata(definition: Mapping[str, Any]) -> dict[str, str]:
    metadata = {"name": kebab(definition["name"]), "title": definition["name"]}
    if isinstance(definition.get("description"), str):
        metadata["description"] = definition["description"]
    return metadata


def operation_tags(tags: Iterable[str] | None) -> list[str]:
    """Definition tags as display tags (§11.5): drop L1/L2/Quant/FlashInfer-Bench, kebab the rest."""
    result: list[str] = []
    for tag in tags or ():
        if tag in FAMILY_SKIPPED_TAGS:
            continue
        shown = "model:" + kebab(tag[len("model:") :]) if tag.startswith("model:") else kebab(tag)
        if shown not in result:
            result.append(shown)
    return result


def workload_metadata(definition_name: str, workload: Mapping[str, Any]) -> dict[str, str]:
    """WorkloadCase name and title (§11.5); over 200 characters the title is cut to 199 + `…`."""
    key = workload_key(workload)
    pairs = ", ".join(f"{name}={value}" for name, value in workload.get("axes", {}).items())
    title = definition_name + _SEP + pairs
    if js_length(title) > MAX_TITLE:
        title = js_slice(title, MAX_TITLE - 1) + "…"
    return {"name": f"{kebab(definition_name)}-{key[:8]}", "title": title}


def implementation_metadata(
    solution: Mapping[str, Any], author_directory: str | None = None
) -> dict[str, Any]:
    """Implementation name, title, authors and role label (§11.5); metadata only."""
    metadata: dict[str, Any] = {"name": kebab(solution["name"]), "title": solution["name"]}
    author = solution.get("author")
    if isinstance(author, str):
        metadata["authors"] = [author]
    if author_directory is not None:
        if author_directory == "baseline":
            metadata["labels"] = {"role": "baseline"}
        else:
            metadata["labels"] = {"role": "llm-generated", "author": author_directory}
    return metadata


def implementation_slug(solution_name: str) -> str:
    return kebab("flashinfer-" + solution_name)


def project_slug(author: str | None) -> str:
    return "flashinfer-" + kebab(author or "unknown")


def project_name(author: str | None) -> str:
    return "FlashInfer-Bench baselines" if author == "baseline" else (author or "unknown")


def run_metadata(
    definition_name: str, solution_name: str | None, workload_key: str
) -> dict[str, str]:
    """BenchmarkRun name and title (§11.5). A title over 200 characters rejects the line."""
    title = f"{solution_name or 'unknown solution'}{_SEP}{definition_name}"
    check_title(title, "run")  # no truncation here, unlike the workload title
    return {"name": _run_name(definition_name, workload_key[:8]), "title": title}


@functools.lru_cache(maxsize=65536)
def _run_name(definition_name: str, key_prefix: str) -> str:
    # kebab truncates to 100 characters, which can cut a long name before the key (§11.5).
    name = kebab(f"sol-trace-{definition_name}-{key_prefix}")
    check_metadata_name(name, "run")
    return name


def format_latency_ns(ns: int) -> str:
    """Display latency (§11.5): 68857 → `68.9 µs`, 7667 → `7.67 µs`."""
    if ns < 1_000:
        return f"{ns} ns"
    if ns < 1_000_000:
        value, unit = ns / 1e3, "µs"
    elif ns < 1_000_000_000:
        value, unit = ns / 1e6, "ms"
    else:
        value, unit = ns / 1e9, "s"
    return f"{js_to_fixed(value, 2 if value < 10 else 1)} {unit}"


def source_native_line(speedup_factor: float) -> str:
    """`3958.47× reference` (§11.5)."""
    return f"{js_to_fixed(speedup_factor, 2)}× reference"


def rank_line(rank: int | None, observed_at: str, reasons: list[str]) -> str:
    """The record page's rank line (§11.5)."""
    if reasons or rank is None:
        return "Not eligible to rank: " + ", ".join(reasons)
    return f"Rank {rank} in its comparison group{_SEP}source-native comparison{_SEP}observed {observed_at[:10]}"


_INDEX_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "bool"})


def workload_display(
    workload_case_spec: Mapping[str, Any], axes_order: Iterable[str] | None = None
) -> str:
    """`total_q = 1954 · … · bf16`: axes, then the tensors' compute dtypes (§12.4).

    Integer index dtypes are hidden when a compute dtype exists. `axes_order` is the workload's
    original axis names (the spec's own keys are lower-cased).
    """
    axes = workload_case_spec["axes"]
    names = [axis_key(name) for name in axes_order] if axes_order is not None else list(axes)
    parts = [f"{name} = {axes[name]}" for name in names if name in axes]
    dtypes: list[str] = []
    for tensor in workload_case_spec.get("tensors", {}).values():
        if tensor["dtype"] not in dtypes:
            dtypes.append(tensor["dtype"])
    compute = [dtype for dtype in dtypes if dtype not in _INDEX_DTYPES]
    parts.extend(compute or dtypes)
    return _SEP.join(parts)


def record_manifest(
    run_spec: Mapping[str, Any],
    run_metadata: Mapping[str, Any],
    environment_spec: Mapping[str, Any],
    environment_metadata: Mapping[str, Any],
) -> dict[str, Any]:
    """The three full manifests KernelIndex stores with a run (§12.3)."""
    return {
        "run": {
            "apiVersion": API_VERSION,
            "kind": "BenchmarkRun",
            "metadata": dict(run_metadata),
            "spec": dict(run_spec),
        },
        "protocol": {
            "apiVersion": API_VERSION,
            "kind": "BenchmarkProtocol",
            "metadata": dict(PROTOCOL_METADATA),
            "spec": copy.deepcopy(PROTOCOL_SPEC),
        },
        "environment": {
            "apiVersion": API_VERSION,
            "kind": "ExecutionEnvironment",
            "metadata": dict(environment_metadata),
            "spec": dict(environment_spec),
        },
    }
