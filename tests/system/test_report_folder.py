"""`tracehouse report --out DIR` writes only into a folder it owns (issue 16, first finding).

The command once deleted ``DIR/definitions/`` and overwrote ``DIR/index.html`` whatever DIR held:
run as ``report --out .`` inside a dataset clone it deleted every definition file. These tests run
the real command and check that a folder holding anything but an earlier report is refused with
one line and left as it was, that a report replaces its own earlier output, and that an
interrupted report leaves the earlier index with every page it links to.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import build, one_error_line, run_cli
from tracehouse.serve.report import REPORT_MARKER

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tracehouse.demo import generate_dataset

    root = tmp_path_factory.mktemp("report-folder")
    generate_dataset(root / "demo", seed=3, definitions=4, workloads_per_definition=3)
    build(root / "demo", root / "warehouse")
    return root / "warehouse"


def tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` with its content digest (folders as '/')."""
    return {
        str(path.relative_to(folder)): (
            "/" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        )
        for path in sorted(folder.rglob("*"))
    }


def linked_pages(out: Path) -> list[Path]:
    index = (out / "index.html").read_text()
    return [out / href for href in re.findall(r"href='(pages-[^']+\.html)'", index)]


def test_a_dataset_folder_is_refused_and_left_as_it_was(warehouse: Path, tmp_path: Path) -> None:
    clone = tmp_path / "dataset-clone"
    (clone / "definitions" / "gemm").mkdir(parents=True)
    (clone / "definitions" / "gemm" / "gemm_n128.json").write_text('{"name": "gemm_n128"}')
    (clone / "index.html").write_text("<p>my own page</p>")
    before = tree(clone)
    result = run_cli("report", "--out", ".", "--warehouse", str(warehouse), cwd=clone)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "--out" in result.stderr and "not empty" in result.stderr
    assert tree(clone) == before


def test_a_report_replaces_its_own_earlier_output(warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    first = run_cli("report", "--out", str(out), "--warehouse", str(warehouse))
    assert first.returncode == 0, first.stderr
    first_pages = linked_pages(out)
    assert first_pages and all(page.is_file() for page in first_pages)
    second = run_cli("report", "--out", str(out), "--warehouse", str(warehouse))
    assert second.returncode == 0, second.stderr
    second_pages = linked_pages(out)
    assert second_pages and all(page.is_file() for page in second_pages)
    # the earlier report's pages are gone, nothing else is left beside the new one
    assert not any(page.exists() for page in first_pages)
    (pages_folder,) = {page.relative_to(out).parts[0] for page in second_pages}
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["index.html", "plotly.min.js", REPORT_MARKER, pages_folder]
    )


def test_a_folder_that_only_looks_like_a_report_is_refused(warehouse: Path, tmp_path: Path) -> None:
    """index.html beside definitions/*.html is what an older tracehouse wrote, and what anyone's
    own pages look like: without the report's own marker the folder is refused and untouched
    (an older report's folder too: the line says to remove it or name another)."""
    out = tmp_path / "my-pages"
    (out / "definitions").mkdir(parents=True)
    (out / "definitions" / "gemm-0123abcd.html").write_text("<p>my notes on gemm</p>")
    (out / "index.html").write_text("<p>my index</p>")
    (out / "plotly.min.js").write_text("/* mine */")
    before = tree(out)
    result = run_cli("report", "--out", str(out), "--warehouse", str(warehouse))
    line = one_error_line(result)
    assert f"--out {out}" in line and "name another folder, or remove this one" in line, line
    assert tree(out) == before


def test_a_marker_of_other_content_is_not_the_reports(warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "marked"
    out.mkdir()
    (out / REPORT_MARKER).write_text('{"written_by": "someone else"}\n')
    (out / "index.html").write_text("<p>mine</p>")
    before = tree(out)
    line = one_error_line(run_cli("report", "--out", str(out), "--warehouse", str(warehouse)))
    assert f"--out {out}" in line and REPORT_MARKER in line, line
    assert tree(out) == before


def _stop_once_writing_pages(process: subprocess.Popen[str], out: Path, earlier: set[str]) -> None:
    """SIGSTOP ``process`` once it has written a page of its own report but not its index."""
    index_before = (out / "index.html").read_bytes()
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        mine = [p for p in out.glob("pages-*") if p.name not in earlier]
        if mine and any(mine[0].glob("*.html")):
            process.send_signal(signal.SIGSTOP)
            break
        time.sleep(0.002)
    assert process.poll() is None, "the report ended before it could be stopped"
    assert (out / "index.html").read_bytes() == index_before, "stopped after its index"


def _report_process(out: Path, warehouse: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tracehouse.cli", "report", "--out", str(out)]
        + ["--warehouse", str(warehouse)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")},
    )


def _second_report_while_the_first_is_stopped(
    first: subprocess.Popen[str], out: Path, warehouse: Path
) -> None:
    """With the first report stopped in the middle of its pages, a second one into the same
    folder (not waiting) is refused in one line; the first, continued, finishes whole."""
    earlier = {p.name for p in out.iterdir()}
    try:
        _stop_once_writing_pages(first, out, earlier)
        second = run_cli(
            "report", "--out", str(out), "--warehouse", str(warehouse),
            env={"TRACEHOUSE_LOCK_TIMEOUT_S": "0"},
        )  # fmt: skip
        line = one_error_line(second)
        assert f"--out {out}" in line and "another tracehouse report" in line, line
    finally:
        first.send_signal(signal.SIGCONT)
    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    pages = linked_pages(out)
    assert pages and all(page.is_file() for page in pages)
    assert len(list(out.glob("pages-*"))) == 1


def test_a_second_report_into_the_same_folder_does_not_sweep_the_first_ones_pages(
    warehouse: Path, tmp_path: Path
) -> None:
    """Two `report --out R` at once: before, the second swept the page folder the first was
    writing and the first then published an index linking to deleted pages (exit 0 both)."""
    out = tmp_path / "report"
    assert run_cli("report", "--out", str(out), "--warehouse", str(warehouse)).returncode == 0
    _second_report_while_the_first_is_stopped(_report_process(out, warehouse), out, warehouse)


DAGSTER_REPORT = """
import sys
import dagster as dg
from pipelines.defs import assets
from pipelines.defs.resources import WarehouseResource
result = dg.materialize(
    [assets.report], resources={"warehouse": WarehouseResource(warehouse=sys.argv[1])}
)
sys.exit(0 if result.success else 1)
"""


@pytest.mark.slow
def test_a_dagster_report_and_a_cli_report_take_turns(warehouse: Path, tmp_path: Path) -> None:
    """The Dagster report asset writes <warehouse>/report through the same code as the CLI:
    a CLI report into that folder while a materialization writes it is refused (or waits),
    and the materialization's index links only to pages that exist."""
    copy = tmp_path / "warehouse"
    shutil.copytree(warehouse, copy, symlinks=True)
    out = copy / "report"
    assert run_cli("report", "--out", str(out), "--warehouse", str(copy)).returncode == 0
    materialization = subprocess.Popen(
        [sys.executable, "-c", DAGSTER_REPORT, str(copy)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")},
    )
    _second_report_while_the_first_is_stopped(materialization, out, copy)


@pytest.mark.slow
def test_reports_started_together_leave_an_index_whose_every_link_resolves(
    warehouse: Path, tmp_path: Path
) -> None:
    """Unstopped: two reports into one folder, started at once, several times; both wait their
    turn and succeed, and every link of the index left resolves."""
    out = tmp_path / "report"
    for _ in range(3):
        both = [_report_process(out, warehouse) for _ in range(2)]
        for process in both:
            _, stderr = process.communicate(timeout=600)
            assert process.returncode == 0, stderr
        pages = linked_pages(out)
        assert pages and all(page.is_file() for page in pages)
        assert len(list(out.glob("pages-*"))) == 1


def test_an_interrupted_report_leaves_the_earlier_one_whole(
    warehouse: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    assert run_cli("report", "--out", str(out), "--warehouse", str(warehouse)).returncode == 0
    before = tree(out)
    interrupted = 0
    for _ in range(5):
        earlier = {p.name for p in out.iterdir()}
        process = subprocess.Popen(
            [sys.executable, "-m", "tracehouse.cli", "report", "--out", str(out)]
            + ["--warehouse", str(warehouse)],
            stderr=subprocess.PIPE,
            text=True,
        )
        # Ctrl-C once the new report has started writing its pages
        deadline = time.monotonic() + 120
        while process.poll() is None and time.monotonic() < deadline:
            if any(p.name.startswith("pages-") and p.name not in earlier for p in out.iterdir()):
                process.send_signal(signal.SIGINT)
                break
            time.sleep(0.002)
        _, stderr = process.communicate(timeout=120)
        pages = linked_pages(out)
        assert pages and all(page.is_file() for page in pages)
        if process.returncode == 130:
            interrupted += 1
            assert stderr.count("\n") == 1, stderr
            assert {k: v for k, v in tree(out).items() if not k.startswith("pages-")} == {
                k: v for k, v in before.items() if not k.startswith("pages-")
            }
            # the interrupted report's own page folder went with it
            folders = {p.name for p in out.iterdir() if p.name.startswith("pages-")}
            assert folders == {name for name in earlier if name.startswith("pages-")}
            break
        assert process.returncode == 0, stderr
        before = tree(out)
    assert interrupted == 1, "no try was interrupted before the new index was in place"


# --------------------------------------------------------------------------------------------
# export --snapshot DIR: the same rule as report --out


def test_export_refuses_a_non_empty_folder_it_did_not_write(
    warehouse: Path, tmp_path: Path
) -> None:
    """A folder of the user's own Parquet files named like the tables: once overwritten in
    silence, now refused in one line and left as it was."""
    mine = tmp_path / "my-data"
    mine.mkdir()
    (mine / "runs.parquet").write_bytes(b"PAR1 my own runs PAR1")
    (mine / "manifest.json").write_text('{"mine": true}\n')
    before = tree(mine)
    line = one_error_line(run_cli("export", "--snapshot", str(mine), "--warehouse", str(warehouse)))
    assert f"--snapshot {mine}" in line and "not empty" in line, line
    assert tree(mine) == before


def test_export_replaces_its_own_earlier_snapshot_and_nothing_else(
    warehouse: Path, tmp_path: Path
) -> None:
    out = tmp_path / "snapshot"
    for _ in range(2):
        exported = run_cli("export", "--snapshot", str(out), "--warehouse", str(warehouse))
        assert exported.returncode == 0, exported.stderr
    assert (out / "manifest.json").is_file() and (out / "runs.parquet").is_file()
    # a report folder is not a snapshot folder, nor the other way round
    line = one_error_line(run_cli("report", "--out", str(out), "--warehouse", str(warehouse)))
    assert f"--out {out}" in line, line


# --------------------------------------------------------------------------------------------
# a write that fails (a full disk, the file size limit): one line naming the file, exit 2

FILE_SIZE_LIMIT = 4096  # bytes: the marker fits, the Plotly bundle and the tables do not


def run_cli_with_file_size_limit(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command with RLIMIT_FSIZE set, so that a write beyond it fails with EFBIG,
    the OS error a full disk (ENOSPC) also is: a real failed write, not a mock. Python ignores
    SIGXFSZ, so the write returns the error instead of the signal ending the process."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", *args],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")},
        preexec_fn=limit,
        timeout=600,
    )


@pytest.mark.parametrize(
    ("command", "written"),
    [
        (("report", "--out", "{out}"), "{out}/plotly\\.min\\.js"),
        # the first table larger than the limit; the file the user asked for, not a temporary
        (("export", "--snapshot", "{out}"), "{out}/[a-z_]+\\.parquet"),
        (("export", "--kernelindex", "{definition}", "{out}/runs.json"), "{out}/runs\\.json"),
    ],
    ids=["report", "export-snapshot", "export-kernelindex"],
)
def test_a_failed_write_is_one_line_naming_the_file(
    warehouse: Path, tmp_path: Path, command: tuple[str, ...], written: str
) -> None:
    import duckdb

    connection = duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True)
    try:
        ((definition,),) = connection.execute(
            "SELECT definition FROM runs GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
        ).fetchall()
    finally:
        connection.close()
    out = tmp_path / "out"
    if command[0] == "export" and command[1] == "--kernelindex":
        out.mkdir()
    fill = {"out": re.escape(str(out)), "definition": definition}
    args = [part.format(out=out, definition=definition) for part in command]
    line = one_error_line(run_cli_with_file_size_limit(*args, "--warehouse", str(warehouse)))
    assert re.fullmatch(
        f"tracehouse {command[0]}: \\[Errno 27\\] File too large: '{written.format(**fill)}'", line
    ), line
    assert not list(out.rglob("*.tmp")), "a temporary file was left behind"
