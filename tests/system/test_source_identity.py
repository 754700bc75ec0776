"""A source's identity is its real location (issue 19): the same folder spelled relative or
absolute, or reached from another working directory, is one source in one state — an
unchanged folder builds no new generation and no new snapshot, whatever the spelling."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixtures.shared_data import SAMPLES_DIR, requires_shared


def _generations(warehouse: Path) -> list[str]:
    listed = run_cli("generations", "--format", "json", "--warehouse", str(warehouse))
    assert listed.returncode == 0, listed.stderr
    return [row["generation"] for row in json.loads(listed.stdout)]


def _snapshots(warehouse: Path) -> list[tuple[str, str]]:
    found = run_cli(
        "query",
        "SELECT source, uri FROM source_snapshots ORDER BY snapshot_number",
        "--format",
        "json",
        "--warehouse",
        str(warehouse),
    )
    assert found.returncode == 0, found.stderr
    return [(row["source"], row["uri"]) for row in json.loads(found.stdout)]


@pytest.mark.slow
@requires_shared
def test_one_folder_spelled_three_ways_is_one_source_state(tmp_path: Path) -> None:
    data = tmp_path / "work" / "data" / "sample"
    shutil.copytree(SAMPLES_DIR / "hf_v3_layout", data)
    (tmp_path / "elsewhere").mkdir()
    warehouse = tmp_path / "warehouse"
    spellings = [
        ("data/sample", tmp_path / "work"),
        (str(data), tmp_path),
        ("../work/data/./sample", tmp_path / "elsewhere"),
    ]
    outputs = []
    for spelling, cwd in spellings:
        built = run_cli("build", "--source", spelling, "--warehouse", str(warehouse), cwd=cwd)
        assert built.returncode == 0, built.stderr
        outputs.append(built.stdout.splitlines()[0])
    assert outputs[0].startswith("built ")
    assert all(" is up to date " in line for line in outputs[1:]), outputs
    assert len(_generations(warehouse)) == 1
    assert _snapshots(warehouse) == [("sample", str(data.resolve()))]
