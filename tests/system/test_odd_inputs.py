"""Odd inputs each cost one line or one reject, never a traceback or a silent guess (issue 25),
each through the real `tracehouse` command:

* a 100,000-deep `--baselines` file, and an empty `TRACEHOUSE_WAREHOUSE`, are one line, exit 2;
* a warehouse built inside its own source (or any warehouse folder in a source) is not read
  as records, so the next build is up to date;
* a trace whose `evaluation` is neither an object nor null is rejected naming its file and
  line, on the columnar and the exact path alike; null, absent and `{}` stay workload-only;
* `tracehouse tables` takes `--warehouse` as every other command does;
* the quick start's `wh/` and `report/` are ignored by git.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import one_error_line, run_cli
from tests.fixtures.hostile_corpus import (
    DEFINITION,
    definition_object,
    solution_object,
    trace_object,
    workload_record,
)

REPOSITORY = Path(__file__).resolve().parents[2]
TRACE_FILE = f"traces/alice/gemm/{DEFINITION}.jsonl"
# (evaluation, rejected?) for workload lines after three runs: what each is taken for.
ODD_EVALUATIONS: list[tuple[Any, bool]] = [
    ("x", True),
    (True, True),
    ([1], True),
    (0, True),
    ("", True),
    (False, True),
    ({}, False),  # the HF v0 layout's "no evaluation" (flashinfer-trace-format.md §3)
    (None, False),
]
ABSENT = object()  # a line without an evaluation member


def write_dataset(root: Path, extra_lines: list[dict[str, Any]] | None = None) -> Path:
    (root / "definitions/gemm").mkdir(parents=True)
    (root / "definitions/gemm" / f"{DEFINITION}.json").write_text(json.dumps(definition_object()))
    solutions = root / "solutions/alice/gemm" / DEFINITION
    solutions.mkdir(parents=True)
    (solutions / "alice_gemm_v1.json").write_text(json.dumps(solution_object()))
    lines = [trace_object(f"w{i}") for i in range(3)] + (extra_lines or [])
    (root / TRACE_FILE).parent.mkdir(parents=True)
    (root / TRACE_FILE).write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return root


def query(warehouse: Path, sql: str) -> list[dict[str, Any]]:
    result = run_cli("query", sql, "--format", "json", "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_baselines_file_nested_too_deep_is_one_line(tmp_path: Path) -> None:
    source = write_dataset(tmp_path / "dataset")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    refused = run_cli(
        "build",
        "--source",
        str(source),
        "--warehouse",
        str(tmp_path / "w"),
        "--baselines",
        str(deep),
    )
    line = one_error_line(refused)
    assert line == f"tracehouse build: baselines file {deep}: JSON nesting is too deep to parse"
    assert not (tmp_path / "w" / "current").exists()


def test_an_empty_warehouse_variable_is_refused_not_taken_for_the_default(
    tmp_path: Path,
) -> None:
    source = write_dataset(tmp_path / "dataset")
    workdir = tmp_path / "work"
    workdir.mkdir()
    for command in (["build", "--source", str(source)], ["sources"], ["tables"]):
        for empty in ("", "  "):
            refused = run_cli(*command, env={"TRACEHOUSE_WAREHOUSE": empty}, cwd=workdir)
            if command == ["tables"]:  # the schema needs no warehouse, so it is not read
                assert refused.returncode == 0, refused.stderr
                continue
            line = one_error_line(refused)
            assert f"TRACEHOUSE_WAREHOUSE={empty!r}: must not be empty" in line, line
    assert list(workdir.iterdir()) == []  # no ./warehouse built
    # a flag wins over the variable, empty or not
    flagged = run_cli(
        "sources", "--warehouse", str(tmp_path / "none"), env={"TRACEHOUSE_WAREHOUSE": ""}
    )
    assert "TRACEHOUSE_WAREHOUSE" not in one_error_line(flagged)


@pytest.mark.slow
def test_a_warehouse_inside_its_source_is_not_read_as_records(tmp_path: Path) -> None:
    source = write_dataset(tmp_path / "dataset")
    inside = source / "traces" / "warehouse"
    first = run_cli("build", "--source", str(source), "--warehouse", str(inside))
    assert first.returncode == 0, first.stderr
    again = run_cli("build", "--source", str(source), "--warehouse", str(inside))
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"warehouse {inside} is up to date"), again.stdout
    # Another warehouse (a copy of this one) in the source is not read either.
    shutil.copytree(inside, source / "solutions" / "old_warehouse", symlinks=True)
    forced = run_cli("build", "--source", str(source), "--warehouse", str(inside), "--force")
    assert forced.returncode == 0, forced.stderr
    assert query(inside, "SELECT count(*) AS n FROM rejects") == [{"n": 0}]
    files = query(inside, "SELECT DISTINCT source_file FROM runs ORDER BY 1")
    assert files == [{"source_file": TRACE_FILE}]


@pytest.mark.slow
def test_an_evaluation_that_is_not_an_object_is_rejected_on_both_paths(tmp_path: Path) -> None:
    odd = []
    for number, (evaluation, _) in enumerate(ODD_EVALUATIONS):
        record = workload_record(f"odd{number}")
        record["evaluation"] = evaluation
        odd.append(record)
    absent = workload_record("absent")
    del absent["evaluation"]
    source = write_dataset(tmp_path / "dataset", [*odd, absent])
    expected_rejects = [
        {"file": TRACE_FILE, "line": 4 + number, "reason": "invalid_field"}
        for number, (_, rejected) in enumerate(ODD_EVALUATIONS)
        if rejected
    ]
    kept = sorted(
        [f"odd{n}" for n, (_, rejected) in enumerate(ODD_EVALUATIONS) if not rejected]
        + ["absent", "w0", "w1", "w2"]
    )
    warehouse = tmp_path / "warehouse"
    built = run_cli("build", "--source", str(source), "--warehouse", str(warehouse))
    assert built.returncode == 0, built.stderr
    rejects = query(warehouse, "SELECT file, line, reason, message FROM rejects ORDER BY line")
    assert [{k: r[k] for k in ("file", "line", "reason")} for r in rejects] == expected_rejects
    assert all(r["message"].startswith("evaluation is ") for r in rejects), rejects
    workloads = query(warehouse, "SELECT workload_uuid FROM workloads ORDER BY 1")
    assert [w["workload_uuid"] for w in workloads] == kept
    assert query(warehouse, "SELECT count(*) AS n FROM runs") == [{"n": 3}]


def test_tables_takes_the_warehouse_flag_like_every_command(tmp_path: Path) -> None:
    plain = run_cli("tables", "runs")
    assert plain.returncode == 0, plain.stderr
    flagged = run_cli("tables", "runs", "--warehouse", str(tmp_path / "wh"))
    assert flagged.returncode == 0, flagged.stderr
    assert flagged.stdout == plain.stdout
    assert not (tmp_path / "wh").exists()  # the schema is read from the code, nothing written


def test_the_quick_start_outputs_are_ignored_by_git() -> None:
    if shutil.which("git") is None or not (REPOSITORY / ".git").exists():
        pytest.skip("not a git checkout")
    readme = (REPOSITORY / "README.md").read_text()
    assert "--warehouse wh" in readme and "--out report/" in readme
    written = ["wh/tracehouse.duckdb", "wh/cache/manifest.json", "report/index.html"]
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *written],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
    )
    assert ignored.stdout.split() == written, ignored.stderr
