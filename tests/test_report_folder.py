"""`tracehouse report --out DIR` writes only into a folder it owns (issue 16, first finding).

The command once deleted ``DIR/definitions/`` and overwrote ``DIR/index.html`` whatever DIR held:
run as ``report --out .`` inside a dataset clone it deleted every definition file. These tests run
the real command and check that a folder holding anything but an earlier report is refused with
one line and left as it was, that a report replaces its own earlier output, and that an
interrupted report leaves the earlier index with every page it links to.
"""

from __future__ import annotations

import hashlib
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.report import REPORT_MARKER
from tests.conftest import build, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipelines.demo import generate_dataset

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


def test_a_report_of_the_earlier_layout_is_taken_over(warehouse: Path, tmp_path: Path) -> None:
    """A folder an earlier tracehouse wrote (index.html, plotly.min.js, definitions/*.html and
    no marker) is still the report's: the Dagster asset rewrites <warehouse>/report in place."""
    out = tmp_path / "old-report"
    (out / "definitions").mkdir(parents=True)
    (out / "definitions" / "gemm-0123abcd.html").write_text("<p>old</p>")
    (out / "index.html").write_text("<p>old index</p>")
    (out / "plotly.min.js").write_text("/* old */")
    result = run_cli("report", "--out", str(out), "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    assert not (out / "definitions").exists()
    assert all(page.is_file() for page in linked_pages(out))


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
            [sys.executable, "-m", "pipelines.cli", "report", "--out", str(out)]
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
            break
        assert process.returncode == 0, stderr
        before = tree(out)
    assert interrupted == 1, "no try was interrupted before the new index was in place"
