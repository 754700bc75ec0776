"""Building from the Hub (a real HTTP server on 127.0.0.1 speaking the Hub's API) gives the
same warehouse as building from the same files on disk, with and without injected faults, and
refreshes transfer and re-parse only what changed upstream."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import build, files_outside, one_error_line, run_cli
from tests.fixtures.hub_server import FakeHub, Fault
from tests.fixtures.shared_data import GOLDEN_DIR, requires_shared
from tracehouse.ingest.plan import file_group
from tracehouse.warehouse import Warehouse, read_table

# `tracehouse build` against the fake Hub server, with its faults and deadlines.
pytestmark = pytest.mark.integration

URI = "hf://datasets/flashinfer-ai/flashinfer-trace@main"
HUB_NAME = "flashinfer-ai/flashinfer-trace"  # the source name a build of URI gets
COMPARED = (
    "definitions",
    "implementations",
    "workloads",
    "environments",
    "protocols",
    "correctness",
    "rejects",
    "run_rankings",
)


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub(repo_id="flashinfer-ai/flashinfer-trace") as server:
        server.commit(FakeHub.read_folder(GOLDEN_DIR / "dataset"))
        yield server


def rows(warehouse: Path, table: str) -> list[dict]:
    result = read_table(Warehouse(warehouse).require_current(), table).to_pylist()
    for row in result:
        row.pop("snapshot_id", None)  # names the source, which differs by design
    return result


def assert_same_warehouse(hub_built: Path, local_built: Path) -> None:
    assert len(rows(hub_built, "runs")) == 1490
    for table in ("runs", *COMPARED):
        assert rows(hub_built, table) == rows(local_built, table), table


@requires_shared
def test_hub_build_equals_local_build_with_and_without_faults(hub: FakeHub, tmp_path: Path) -> None:
    sha = hub.head()
    # The same data under the same source name (run ids are qualified by it): the Hub's
    # <org>/<name>, which a folder does not have.
    build(GOLDEN_DIR / "dataset", tmp_path / "local", revision=sha, source_name=HUB_NAME)

    result = run_cli(
        "build",
        "--source",
        URI,
        "--warehouse",
        str(tmp_path / "hub"),
        env={"HF_ENDPOINT": hub.endpoint},
    )
    assert result.returncode == 0, result.stderr
    assert_same_warehouse(tmp_path / "hub", tmp_path / "local")
    snapshot = pq.read_table(
        Warehouse(tmp_path / "hub").table_path("source_snapshots")
    ).to_pylist()[-1]
    # the uri is the dataset's location; the revision asked for and read are beside it
    assert (snapshot["uri"], snapshot["requested_revision"], snapshot["resolved_sha"]) == (
        URI.split("@", 1)[0],
        "main",
        sha,
    )

    hub.inject(
        Fault("status", endpoint="revision", status=503),
        Fault("status", endpoint="tree", status=500),
        Fault("status", endpoint="body", pattern="traces/*", status=429, retry_after="1"),
        Fault("reset", endpoint="body", pattern="traces/baseline/gemm/*", times=3),
        Fault("truncate", endpoint="body", pattern="definitions/*", times=2),
        Fault("status", endpoint="body", pattern="solutions/*", status=502, times=2),
    )
    faulty = run_cli(
        "build",
        "--source",
        URI,
        "--warehouse",
        str(tmp_path / "faulty"),
        env={"HF_ENDPOINT": hub.endpoint},
    )
    assert faulty.returncode == 0, faulty.stderr
    assert_same_warehouse(tmp_path / "faulty", tmp_path / "local")


@requires_shared
def test_refresh_transfers_and_reparses_only_what_changed(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    warehouse = tmp_path / "w"
    first = build(URI, warehouse)
    assert first.files_parsed == 100

    hub.reset_counters()
    again = build(URI, warehouse)
    assert again.up_to_date and sum(hub.body_transfers.values()) == 0

    trace = "traces/baseline/rmsnorm/fused_add_rmsnorm_h2048.jsonl"
    content = (GOLDEN_DIR / "dataset" / trace).read_bytes()
    hub.commit({trace: b"".join(content.splitlines(keepends=True)[:-1])})  # upstream drops a run
    hub.reset_counters()
    refreshed = build(URI, warehouse)
    assert dict(hub.body_transfers) == {trace: 1}
    # The changed file's group (its definition's files, every author's: ingest.plan) is
    # written again, but only the changed file is parsed: the others carry their rows over.
    group = [
        path
        for path in (GOLDEN_DIR / "dataset").rglob("*.jsonl")
        if file_group(path.relative_to(GOLDEN_DIR / "dataset").as_posix()) == file_group(trace)
    ]
    assert 1 < len(group) < 10
    assert (refreshed.files_parsed, refreshed.files_reused) == (1, 99)
    assert len(rows(warehouse, "runs")) == 1489

    build(URI, tmp_path / "scratch")
    for table in ("runs", *COMPARED):
        assert rows(warehouse, table) == rows(tmp_path / "scratch", table), table
    history = pq.read_table(Warehouse(warehouse).table_path("source_snapshots")).to_pylist()
    assert [h["resolved_sha"] for h in history] == [first.source.resolved_sha, hub.head()]  # type: ignore[union-attr]


def history(warehouse: Path, table: str) -> list[dict]:
    return read_table(Warehouse(warehouse).require_current(), table).to_pylist()


@requires_shared
def test_a_file_that_cannot_be_fetched_fails_the_build_and_publishes_nothing(
    hub: FakeHub, tmp_path: Path
) -> None:
    """Issue 16: HTTP 500s on one of two changed trace files used to publish the other half of
    the update, exit 0, and record the missing file's runs in run_history as gone."""
    warehouse = tmp_path / "w"
    env = {"HF_ENDPOINT": hub.endpoint, "TRACEHOUSE_HUB_TIMEOUT_S": "2"}
    first = run_cli("build", "--source", URI, "--warehouse", str(warehouse), env=env)
    assert first.returncode == 0, first.stderr
    generation = Warehouse(warehouse).require_current().name
    appearances = history(warehouse, "run_appearances")

    changed = {}
    for trace in (
        "traces/baseline/rmsnorm/fused_add_rmsnorm_h2048.jsonl",
        "traces/baseline/rmsnorm/rmsnorm_h128.jsonl",
    ):
        lines = (GOLDEN_DIR / "dataset" / trace).read_bytes().splitlines(keepends=True)
        changed[trace] = b"".join(lines[:-1])  # upstream drops the last run of each
    hub.commit(changed)
    broken = "traces/baseline/rmsnorm/rmsnorm_h128.jsonl"
    hub.inject(Fault("status", endpoint="body", pattern=broken, status=500, times=None))
    outside = files_outside(tmp_path, warehouse)
    # The whole fetch within 15 s: the 500s are given up after five attempts (0.5 + 1 + 2 + 4 s
    # of back-off) instead of eight (a minute of waiting that proves nothing more).
    failing_env = {**env, "TRACEHOUSE_HUB_FETCH_TIMEOUT_S": "15"}
    failed = run_cli("build", "--source", URI, "--warehouse", str(warehouse), env=failing_env)
    line = one_error_line(failed)
    assert broken in line and "HTTP 500" in line and "nothing was published" in line, line
    assert files_outside(tmp_path, warehouse) == outside
    assert Warehouse(warehouse).require_current().name == generation
    assert len(rows(warehouse, "runs")) == 1490
    assert history(warehouse, "run_disappearances") == []
    assert history(warehouse, "run_appearances") == appearances

    hub.clear_faults()
    hub.reset_counters()
    repaired = run_cli("build", "--source", URI, "--warehouse", str(warehouse), env=env)
    assert repaired.returncode == 0, repaired.stderr
    assert dict(hub.body_transfers) == {broken: 1}  # the other changed file stayed cached
    assert len(rows(warehouse, "runs")) == 1488
    gone = history(warehouse, "run_disappearances")
    assert len(gone) == 2  # exactly the two runs upstream dropped


@requires_shared
@pytest.mark.slow
def test_a_body_that_stalls_once_is_resumed_and_the_build_succeeds(
    hub: FakeHub, tmp_path: Path
) -> None:
    """A body that stopped arriving for 30 s used to fail the build: the file's one time
    budget (10 s + size / 256 KiB) was spent, and no attempt followed."""
    trace = "traces/baseline/rmsnorm/rmsnorm_h128.jsonl"
    # Half the body, then nothing for far longer than an attempt's budget (5 s here), once.
    hub.inject(Fault("stall", pattern=trace, fraction=0.5, delay_s=120))
    warehouse = tmp_path / "w"
    env = {"HF_ENDPOINT": hub.endpoint, "TRACEHOUSE_HUB_TIMEOUT_S": "5"}
    started = time.monotonic()
    result = run_cli("build", "--source", URI, "--warehouse", str(warehouse), env=env)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 100  # it did not wait for the stalled answer
    assert hub.body_transfers[trace] >= 2
    resumed = [r for r in hub.requests if r.target == trace and r.range]
    assert resumed and resumed[0].range.startswith("bytes="), hub.requests  # type: ignore[union-attr]
    assert len(rows(warehouse, "runs")) == 1490


@requires_shared
@pytest.mark.slow
def test_a_failed_build_into_a_new_folder_leaves_no_folder(hub: FakeHub, tmp_path: Path) -> None:
    """A failed build used to leave the folder it had created behind, holding `.build.lock`."""
    env = {"HF_ENDPOINT": hub.endpoint, "TRACEHOUSE_HUB_TIMEOUT_S": "5"}
    new = tmp_path / "new" / "warehouse"  # its parent is created by the build too
    missing = run_cli("build", "--source", f"{URI}-nope", "--warehouse", str(new), env=env)
    assert "RevisionNotFound" in one_error_line(missing)
    assert list(tmp_path.iterdir()) == []

    existing = tmp_path / "existing"  # a folder that was there before stays
    existing.mkdir()
    refused = run_cli("build", "--source", f"{URI}-nope", "--warehouse", str(existing), env=env)
    one_error_line(refused)
    assert existing.is_dir() and Warehouse(existing).current_generation() is None

    # Files already fetched are kept for the next build, as the error line says: the folder
    # then holds them (and nothing published).
    broken = "traces/baseline/rmsnorm/rmsnorm_h128.jsonl"
    hub.inject(Fault("status", endpoint="body", pattern=broken, status=404, times=None))
    failed = run_cli("build", "--source", URI, "--warehouse", str(new), env=env)
    assert "files already fetched stay cached" in one_error_line(failed)
    assert Warehouse(new).current_generation() is None
    assert any((new / "cache" / "hub" / "blobs").iterdir())
    hub.clear_faults()
    hub.reset_counters()
    built = run_cli("build", "--source", URI, "--warehouse", str(new), env=env)
    assert built.returncode == 0, built.stderr
    assert dict(hub.body_transfers) == {broken: 1}


def hostile_build(hub: FakeHub, tmp_path: Path, **env: str) -> tuple[str, float]:
    """A first build from a misbehaving Hub: the one line it ends with and how long it took,
    after checking that nothing was published and nothing outside the warehouse changed."""
    warehouse = tmp_path / "w"
    outside = files_outside(tmp_path, warehouse)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", "build", "--source", URI],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("TRACEHOUSE_", "HF_"))},
            "HF_ENDPOINT": hub.endpoint,
            "TRACEHOUSE_WAREHOUSE": str(warehouse),
            **env,
        },
    )
    elapsed = time.monotonic() - started
    line = one_error_line(result)
    assert Warehouse(warehouse).current_generation() is None
    assert files_outside(tmp_path, warehouse) == outside
    return line, elapsed


@requires_shared
def test_a_trickling_revision_answer_ends_with_the_metadata_deadline(
    hub: FakeHub, tmp_path: Path
) -> None:
    # A byte every 0.1 s keeps every read within its timeout: 100 s for the answer before.
    hub.inject(Fault("slow", endpoint="revision", times=None, pieces=1000, delay_s=0.1))
    line, elapsed = hostile_build(hub, tmp_path, TRACEHOUSE_HUB_TIMEOUT_S="2")
    assert "resolve hf://datasets/flashinfer-ai/flashinfer-trace" in line, line
    assert "still arriving" in line, line
    assert elapsed < 60, elapsed


@requires_shared
def test_an_endless_listing_is_cut_off(tmp_path: Path) -> None:
    from tracehouse.fetch.hub.listing import MAX_LISTING_PAGES

    with FakeHub(endless_pages=True, page_size=5) as hub:
        hub.commit(FakeHub.read_folder(GOLDEN_DIR / "dataset"))
        line, _ = hostile_build(hub, tmp_path)
        pages = sum(1 for r in hub.requests if r.kind == "tree")
    assert line.startswith("tracehouse build: list flashinfer-ai/flashinfer-trace@"), line
    assert "pages" in line or "giving up" in line, line
    assert pages <= MAX_LISTING_PAGES, pages


@requires_shared
def test_a_listed_size_does_not_choose_the_deadline(hub: FakeHub, tmp_path: Path) -> None:
    """A listing that says 2 GiB gave the body 8,202 s; the whole fetch has one deadline."""
    trace = "traces/baseline/rmsnorm/rmsnorm_h128.jsonl"
    content = (GOLDEN_DIR / "dataset" / trace).read_bytes()
    hub.commit({trace: content + b"\n"}, listing_overrides={trace: {"size": 2 << 30}})
    hub.inject(Fault("trickle", pattern=trace, times=None, pieces=50, delay_s=0.05))
    line, elapsed = hostile_build(
        hub, tmp_path, TRACEHOUSE_HUB_TIMEOUT_S="5", TRACEHOUSE_HUB_FETCH_TIMEOUT_S="4"
    )
    assert trace in line and "time ran out" in line, line
    assert elapsed < 120, elapsed


@requires_shared
@pytest.mark.parametrize("location", ["file:///etc/passwd", ""], ids=["file", "itself"])
def test_a_redirect_to_a_file_url_or_to_itself_fails_naming_the_file(
    hub: FakeHub, tmp_path: Path, location: str
) -> None:
    trace = "traces/baseline/rmsnorm/rmsnorm_h128.jsonl"
    hub.inject(Fault("redirect", pattern=trace, times=None, location=location))
    line, _ = hostile_build(hub, tmp_path)
    wanted = "UnsupportedProtocol" if location else "TooManyRedirects"
    assert trace in line and wanted in line and "nothing was published" in line, line


@requires_shared
def test_a_killed_download_leaves_no_part_files_after_the_next_build(
    hub: FakeHub, tmp_path: Path
) -> None:
    """`.part` files of a SIGKILLed fetch used to stay in the cache for ever."""
    warehouse = tmp_path / "w"
    tmp_dir = warehouse / "cache" / "hub" / "tmp"
    hub.inject(Fault("slow", pattern="traces/*", times=None, pieces=200, delay_s=0.5))
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TRACEHOUSE_", "HF_"))},
        "HF_ENDPOINT": hub.endpoint,
    }
    command = [sys.executable, "-m", "tracehouse.cli", "build", "--source", URI]
    killed = subprocess.Popen(
        [*command, "--warehouse", str(warehouse)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(1200):  # until a body is being written
            if tmp_dir.is_dir() and any(tmp_dir.glob("*.part")):
                break
            time.sleep(0.05)
        assert any(tmp_dir.glob("*.part")), "no download started"
    finally:
        killed.kill()
        killed.wait()
    assert any(tmp_dir.glob("*.part"))  # what a killed fetch leaves
    hub.clear_faults()
    again = run_cli(
        "build", "--source", URI, "--warehouse", str(warehouse), env={"HF_ENDPOINT": hub.endpoint}
    )
    assert again.returncode == 0, again.stderr
    assert list(tmp_dir.iterdir()) == []
    assert len(rows(warehouse, "runs")) == 1490
