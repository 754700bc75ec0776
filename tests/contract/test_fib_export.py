"""Issue 29: a warehouse keeps what a FlashInfer-Trace dataset holds, and gives it back.

`tracehouse export --flashinfer-trace OUT` writes a dataset folder in the current layout; loaded
by FlashInfer-Bench's own `TraceSet.from_path` (installed from PyPI into a separate environment
once per test session, without its GPU dependencies), every definition, solution, workload and
trace of the export equals the original's, and so do `summary()` and the rankings
(tests/fixtures/fib_compare.py runs inside that environment).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.conftest import build, files_outside, one_error_line, run_cli
from tests.fixtures.fib_golden import FIB_GOLDEN_DIR
from tests.fixtures.shared_data import GOLDEN_DIR, SAMPLES_DIR, requires_shared

pytestmark = requires_shared

V3 = SAMPLES_DIR / "hf_v3_layout"
FIXTURE_ERRORS = FIB_GOLDEN_DIR / "fixtures" / "fixture_errors"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """hf_v3_layout (source `v3`) and fixture_errors (source `errors`) side by side."""
    path = tmp_path_factory.mktemp("lossless") / "warehouse"
    build(V3, path, source_name="v3")
    build(FIXTURE_ERRORS, path, source_name="errors")
    return path


def published(warehouse: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(warehouse / "current" / "tracehouse.duckdb"), read_only=True)


def test_the_warehouse_keeps_logs_references_and_sources_whole(warehouse: Path) -> None:
    connection = published(warehouse)
    try:
        logs = dict(
            ((f, line), log)
            for f, line, log in connection.execute(
                "SELECT source_file, source_line, log FROM runs WHERE source = 'v3'"
            ).fetchall()
        )
        references = dict(
            connection.execute(
                "SELECT definition, reference FROM definitions WHERE source = 'v3'"
            ).fetchall()
        )
        definition_json = dict(
            connection.execute(
                "SELECT definition, definition_json FROM definitions WHERE source = 'v3'"
            ).fetchall()
        )
        sources = dict(
            connection.execute(
                "SELECT solution, sources FROM implementations WHERE source = 'v3'"
            ).fetchall()
        )
        refused = connection.execute(
            "SELECT raw FROM rejects WHERE source = 'errors' AND reason = 'invalid_latency'"
        ).fetchall()
    finally:
        connection.close()
    long_logs = 0
    for path in sorted((V3 / "traces").rglob("*.jsonl")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            evaluation = json.loads(line)["evaluation"]
            rel = path.relative_to(V3).as_posix()
            assert logs[(rel, number)] == (evaluation.get("log") or None), (rel, number)
            long_logs += len(evaluation.get("log") or "") > 300
    assert long_logs > 20  # longer than any excerpt: the whole log, not a summary
    for path in sorted((V3 / "definitions").rglob("*.json")):
        value = json.loads(path.read_text())
        assert references[value["name"]] == value["reference"]
        assert json.loads(definition_json[value["name"]]) == value
    for path in sorted((V3 / "solutions").rglob("*.json")):
        value = json.loads(path.read_text())
        assert sources[value["name"]] == value["sources"]
    assert len(refused) == 1 and json.loads(refused[0][0])["definition"] == "fxe_zero_latency"


def test_export_refuses_a_folder_that_is_not_empty(warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "dataset"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    result = run_cli(
        "export", "--flashinfer-trace", str(out), "--source", "v3", "--warehouse", str(warehouse)
    )
    line = one_error_line(result)
    assert "--flashinfer-trace" in line and "not empty" in line
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_export_names_the_source_when_the_warehouse_holds_several(
    warehouse: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dataset"
    line = one_error_line(
        run_cli("export", "--flashinfer-trace", str(out), "--warehouse", str(warehouse))
    )
    assert line.startswith("tracehouse export: --source") and "errors, v3" in line
    line = one_error_line(
        run_cli(
            "export",
            "--flashinfer-trace",
            str(out),
            "--source",
            "nope",
            "--warehouse",
            str(warehouse),
        )
    )
    assert "--source 'nope'" in line
    line = one_error_line(
        run_cli(
            "export",
            "--flashinfer-trace",
            str(out),
            "--source",
            "v3",
            "--definition",
            "nope",
            "--warehouse",
            str(warehouse),
        )
    )
    assert "--definition 'nope'" in line
    line = one_error_line(
        run_cli(
            "export", "--snapshot", str(out), "--definition", "x", "--warehouse", str(warehouse)
        )
    )
    assert "--definition" in line and "--flashinfer-trace" in line
    assert not out.exists()


def test_export_of_one_definition_writes_only_its_records(warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "dataset"
    before = files_outside(tmp_path, out)
    result = run_cli(
        "export", "--flashinfer-trace", str(out), "--source", "v3",
        "--definition", "gemm_n2048_k4096", "--warehouse", str(warehouse),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert files_outside(tmp_path, out) == before
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == [
        "definitions/gemm/gemm_n2048_k4096.json",
        "solutions/gpt-5/gemm/gemm_n2048_k4096/gpt-5_gemm_n2048_k4096_cuda_optimized_r8_c0_high.json",
        "traces/gpt-5/gemm/gemm_n2048_k4096.jsonl",
        "workloads/gemm/gemm_n2048_k4096.jsonl",
    ]
    original = (V3 / "traces" / "gpt-5" / "gemm" / "gemm_n2048_k4096.jsonl").read_text()
    exported = (out / written[2]).read_text()
    assert len(exported.splitlines()) == len(original.splitlines())
    assert "exported 1 definitions, 1 solutions" in result.stdout


# --- FlashInfer-Bench's own reading ---------------------------------------------------------

FIB_PACKAGES = (
    # FlashInfer-Bench's package imports torch (a CPU build of 2.13.0 is on this machine's
    # index), pydantic, safetensors and docstring_parser to load a TraceSet; its GPU
    # dependencies (flashinfer-python, apache-tvm-ffi, CUDA wheels) are not needed for that.
    ["torch==2.13.0"],
    ["--no-deps", "flashinfer-bench"],
    ["pydantic", "safetensors", "docstring-parser"],
)


@pytest.fixture(scope="session")
def fib_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Python of a separate environment with FlashInfer-Bench installed from PyPI, made
    once per test session."""
    venv = tmp_path_factory.mktemp("flashinfer-bench") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    for packages in FIB_PACKAGES:
        # pip, not uv: uv would resolve torch to a CUDA build and download it
        result = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             *packages],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        if result.returncode != 0:
            tail = " | ".join(result.stderr.strip().splitlines()[-3:])
            pytest.fail(f"cannot install {' '.join(packages)} into {venv}: {tail}")
    check = subprocess.run(
        [str(python), "-c", "from flashinfer_bench.data import TraceSet"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr[-2000:]
    return python


def fib_compare(python: Path, original: Path, exported: Path) -> dict[str, object]:
    result = subprocess.run(
        [str(python), str(Path(__file__).parents[1] / "fixtures" / "fib_compare.py"), str(original), str(exported)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def export(warehouse: Path, out: Path, *flags: str) -> None:
    result = run_cli(
        "export", "--flashinfer-trace", str(out), "--warehouse", str(warehouse), *flags
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
@pytest.mark.integration
def test_flashinfer_bench_reads_the_golden_corpus_back_equal(
    fib_python: Path, golden_warehouse: Path, tmp_path: Path
) -> None:
    export(golden_warehouse, tmp_path / "golden")
    found = fib_compare(fib_python, GOLDEN_DIR / "dataset", tmp_path / "golden")
    assert found["problems"] == []
    assert (found["definitions"], found["solutions"], found["traces"]) == (50, 53, 1490)
    assert found["workloads"] == 1056 and found["exported_traces"] == 1490


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize(
    ("folder", "counts"),
    [
        (SAMPLES_DIR / "intel_sycl_fork_2026-09", (2, 0, 8)),
        (SAMPLES_DIR / "ffi_example_flat_layout", (1, 1, 0)),
        (FIB_GOLDEN_DIR / "fixtures" / "fixture_main", (3, 16, 56)),
    ],
    ids=lambda value: value.name if isinstance(value, Path) else None,
)
def test_flashinfer_bench_reads_sample_folders_back_equal(
    fib_python: Path, folder: Path, counts: tuple[int, int, int], tmp_path: Path
) -> None:
    build(folder, tmp_path / "warehouse")
    export(tmp_path / "warehouse", tmp_path / "out")
    found = fib_compare(fib_python, folder, tmp_path / "out")
    assert found["problems"] == []
    assert (found["definitions"], found["solutions"], found["traces"]) == counts


@pytest.mark.slow
@pytest.mark.integration
def test_flashinfer_bench_reads_each_source_of_a_warehouse_back_equal(
    fib_python: Path, warehouse: Path, tmp_path: Path
) -> None:
    """hf_v3_layout (real A800 runs, logs up to 8 KB) and fixture_errors, whose trace without
    an evaluation and zero-latency trace the build keeps only as a workload and a reject."""
    for source, folder, counts in (
        ("v3", V3, (11, 8, 242)),
        ("errors", FIXTURE_ERRORS, (4, 9, 19)),
    ):
        export(warehouse, tmp_path / source, "--source", source)
        found = fib_compare(fib_python, folder, tmp_path / source)
        assert found["problems"] == [], source
        assert (found["definitions"], found["solutions"], found["traces"]) == counts
        assert found["exported_traces"] == counts[2]
