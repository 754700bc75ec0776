"""The demo dataset generator writes a realistic, self-consistent, deterministic dataset."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import run_cli
from tracehouse import rejects
from tracehouse.demo import (
    BASELINE_AUTHOR,
    STATUSES,
    GeneratedDataset,
    generate_dataset,
)
from tracehouse.demo.generate import KINDS

TRACE_KEYS = ["definition", "workload", "solution", "evaluation"]
WORKLOAD_KEYS = ["axes", "inputs", "uuid"]
EVALUATION_KEYS = ["status", "environment", "timestamp", "log", "correctness", "performance"]
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$")
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> GeneratedDataset:
    return generate_dataset(tmp_path_factory.mktemp("demo") / "ds")


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _jsonl(path: Path) -> list[tuple[bytes, dict[str, Any]]]:
    return [(line, orjson.loads(line)) for line in path.read_bytes().splitlines() if line.strip()]


def _trace_lines(root: Path) -> list[tuple[Path, bytes, dict[str, Any]]]:
    return [
        (path, raw, obj)
        for path in sorted((root / "traces").rglob("*.jsonl"))
        for raw, obj in _jsonl(path)
    ]


def test_same_seed_and_arguments_give_byte_identical_files(tmp_path: Path) -> None:
    kwargs: dict[str, Any] = {
        "definitions": 8,
        "workloads_per_definition": 4,
        "solutions_per_definition": 4,
    }
    first = generate_dataset(tmp_path / "a", seed=11, **kwargs)
    second = generate_dataset(tmp_path / "b", seed=11, **kwargs)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert first.bytes == second.bytes and first.status_counts == second.status_counts
    other = generate_dataset(tmp_path / "c", seed=12, **kwargs)
    assert _files(tmp_path / "c") != _files(tmp_path / "a")
    assert other.trace_lines > 0


def test_every_status_is_present_and_passed_dominates(dataset: GeneratedDataset) -> None:
    counts = Counter(obj["evaluation"]["status"] for _, _, obj in _trace_lines(dataset.root))
    assert set(counts) == set(STATUSES)
    assert counts.most_common(1)[0][0] == "PASSED"
    assert counts == Counter({k: v for k, v in dataset.status_counts.items() if v})


def test_status_nullability_matrix_holds_for_every_line(dataset: GeneratedDataset) -> None:
    for path, _, obj in _trace_lines(dataset.root):
        ev = obj["evaluation"]
        status = ev["status"]
        if status == "PASSED":
            assert ev["correctness"] is not None and ev["performance"] is not None, path
            perf = ev["performance"]
            assert perf["latency_ms"] > 0
            assert perf["reference_latency_ms"] >= 0 and perf["speedup_factor"] >= 0
            if perf["reference_latency_ms"]:
                expected = perf["reference_latency_ms"] / perf["latency_ms"]
                assert perf["speedup_factor"] == pytest.approx(expected)
        elif status == "INCORRECT_NUMERICAL":
            assert ev["correctness"] is not None and ev["performance"] is None, path
        else:
            assert ev["correctness"] is None and ev["performance"] is None, path


def test_lines_use_the_writer_json_style(dataset: GeneratedDataset) -> None:
    special: set[str] = set()
    for _, raw, obj in _trace_lines(dataset.root):
        assert list(obj) == TRACE_KEYS
        assert list(obj["workload"]) == WORKLOAD_KEYS
        assert list(obj["evaluation"]) == EVALUATION_KEYS
        assert raw == orjson.dumps(obj)  # compact, nothing reordered
        ev = obj["evaluation"]
        assert TIMESTAMP.match(ev["timestamp"])
        assert UUID4.match(obj["workload"]["uuid"])
        assert all(isinstance(v, str) for v in ev["environment"]["libs"].values())
        if ev["correctness"] is not None:
            for key in ("max_relative_error", "max_absolute_error"):
                value = ev["correctness"][key]
                if isinstance(value, str):
                    special.add(value)
                    assert ev["status"] == "INCORRECT_NUMERICAL"
    assert special <= {"NaN", "Infinity"} and special
    for path in (dataset.root / "definitions").rglob("*.json"):
        text = path.read_bytes()
        assert text == orjson.dumps(orjson.loads(text), option=orjson.OPT_INDENT_2)


def test_files_follow_the_current_layout(dataset: GeneratedDataset) -> None:
    root = dataset.root
    assert sorted(p.name for p in root.iterdir()) == sorted(KINDS)
    for path in (root / "definitions").rglob("*.json"):
        rel = path.relative_to(root / "definitions").parts
        doc = orjson.loads(path.read_bytes())
        assert len(rel) == 2 and rel == (doc["op_type"], f"{doc['name']}.json")
    for path in (root / "workloads").rglob("*.jsonl"):
        rel = path.relative_to(root / "workloads").parts
        assert len(rel) == 2
        for _, obj in _jsonl(path):
            assert f"{obj['definition']}.jsonl" == rel[1]
            assert obj["solution"] is None and obj["evaluation"] is None
    for path in (root / "solutions").rglob("*.json"):
        rel = path.relative_to(root / "solutions").parts
        doc = orjson.loads(path.read_bytes())
        assert len(rel) == 4
        assert (rel[0], rel[2], rel[3]) == (doc["author"], doc["definition"], f"{doc['name']}.json")
    for path, _, obj in _trace_lines(root):
        rel = path.relative_to(root / "traces").parts
        assert len(rel) == 3 and rel[2] == f"{obj['definition']}.jsonl"


def test_reported_counts_equal_files_written(dataset: GeneratedDataset) -> None:
    root = dataset.root
    for kind in KINDS:
        files = [p for p in (root / kind).rglob("*") if p.is_file()]
        assert len(files) == dataset.files[kind], kind
        assert sum(p.stat().st_size for p in files) == dataset.bytes[kind], kind
    assert dataset.definitions == dataset.files["definitions"]
    assert dataset.solutions == dataset.files["solutions"]
    workload_lines = sum(len(_jsonl(p)) for p in (root / "workloads").rglob("*.jsonl"))
    assert workload_lines == dataset.workloads
    assert len(_trace_lines(root)) == dataset.trace_lines == sum(dataset.status_counts.values())
    assert dataset.total_bytes == sum(dataset.bytes.values())


def test_every_reference_resolves(dataset: GeneratedDataset) -> None:
    root = dataset.root
    definitions = {
        orjson.loads(p.read_bytes())["name"]: orjson.loads(p.read_bytes())
        for p in (root / "definitions").rglob("*.json")
    }
    solutions = {
        doc["name"]: doc
        for doc in (orjson.loads(p.read_bytes()) for p in (root / "solutions").rglob("*.json"))
    }
    assert len(solutions) == dataset.solutions  # names are globally unique
    workloads: dict[tuple[str, str], dict[str, Any]] = {}
    for path in (root / "workloads").rglob("*.jsonl"):
        for _, obj in _jsonl(path):
            workloads[(obj["definition"], obj["workload"]["uuid"])] = obj["workload"]
    for (definition, _), workload in workloads.items():
        var_axes = {k for k, v in definitions[definition]["axes"].items() if v["type"] == "var"}
        assert set(workload["axes"]) == var_axes
        assert list(workload["inputs"]) == list(definitions[definition]["inputs"])
    for path, _, obj in _trace_lines(root):
        solution = solutions[obj["solution"]]
        assert solution["definition"] == obj["definition"] in definitions
        assert path.relative_to(root / "traces").parts[0] == solution["author"]
        assert workloads[(obj["definition"], obj["workload"]["uuid"])] == obj["workload"]


def test_baselines_authors_and_inputs_look_real(dataset: GeneratedDataset) -> None:
    root = dataset.root
    docs = [orjson.loads(p.read_bytes()) for p in (root / "solutions").rglob("*.json")]
    baselines = Counter(d["definition"] for d in docs if d["author"] == BASELINE_AUTHOR)
    assert set(baselines.values()) == {1} and len(baselines) == dataset.definitions
    for doc in docs:
        if doc["author"] == BASELINE_AUTHOR:
            assert re.fullmatch(r"(flashinfer_wrapper|torch_matmul)_[0-9a-f]{6}", doc["name"])
        else:
            assert doc["name"].startswith(f"{doc['author']}_{doc['definition']}_")
    assert len({d["author"] for d in docs}) >= 4
    kinds: Counter[str] = Counter()
    for path in (root / "workloads").rglob("*.jsonl"):
        for _, obj in _jsonl(path):
            for spec in obj["workload"]["inputs"].values():
                kinds[spec["type"]] += 1
                if spec["type"] == "safetensors":
                    assert spec["path"].startswith("./blob/workloads/")
    assert {"random", "scalar", "safetensors"} <= set(kinds)
    assert not (root / "blob").exists()


def test_reruns_append_lines_with_later_timestamps(dataset: GeneratedDataset) -> None:
    seen: Counter[tuple[str, str, str]] = Counter()
    for path in sorted((dataset.root / "traces").rglob("*.jsonl")):
        stamps = []
        for _, obj in _jsonl(path):
            ev = obj["evaluation"]
            seen[(obj["solution"], obj["workload"]["uuid"], ev["environment"]["hardware"])] += 1
            stamps.append(ev["timestamp"])
        assert stamps == sorted(stamps)  # appended in time order
    assert max(seen.values()) >= 2


def test_target_trace_lines_scales_the_dataset(tmp_path: Path) -> None:
    result = generate_dataset(tmp_path / "t", target_trace_lines=3000)
    assert 0.9 * 3000 <= result.trace_lines <= 1.1 * 3000
    assert result.parameters["target_trace_lines"] == 3000
    bytes_per_line = result.bytes["traces"] / result.trace_lines
    assert 1500 < bytes_per_line < 6000


def test_refuses_to_write_over_an_existing_dataset(tmp_path: Path) -> None:
    generate_dataset(tmp_path / "x", definitions=2, workloads_per_definition=2)
    with pytest.raises(FileExistsError):
        generate_dataset(tmp_path / "x", definitions=2, workloads_per_definition=2)
    again = generate_dataset(
        tmp_path / "x", definitions=3, workloads_per_definition=2, overwrite=True
    )
    assert len(list((tmp_path / "x" / "definitions").rglob("*.json"))) == again.definitions == 3


@pytest.mark.slow
def test_tracehouse_demo_is_the_one_command_line(tmp_path: Path) -> None:
    result = run_cli(
        "demo",
        "--source",
        str(tmp_path / "ds"),
        "--warehouse",
        str(tmp_path / "warehouse"),
        "--seed",
        "3",
    )
    assert result.returncode == 0, result.stderr
    assert "generated a demo dataset in" in result.stdout and "leaderboard for" in result.stdout
    assert (tmp_path / "ds" / "traces").is_dir()
    assert (tmp_path / "warehouse" / "current").is_dir()
    # The generator package has no command line of its own.
    second = subprocess.run(
        [sys.executable, "-m", "tracehouse.demo", "--out", str(tmp_path / "other")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode != 0 and not (tmp_path / "other").exists()


def test_the_demo_writes_only_known_statuses() -> None:
    assert set(STATUSES) <= rejects.STATUSES
