"""The published `<warehouse>/tracehouse.duckdb` is read-only to other clients (issue 25).

Once, a bare `duckdb.connect` of it (DuckDB's default opens read-write) could `DROP VIEW
regressions`, and the view was gone for everyone who opened the file after. The file is now
mode 0444. Root is not held to file modes, so where the tests run as root, the clients run
with the capabilities that let root ignore them dropped (as any user's process is): a real
permission check, not a mock.
"""

from __future__ import annotations

import ctypes
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tracehouse.demo import generate_dataset
from tracehouse.warehouse import DUCKDB_FILE, Warehouse

pytestmark = pytest.mark.integration

PR_CAPBSET_DROP = 24  # <linux/prctl.h>
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2  # <linux/capability.h>
REVISIONS = [f"{n:040x}" for n in range(1, 4)]


def _as_an_ordinary_user() -> None:
    """preexec_fn: root without the capabilities that let it ignore file modes."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")} | (env or {}),
        preexec_fn=_as_an_ordinary_user,
        timeout=600,
    )


def tracehouse(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real `tracehouse` command, run as an ordinary user."""
    return _run([sys.executable, "-m", "tracehouse.cli", *args], env)


def duckdb_session(database: Path, *statements: str, read_only: bool = False) -> str:
    """A bare DuckDB client (DuckDB's default: read-write), as an ordinary user: prints the
    last statement's first value, or the error that stopped it."""
    script = (
        "import sys, duckdb\n"
        "try:\n"
        f"    c = duckdb.connect(sys.argv[1], read_only={read_only})\n"
        "    for s in sys.argv[2:]:\n"
        "        r = c.execute(s).fetchall()\n"
        "    c.close()\n"
        "    print(r[0][0] if r else 'ok')\n"
        "except duckdb.Error as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    result = _run([sys.executable, "-c", script, str(database), *statements])
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("published-file")
    generate_dataset(root / "demo", seed=5, definitions=3, workloads_per_definition=3)
    try:
        probe = _run(["true"])
    except subprocess.SubprocessError as unable:
        pytest.skip(f"cannot drop root's file capabilities here: {unable}")
    assert probe.returncode == 0
    built = tracehouse(
        "build", "--source", str(root / "demo"), "--warehouse", str(root / "wh"),
        "--revision", REVISIONS[0],
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    return root / "wh"


def test_a_bare_duckdb_session_cannot_drop_a_view_of_the_published_file(warehouse: Path) -> None:
    published = warehouse / DUCKDB_FILE
    dropped = duckdb_session(published, "DROP VIEW regressions")
    assert "Permission denied" in dropped, dropped
    assert stat.S_IMODE(published.stat().st_mode) == 0o444
    # the view is still there for the next client, read-only as the docs say to open it
    count = "SELECT count(*) FROM regressions"
    assert duckdb_session(published, count, read_only=True).isdigit()
    queried = tracehouse("query", count, "--warehouse", str(warehouse), "--format", "csv")
    assert queried.returncode == 0, queried.stderr
    assert queried.stdout.split()[-1].isdigit()


def test_ones_own_tables_go_into_ones_own_file_beside_it(warehouse: Path, tmp_path: Path) -> None:
    """docs/using.md: ATTACH the published file READ_ONLY from a DuckDB file of one's own."""
    mine = tmp_path / "mine.duckdb"
    published = warehouse / DUCKDB_FILE
    made = duckdb_session(
        mine,
        f"ATTACH '{published}' AS tracehouse (READ_ONLY)",
        "CREATE TABLE my_runs AS SELECT run_id FROM tracehouse.runs LIMIT 3",
        "SELECT count(*) FROM my_runs",
    )
    assert made == "3", made
    refused = duckdb_session(
        mine, f"ATTACH '{published}' AS tracehouse (READ_ONLY)", "DROP VIEW tracehouse.regressions"
    )
    assert "read-only" in refused.lower(), refused


def test_a_rebuild_replaces_the_read_only_file_and_removes_old_ones(warehouse: Path) -> None:
    """Builds, run as an ordinary user, publish a new generation over the sealed file and
    remove the ones beyond keep_generations (their sealed files included)."""
    first = Warehouse(warehouse).require_current()
    for revision in REVISIONS[1:]:
        built = tracehouse(
            "build", "--source", str(warehouse.parent / "demo"), "--warehouse", str(warehouse),
            "--revision", revision, env={"TRACEHOUSE_KEEP_GENERATIONS": "1"},
        )  # fmt: skip
        assert built.returncode == 0, built.stderr
    current = Warehouse(warehouse).require_current()
    assert current != first and not first.exists()
    assert list((warehouse / "generations").iterdir()) == [current]
    assert stat.S_IMODE((current / DUCKDB_FILE).stat().st_mode) == 0o444
    revision = duckdb_session(
        warehouse / DUCKDB_FILE, "SELECT max(resolved_sha) FROM source_snapshots", read_only=True
    )
    assert revision == REVISIONS[-1]
