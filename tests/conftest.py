"""Shared fixtures: real warehouses built into temporary folders."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from tests.fixtures.shared_data import GOLDEN_DIR, MISSING_REASON, SHARED
from tracehouse.build import BuildResult, build_warehouse
from tracehouse.settings import load_settings

GOLDEN_REVISION = "da915083d4c7c5e61aa3005e3d17ae488e0fc71c"

# The width a command's prose is wrapped to is the reader's (COLUMNS), not the test runner's:
# pytest-xdist gives its workers COLUMNS=80 and LINES=24, and a shell may export COLUMNS. A test
# that reads a command's output sees it as a pipe gets it (whole lines), unless it sets the width
# itself (tests/system/test_truthful_output.py runs every command at 80 columns).
for _variable in ("COLUMNS", "LINES"):
    os.environ.pop(_variable, None)

# `TESTS_EXHAUSTIVE=1 pytest ...`: the kill and interrupt tests (tests/system/test_crash_safety.py,
# tests/system/test_interrupts.py) try every moment of their plans, some thirty builds each, instead of
# one moment per build phase.
EXHAUSTIVE = os.environ.get("TESTS_EXHAUSTIVE") == "1"

# Property tests check behaviour, not speed: on a loaded 2-core machine generating examples can
# be slow, which Hypothesis would otherwise report as a failed health check.
hypothesis_settings.register_profile(
    "tracehouse", suppress_health_check=[HealthCheck.too_slow], deadline=None
)
hypothesis_settings.load_profile("tracehouse")


def build(source: Path | str, warehouse: Path, **settings: object) -> BuildResult:
    """Build with explicit settings, ignoring any TRACEHOUSE_* variables of the caller."""
    return build_warehouse(
        load_settings(environ={}, warehouse=warehouse, source=str(source), **settings)
    )


def cli_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the caller's TRACEHOUSE_* settings, plus ``env``."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")}
    environment.update(env or {})
    return environment


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The real `tracehouse` command in a separate process."""
    return subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", *args],
        capture_output=True,
        text=True,
        env=cli_environment(env),
        cwd=cwd,
        timeout=600,
    )


def run_cli_bytes(*args: str) -> subprocess.CompletedProcess[bytes]:
    """``run_cli``, its output as bytes (to see exactly what a terminal would be sent)."""
    return subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", *args],
        capture_output=True,
        env=cli_environment(),
        timeout=600,
    )


@pytest.fixture(scope="session")
def golden_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if SHARED is None:
        pytest.skip(MISSING_REASON)
    warehouse = tmp_path_factory.mktemp("golden") / "warehouse"
    build(GOLDEN_DIR / "dataset", warehouse, revision=GOLDEN_REVISION)
    return warehouse


def files_outside(root: Path, *owned: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every path below ``root`` except those below ``owned`` (the warehouse):
    compared before and after a command, it shows that nothing else was written or deleted."""
    state: dict[str, tuple[int, int]] = {}
    owned_resolved = [o.resolve() for o in owned]
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if (here / d).resolve() not in owned_resolved]
        for name in filenames + dirnames:
            path = here / name
            info = path.lstat()
            state[str(path.relative_to(root))] = (info.st_size, info.st_mtime_ns)
    return state


def one_error_line(result: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The one line a failed command printed on stderr (asserting its exit code and that there
    is exactly one line and no traceback)."""
    lines = result.stderr.splitlines()
    assert result.returncode == code and len(lines) == 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    return lines[0]
