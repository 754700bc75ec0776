"""Issue 10, part 1: a good warehouse is never silently replaced, and earlier ones are kept.

All through the real `tracehouse` command (subprocesses): a source with no dataset, or none at
all, is refused before anything is written; a build that would shrink a table by more than
``max_shrink_share`` is refused with the warehouse unchanged, unless ``--allow-shrink`` (or
TRACEHOUSE_ALLOW_SHRINK) says so; completed generations are kept (TRACEHOUSE_KEEP_GENERATIONS),
listed by `tracehouse generations`, and `tracehouse rollback` makes an earlier one current.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.fixtures.hostile_corpus import AUTHOR, write_plain_dataset

pytestmark = pytest.mark.integration


def build(source: Path, warehouse: Path, *extra: str, env: dict[str, str] | None = None) -> Any:
    return run_cli("build", "--source", str(source), "--warehouse", str(warehouse), *extra, env=env)


def runs(warehouse: Path) -> int:
    result = run_cli(
        "query", "SELECT count(*) AS n FROM runs", "--format", "json", "--warehouse", str(warehouse)
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)[0]["n"]


def current(warehouse: Path) -> str:
    return os.readlink(warehouse / "current")


def listed(warehouse: Path) -> list[dict[str, Any]]:
    table = run_cli("generations", "--wide", "--warehouse", str(warehouse))  # one line per row
    assert table.returncode == 0, table.stderr
    assert table.stdout.split()[:4] == ["generation", "current", "built_at", "runs"]
    result = run_cli("generations", "--format", "json", "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_no_source_and_no_dataset_are_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    warehouse = tmp_path / "warehouse"
    no_source = run_cli("build", "--warehouse", str(warehouse))
    assert no_source.returncode == 2 and "no source given" in no_source.stderr
    assert "tracehouse demo" in no_source.stderr
    (tmp_path / "empty").mkdir()
    empty = build(tmp_path / "empty", warehouse)
    assert empty.returncode == 2
    assert "definitions/, solutions/, workloads/, traces/" in empty.stderr
    assert not (warehouse / "generations").exists()


def test_a_shrinking_build_is_refused_unless_allowed(tmp_path: Path) -> None:
    source, warehouse = tmp_path / "dataset", tmp_path / "warehouse"
    write_plain_dataset(source, "A", files=4, lines=20)
    assert build(source, warehouse).returncode == 0
    full, published = runs(warehouse), current(warehouse)

    # Three of four trace files gone (a half-finished clone, a wrong checkout): refused.
    traces = source / "traces" / AUTHOR / "gemm"
    for name in ("part001.jsonl", "part002.jsonl", "part003.jsonl"):
        (traces / name).unlink()
    refused = build(source, warehouse)
    assert refused.returncode == 2, refused.stdout
    (line,) = refused.stderr.splitlines()
    assert line.startswith("tracehouse build: refused to publish: runs ")
    assert "--allow-shrink" in line and "the warehouse is unchanged" in line
    assert current(warehouse) == published and runs(warehouse) == full
    assert len(list((warehouse / "generations").iterdir())) == 1  # the refused one is gone

    # A wider limit, the environment, or the flag let it through.
    wider = build(source, warehouse, env={"TRACEHOUSE_MAX_SHRINK_SHARE": "0.9"})
    assert wider.returncode == 0, wider.stderr
    smaller = runs(warehouse)
    assert smaller < full / 2
    shutil.rmtree(source)
    write_plain_dataset(source, "A", files=4, lines=20)
    assert build(source, warehouse).returncode == 0  # growing is always fine
    for name in ("part001.jsonl", "part002.jsonl", "part003.jsonl"):
        (traces / name).unlink()
    assert build(source, warehouse, env={"TRACEHOUSE_ALLOW_SHRINK": "1"}).returncode == 0
    assert runs(warehouse) == smaller
    (traces / "part000.jsonl").unlink()  # an empty traces/ folder: the whole table would go
    assert build(source, warehouse).returncode == 2
    allowed = build(source, warehouse, "--allow-shrink")
    assert allowed.returncode == 0, allowed.stderr
    assert runs(warehouse) == 0


def test_generations_are_kept_listed_and_rolled_back(tmp_path: Path) -> None:
    source, warehouse = tmp_path / "dataset", tmp_path / "warehouse"
    counts = []
    for lines in (10, 20, 30, 40):
        write_plain_dataset(source, "A", files=2, lines=lines)
        assert build(source, warehouse).returncode == 0
        counts.append(runs(warehouse))
    generations = listed(warehouse)
    assert len(generations) == 3  # the default keeps three
    assert [g["runs"] for g in generations] == counts[1:]
    assert [g["current"] for g in generations] == ["", "", "*"]
    assert all(g["source"].startswith(str(source)) for g in generations)

    rolled = run_cli("rollback", "--warehouse", str(warehouse))
    assert rolled.returncode == 0, rolled.stderr
    assert generations[1]["generation"] in rolled.stdout
    assert runs(warehouse) == counts[2]
    by_number = run_cli("rollback", generations[0]["generation"][:6], "--warehouse", str(warehouse))
    assert by_number.returncode == 0, by_number.stderr
    assert runs(warehouse) == counts[1]
    assert [g["current"] for g in listed(warehouse)] == ["*", "", ""]
    # Rolling back is not the source changing: the next build rebuilds the source's state.
    again = build(source, warehouse)
    assert again.returncode == 0 and "up to date" not in again.stdout
    assert runs(warehouse) == counts[3]

    fewer = build(source, warehouse, "--force", env={"TRACEHOUSE_KEEP_GENERATIONS": "1"})
    assert fewer.returncode == 0
    assert len(listed(warehouse)) == 1


def test_a_rollback_waits_for_a_running_build(tmp_path: Path) -> None:
    import fcntl

    source, warehouse = tmp_path / "dataset", tmp_path / "warehouse"
    for lines in (5, 6):
        write_plain_dataset(source, "A", files=1, lines=lines)
        assert build(source, warehouse).returncode == 0
    before = current(warehouse)
    with (warehouse / ".build.lock").open("a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        busy = run_cli(
            "rollback", "--warehouse", str(warehouse), env={"TRACEHOUSE_LOCK_TIMEOUT_S": "0"}
        )
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    assert busy.returncode == 2 and "another build is writing" in busy.stderr
    assert current(warehouse) == before
