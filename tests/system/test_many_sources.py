"""Several sources in one warehouse (issue 19): FlashInfer-Bench's figures are computed per
source, as FlashInfer-Bench computes them on that source's dataset, so each source's figures
equal those of the source built alone; their union is a scope of its own, `(all sources)`, made
of the definitions the sources agree on; no view returns two rows with one key.

The sources are the KernelIndex golden corpus, the hf_v3_layout sample (a real third-party
`flashinfer-bench run` output on H200 that shares five definitions with it) and FlashInfer-Bench's
fixture_main (authors, baselines and a web baseline map, so that every web figure has rows).
Every warehouse is built with fixture_main's baseline map, as the web figures read it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.fixtures.shared_data import GOLDEN_DIR, SAMPLES_DIR, SHARED, requires_shared
from tracehouse.schemas import VIEW_KEYS
from tracehouse.warehouse import Warehouse, connect_read_only

pytestmark = [requires_shared, pytest.mark.slow]  # six builds of three sources

UNION = "(all sources)"
FIXTURE = (SHARED or Path("shared")) / "golden" / "fib-metrics" / "fixtures" / "fixture_main"
SOURCES = {
    "golden": GOLDEN_DIR / "dataset",
    "h200": SAMPLES_DIR / "hf_v3_layout",
    "fixture": FIXTURE,
}
# FlashInfer-Bench's figures and their building blocks: one scope per source.
PER_SOURCE_VIEWS = sorted(
    name
    for name, key in VIEW_KEYS.items()
    if key[0] == "source" and name not in ("fib_source_scopes", "source_summary")
)


def _build(source: Path, warehouse: Path, name: str | None = None) -> None:
    named = ["--source-name", name] if name else []
    result = run_cli(
        "build",
        "--source",
        str(source),
        *named,
        "--baselines",
        str(FIXTURE / "baselines.json"),
        "--warehouse",
        str(warehouse),
    )
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def warehouses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("many-sources")
    built = {}
    for name, folder in SOURCES.items():
        built[name] = root / f"{name}-alone"
        _build(folder, built[name])
        _build(folder, root / "both", name)
    built["both"] = root / "both"
    return built


def rows(warehouse: Path, sql: str, **parameters: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
    connection = connect_read_only(Warehouse(warehouse))
    try:
        relation = connection.sql(sql, params=parameters)
        return relation.columns, relation.fetchall()
    finally:
        connection.close()


def _comparable(row: tuple[Any, ...]) -> tuple[str, ...]:
    # NaN is a value of FlashInfer-Bench's web score; repr makes it equal to itself
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else repr(v) for v in row)


@pytest.mark.parametrize("view", PER_SOURCE_VIEWS)
def test_each_source_equals_the_source_built_alone(warehouses: dict[str, Path], view: str) -> None:
    compared = 0
    for name in SOURCES:
        everything = f"SELECT * EXCLUDE (source) FROM {view}"  # noqa: S608  (our view names)
        _, alone = rows(warehouses[name], everything)
        _, shared = rows(warehouses["both"], everything + " WHERE source = $s", s=name)
        assert sorted(map(_comparable, shared)) == sorted(map(_comparable, alone)), (view, name)
        compared += len(alone)
    assert compared, f"{view} has no rows for either source: the comparison would prove nothing"


@pytest.mark.parametrize("view", sorted(VIEW_KEYS))
def test_no_view_has_duplicated_keys(warehouses: dict[str, Path], view: str) -> None:
    key = ", ".join(VIEW_KEYS[view])
    _, duplicated = rows(
        warehouses["both"],
        f"SELECT {key}, count(*) AS n FROM {view} "  # noqa: S608  (our view names)
        "GROUP BY ALL HAVING count(*) > 1 LIMIT 5",
    )
    assert duplicated == [], (view, duplicated)


def test_union_scope_is_labelled_and_holds_only_agreed_definitions(
    warehouses: dict[str, Path],
) -> None:
    both = warehouses["both"]
    _, scopes = rows(both, "SELECT DISTINCT source, is_union FROM fib_source_scopes ORDER BY 1")
    assert scopes == [(UNION, True), ("fixture", False), ("golden", False), ("h200", False)]
    _, shared = rows(
        both,
        "SELECT definition, in_union, reason FROM fib_union_definitions "
        "WHERE len(sources) > 1 ORDER BY definition",
    )
    assert len(shared) == 5, shared
    _, union_definitions = rows(
        both, "SELECT definition FROM fib_definitions WHERE source = $s", s=UNION
    )
    _, excluded = rows(both, "SELECT definition FROM fib_union_definitions WHERE NOT in_union")
    assert set(union_definitions).isdisjoint(excluded)
    # every definition either source holds is in the union unless the sources disagree on it
    _, everything = rows(both, "SELECT DISTINCT definition FROM definitions")
    assert set(union_definitions) | set(excluded) == set(everything)
    # the union is one dataset: on a definition both hold, the H200 run's solution (no
    # baseline of its own) is scored against the golden corpus's baseline, and only there
    _, ranked = rows(
        both,
        "SELECT source, list(author ORDER BY rank) FROM author_rankings WHERE hardware = 'all' "
        "AND scope_kind = 'definition' AND scope = 'gemm_n128_k2048' GROUP BY source",
    )
    by_scope = dict(ranked)
    assert "gpt-5" in by_scope[UNION] and "gpt-5" not in (by_scope["h200"] or [None])


def test_shared_definition_keeps_each_sources_baseline_score(warehouses: dict[str, Path]) -> None:
    """The issue's case: with both sources, a shared definition's solutions, the baseline
    included, became `no_comparable_workload`; now each source scores as it does alone."""
    sql = (
        "SELECT definition, solution, outcome, reason, avg_speedup FROM fib_solution_scores "
        "WHERE hardware = 'all' AND source = $s AND list_contains($shared, definition) "
        "ORDER BY ALL"
    )
    _, held_by_several = rows(
        warehouses["both"], "SELECT definition FROM fib_union_definitions WHERE len(sources) > 1"
    )
    shared_definitions = [d for (d,) in held_by_several]
    for name in ("golden", "h200"):
        _, alone_name = rows(warehouses[name], "SELECT DISTINCT source FROM fib_source_scopes")
        _, alone = rows(warehouses[name], sql, s=alone_name[0][0], shared=shared_definitions)
        _, shared = rows(warehouses["both"], sql, s=name, shared=shared_definitions)
        assert alone and shared == alone, name
    _, golden = rows(warehouses["both"], sql, s="golden", shared=shared_definitions)
    assert ("gemm_n128_k2048", "torch_matmul_317103", "none", "is_baseline", None) in golden


def _small_source(root: Path, n: int) -> Path:
    """One definition `gemm_n4_k4` (with N = ``n``), a baseline and one contender."""
    import json

    from tests.fixtures.hostile_corpus import definition_object, solution_object, trace_object

    definition = definition_object("gemm_n4_k4")
    definition["axes"]["N"]["value"] = n
    (root / "definitions/gemm").mkdir(parents=True)
    (root / "definitions/gemm/gemm_n4_k4.json").write_text(json.dumps(definition))
    for name, author, latency in (("base", "baseline", 1.0), (f"fast_{n}", "alice", 0.5)):
        folder = root / "solutions" / author / "gemm" / "gemm_n4_k4"
        folder.mkdir(parents=True)
        (folder / f"{name}.json").write_text(json.dumps(solution_object(name, author)))
        traces = root / "traces" / author / "gemm"
        traces.mkdir(parents=True)
        lines = [
            json.dumps(trace_object(f"w{i}", solution=name, latency=latency)) for i in range(3)
        ]
        (traces / "gemm_n4_k4.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_sources_that_disagree_on_a_definition_stay_apart(tmp_path: Path) -> None:
    """Two sources with a definition of the same name but another operation: the union leaves
    it out and says why; each source keeps its own figures."""
    warehouse = tmp_path / "w"
    for name, n in (("four", 4), ("eight", 8)):
        source = _small_source(tmp_path / name, n)
        built = run_cli(
            "build", "--source", str(source), "--source-name", name, "--warehouse", str(warehouse)
        )
        assert built.returncode == 0, built.stderr
    _, union = rows(warehouse, "SELECT definition, in_union, reason FROM fib_union_definitions")
    assert union == [("gemm_n4_k4", False, "operation_digests_differ")]
    _, scores = rows(
        warehouse,
        "SELECT source, solution, avg_speedup FROM fib_solution_scores "
        "WHERE hardware = 'all' AND outcome = 'score' ORDER BY source",
    )
    assert scores == [("eight", "fast_8", 2.0), ("four", "fast_4", 2.0)]
    _, in_union = rows(warehouse, "SELECT count(*) FROM fib_definitions WHERE source = $s", s=UNION)
    assert in_union == [(0,)]
    out = tmp_path / "report"
    report = run_cli("report", "--out", str(out), "--warehouse", str(warehouse))
    assert report.returncode == 0, report.stderr
    index = (out / "index.html").read_text()
    assert "union-left-out" in index and "operation_digests_differ" in index
