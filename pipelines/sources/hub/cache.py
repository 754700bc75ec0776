"""The snapshot cache: ``fetch_dataset`` makes ``cache_dir/snapshots/<sha>/`` hold a dataset at
one commit, from verified blobs shared by every snapshot.

Cache layout (``cache_dir``)::

    blobs/<oid>              verified file bodies, read-only; oid = git blob sha1 (40 hex) for
                             regular files, LFS sha256 (64 hex) for LFS files
    snapshots/<sha>/<path>   the dataset at commit <sha>: hard links to blobs/ (copies where
                             linking fails); contains exactly the selected, verified files
    manifests/<sha>.json     the selected listing, rejected and failed files of the last fetch
    locks/<sha>.lock         flock taken while a snapshot folder is pruned and re-linked
    tmp/                     in-flight downloads (``*.part``) and links; renamed into place
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

from pipelines.files import replace_atomically
from pipelines.sources.hub.client import (
    RetryPolicy,
    auth_headers,
    hub_endpoint,
    hub_token,
    make_client,
)
from pipelines.sources.hub.download import (
    DownloadJob,
    blob_is_valid,
    download,
    sweep,
    temporary_in,
)
from pipelines.sources.hub.listing import (
    FailedRemoteFile,
    RejectedRemoteFile,
    RemoteFile,
    file_list_digest,
    list_selected,
    resolve,
)
from pipelines.sources.hub.uri import HubDatasetRef, as_ref
from pipelines.sources.safety import safe_join


@dataclass
class HubSnapshot:
    """What one ``fetch_dataset`` call produced; ``root`` is the folder the builder reads."""

    root: Path  # cache_dir/snapshots/<resolved_sha>
    source_uri: str  # canonical hf:// URI of the reference asked for
    repo_id: str
    requested_revision: str  # branch, tag or commit as asked
    resolved_sha: str  # the commit that was listed and downloaded
    fetched_at: dt.datetime  # UTC, when the fetch finished
    files: int  # files in the snapshot (selected, safe and verified)
    bytes: int  # their total size
    file_list_digest: str  # "sha256:..." over the selected listing, see file_list_digest()
    transferred_files: list[str] = field(default_factory=list)  # downloaded: one path per new oid
    transferred_bytes: int = 0  # body bytes received over the network, retries included
    rejected: list[RejectedRemoteFile] = field(default_factory=list)  # unsafe/malformed entries
    failed: list[FailedRemoteFile] = field(default_factory=list)  # selected but not fetched
    include_blobs: bool = False
    manifest_path: Path | None = None

    @property
    def complete(self) -> bool:
        """True when every selected file is in the snapshot."""
        return not self.failed


ProgressCallback = Callable[[int, int, int, int], None]
"""``progress(done_files, total_files, done_bytes, total_bytes)``; called in the calling thread."""


def snapshot_root(cache_dir: Path, sha: str) -> Path:
    return Path(cache_dir) / "snapshots" / sha


@contextlib.contextmanager
def _snapshot_lock(cache_dir: Path, sha: str) -> Iterator[None]:
    """Serialise materialising one snapshot between processes sharing ``cache_dir``.

    Blobs need no lock (unique temp names, atomic rename of identical content).
    """
    lock_dir = cache_dir / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{sha}.lock", "a+b") as fh:
        if fcntl is not None:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _link_or_copy(blob: Path, dest: Path, tmp_dir: Path) -> None:
    try:
        if dest.is_file() and not dest.is_symlink() and os.path.samefile(blob, dest):
            return
    except OSError:
        pass

    def link(temporary: Path) -> None:
        try:
            os.link(blob, temporary)
        except OSError:
            shutil.copyfile(blob, temporary)

    replace_atomically(dest, link, temporary=temporary_in(tmp_dir, "link"))


def _prune(root: Path, keep: set[str]) -> None:
    """Remove everything below ``root`` that is not a kept file (without following links)."""
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        current = Path(dirpath)
        rel_dir = current.relative_to(root).as_posix()
        for name in filenames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if rel not in keep:
                (current / name).unlink()
        for name in dirnames:
            sub = current / name
            if sub.is_symlink():
                sub.unlink()
            elif not any(sub.iterdir()):
                sub.rmdir()


def fetch_dataset(
    ref: HubDatasetRef | str,
    cache_dir: Path,
    *,
    include_blobs: bool = False,
    endpoint: str | None = None,
    token: str | bool | None = None,
    max_concurrency: int = 4,
    progress: ProgressCallback | None = None,
    retry: RetryPolicy | None = None,
    verify_cached: bool = False,
    client: httpx.Client | None = None,
) -> HubSnapshot:
    """Make ``cache_dir/snapshots/<sha>/`` hold the dataset at the commit ``ref`` resolves to.

    The revision is resolved first and only that sha is used afterwards. Bodies already in
    ``cache_dir/blobs`` (same oid, same size; rehashed too with ``verify_cached``) are not
    downloaded again. Unsafe or malformed listing entries end up in ``rejected``, files that
    could not be fetched and verified in ``failed``; neither is written into the snapshot, and
    neither stops the other files. Raises HubError (or a subclass) only when the revision or
    the listing cannot be read.
    """
    ref = as_ref(ref)
    policy = retry or RetryPolicy()
    base = hub_endpoint(endpoint)
    headers = auth_headers(hub_token(token))
    workers = max(1, int(max_concurrency))
    cache_dir = Path(cache_dir)
    own_client = client is None
    http = client if client is not None else make_client(policy, workers + 1)
    started = time.monotonic()
    try:
        # The revision and every listing page share one deadline, and the whole fetch another.
        listed_by = started + policy.deadline_s
        sha = resolve(http, base, ref, headers, policy, listed_by)
        files, rejected = list_selected(
            http,
            base,
            ref.repo_id,
            sha,
            include_blobs=include_blobs,
            headers=headers,
            policy=policy,
            deadline=listed_by,
        )
        blobs_dir, tmp_dir = cache_dir / "blobs", cache_dir / "tmp"
        root = snapshot_root(cache_dir, sha)
        for folder in (blobs_dir, tmp_dir, root, cache_dir / "manifests"):
            folder.mkdir(parents=True, exist_ok=True)
        sweep(tmp_dir)  # what a killed fetch left: its bodies are fetched again anyway

        by_oid: dict[str, list[RemoteFile]] = {}
        for f in files:
            by_oid.setdefault(f.oid, []).append(f)
        total_files, total_bytes = len(files), sum(f.size for f in files)
        done_files = done_bytes = 0
        failed: list[FailedRemoteFile] = []
        transferred: list[str] = []
        transferred_bytes = 0
        if progress:
            progress(0, total_files, 0, total_bytes)

        pending: list[RemoteFile] = []
        for oid, group in by_oid.items():
            if blob_is_valid(blobs_dir / oid, group[0], verify_cached):
                done_files += len(group)
                done_bytes += sum(f.size for f in group)
            else:
                (blobs_dir / oid).unlink(missing_ok=True)
                pending.append(group[0])
        if progress and done_files:
            progress(done_files, total_files, done_bytes, total_bytes)

        job = DownloadJob(
            http,
            base,
            ref.repo_id,
            sha,
            headers,
            policy,
            blobs_dir,
            tmp_dir,
            deadline=started + policy.fetch_deadline_s,
        )
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hub-fetch")
        futures = [pool.submit(download, job, f) for f in pending]
        try:
            for future in as_completed(futures):
                outcome = future.result()
                group = by_oid[outcome.file.oid]
                transferred_bytes += outcome.received
                if outcome.ok:
                    transferred.append(outcome.file.path)
                else:
                    failed.extend(
                        RejectedRemoteFile(f.path, outcome.reason, outcome.message) for f in group
                    )
                done_files += len(group)
                done_bytes += sum(f.size for f in group)
                if progress:
                    progress(done_files, total_files, done_bytes, total_bytes)
        except BaseException:  # e.g. Ctrl-C: start no queued download, wait for no running one
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
    finally:
        if own_client:
            http.close()

    failed_paths = {f.path for f in failed}
    present = [f for f in files if f.path not in failed_paths]
    with _snapshot_lock(cache_dir, sha):
        _prune(root, {f.path for f in present})
        for f in present:
            dest = safe_join(root, f.path)
            dest.parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(blobs_dir / f.oid, dest, tmp_dir)

    snapshot = HubSnapshot(
        root=root,
        source_uri=ref.uri,
        repo_id=ref.repo_id,
        requested_revision=ref.revision,
        resolved_sha=sha,
        fetched_at=dt.datetime.now(dt.UTC),
        files=len(present),
        bytes=sum(f.size for f in present),
        file_list_digest=file_list_digest(files),
        transferred_files=sorted(transferred),
        transferred_bytes=transferred_bytes,
        rejected=sorted(rejected, key=lambda r: (r.path, r.reason)),
        failed=sorted(failed, key=lambda r: r.path),
        include_blobs=include_blobs,
        manifest_path=cache_dir / "manifests" / f"{sha}.json",
    )
    _write_manifest(snapshot, files, tmp_dir)
    return snapshot


def _write_manifest(snapshot: HubSnapshot, files: list[RemoteFile], tmp_dir: Path) -> None:
    assert snapshot.manifest_path is not None
    document = {
        "source_uri": snapshot.source_uri,
        "repo_id": snapshot.repo_id,
        "requested_revision": snapshot.requested_revision,
        "resolved_sha": snapshot.resolved_sha,
        "fetched_at": snapshot.fetched_at.isoformat(),
        "include_blobs": snapshot.include_blobs,
        "file_list_digest": snapshot.file_list_digest,
        "files": [
            {"path": f.path, "oid": f.oid, "git_oid": f.git_oid, "size": f.size, "lfs": f.lfs}
            for f in files
        ],
        "rejected": [r.__dict__ for r in snapshot.rejected],
        "failed": [r.__dict__ for r in snapshot.failed],
    }
    text = orjson.dumps(document, option=orjson.OPT_INDENT_2)
    replace_atomically(
        snapshot.manifest_path,
        lambda temporary: temporary.write_bytes(text),
        temporary=temporary_in(tmp_dir, "manifest"),
    )
