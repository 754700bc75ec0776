"""A build whose assembly needs more memory than ``TRACEHOUSE_BUILD_MEMORY_MB`` allows stops with
one line naming that setting, exit 2, and publishes nothing: a first build leaves no warehouse, a
rebuild and a source's removal leave the current warehouse as it was. DuckDB's own message
advised SQL settings a user of the command cannot reach (``SET threads``, ``SET memory_limit``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.conftest import one_error_line, run_cli
from tracehouse.demo import generate_dataset

pytestmark = pytest.mark.integration

REVISION = "a" * 40
# Below what the assembly of even a small source needs (a few blocks of 256 KiB each).
TOO_LITTLE = {"TRACEHOUSE_BUILD_MEMORY_MB": "16"}


def _published(warehouse: Path) -> tuple[str, list[str], str]:
    """What readers see of a warehouse: the generation ``current`` names, the generations kept,
    and every file of the current one. (A failed build may leave its parse in the cache, for the
    next build to reuse; readers never read it.)"""
    current = warehouse / os.readlink(warehouse / "current")
    digest = hashlib.sha256()
    for path in sorted(current.rglob("*")):
        digest.update(str(path.relative_to(current)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    kept = sorted(path.name for path in (warehouse / "generations").iterdir())
    return os.readlink(warehouse / "current"), kept, digest.hexdigest()


def _says_the_limit(line: str) -> None:
    assert line.startswith("tracehouse "), line
    assert "needs more than its 16 MiB of memory" in line, line
    assert "TRACEHOUSE_BUILD_MEMORY_MB allows more" in line, line
    assert "nothing was published" in line, line
    assert "SET " not in line, line  # none of DuckDB's advice on its own settings


def test_a_build_beyond_its_memory_stops_in_one_line_and_publishes_nothing(
    tmp_path: Path,
) -> None:
    source, other, warehouse = tmp_path / "demo", tmp_path / "fork", tmp_path / "wh"
    generate_dataset(source, seed=7, definitions=2, workloads_per_definition=3)
    generate_dataset(other, seed=8, definitions=2, workloads_per_definition=3)
    build = ("build", "--source", str(source), "--warehouse", str(warehouse))

    first = run_cli(*build, "--revision", REVISION, env=TOO_LITTLE)
    _says_the_limit(one_error_line(first))
    assert not warehouse.exists()  # the folder the first build created is gone again

    assert run_cli(*build, "--revision", REVISION).returncode == 0
    fork = ("build", "--source", str(other), "--warehouse", str(warehouse), "--name", "fork")
    assert run_cli(*fork).returncode == 0
    before = _published(warehouse)

    # Another revision of the source: a full assembly, which does not fit.
    again = run_cli(*build, "--revision", "b" * 40, env=TOO_LITTLE)
    _says_the_limit(one_error_line(again))
    assert _published(warehouse) == before

    removal = run_cli("remove-source", "fork", "--warehouse", str(warehouse), env=TOO_LITTLE)
    _says_the_limit(one_error_line(removal))
    assert _published(warehouse) == before

    # Within its memory, the same build goes through.
    assert run_cli(*build, "--revision", "b" * 40).returncode == 0


def test_a_build_memory_below_the_least_is_refused_in_one_line(tmp_path: Path) -> None:
    refused = run_cli(
        "build",
        "--source",
        str(tmp_path),
        "--warehouse",
        str(tmp_path / "wh"),
        env={"TRACEHOUSE_BUILD_MEMORY_MB": "8"},
    )
    assert one_error_line(refused) == (
        "tracehouse build: TRACEHOUSE_BUILD_MEMORY_MB=8: must be >= 16, got 8"
    )
    assert not (tmp_path / "wh").exists()
