"""Issue 16: a hostile dataset folder or hostile local file costs only itself, and every read has
a budget.

Each case is the real `tracehouse` command in a subprocess (with a timeout, so a hang fails the
test instead of stalling it) against files a user or a hostile dataset can hold: git metadata
that is a FIFO, a device, or a path outside the dataset; a baselines file that is a FIFO or
`/dev/zero`. Every build either succeeds with every record imported or ends with one line
naming the file, exit 2; nothing outside the warehouse changes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import files_outside, one_error_line
from tests.fixtures.hostile_corpus import write_plain_dataset
from tracehouse.warehouse import Warehouse, read_table

pytestmark = pytest.mark.integration

SHA = "0123456789abcdef0123456789abcdef01234567"
NO_REVISION = "note: no dataset revision"


def tracehouse(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEHOUSE_", "HF_"))}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd,
        timeout=180,  # a hang fails here instead of stalling the suite
    )


def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "dataset"
    write_plain_dataset(root, "A", files=2, lines=10)
    return root


def run_count(warehouse: Path) -> int:
    return read_table(Warehouse(warehouse).require_current(), "runs").num_rows


@pytest.fixture(scope="module")
def plain_runs(tmp_path_factory: pytest.TempPathFactory) -> int:
    """Runs of the dataset built without any .git folder."""
    place = tmp_path_factory.mktemp("plain")
    result = tracehouse("build", "--source", str(dataset(place)), "--warehouse", str(place / "w"))
    assert result.returncode == 0, result.stderr
    return run_count(place / "w")


def _head_fifo(git: Path, outside: Path) -> None:
    os.mkfifo(git / "HEAD")


def _ref_to_fifo(git: Path, outside: Path) -> None:
    (git / "refs" / "heads").mkdir(parents=True)
    os.mkfifo(git / "refs" / "heads" / "main")
    (git / "HEAD").write_text("ref: refs/heads/main\n")


def _ref_to_dev_zero(git: Path, outside: Path) -> None:
    (git / "HEAD").write_text("ref: /dev/zero\n")


def _ref_outside(git: Path, outside: Path) -> None:
    outside.write_text(SHA + "\n")
    (git / "HEAD").write_text(f"ref: {os.path.relpath(outside, git)}\n")


def _ref_link_outside(git: Path, outside: Path) -> None:
    outside.write_text(SHA + "\n")
    (git / "refs").mkdir()
    (git / "refs" / "main").symlink_to(outside)
    (git / "HEAD").write_text("ref: refs/main\n")


def _packed_refs_fifo(git: Path, outside: Path) -> None:
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    os.mkfifo(git / "packed-refs")


@pytest.mark.parametrize(
    "make_git",
    [
        _head_fifo,
        _ref_to_fifo,
        _ref_to_dev_zero,
        _ref_outside,
        _ref_link_outside,
        _packed_refs_fifo,
    ],
    ids=lambda f: f.__name__.strip("_"),
)
def test_git_metadata_is_read_only_from_regular_files_inside_the_dataset(
    tmp_path: Path, make_git, plain_runs: int
) -> None:
    """A FIFO hung the build, `ref: /dev/zero` grew without bound, a ref outside was read
    whole: each now means "no revision known", and the build imports everything."""
    root = dataset(tmp_path)
    (root / ".git").mkdir()
    make_git(root / ".git", tmp_path / "outside_ref")
    warehouse = tmp_path / "w"
    outside = files_outside(tmp_path, warehouse)
    result = tracehouse("build", "--source", str(root), "--warehouse", str(warehouse))
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert NO_REVISION in result.stdout  # nothing from outside or from a pipe became the revision
    assert run_count(warehouse) == plain_runs
    assert files_outside(tmp_path, warehouse) == outside


def test_a_git_checkout_still_gives_its_revision(tmp_path: Path) -> None:
    root = dataset(tmp_path)
    (root / ".git" / "refs" / "heads").mkdir(parents=True)
    (root / ".git" / "refs" / "heads" / "main").write_text(SHA + "\n")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    result = tracehouse("build", "--source", str(root), "--warehouse", str(tmp_path / "w"))
    assert result.returncode == 0, result.stderr
    assert NO_REVISION not in result.stdout
    snapshot = read_table(
        Warehouse(tmp_path / "w").require_current(), "source_snapshots"
    ).to_pylist()[-1]
    assert snapshot["resolved_sha"] == SHA


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_a_baselines_file_must_be_a_regular_file(tmp_path: Path, kind: str) -> None:
    """`--baselines FIFO` hung; `--baselines /dev/zero` ended in MemoryError."""
    root = dataset(tmp_path)
    warehouse = tmp_path / "w"
    first = tracehouse("build", "--source", str(root), "--warehouse", str(warehouse))
    assert first.returncode == 0, first.stderr
    generation = Warehouse(warehouse).require_current().name
    if kind == "fifo":
        baselines = tmp_path / "baselines.json"
        os.mkfifo(baselines)
    else:
        baselines = Path("/dev/zero")
    outside = files_outside(tmp_path, warehouse)
    result = tracehouse(
        "build", "--source", str(root), "--warehouse", str(warehouse), "--baselines", str(baselines)
    )
    line = one_error_line(result)
    assert f"baselines file {baselines}: is a pipe, socket or device" in line, line
    assert Warehouse(warehouse).require_current().name == generation
    assert files_outside(tmp_path, warehouse) == outside


def rejects_of(warehouse: Path) -> dict[str, tuple[str, str]]:
    rows = read_table(Warehouse(warehouse).require_current(), "rejects").to_pylist()
    return {row["file"]: (row["reason"], row["message"]) for row in rows}


def test_symbolic_link_loops_cost_only_themselves(tmp_path: Path, plain_runs: int) -> None:
    """A loop ended the build with `internal error: RuntimeError`."""
    root = dataset(tmp_path)
    traces = root / "traces"
    (traces / "self.jsonl").symlink_to("self.jsonl")
    (traces / "a.jsonl").symlink_to("b.jsonl")
    (traces / "b.jsonl").symlink_to("a.jsonl")
    (traces / "dir_a").symlink_to("dir_b")
    (traces / "dir_b").symlink_to("dir_a")
    (root / "workloads").symlink_to("workloads")  # a data folder that is a loop
    warehouse = tmp_path / "w"
    outside = files_outside(tmp_path, warehouse)
    result = tracehouse("build", "--source", str(root), "--warehouse", str(warehouse))
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert run_count(warehouse) == plain_runs
    found = rejects_of(warehouse)
    for name in ("traces/self.jsonl", "traces/a.jsonl", "traces/b.jsonl", "workloads"):
        assert found[name] == (
            "unreadable_file",
            "symbolic link: a loop of symbolic links; not followed",
        ), name
    assert files_outside(tmp_path, warehouse) == outside


def test_a_file_name_that_is_not_utf8_is_a_reject_naming_it(
    tmp_path: Path, plain_runs: int
) -> None:
    """Such a name ended the build with an error naming no file."""
    root = dataset(tmp_path)
    folder = next((root / "traces").rglob("part000.jsonl")).parent
    content = (folder / "part000.jsonl").read_bytes()
    os.mkdir(os.fsencode(folder) + b"/bad\xffdir")
    (Path(os.fsdecode(os.fsencode(folder) + b"/bad\xffdir")) / "x.jsonl").write_bytes(content)
    with open(os.fsencode(folder) + b"/bad\xfe.jsonl", "wb") as handle:
        handle.write(content)
    with open(os.fsencode(root) + b"/root\xfe.jsonl", "wb") as handle:
        handle.write(content)
    warehouse = tmp_path / "w"
    result = tracehouse("build", "--source", str(root), "--warehouse", str(warehouse))
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert run_count(warehouse) == plain_runs  # the rest imported, the badly named not read
    found = rejects_of(warehouse)
    rel = folder.relative_to(root).as_posix()
    for name in (f"{rel}/bad\\xfe.jsonl", f"{rel}/bad\\xffdir", "root\\xfe.jsonl"):
        assert found[name][0] == "invalid_file_name", (name, found)


def test_an_empty_warehouse_argument_touches_nothing(tmp_path: Path) -> None:
    """`--warehouse ''` built in the current folder, and its tidy-up deleted `.*.tmp` there."""
    root = dataset(tmp_path)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / ".notes.tmp").write_text("mine\n")
    (cwd / ".draft.1234.tmp").write_text("mine too\n")
    outside = files_outside(tmp_path)
    result = tracehouse("build", "--source", str(root), "--warehouse", "", cwd=cwd)
    assert "--warehouse '': must not be empty" in one_error_line(result)
    assert files_outside(tmp_path) == outside


def test_a_full_device_is_one_line_naming_the_warehouse(tmp_path: Path) -> None:
    """ENOSPC came out as `[Errno 28] Error writing bytes to file`, naming no path."""
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("a small file system needs mount (root): " + mounted.stderr.decode().strip())
    try:
        root = tmp_path / "dataset"
        write_plain_dataset(root, "A", files=12, lines=2000)  # about 15 MB of traces
        warehouse = small / "w"
        result = tracehouse("build", "--source", str(root), "--warehouse", str(warehouse))
        line = one_error_line(result)
        assert "No space left on device" in line and str(warehouse) in line, line
        assert Warehouse(warehouse).current_generation() is None
    finally:
        subprocess.run(["umount", str(small)], check=True)
