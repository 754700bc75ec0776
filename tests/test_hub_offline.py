"""Offline Hub builds (issue 21): with every file of a revision in the cache, `HF_HUB_OFFLINE=1`
or `--offline` builds it without a single request, the Hub's server stopped, into the same
warehouse; the cache keeps huggingface_hub's layout and its links are never rewritten."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.demo import generate_dataset
from pipelines.warehouse import Warehouse, read_table
from tests.conftest import run_cli
from tests.hub_server import FakeHub

REPO_ID = "flashinfer-ai/flashinfer-trace"
DATASET = f"hf://datasets/{REPO_ID}"
COMPARED = (
    "definitions",
    "implementations",
    "workloads",
    "environments",
    "runs",
    "correctness",
    "rejects",
    "run_rankings",
    "trace_lines",
)

pytestmark = pytest.mark.integration


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[FakeHub]:
    folder = tmp_path / "upstream"
    generate_dataset(folder, seed=5, definitions=3, workloads_per_definition=3)
    with FakeHub(repo_id=REPO_ID) as server:
        server.commit(FakeHub.read_folder(folder))
        yield server


def _rows(warehouse: Path) -> dict[str, list[dict[str, object]]]:
    """Every row of the compared tables but its snapshot id, which names the revision as asked
    for (``main`` or the sha), by design."""
    generation = Warehouse(warehouse).require_current()
    tables = {table: read_table(generation, table).to_pylist() for table in COMPARED}
    for rows in tables.values():
        for row in rows:
            row.pop("snapshot_id", None)
    return tables


def _build(*args: str, env: dict[str, str]) -> None:
    result = run_cli("build", *args, env=env)
    assert result.returncode == 0, result.stderr


def _as_huggingface_hub_links(snapshot: Path) -> list[Path]:
    """Replace every file of a snapshot by the relative symlink huggingface_hub makes
    (snapshots/<sha>/<path> -> ../../blobs/<etag>); returns the links."""
    blobs = snapshot.parent.parent / "blobs"
    by_inode = {path.stat().st_ino: path for path in blobs.iterdir()}
    links = []
    for path in sorted(p for p in snapshot.rglob("*") if p.is_file()):
        blob = by_inode[path.stat().st_ino]
        path.unlink()
        path.symlink_to(os.path.relpath(blob, path.parent))
        links.append(path)
    return links


def test_offline_builds_the_same_warehouse_from_the_cache_without_a_request(
    hub: FakeHub, tmp_path: Path
) -> None:
    online = tmp_path / "online"
    _build(
        "--source", f"{DATASET}@main", "--warehouse", str(online),
        env={"HF_ENDPOINT": hub.endpoint},
    )  # fmt: skip
    cache = online / "cache" / "hub"
    sha = hub.head()
    assert (cache / "refs" / "main").read_text() == sha  # huggingface_hub's refs/main
    expected = _rows(online)
    assert expected["runs"]

    # HF_HUB_OFFLINE=1, a branch name: the commit from refs/, the server up but never asked
    hub.reset_counters()
    # another warehouse on the first one's cache (TRACEHOUSE_HUB_CACHE)
    shared = {"HF_ENDPOINT": hub.endpoint, "TRACEHOUSE_HUB_CACHE": str(cache)}
    by_branch = tmp_path / "by-branch"
    _build(
        "--source", f"{DATASET}@main", "--warehouse", str(by_branch),
        env={**shared, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert hub.requests == []
    assert _rows(by_branch) == expected

    # the server stopped, --offline, a pinned commit, and the snapshot laid out with
    # huggingface_hub's symlinks into blobs/: built from them, and they are left as they are
    links = _as_huggingface_hub_links(cache / "snapshots" / sha)
    targets = {link: os.readlink(link) for link in links}
    hub.stop()
    pinned = tmp_path / "pinned"
    _build(
        "--source", f"{DATASET}@{sha}", "--warehouse", str(pinned), "--offline", env=shared,
    )  # fmt: skip
    assert _rows(pinned) == expected
    assert {link: os.readlink(link) for link in links} == targets


def test_offline_without_the_revision_in_the_cache_is_one_line(
    hub: FakeHub, tmp_path: Path
) -> None:
    env = {"HF_ENDPOINT": hub.endpoint, "TRACEHOUSE_HUB_CACHE": str(tmp_path / "cache")}
    # nothing fetched yet: no refs/main
    missing = run_cli(
        "build", "--source", f"{DATASET}@main", "--warehouse", str(tmp_path / "w"), "--offline",
        env=env,
    )  # fmt: skip
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1, missing.stderr
    assert "offline" in missing.stderr and "refs/main" in missing.stderr
    # a commit that was never fetched
    never = "f" * 40
    unknown = run_cli(
        "build", "--source", f"{DATASET}@{never}", "--warehouse", str(tmp_path / "w"),
        env={**env, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert unknown.returncode == 2
    assert unknown.stderr.count("\n") == 1, unknown.stderr
    assert never in unknown.stderr and "never fetched" in unknown.stderr
    assert hub.requests == []
    assert not (tmp_path / "w" / "current").exists()
