"""Every identity of the KernelIndex 2026-08-16 golden corpus, recomputed from its dataset.

Reads golden/kernelindex-2026-08-16/dataset directly (discovery §2.1, strict parsing §2.2),
applies tracehouse.kernelindex line by line with the global first-line-wins workload cache
(§2.4 step 4), deduplicates runs by run digest and ranks them densely within each comparison key
(§11.2, a small reference ranking below), then requires exact equality with every row of
expected.csv, rows paired on (definition, solution, workload_uuid) then observed_at (§14).
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.shared_data import GOLDEN_DIR, requires_shared
from tracehouse import kernelindex

pytestmark = requires_shared

REVISION = "da915083d4c7c5e61aa3005e3d17ae488e0fc71c"
AUTHORS = frozenset({"baseline"})
COMPARED = (
    "operation_digest",
    "workload_digest",
    "environment_key",
    "protocol_key",
    "correctness_key",
    "comparison_key",
    "latency_ns",
    "observed_at",
    "ki_status",
    "rank",
    "cohort_size",
)


def _reject_constant(token: str) -> Any:
    raise ValueError(f"bare {token} is not JSON (KernelIndex parses strictly, §2.2)")


def strict_loads(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def parse_trace_file(body: str) -> list[Any]:
    """§2.2: a JSON array, a single object, or JSONL; one bad line fails the whole file."""
    body = body.strip()
    if body.startswith("["):
        return strict_loads(body)
    if body.startswith("{") and "\n{" not in body:
        return [strict_loads(body)]
    return [strict_loads(line.strip()) for line in body.split("\n") if line.strip()]


@dataclass
class Import:
    definitions: dict[str, dict[str, Any]]
    operation_digests: dict[str, str]
    implementation_digests: dict[str, str]
    trace_files: list[str]


def discover(root: Path) -> Import:
    """§2.1 discovery, §2.4 lookups: definitions by name, solutions by name (global)."""
    paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    definitions: dict[str, dict[str, Any]] = {}
    stems: set[str] = set()
    for path in paths:
        if path.startswith("definitions/") and path.endswith(".json"):
            stems.add(path.rsplit("/", 1)[-1].replace(".json", "", 1))
            definition = json.loads((root / path).read_text(encoding="utf-8"))
            kernelindex.validate_definition(definition)  # the corpus has no skipped definition
            definitions[definition["name"]] = definition
    operation_digests = {name: kernelindex.operation_digest(d) for name, d in definitions.items()}

    solutions: dict[str, dict[str, Any]] = {}
    trace_files: list[str] = []
    for path in paths:
        parts = path.split("/")
        if len(parts) < 3 or parts[1] not in AUTHORS:
            continue
        if (
            parts[0] == "solutions"
            and path.endswith(".json")
            and len(parts) >= 4
            and parts[-2] in stems
        ):
            solution = json.loads((root / path).read_text(encoding="utf-8"))
            solutions[solution["name"]] = solution
        elif (
            parts[0] == "traces"
            and path.endswith(".jsonl")
            and parts[-1][: -len(".jsonl")] in stems
        ):
            trace_files.append(path)

    implementation_digests = {}
    for name, solution in solutions.items():
        definition = definitions.get(solution["definition"])
        if definition is not None:
            implementation_digests[name] = kernelindex.implementation_digest(
                solution, definition, operation_digests[solution["definition"]], REVISION
            )
    return Import(definitions, operation_digests, implementation_digests, trace_files)


def rank_runs(runs: list[dict[str, Any]]) -> None:
    """Reference ranking-v1, source-native profile (§11.2): dense rank by latency, exact ties."""
    cohorts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        if run["eligible"]:
            cohorts[run["comparison_key"]].append(run)
    for members in cohorts.values():
        values = sorted({run["latency_ns"] for run in members})
        rank_of = {value: index + 1 for index, value in enumerate(values)}
        for run in members:
            run["rank"] = str(rank_of[run["latency_ns"]])
            run["cohort_size"] = str(len(members))


def compute_rows(root: Path) -> list[dict[str, Any]]:
    imported = discover(root)
    workload_cache: dict[str, kernelindex.WorkloadIdentity] = {}
    runs: dict[str, dict[str, Any]] = {}
    for path in imported.trace_files:
        for trace in parse_trace_file((root / path).read_text(encoding="utf-8")):
            definition = imported.definitions.get(trace["definition"])
            implementation = imported.implementation_digests.get(trace.get("solution") or "")
            if definition is None or implementation is None:
                pytest.fail(f"{path}: every golden line has a known definition and solution")
            key = kernelindex.workload_key(trace["workload"])
            found = kernelindex.identify_trace_line(
                trace,
                definition=definition,
                operation_digest=imported.operation_digests[trace["definition"]],
                implementation_digest=implementation,
                workload_digest_override=workload_cache.get(key),
            )
            workload_cache.setdefault(key, found.workload)
            # The run digest (hashed by a member-by-member writer) equals the generic JCS digest.
            spec = kernelindex.run_spec(
                trace,
                implementation_digest=implementation,
                workload_digest=found.workload_digest,
                environment_digest=found.environment_digest,
            )
            assert found.run_digest == kernelindex.manifest_digest("BenchmarkRun", spec)
            runs.setdefault(
                found.run_digest,  # identical run bodies are one run (§2.4 step 6)
                {
                    "definition": trace["definition"],
                    "solution": trace["solution"],
                    "workload_uuid": trace["workload"].get("uuid") or "",
                    "operation_digest": found.operation_digest,
                    "workload_digest": found.workload_digest,
                    "environment_key": found.environment_digest,
                    "protocol_key": found.protocol_digest,
                    "correctness_key": found.correctness_key,
                    "comparison_key": found.comparison_key,
                    "latency_ns": found.latency_ns,
                    "observed_at": found.observed_at,
                    "ki_status": found.ki_status,
                    "eligible": found.eligible,
                    "rank": "",
                    "cohort_size": "",
                },
            )
    rows = list(runs.values())
    rank_runs(rows)
    for row in rows:
        row["latency_ns"] = "" if row["latency_ns"] is None else str(row["latency_ns"])
    return rows


def _grouped(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[tuple[str, ...]]]:
    groups: dict[tuple[str, str, str], list[tuple[str, ...]]] = defaultdict(list)
    for row in rows:
        groups[(row["definition"], row["solution"], row["workload_uuid"])].append(
            tuple(
                row["observed_at"] if f == "observed_at" else row[f]
                for f in ("observed_at", *COMPARED)
            )
        )
    return {key: sorted(values) for key, values in groups.items()}


@pytest.fixture(scope="module")
def computed() -> list[dict[str, Any]]:
    return compute_rows(GOLDEN_DIR / "dataset")


@pytest.fixture(scope="module")
def expected() -> list[dict[str, str]]:
    with (GOLDEN_DIR / "expected.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_every_line_is_accepted_as_a_distinct_run(computed, expected):
    assert len(expected) == 1490
    assert len(computed) == 1490


def test_every_expected_row_matches(computed, expected):
    mine, theirs = _grouped(computed), _grouped(expected)
    assert mine.keys() == theirs.keys()
    mismatches = []
    for key, expected_rows in theirs.items():
        for got, want in zip(mine[key], expected_rows, strict=True):
            for name, got_value, want_value in zip(
                ("observed_at", *COMPARED), got, want, strict=True
            ):
                if got_value != want_value:
                    mismatches.append((key, name, got_value, want_value))
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:5]}"


def test_column_by_column_counts(computed, expected):
    """Multiset equality per column, a second view that does not depend on pairing."""
    for name in COMPARED:
        assert sorted(r[name] for r in computed) == sorted(r[name] for r in expected), name


def test_corpus_figures_from_the_doc(computed):
    """§5.2 environment row counts and §11.2 cohort figures."""
    by_environment: dict[str, int] = defaultdict(int)
    for row in computed:
        by_environment[row["environment_key"]] += 1
    assert by_environment == {
        "sha256:af7cb68a0bb0eb9671092a620668c2600f0431301fc46a71807ea75fb7de8bce": 646,
        "sha256:f4292a8be127b7230cd3995c1d605fb6c644e2c2f94566e1d28cc1be766ca5d5": 588,
        "sha256:83c9b6e78d493927f18878d57448d9a0d2221a70840b562455b2665a2897ba19": 237,
        "sha256:1766500d1b1ecc9787a211f3c98e76bf311671f443544a305252cb4d9564be8b": 19,
    }
    sizes: dict[str, int] = defaultdict(int)
    for row in computed:
        if row["cohort_size"]:
            sizes[row["cohort_size"]] += 1
    assert sizes == {"1": 811, "2": 318, "3": 267, "6": 18}
    assert sum(row["ki_status"] == "runtime_error" for row in computed) == 76


def test_ties_and_dense_ranks_from_the_doc(computed):
    """§11.2: a tie (both rank 1, cohort 2) and a cohort of 6 ranked 1-6 by latency."""
    tie = [
        (row["latency_ns"], row["observed_at"], row["rank"], row["cohort_size"])
        for row in computed
        if (row["definition"], row["solution"], row["workload_uuid"][:8])
        == ("gemm_n5120_k5120", "flashinfer_wrapper_ad9a00", "b5f2339a")
    ]
    assert sorted(tie) == [
        ("18880", "2026-03-23T21:19:26.941Z", "1", "2"),
        ("18880", "2026-03-24T18:02:32.128Z", "1", "2"),
    ]
    six = sorted(
        (int(row["latency_ns"]), row["rank"], row["cohort_size"])
        for row in computed
        if row["definition"] == "gemm_nvfp4_n4096_k4096"
        and row["workload_uuid"].startswith("27d3dd8d")
        and row["rank"]
    )
    assert six == [
        (97424, "1", "6"),
        (97813, "2", "6"),
        (98725, "3", "6"),
        (105946, "4", "6"),
        (132864, "5", "6"),
        (147167, "6", "6"),
    ]
