"""FlashInfer-Bench's own leaderboard metrics, reproduced in SQL views, against the figures its
own code computed (../shared/golden/fib-metrics): every dataset there, both fixtures, the golden
corpus and the demo (while the generator still writes the recorded tree). Floats agree within
4 ulp (FlashInfer-Bench sums over Python sets); where it raised or returned nothing, the view
has NULL with a reason of the same kind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import build
from tests.fixtures.fib_golden import (
    DEMO_DATASET,
    DEMO_SEED,
    compare_rows,
    error_kind,
    golden_datasets,
    golden_float,
    golden_int,
    read_csv,
    recorded_tree_sha256,
    require_shared,
    tree_sha256,
)
from tracehouse.warehouse import Warehouse, connect_read_only

# Every test reads fib_warehouses: ten builds, one per golden dataset, before the first.
pytestmark = pytest.mark.slow

DATASETS = golden_datasets()
DATASET_NAMES = [d.name for d in DATASETS] or ["(no ../shared)"]


@pytest.fixture(scope="session")
def fib_warehouses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One warehouse per golden dataset, built with the web map its golden rows used."""
    require_shared()
    root = tmp_path_factory.mktemp("fib-golden")
    built: dict[str, Path] = {}
    for dataset in DATASETS:
        source = dataset.source
        if source is None:  # the demo, generated as `tracehouse demo` writes data/demo
            from tracehouse.demo import generate_dataset

            source = root / "demo"
            generate_dataset(source, seed=DEMO_SEED)
            if tree_sha256(source) != recorded_tree_sha256(DEMO_DATASET):
                continue
        warehouse = root / dataset.name
        # allow_shrink: a dataset whose every record tracehouse rejects (legacy_2025-07) is
        # refused by default; its FlashInfer-Bench figures are part of the oracle all the same
        build(source, warehouse, baselines_file=dataset.baselines_file, allow_shrink=True)
        built[dataset.name] = warehouse
    return built


def query(warehouse: Path, sql: str, **parameters: Any) -> list[dict[str, Any]]:
    connection = connect_read_only(Warehouse(warehouse))
    try:
        relation = connection.sql(sql, params=parameters)
        names = relation.columns
        return [dict(zip(names, row, strict=True)) for row in relation.fetchall()]
    finally:
        connection.close()


def warehouse_for(fib_warehouses: dict[str, Path], dataset: str) -> Path:
    if dataset not in fib_warehouses:
        pytest.skip(
            f"{dataset}: the demo generator no longer writes the tree the golden rows were "
            "computed on (tree_sha256 differs from datasets.csv)"
        )
    return fib_warehouses[dataset]


def golden_rows(file: str, dataset: str) -> list[dict[str, str]]:
    return [row for row in read_csv(file) if row["dataset"] == dataset]


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_solution_scores_equal_fib(fib_warehouses: dict[str, Path], dataset: str) -> None:
    warehouse = warehouse_for(fib_warehouses, dataset)
    expected = {}
    for row in golden_rows("solution_scores.csv", dataset):
        expected[(row["scope"], row["definition"], row["solution"])] = {
            "author": row["author"],
            "outcome": row["outcome"],
            "error_kind": error_kind(row["error"]) if row["outcome"] == "error" else None,
            "avg_speedup": golden_float(row["avg_speedup"]),
            "success_rate": golden_float(row["success_rate"]),
            "win_rate": golden_float(row["win_rate"]),
            "workloads": golden_int(row["workloads"]),
            "definitions": golden_int(row["definitions"]),
        }
    actual = {
        (r["hardware"], r["definition"], r["solution"]): {
            **r,
            "error_kind": r["reason"] if r["outcome"] == "error" else None,
        }
        for r in query(warehouse, "SELECT * FROM fib_solution_scores")
    }
    for value in actual.values():  # NULL always comes with its reason, a number never does
        assert (value["avg_speedup"] is None) == (value["reason"] is not None), value
    compare_rows(
        f"{dataset} fib_solution_scores",
        expected,
        actual,
        ("avg_speedup", "success_rate", "win_rate"),
    )


def _ranking_key(row: dict[str, Any], rank: Any) -> tuple[Any, ...]:
    return (row["hardware"], row["scope_kind"], row["scope"], rank)


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_author_rankings_equal_fib(fib_warehouses: dict[str, Path], dataset: str) -> None:
    warehouse = warehouse_for(fib_warehouses, dataset)
    expected, error_kinds = {}, {}
    for row in golden_rows("author_rankings.csv", dataset):
        key = _ranking_key(row, golden_int(row["rank"]))
        expected[key] = {
            "outcome": row["outcome"],
            "author": row["author"] or None,
            "avg_speedup": golden_float(row["avg_speedup"]),
            "success_rate": golden_float(row["success_rate"]),
            "win_rate": golden_float(row["win_rate"]),
            "workloads": golden_int(row["workloads"]),
            "definitions": golden_int(row["definitions"]),
            "best_solutions": json.loads(row["best_solutions"]) if row["best_solutions"] else None,
        }
        if row["outcome"] == "error":
            error_kinds[key] = error_kind(row["error"])
    actual = {}
    for row in query(warehouse, "SELECT * FROM author_rankings"):
        key = _ranking_key(row, row["rank"])
        row["best_solutions"] = json.loads(row["best_solutions"]) if row["best_solutions"] else None
        actual[key] = row
        if row["outcome"] == "error":  # FlashInfer-Bench names one of the scope's errors
            assert error_kinds[key] in row["reason"].split(", "), (key, row["reason"])
        assert (row["outcome"] == "ranked") == (row["avg_speedup"] is not None), row
    compare_rows(
        f"{dataset} author_rankings",
        expected,
        actual,
        ("avg_speedup", "success_rate", "win_rate"),
    )


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_run_totals_equal_fib_report_summary(fib_warehouses: dict[str, Path], dataset: str) -> None:
    warehouse = warehouse_for(fib_warehouses, dataset)
    expected = {}
    for row in golden_rows("summary.csv", dataset):
        rankings = json.loads(row["rankings"]) if row["rankings"] else None
        expected[(row["hardware"], row["scope_kind"], row["scope"])] = {
            "outcome": row["outcome"],
            "reason_kind": error_kind(row["error"]) if row["outcome"] == "error" else None,
            "total": golden_int(row["total"]),
            "passed": golden_int(row["passed"]),
            "failed": golden_int(row["failed"]),
            "n_rankings": golden_int(row["n_rankings"]),
            "ranking_authors": [a for a, _ in rankings] if rankings is not None else None,
        }
        for position, (_, value) in enumerate(rankings or []):
            expected[(row["hardware"], row["scope_kind"], row["scope"])][f"avg_{position}"] = value
    actual = {}
    for row in query(warehouse, "SELECT * FROM fib_summary"):
        key = (row["hardware"], row["scope_kind"], row["scope"])
        want = expected.get(key, {})
        row["reason_kind"] = (
            want.get("reason_kind")
            if row["reason"] and want.get("reason_kind") in row["reason"].split(", ")
            else row["reason"]
        )
        rankings = row["rankings"]
        row["ranking_authors"] = [r["author"] for r in rankings] if rankings is not None else None
        for position, ranked in enumerate(rankings or []):
            row[f"avg_{position}"] = ranked["avg_speedup"]
        actual[key] = row
    floats = tuple(f"avg_{i}" for i in range(100))
    compare_rows(f"{dataset} fib_summary", expected, actual, floats)


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_best_trace_equals_fib(fib_warehouses: dict[str, Path], dataset: str) -> None:
    warehouse = warehouse_for(fib_warehouses, dataset)
    expected = {
        (row["hardware"], row["definition"]): {
            "outcome": row["outcome"],
            "n_filter_traces": int(row["n_filter_traces"]),
            "solution": row["solution"] or None,
            "workload_uuid": row["workload_uuid"] or None,
            "trace_hardware": row["trace_hardware"] or None,
            "timestamp": row["timestamp"] or None,
            "latency_ms": golden_float(row["latency_ms"]),
            "speedup_factor": golden_float(row["speedup_factor"]),
            "max_absolute_error": golden_float(row["max_absolute_error"]),
            "max_relative_error": golden_float(row["max_relative_error"]),
        }
        for row in golden_rows("best_trace.csv", dataset)
    }
    actual = {
        (row["hardware"], row["definition"]): row
        for row in query(warehouse, "SELECT * FROM fib_best_trace")
    }
    compare_rows(
        f"{dataset} fib_best_trace",
        expected,
        actual,
        ("latency_ms", "speedup_factor", "max_absolute_error", "max_relative_error"),
    )


def map_name(golden: str) -> str:
    """The golden's name of a web baseline map → tracehouse's (web_baseline_maps)."""
    return "author_baseline" if golden == "author_baseline" else "baselines_file"


def golden_bool(text: str) -> bool | None:
    return None if text == "" else text == "true"


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_web_fast_p_equals_fib_web(fib_warehouses: dict[str, Path], dataset: str) -> None:
    warehouse = warehouse_for(fib_warehouses, dataset)

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (
            row["hardware"],
            row["level"],
            row["definition"],
            row["solution"] or None,
            row["author"] or None,
            float(row["p"]),
        )

    expected: dict[str, dict[Any, dict[str, Any]]] = {}
    for row in golden_rows("fast_p.csv", dataset):
        expected.setdefault(map_name(row["baseline_map"]), {})[key(row)] = {
            "n_ratios": int(row["n_ratios"]),
            "n_at_least_p": int(row["n_at_least_p"]),
            "fraction": golden_float(row["fraction"]),
            "web_sample_p": float(row["web_sample_p"]),
            "web_percent": float(row["web_percent"]),
            "n_workloads": int(row["n_workloads"]),
            "max_ratio": float(row["max_ratio"]),
            "ui_hidden": golden_bool(row["ui_hidden"]),
        }
    rows = query(warehouse, "SELECT * FROM web_fast_p")
    for name in {r["baseline_map"] for r in rows} | set(expected):
        actual = {key(r): r for r in rows if r["baseline_map"] == name}
        compare_rows(
            f"{dataset} web_fast_p {name}",
            expected.get(name, {}),
            actual,
            ("fraction", "web_sample_p", "web_percent", "max_ratio"),
        )


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_web_coverage_equals_fib_web(fib_warehouses: dict[str, Path], dataset: str) -> None:
    warehouse = warehouse_for(fib_warehouses, dataset)

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (
            row["baseline_map"],
            row["hardware"],
            row["level"],
            row["definition"],
            row["author"],
        )

    expected = {}
    for row in golden_rows("coverage.csv", dataset):
        row["baseline_map"] = map_name(row["baseline_map"])
        expected[key(row)] = {
            "attempted": int(row["attempted"]),
            "total": int(row["total"]),
            "percent": float(row["percent"]),
            "comparison_count": int(row["comparison_count"]),
            "total_comparisons": int(row["total_comparisons"]),
            "total_workloads": int(row["total_workloads"]),
            "ui_hidden": golden_bool(row["ui_hidden"]),
        }
    actual = {key(r): r for r in query(warehouse, "SELECT * FROM web_coverage")}
    compare_rows(f"{dataset} web_coverage", expected, actual, ("percent",))


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_web_solution_scores_equal_fib_web(fib_warehouses: dict[str, Path], dataset: str) -> None:
    warehouse = warehouse_for(fib_warehouses, dataset)

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (row["baseline_map"], row["hardware"], row["definition"], row["solution"])

    expected = {}
    for row in golden_rows("web_solution_scores.csv", dataset):
        row["baseline_map"] = map_name(row["baseline_map"])
        expected[key(row)] = {
            "author": row["author"],
            "is_baseline": golden_bool(row["is_baseline"]),
            "outcome": row["outcome"],
            "avg_speedup": golden_float(row["avg_speedup"]),
            "success_rate": golden_float(row["success_rate"]),
            "win_rate": golden_float(row["win_rate"]),
            "workloads": golden_int(row["workloads"]),
        }
    actual = {key(r): r for r in query(warehouse, "SELECT * FROM web_solution_scores")}
    for row in actual.values():
        assert (row["outcome"] == "null") == (row["reason"] is not None), row
    compare_rows(
        f"{dataset} web_solution_scores",
        expected,
        actual,
        ("avg_speedup", "success_rate", "win_rate"),
    )


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_web_author_rankings_equal_fib_web(fib_warehouses: dict[str, Path], dataset: str) -> None:
    warehouse = warehouse_for(fib_warehouses, dataset)

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (row["baseline_map"], row["hardware"], int(row["rank"]))

    expected = {}
    for row in golden_rows("web_author_rankings.csv", dataset):
        row["baseline_map"] = map_name(row["baseline_map"])
        expected[key(row)] = {
            "author": row["author"],
            "avg_speedup": float(row["avg_speedup"]),
            "success_rate": float(row["success_rate"]),
            "win_rate": float(row["win_rate"]),
            "workloads": int(row["workloads"]),
            "definitions": int(row["definitions"]),
            "best_solutions": json.loads(row["best_solutions"]),
            "ui_hidden": golden_bool(row["ui_hidden"]),
        }
    actual = {}
    for row in query(warehouse, "SELECT * FROM web_author_rankings"):
        row["best_solutions"] = json.loads(row["best_solutions"])
        actual[key(row)] = row
    compare_rows(
        f"{dataset} web_author_rankings",
        expected,
        actual,
        ("avg_speedup", "success_rate", "win_rate"),
    )


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_web_correctness_summary_equals_fib_web(
    fib_warehouses: dict[str, Path], dataset: str
) -> None:
    warehouse = warehouse_for(fib_warehouses, dataset)
    columns = ("total", "passed", "incorrect", "runtime_error", "other")

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (
            row["hardware"],
            row["level"],
            row["definition"],
            row["solution"] or None,
            row["author"] or None,
        )

    expected = {
        key(row): {c: int(row[c]) for c in columns}
        for row in golden_rows("correctness_summary.csv", dataset)
    }
    actual = {key(r): r for r in query(warehouse, "SELECT * FROM web_correctness_summary")}
    compare_rows(f"{dataset} web_correctness_summary", expected, actual)


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_web_buckets_equal_fib_web(fib_warehouses: dict[str, Path], dataset: str) -> None:
    warehouse = warehouse_for(fib_warehouses, dataset)
    columns = ("faster", "slower", "slower_no_ratio", "incorrect")

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (
            row["baseline_map"],
            row["hardware"],
            row["definition"],
            row["baseline_solution"],
            row["solution"],
            float(row["p"]),
        )

    expected = {}
    for row in golden_rows("buckets.csv", dataset):
        row["baseline_map"] = map_name(row["baseline_map"])
        expected[key(row)] = {"author": row["author"], **{c: int(row[c]) for c in columns}}
    actual = {key(r): r for r in query(warehouse, "SELECT * FROM web_buckets")}
    compare_rows(f"{dataset} web_buckets", expected, actual)


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_win_at_p_equals_fib_script(fib_warehouses: dict[str, Path], dataset: str) -> None:
    warehouse = warehouse_for(fib_warehouses, dataset)

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        p = row["p"]
        return (row["author_source"], row["author"] or None, None if p in ("", None) else float(p))

    expected = {
        key(row): {
            "outcome": row["outcome"],
            "n_groups": golden_int(row["n_groups"]),
            "n_total": golden_int(row["n_total"]),
            "n_ratios": golden_int(row["n_ratios"]),
            "n_wins": golden_int(row["n_wins"]),
            "win_ratio": golden_float(row["win_ratio"]),
        }
        for row in golden_rows("win_at_p.csv", dataset)
    }
    actual = {key(r): r for r in query(warehouse, "SELECT * FROM win_at_p")}
    for row in actual.values():
        assert (row["outcome"] in ("curve", "empty")) == (row["reason"] is None), row
    compare_rows(f"{dataset} win_at_p", expected, actual, ("win_ratio",))
