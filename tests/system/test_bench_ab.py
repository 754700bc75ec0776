"""`python -m bench.ab` compares two versions for real: the base side runs the exported tree of
the revision, not this checkout (the trap it exists for: a process started in this checkout,
or through the console script, imports this checkout whatever PYTHONPATH says). Nothing
asserts on speed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.ab import export_tree, imported_package, resolve_revision
from bench.run import ensure_dataset

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not (ROOT / ".git").exists(), reason="bench.ab compares git revisions: needs a git checkout"
)


def _ab(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.ab",
            "--work-dir",
            str(tmp_path / "ab"),
            "--data-root",
            str(tmp_path / "data"),
            *arguments,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def test_each_side_imports_its_own_tree(tmp_path: Path) -> None:
    sha = resolve_revision("HEAD")
    tree = export_tree(sha, tmp_path)
    assert tree == tmp_path / f"tree-{sha}"
    assert imported_package(tree) == (tree / "tracehouse").resolve()
    assert imported_package(ROOT) == (ROOT / "tracehouse").resolve()
    # A second export of the same commit reuses the first.
    assert export_tree(sha, tmp_path) == tree
    assert not list(tmp_path.glob(".tree-*"))


@pytest.mark.slow
@pytest.mark.integration
def test_alternated_changed_builds_are_timed_on_both_sides(tmp_path: Path) -> None:
    done = _ab(tmp_path, "--base", "HEAD", "--pairs", "2", "--lines", "300")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "changed build, 2 alternated pair(s), seconds" in out
    for side in ("base", "head"):
        line = next(line for line in out.splitlines() if line.startswith(f"  {side:5} wall"))
        assert len(line.split("(")[1].split()) == 2  # one time per pair
    assert "head - base, wall per pair: median" in out
    # Each side built its own warehouse; the dataset is back as it was (bench.run's check).
    for side in ("base", "head"):
        assert (tmp_path / "ab" / f"warehouse-{side}" / "current").exists()
    # The exported tree was compiled as an install compiles (PYTHONDONTWRITEBYTECODE or not):
    # else its every process would compile it afresh, a cost the head side does not pay.
    (tree,) = (tmp_path / "ab").glob("tree-*")
    for module in ("tracehouse/__init__", "tracehouse/ingest/worker"):
        source = tree / f"{module}.py"
        cached = source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
        assert cached.is_file(), cached


def test_an_unknown_revision_is_one_line(tmp_path: Path) -> None:
    done = _ab(tmp_path, "--base", "no-such-revision-here")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"bench.ab: --base no-such-revision-here: not a commit of {ROOT}"
    ]
    assert not (tmp_path / "ab" / "warehouse-base").exists()


def test_a_bad_argument_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _ab(tmp_path, "--base", "HEAD", "--pairs", "0")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["bench.ab: --pairs 0: at least 1"]
    done = _ab(tmp_path, "--base", "HEAD", "--leg", "hot")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("bench.ab: argument --leg: invalid choice")


@pytest.mark.slow
@pytest.mark.integration
def test_ctrl_c_during_the_builds_is_one_line_and_the_dataset_is_put_back(tmp_path: Path) -> None:
    # The dataset first, so that the interrupt lands in the alternated builds.
    ensure_dataset(tmp_path / "data", 300, 7)
    traces = sorted((tmp_path / "data" / "300" / "traces").rglob("*.jsonl"))
    before = {path: path.read_bytes() for path in traces}
    process = subprocess.Popen(
        [
            sys.executable, "-m", "bench.ab", "--base", "HEAD", "--pairs", "3", "--lines", "300",
            "--work-dir", str(tmp_path / "ab"), "--data-root", str(tmp_path / "data"),
        ],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches it
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().startswith("base ")  # the builds begin after this line
    time.sleep(2)
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 130, err
    assert err.strip().splitlines() == ["bench.ab: interrupted; the dataset is as it was"]
    assert {path: path.read_bytes() for path in traces} == before
