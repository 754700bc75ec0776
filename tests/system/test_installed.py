"""Issue 30's acceptance: the installed package, used from where a user works.

From a folder that holds a `pipelines/` package of its own (one that fails when imported),
`import tracehouse`, `python -m tracehouse` and `tracehouse build` work, in the editable install
of this checkout and from the built wheel in a bare venv; Dagster loads the code location from
the installed wheel; the wheel ships the library, the code location and sql/, nothing else.
`dg check defs` and `dagster dev -w workspace.yaml` on the checkout are run by
tests/system/test_dagster.py and tests/unit/test_readme.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.system.conftest import uv_command

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_wheel_ships_the_library_the_code_location_and_the_sql_only(wheel: Path) -> None:
    def files(folder: str, pattern: str) -> set[str]:
        found = (REPO / folder).rglob(pattern)
        return {p.relative_to(REPO).as_posix() for p in found if p.is_file()}

    with zipfile.ZipFile(wheel) as archive:
        shipped = {name for name in archive.namelist() if ".dist-info/" not in name}
    modules = files("tracehouse", "*.py") | files("pipelines", "*.py")
    # sql/ lives at the top of the checkout (the design's layout); the wheel carries all of it
    # inside the library, where tracehouse/sql_files.py looks in an installation.
    sql = {"tracehouse/_sql/" + name.removeprefix("sql/") for name in files("sql", "*")}
    assert modules and sql
    assert shipped == modules | sql | {"tracehouse/py.typed"}, (
        sorted(shipped - modules - sql),
        sorted((modules | sql) - shipped),
    )


# A user's project with a `pipelines` package of its own, as many data projects have. It records
# that it was imported and raises (not ImportError, which a `try: import` could swallow).
USERS_PIPELINES = """
import pathlib
pathlib.Path(__file__).with_name("IMPORTED").write_text("the user's pipelines was imported")
raise RuntimeError("the user's own pipelines package was imported")
"""
# The issue's `.sql('select 1').fetchone()`, as DuckDB 2 spells it: its relations have no
# fetchone() any more (a relation keeps no result between calls), fetchall() is the same query.
CONNECT = "import tracehouse; print(tracehouse.connect('warehouse').sql('select 1').fetchall())"


def _users_folder(base: Path) -> Path:
    """A working directory holding its own failing `pipelines/` and a small demo dataset."""
    from tracehouse.demo import generate_dataset

    folder = base / "project"
    (folder / "pipelines").mkdir(parents=True)
    (folder / "pipelines" / "__init__.py").write_text(USERS_PIPELINES)
    generate_dataset(
        folder / "traces", definitions=2, workloads_per_definition=2, solutions_per_definition=2
    )
    return folder


def _bare_environment() -> dict[str, str]:
    """The caller's environment without anything that points Python or tracehouse elsewhere."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TRACEHOUSE_", "PYTHON", "VIRTUAL_ENV", "DAGSTER_"))
    }


@pytest.fixture(scope="module")
def bare_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv made by `python -m venv` holding the wheel and the dependencies its metadata
    declares, nothing else (so a dependency missing from pyproject.toml fails here).

    The versions are pinned to uv.lock's (`uv export`, as constraints, so only what the wheel
    asks for is installed), and uv installs them from its cache: about 5 s, where a cold cache
    downloads some 300 MB once. The project's site-packages are not reused through a `.pth`
    file: that would also hide an undeclared dependency."""
    base = tmp_path_factory.mktemp("bare")
    venv = base / "venv"
    made = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    constraints = base / "constraints.txt"
    exported = subprocess.run(
        [str(uv_command()), "export", "--project", str(REPO), "--frozen", "--no-dev",
         "--no-emit-project", "--no-hashes", "--quiet", "--output-file", str(constraints)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    installed = subprocess.run(
        [str(uv_command()), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
         str(wheel), "--constraints", str(constraints)],
        capture_output=True, text=True, timeout=900, env=_bare_environment(),
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    return venv


def _python_and_command(install: str, request: pytest.FixtureRequest) -> tuple[Path, Path]:
    if install == "editable":  # this checkout's .venv, as `make install` made it
        bin_dir = Path(sys.executable).parent
    else:
        bin_dir = request.getfixturevalue("bare_venv") / "bin"
    return bin_dir / "python", bin_dir / "tracehouse"


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("install", ["editable", "wheel"])
def test_tracehouse_works_beside_a_users_own_pipelines_package(
    install: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    python, command = _python_and_command(install, request)
    folder = _users_folder(tmp_path)
    environment = _bare_environment()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), capture_output=True, text=True, cwd=folder, env=environment, timeout=600
        )

    # The folder's own package is what `import pipelines` gives there: the trap is armed.
    trap = run(str(python), "-c", "import pipelines")
    assert trap.returncode == 1 and "the user's own pipelines" in trap.stderr, trap.stderr
    (folder / "pipelines" / "IMPORTED").unlink()

    built = run(str(command), "build", "--source", "traces", "--warehouse", "warehouse")
    assert built.returncode == 0, built.stderr
    assert (folder / "warehouse" / "tracehouse.duckdb").exists()
    connected = run(str(python), "-c", CONNECT)
    assert (connected.returncode, connected.stdout) == (0, "[(1,)]\n"), connected.stderr
    version = run(str(python), "-m", "tracehouse", "--version")
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert version.returncode == 0 and version.stdout.startswith(f"tracehouse {declared} ")
    assert not (folder / "pipelines" / "IMPORTED").exists()

    # Each is the install under test: the wheel's copy in the bare venv, or this checkout.
    where = run(str(python), "-c", "import tracehouse; print(tracehouse.__file__)").stdout
    expected = python.parent.parent if install == "wheel" else REPO
    assert Path(where.strip()).is_relative_to(expected), where


@pytest.mark.slow
@pytest.mark.integration
def test_dagster_loads_the_code_location_from_the_installed_wheel(
    bare_venv: Path, tmp_path: Path
) -> None:
    """`pipelines` is shipped so an installation can be loaded by Dagster without a checkout:
    the module workspace.yaml names, from a folder that holds nothing of the project's."""
    environment = _bare_environment() | {"DAGSTER_HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    validated = subprocess.run(
        [str(bare_venv / "bin" / "dagster"), "definitions", "validate",
         "-m", "pipelines.definitions"],
        capture_output=True, text=True, cwd=tmp_path, env=environment, timeout=600,
    )  # fmt: skip
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "Validation successful" in validated.stdout + validated.stderr


@pytest.mark.slow
@pytest.mark.integration
def test_the_workspace_dagster_dev_loads_is_valid(tmp_path: Path) -> None:
    """What `dagster dev -w workspace.yaml` loads, validated without starting the server (the
    server itself runs in tests/unit/test_readme.py, where Chromium is installed)."""
    environment = _bare_environment() | {"DAGSTER_HOME": str(tmp_path)}
    validated = subprocess.run(
        [str(Path(sys.executable).with_name("dagster")), "definitions", "validate",
         "-w", "workspace.yaml"],
        capture_output=True, text=True, cwd=REPO, env=environment, timeout=600,
    )  # fmt: skip
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert (
        "Validation successful for code location tracehouse" in validated.stdout + validated.stderr
    )
