"""Building from the Hub (a real HTTP server on 127.0.0.1 speaking the Hub's API) gives the
same warehouse as building from the same files on disk, with and without injected faults, and
refreshes transfer and re-parse only what changed upstream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.warehouse import Warehouse, read_table
from tests.conftest import build, run_cli
from tests.hub_server import FakeHub, Fault
from tests.shared_data import GOLDEN_DIR, requires_shared

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
    assert (refreshed.files_parsed, refreshed.files_reused) == (1, 99)
    assert len(rows(warehouse, "runs")) == 1489

    build(URI, tmp_path / "scratch")
    for table in ("runs", *COMPARED):
        assert rows(warehouse, table) == rows(tmp_path / "scratch", table), table
    history = pq.read_table(Warehouse(warehouse).table_path("source_snapshots")).to_pylist()
    assert [h["resolved_sha"] for h in history] == [first.source.resolved_sha, hub.head()]  # type: ignore[union-attr]
