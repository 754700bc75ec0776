"""A Hub build on a huggingface_hub cache (`TRACEHOUSE_HUB_CACHE` pointed at one repository's
folder of `$HF_HUB_CACHE`, as docs/using.md invites) reads the files it selects from it and
deletes nothing it did not create itself: the README, the files of folders it does not read,
`blob/` and the blobs no snapshot of it uses all stay as huggingface_hub left them."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixtures.hub_server import FakeHub, git_blob_oid
from tracehouse.demo import generate_dataset
from tracehouse.warehouse import Warehouse, read_table

REPO_ID = "flashinfer-ai/flashinfer-trace"
DATASET = f"hf://datasets/{REPO_ID}"
# Files of the commit that a build does not select (only definitions/, solutions/, workloads/,
# traces/ and root *.json / *.jsonl are read; blob/ only with --include-blobs).
NOT_SELECTED = {
    "README.md": b"# FlashInfer-Trace\n",
    ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
    "extras/notes.txt": b"kept by huggingface_hub\n",
    "extras/deep/more.jsonl": b'{"not": "a trace folder"}\n',
    "blob/workloads/gemm/w_0001.safetensors": hashlib.sha256(b"w").digest() * 64,
}

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[FakeHub]:
    folder = tmp_path / "upstream"
    generate_dataset(folder, seed=5, definitions=3, workloads_per_definition=3)
    with FakeHub(repo_id=REPO_ID) as server:
        server.commit({**FakeHub.read_folder(folder), **NOT_SELECTED})
        yield server


def huggingface_hub_cache(hub: FakeHub, repo_folder: Path) -> None:
    """The folder `huggingface_hub.snapshot_download` leaves for the whole commit: every body
    in blobs/<etag> (git blob sha1, LFS sha256), snapshots/<sha>/<path> a relative symlink to
    it, refs/main; plus a blob of an older commit that no snapshot uses any more."""
    sha = hub.head()
    for path, content in hub.files_at(sha).items():
        lfs = path.endswith(".safetensors")
        etag = hashlib.sha256(content).hexdigest() if lfs else git_blob_oid(content)
        blob = repo_folder / "blobs" / etag
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(content)
        link = repo_folder / "snapshots" / sha / path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo_folder / "blobs" / git_blob_oid(b"an older README\n")).write_bytes(b"an older README\n")
    (repo_folder / "refs").mkdir()
    (repo_folder / "refs" / "main").write_text(sha)


def entries(folder: Path) -> dict[str, str | bytes]:
    """Every file, link and folder below ``folder``: a link's target, a file's bytes."""
    found: dict[str, str | bytes] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[rel] = "-> " + os.readlink(path)
        elif path.is_dir():
            found[rel] = "folder"
        else:
            found[rel] = path.read_bytes()
    return found


def test_a_build_on_a_huggingface_hub_cache_deletes_nothing_of_it(
    hub: FakeHub, tmp_path: Path
) -> None:
    """It used to prune snapshots/<sha>/ down to its own selection: README.md, blob/ and
    extras/ of the user's huggingface_hub cache were gone after the build."""
    cache = tmp_path / "hf" / "hub" / "datasets--flashinfer-ai--flashinfer-trace"
    huggingface_hub_cache(hub, cache)
    before = entries(cache)
    snapshot = f"snapshots/{hub.head()}"
    assert f"{snapshot}/README.md" in before and f"{snapshot}/extras/notes.txt" in before
    hub.reset_counters()

    env = {"HF_ENDPOINT": hub.endpoint, "TRACEHOUSE_HUB_CACHE": str(cache)}
    for extra in ([], ["--include-blobs"], []):  # blob/ not selected, selected, no longer
        result = run_cli(
            "build", "--source", f"{DATASET}@main", "--warehouse", str(tmp_path / "w"), *extra,
            env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        after = entries(cache)
        kept = {rel: after.get(rel) for rel in before}
        assert kept == before, [rel for rel in before if after.get(rel) != before[rel]]
    assert sum(hub.body_transfers.values()) == 0  # every body came from huggingface_hub's blobs
    runs = read_table(Warehouse(tmp_path / "w").require_current(), "runs")
    assert runs.num_rows > 0
