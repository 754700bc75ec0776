"""What the system tests share: the wheel `uv build` makes of this checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def uv_command() -> Path:
    """uv beside this Python (in the .venv `make install` made), else on PATH."""
    uv = Path(sys.executable).parent / "uv"
    if not uv.exists():
        found = shutil.which("uv")
        if found is None:
            pytest.skip("uv is not installed in this environment")
        uv = Path(found)
    return uv


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `uv build` makes of this checkout, as a user would install it."""
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [str(uv_command()), "build", "--wheel", "--out-dir", str(out), str(REPO)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (path,) = out.glob("tracehouse-*.whl")
    return path
