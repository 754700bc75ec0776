"""The snapshot cache: ``fetch_dataset`` makes ``cache_dir/snapshots/<sha>/`` hold a dataset at
one commit, from verified blobs shared by every snapshot.

Cache layout (``cache_dir``), on purpose the layout of one repository's folder in
huggingface_hub's cache (``$HF_HUB_CACHE/datasets--<org>--<name>/``)::

    blobs/<oid>              verified file bodies, read-only; oid = git blob sha1 (40 hex) for
                             regular files, LFS sha256 (64 hex) for LFS files: the ETag the Hub
                             answers, which huggingface_hub names its blobs by
    snapshots/<sha>/<path>   the dataset at commit <sha>: hard links to blobs/ (copies where
                             linking fails); holds every selected, verified file. An entry that
                             already leads to the right blob (huggingface_hub's relative
                             symlinks included) is left as it is, never re-linked; entries
                             tracehouse did not write (huggingface_hub's README.md, blob/, ...)
                             are never removed
    refs/<revision>          the commit a branch or tag resolved to when last fetched online
                             (huggingface_hub's refs/main), so an offline build can name it
    manifests/<sha>.json     the selected listing, rejected and failed files of the last fetch
    manifests/<sha>.linked.json  the entries of snapshots/<sha>/ tracehouse wrote: the only ones
                             it removes again (when they are no longer selected, e.g. blob/
                             after a build without --include-blobs)
    locks/<sha>.lock         flock taken while a snapshot folder is pruned and re-linked
    tmp/                     in-flight downloads (``*.part``) and links; renamed into place

huggingface_hub writes (and tracehouse reads, never writes) two more::

    trees/<sha>.json         the whole tree listing at <sha> (huggingface_hub 1.x/2.x
                             snapshot_download): {"format_version": 1, "files": {path: {size,
                             blob_id, lfs_sha256?, lfs_size?}}}
    snapshots/<sha>/<path>   relative symlinks ../../blobs/<etag>

Offline (``offline=True``, ``HF_HUB_OFFLINE=1``), ``fetch_dataset`` makes no request at all: the
commit comes from the revision itself (a sha) or ``refs/``, the listing from the manifest the
last online fetch of that commit wrote, else from what huggingface_hub wrote (``trees/<sha>.json``,
else the links of ``snapshots/<sha>/``), and every body from ``blobs/``. A body tracehouse did not
verify itself (any listing but its manifest) is hashed against the oid that names its blob
before it is used. Online, when the Hub cannot be reached (no answer, or only server errors) for
a revision the cache holds, the same offline snapshot is used and ``HubSnapshot.note`` says so.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
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

from tracehouse.fetch.hub.client import (
    HubError,
    HubHTTPError,
    RetryPolicy,
    auth_headers,
    hub_endpoint,
    hub_offline,
    hub_token,
    make_client,
)
from tracehouse.fetch.hub.download import (
    DownloadJob,
    blob_is_valid,
    download,
    sweep,
    temporary_in,
)
from tracehouse.fetch.hub.listing import (
    FailedRemoteFile,
    RejectedRemoteFile,
    RemoteFile,
    file_list_digest,
    is_git_blob_id,
    is_sha256_hex,
    list_selected,
    resolve,
    select_listed,
)
from tracehouse.fetch.hub.uri import HubDatasetRef, as_ref
from tracehouse.fetch.safety import safe_join
from tracehouse.files import replace_atomically


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
    # Why this snapshot came from the cache although a request was allowed (the Hub was down)
    note: str | None = None

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


def _leads_to(blob: Path, dest: Path) -> bool:
    """True when ``dest`` already is the blob: our hard link, or a symlink huggingface_hub made
    (which is never rewritten)."""
    try:
        return dest.is_file() and os.path.samefile(blob, dest)
    except OSError:
        return False


def _link_or_copy(blob: Path, dest: Path, tmp_dir: Path) -> None:
    def link(temporary: Path) -> None:
        try:
            os.link(blob, temporary)
        except OSError:
            shutil.copyfile(blob, temporary)

    replace_atomically(dest, link, temporary=temporary_in(tmp_dir, "link"))


def _own_entries_path(cache_dir: Path, sha: str) -> Path:
    return cache_dir / "manifests" / f"{sha}.linked.json"


def _read_own_entries(cache_dir: Path, sha: str) -> set[str]:
    """The entries of ``snapshots/<sha>/`` that tracehouse wrote (none for a snapshot another
    tool, or a tracehouse before this record, made: those are never pruned)."""
    try:
        document = orjson.loads(_own_entries_path(cache_dir, sha).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return set()
    paths = document.get("paths") if isinstance(document, dict) else None
    return {p for p in paths if isinstance(p, str)} if isinstance(paths, list) else set()


def _write_own_entries(cache_dir: Path, sha: str, paths: set[str], tmp_dir: Path) -> None:
    text = orjson.dumps({"paths": sorted(paths)}, option=orjson.OPT_INDENT_2)
    replace_atomically(
        _own_entries_path(cache_dir, sha),
        lambda temporary: temporary.write_bytes(text),
        temporary=temporary_in(tmp_dir, "linked"),
    )


def _in_the_way(snapshots: Path, dest: Path, folders_ok: set[Path]) -> str | None:
    """What stops ``dest`` from being written inside the snapshot without deleting something
    that is not ours: a folder on the way that is a link (it could lead anywhere) or a file,
    or a folder where the file goes. None when nothing does. ``folders_ok`` remembers the
    folders found fine (or absent, to be created) so each is looked at once."""
    rel = dest.relative_to(snapshots)
    for depth in range(1, len(rel.parts)):
        folder = snapshots.joinpath(*rel.parts[:depth])
        if folder in folders_ok:
            continue
        if folder.is_symlink():
            return f"{folder} is a link, which tracehouse neither follows nor removes"
        if folder.exists() and not folder.is_dir():
            return f"{folder} is a file where a folder belongs; tracehouse leaves it as it is"
        folders_ok.add(folder)
    if dest.is_dir() and not dest.is_symlink():
        return f"{dest} is a folder where a file belongs; tracehouse leaves it as it is"
    return None


def _prune_own(root: Path, paths: set[str]) -> None:
    """Remove the given entries of ``root`` (tracehouse's own, no longer selected), without
    following links, and then the folders that removing them left empty."""
    for rel in sorted(paths):
        path = root.joinpath(*rel.split("/"))
        if path.is_dir() and not path.is_symlink():
            continue  # not the file tracehouse wrote there any more: not ours to remove
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        folder = path.parent
        while folder != root and folder.is_relative_to(root) and not folder.is_symlink():
            try:
                folder.rmdir()  # only when empty: anything another tool put there stays
            except OSError:
                break
            folder = folder.parent


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
    offline: bool = False,
) -> HubSnapshot:
    """Make ``cache_dir/snapshots/<sha>/`` hold the dataset at the commit ``ref`` resolves to.

    The revision is resolved first and only that sha is used afterwards. Bodies already in
    ``cache_dir/blobs`` (same oid, same size; rehashed too with ``verify_cached``) are not
    downloaded again. Unsafe or malformed listing entries end up in ``rejected``, files that
    could not be fetched and verified in ``failed``; neither is written into the snapshot, and
    neither stops the other files. Raises HubError (or a subclass) only when the revision or
    the listing cannot be read. Offline (``offline`` or ``HF_HUB_OFFLINE``) it makes no request:
    see ``_fetch_offline``.
    """
    ref = as_ref(ref)
    if hub_offline(offline):
        return _fetch_offline(ref, Path(cache_dir), include_blobs, verify_cached)
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
        try:
            sha = resolve(http, base, ref, headers, policy, listed_by)
            if sha != ref.revision:
                _write_ref(cache_dir, ref.revision, sha)
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
        except HubHTTPError:
            raise  # the Hub answered (not found, not allowed): the cache must not hide that
        except HubError as unreachable:
            return _cached_instead(ref, cache_dir, include_blobs, verify_cached, unreachable)
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

    snapshot = _link_snapshot(
        ref, cache_dir, sha, files, rejected, failed, include_blobs, transferred, transferred_bytes
    )
    _write_manifest(snapshot, files, tmp_dir)
    return snapshot


def _link_snapshot(
    ref: HubDatasetRef,
    cache_dir: Path,
    sha: str,
    files: list[RemoteFile],
    rejected: list[RejectedRemoteFile],
    failed: list[FailedRemoteFile],
    include_blobs: bool,
    transferred: list[str],
    transferred_bytes: int,
) -> HubSnapshot:
    """Make ``snapshots/<sha>/`` hold every fetched file, linked to its blob, and none of the
    entries tracehouse wrote there before that are no longer selected.

    Only tracehouse's own entries (``manifests/<sha>.linked.json``) are ever removed: the
    folder may be huggingface_hub's, whose other files (a README, ``blob/``, folders
    tracehouse does not read) stay as they are. An entry that already leads to the right
    blob is left as it is; one that does not is replaced, and from then on tracehouse's. A
    file that cannot be written without deleting what is in its way fails (``io_error``).
    """
    blobs_dir, tmp_dir = cache_dir / "blobs", cache_dir / "tmp"
    root = snapshot_root(cache_dir, sha)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    failed = list(failed)
    failed_paths = {f.path for f in failed}
    with _snapshot_lock(cache_dir, sha):
        owned = _read_own_entries(cache_dir, sha)
        writes: list[tuple[RemoteFile, Path]] = []
        folders_ok: set[Path] = set()
        for f in files:
            if f.path in failed_paths:
                continue
            dest = safe_join(root, f.path)
            problem = _in_the_way(root.parent, dest, folders_ok)
            if problem is not None:
                failed.append(RejectedRemoteFile(f.path, "io_error", f"{f.path}: {problem}"))
                failed_paths.add(f.path)
            elif not _leads_to(blobs_dir / f.oid, dest):
                writes.append((f, dest))
        present = [f for f in files if f.path not in failed_paths]
        kept = {f.path for f in present}
        # Recorded before writing, so a fetch killed half way still knows what it wrote.
        _write_own_entries(cache_dir, sha, owned | {f.path for f, _ in writes}, tmp_dir)
        _prune_own(root, owned - kept)
        for f, dest in writes:
            dest.parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(blobs_dir / f.oid, dest, tmp_dir)
        _write_own_entries(cache_dir, sha, (owned & kept) | {f.path for f, _ in writes}, tmp_dir)
    return HubSnapshot(
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


class HubOfflineMiss(HubError):
    """Offline, and the cache does not hold what the build needs."""


def _ref_path(cache_dir: Path, revision: str) -> Path:
    # A branch may hold "/" (refs/pr/1 on the Hub); each part is a path component, as in
    # huggingface_hub's refs/ folder. The revision was validated by the URI parser.
    return safe_join(cache_dir / "refs", revision)


def _write_ref(cache_dir: Path, revision: str, sha: str) -> None:
    path = _ref_path(cache_dir, revision)
    path.parent.mkdir(parents=True, exist_ok=True)
    (cache_dir / "tmp").mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if path.read_text().strip() == sha:
            return
    replace_atomically(
        path,
        lambda temporary: temporary.write_text(sha),  # no newline, as huggingface_hub writes it
        temporary=temporary_in(cache_dir / "tmp", "ref"),
    )


def _cached_instead(
    ref: HubDatasetRef,
    cache_dir: Path,
    include_blobs: bool,
    verify_cached: bool,
    unreachable: HubError,
) -> HubSnapshot:
    """The cached snapshot of ``ref`` when the Hub could not be reached, with a note saying so;
    ``unreachable`` itself when the cache does not hold the revision whole."""
    try:
        snapshot = _fetch_offline(ref, cache_dir, include_blobs, verify_cached)
    except HubOfflineMiss:
        raise unreachable from None
    snapshot.note = (
        f"the Hub could not be reached ({unreachable}); the cached snapshot of "
        f"{snapshot.resolved_sha} was used"
    )
    return snapshot


def _git_blob_oid(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content, usedforsecurity=False).hexdigest()


def _lfs_pointer_oid(sha256: str, size: int) -> str:
    """The git blob id of the LFS pointer file of an object (the pointer's text is canonical)."""
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n"
    return _git_blob_oid(pointer.encode())


def _tree_cache_entries(cache_dir: Path, sha: str) -> list[dict[str, object]] | None:
    """The listing huggingface_hub's snapshot_download cached as ``trees/<sha>.json``, as
    entries of the Hub's tree API; None when there is no readable one."""
    try:
        document = orjson.loads((cache_dir / "trees" / f"{sha}.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(document, dict) or document.get("format_version") != 1:
        return None
    listed = document.get("files")
    if not isinstance(listed, dict):
        return None
    entries: list[dict[str, object]] = []
    for path, info in listed.items():
        entry: dict[str, object] = {"type": "file", "path": path}
        if isinstance(info, dict):  # anything else is refused as a bad entry by the selection
            entry["size"], entry["oid"] = info.get("size"), info.get("blob_id")
            if info.get("lfs_sha256") is not None:
                entry["lfs"] = {"oid": info.get("lfs_sha256"), "size": info.get("lfs_size")}
        entries.append(entry)
    return entries


def _snapshot_link_entries(cache_dir: Path, sha: str) -> list[dict[str, object]] | None:
    """A listing read off huggingface_hub's ``snapshots/<sha>/`` (for versions that write no
    trees/): each symlink into ``blobs/`` is a file whose blob name is its oid (40 hex: git blob
    sha1; 64 hex: LFS sha256). None when there is no such link."""
    root = snapshot_root(cache_dir, sha)
    blobs = (cache_dir / "blobs").resolve()
    entries: list[dict[str, object]] = []
    for folder, _, names in os.walk(root):  # links to folders are never followed
        for name in names:
            path = Path(folder) / name
            if not path.is_symlink():
                continue
            try:
                target = path.resolve(strict=True)
                size = target.stat().st_size
            except (OSError, RuntimeError):
                continue
            if target.parent != blobs:
                continue
            rel = path.relative_to(root).as_posix()
            if is_git_blob_id(target.name):
                entries.append({"type": "file", "path": rel, "size": size, "oid": target.name})
            elif is_sha256_hex(target.name):
                lfs = {"oid": target.name, "size": size}
                oid = _lfs_pointer_oid(target.name, size)
                entries.append({"type": "file", "path": rel, "size": size, "oid": oid, "lfs": lfs})
    return entries or None


def _fetch_offline(
    ref: HubDatasetRef, cache_dir: Path, include_blobs: bool, verify_cached: bool
) -> HubSnapshot:
    """The snapshot of ``ref`` from the cache alone, without a single request: the commit from
    the revision (a sha) or refs/, the listing from its manifest (else from huggingface_hub's
    trees/ or snapshot links), every body a verified blob."""
    from tracehouse.kernelindex import is_commit_sha

    hint = "build it once online, or unset HF_HUB_OFFLINE / drop --offline"
    if is_commit_sha(ref.revision):
        sha = ref.revision
    else:
        try:
            sha = _ref_path(cache_dir, ref.revision).read_text().strip()
        except (OSError, UnicodeDecodeError):
            raise HubOfflineMiss(
                f"offline: {ref.uri}: the cache {cache_dir} has no refs/{ref.revision}; {hint}"
            ) from None
        if not is_commit_sha(sha):  # it names files below: nothing but a sha may
            raise HubOfflineMiss(
                f"offline: {ref.uri}: refs/{ref.revision} in the cache {cache_dir} holds no "
                f"40-hex commit sha; {hint}"
            )
    manifest = cache_dir / "manifests" / f"{sha}.json"
    try:
        document = orjson.loads(manifest.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        document = None
    if isinstance(document, dict):
        if include_blobs and not document.get("include_blobs"):
            raise HubOfflineMiss(
                f"offline: {ref.uri}: the cache {cache_dir} holds commit {sha} without blob/ "
                f"(--include-blobs); {hint}"
            )
        files = [
            RemoteFile(e["path"], int(e["size"]), e["oid"], e["git_oid"], bool(e["lfs"]))
            for e in document["files"]
            if include_blobs or e["path"].split("/", 1)[0] != "blob"
        ]
        failed = [RejectedRemoteFile(**r) for r in document.get("failed", [])]
        rejected = [RejectedRemoteFile(**r) for r in document.get("rejected", [])]
        verify = verify_cached  # tracehouse verified each body when it wrote the blob
    else:
        entries = _tree_cache_entries(cache_dir, sha)
        if entries is None:
            entries = _snapshot_link_entries(cache_dir, sha)
        if entries is None:
            raise HubOfflineMiss(
                f"offline: {ref.uri}: commit {sha} was never fetched into the cache {cache_dir} "
                f"(no readable manifests/{sha}.json, trees/{sha}.json or links in "
                f"snapshots/{sha}/); {hint}"
            )
        files, rejected = select_listed(entries, include_blobs=include_blobs)
        failed = []
        verify = True  # another tool wrote these blobs: each is hashed against its name
    failed_paths = {f.path for f in failed}
    for f in files:
        if f.path not in failed_paths and not blob_is_valid(cache_dir / "blobs" / f.oid, f, verify):
            raise HubOfflineMiss(
                f"offline: {ref.uri}: {f.path} of commit {sha} is not in the cache {cache_dir} "
                f"(blob {f.oid} missing, not {f.size} bytes or not of that hash); {hint}"
            )
    return _link_snapshot(ref, cache_dir, sha, files, rejected, failed, include_blobs, [], 0)


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
