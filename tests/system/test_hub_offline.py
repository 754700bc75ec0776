"""Offline Hub builds (issue 21): with every file of a revision in the cache, `HF_HUB_OFFLINE=1`
or `--offline` builds it without a single request, the Hub's server stopped, into the same
warehouse; the cache keeps huggingface_hub's layout and its links are never rewritten."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import one_error_line, run_cli
from tests.fixtures.hub_server import FakeHub
from tracehouse.demo import generate_dataset
from tracehouse.warehouse import Warehouse, read_table

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


# ---- issue 28: a cache huggingface_hub wrote, HF_HOME, the Hub down, a 401 -----------------


def _snapshot_download(hub: FakeHub, hf_home: Path, revision: str = "main") -> Path:
    """huggingface_hub's own snapshot_download from the fake Hub into ``hf_home``, in its own
    process (huggingface_hub reads HF_ENDPOINT and HF_HOME once, when it is imported)."""
    code = (
        "import sys; from huggingface_hub import snapshot_download; "
        f"print(snapshot_download({REPO_ID!r}, repo_type='dataset', revision={revision!r}))"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRACEHOUSE_"))},
        "HF_ENDPOINT": hub.endpoint,
        "HF_HOME": str(hf_home),
        "HF_HUB_DISABLE_XET": "1",  # the fake Hub speaks plain HTTP downloads only
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return Path(result.stdout.strip())


def _repo_folder(hf_home: Path) -> Path:
    return hf_home / "hub" / ("datasets--" + REPO_ID.replace("/", "--"))


@pytest.fixture
def expected_rows(hub: FakeHub, tmp_path: Path) -> dict[str, list[dict[str, object]]]:
    """The tables of an online build with a cache of tracehouse's own."""
    reference = tmp_path / "reference"
    _build(
        "--source", f"{DATASET}@main", "--warehouse", str(reference),
        env={"HF_ENDPOINT": hub.endpoint, "TRACEHOUSE_HUB_CACHE": str(tmp_path / "own-cache")},
    )  # fmt: skip
    return _rows(reference)


def _no_hf_variables() -> dict[str, str]:
    """The variables that would point a build at a user's own Hub cache or token, blanked."""
    return {"HF_HOME": "", "HF_HUB_CACHE": "", "HF_TOKEN": "", "HF_HUB_OFFLINE": ""}


@pytest.mark.slow  # several builds
def test_offline_builds_from_the_cache_huggingface_hub_wrote(
    hub: FakeHub, tmp_path: Path, expected_rows: dict[str, list[dict[str, object]]]
) -> None:
    hf_home = tmp_path / "hf-home"
    snapshot = _snapshot_download(hub, hf_home)
    sha = hub.head()
    repo = _repo_folder(hf_home)
    assert snapshot == repo / "snapshots" / sha
    assert (repo / "refs" / "main").read_text() == sha
    links = {p: os.readlink(p) for p in snapshot.rglob("*") if p.is_symlink()}
    assert links and not (repo / "manifests" / f"{sha}.json").exists()

    hub.reset_counters()
    env = {**_no_hf_variables(), "HF_ENDPOINT": hub.endpoint, "HF_HOME": str(hf_home)}
    for revision in (sha, "main"):  # pinned, and the branch through huggingface_hub's refs/main
        warehouse = tmp_path / f"offline-{revision}"
        _build(
            "--source", f"{DATASET}@{revision}", "--warehouse", str(warehouse),
            env={**env, "HF_HUB_OFFLINE": "1"},
        )  # fmt: skip
        assert _rows(warehouse) == expected_rows
        assert not (warehouse / "cache" / "hub").exists()  # read in place, nothing copied
    assert hub.requests == []
    assert {p: os.readlink(p) for p in snapshot.rglob("*") if p.is_symlink()} == links

    # a body another tool wrote is hashed against its blob's name: one altered byte is refused
    blob = repo / "blobs" / os.path.basename(next(iter(links.values())))
    body = bytearray(blob.read_bytes())
    body[0] ^= 1
    blob.chmod(0o644)
    blob.write_bytes(bytes(body))
    altered = run_cli(
        "build", "--source", f"{DATASET}@{sha}", "--warehouse", str(tmp_path / "altered"),
        env={**env, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    line = one_error_line(altered)
    assert "offline" in line and blob.name in line
    assert hub.requests == []


@pytest.mark.slow  # several builds
def test_offline_reads_huggingface_hub_snapshot_links_when_it_wrote_no_tree_listing(
    hub: FakeHub, tmp_path: Path, expected_rows: dict[str, list[dict[str, object]]]
) -> None:
    """Versions of huggingface_hub before its trees/ cache leave only refs/, blobs/ and the
    snapshot's symlinks: those are the listing."""
    hf_home = tmp_path / "hf-home"
    _snapshot_download(hub, hf_home)
    sha = hub.head()
    (_repo_folder(hf_home) / "trees" / f"{sha}.json").unlink()
    hub.reset_counters()
    warehouse = tmp_path / "offline"
    _build(
        "--source", f"{DATASET}@{sha}", "--warehouse", str(warehouse),
        env={**_no_hf_variables(), "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1",
             "HF_ENDPOINT": hub.endpoint},
    )  # fmt: skip
    assert _rows(warehouse) == expected_rows
    assert hub.requests == []


@pytest.mark.slow  # several builds
def test_hf_home_is_the_cache_so_nothing_is_downloaded_twice(hub: FakeHub, tmp_path: Path) -> None:
    hf_home = tmp_path / "hf-home"
    env = {**_no_hf_variables(), "HF_ENDPOINT": hub.endpoint, "HF_HOME": str(hf_home)}
    # no tracehouse cache: the first build downloads into huggingface_hub's standard folder
    _build("--source", f"{DATASET}@main", "--warehouse", str(tmp_path / "first"), env=env)
    assert hub.body_transfers and not (tmp_path / "first" / "cache" / "hub").exists()
    repo = _repo_folder(hf_home)
    assert (repo / "refs" / "main").read_text() == hub.head()
    hub.reset_counters()
    _build("--source", f"{DATASET}@main", "--warehouse", str(tmp_path / "second"), env=env)
    assert hub.body_transfers == {}

    # HF_HUB_CACHE wins over HF_HOME; after huggingface_hub's snapshot_download there, a build
    # downloads no body either
    hub_cache = tmp_path / "hub-cache"
    _snapshot_download(hub, tmp_path / "elsewhere")
    (tmp_path / "elsewhere" / "hub").rename(hub_cache)
    hub.reset_counters()
    _build(
        "--source", f"{DATASET}@main", "--warehouse", str(tmp_path / "third"),
        env={**env, "HF_HUB_CACHE": str(hub_cache)},
    )  # fmt: skip
    assert hub.body_transfers == {}
    assert [r.kind for r in hub.requests if r.kind in ("resolve", "cdn")] == []


@pytest.mark.slow  # several builds
def test_a_pinned_build_uses_the_cache_with_one_note_when_the_hub_is_down(
    hub: FakeHub, tmp_path: Path
) -> None:
    sha = hub.head()
    env = {
        **_no_hf_variables(),
        "HF_ENDPOINT": hub.endpoint,
        "TRACEHOUSE_HUB_CACHE": str(tmp_path / "cache"),
        "TRACEHOUSE_HUB_TIMEOUT_S": "1",  # an unreachable Hub is given up on soon
    }
    _build("--source", f"{DATASET}@main", "--warehouse", str(tmp_path / "online"), env=env)
    expected = _rows(tmp_path / "online")
    hub.stop()  # no offline switch: the build tries the Hub, which does not answer

    for revision in (sha, "main"):  # pinned, and a branch whose commit the cache recorded
        warehouse = tmp_path / f"down-{revision}"
        result = run_cli(
            "build", "--source", f"{DATASET}@{revision}", "--warehouse", str(warehouse), env=env
        )
        assert result.returncode == 0, result.stderr
        notes = [line for line in result.stdout.splitlines() if "could not be reached" in line]
        assert len(notes) == 1, result.stdout
        assert f"the cached snapshot of {sha} was used" in notes[0]
        assert _rows(warehouse) == expected

    # a commit the cache does not hold still fails, in one line
    never = "e" * 40
    missing = run_cli(
        "build", "--source", f"{DATASET}@{never}", "--warehouse", str(tmp_path / "w"), env=env
    )
    assert "giving up" in one_error_line(missing)


def test_a_401_says_how_to_log_in(tmp_path: Path) -> None:
    folder = tmp_path / "upstream"
    generate_dataset(folder, seed=5, definitions=1, workloads_per_definition=1)
    with FakeHub(repo_id=REPO_ID, token="the-right-token") as private:
        private.commit(FakeHub.read_folder(folder))
        env = {
            **_no_hf_variables(),
            "HF_ENDPOINT": private.endpoint,
            "HF_HOME": str(tmp_path / "hf-home"),  # no token file there
        }
        result = run_cli("build", "--source", f"{DATASET}@main", "--warehouse", str(tmp_path / "w"),
                         env=env)  # fmt: skip
    line = one_error_line(result)
    assert "401" in line and "hf auth login" in line and "HF_TOKEN" in line


def test_offline_refuses_a_ref_that_holds_no_commit_sha(hub: FakeHub, tmp_path: Path) -> None:
    """refs/<branch> names the files read next: anything but a sha there is one line."""
    cache = tmp_path / "cache"
    (cache / "refs").mkdir(parents=True)
    (cache / "refs" / "main").write_text("../../elsewhere")
    result = run_cli(
        "build", "--source", f"{DATASET}@main", "--warehouse", str(tmp_path / "w"), "--offline",
        env={"HF_ENDPOINT": hub.endpoint, "TRACEHOUSE_HUB_CACHE": str(cache)},
    )  # fmt: skip
    assert "refs/main" in one_error_line(result) and "no 40-hex commit sha" in result.stderr
    assert hub.requests == []
