"""What a dataset holds at a revision: the commit a revision resolves to, and the selected files
of the tree listing at that commit (with the entries refused and why).

Hub endpoints (the same URLs ``huggingface_hub`` builds; checked against its 2.x source):

* revision info: ``GET {endpoint}/api/datasets/{repo_id}/revision/{quote(revision, safe="")}``
  → JSON object whose ``sha`` is the 40-hex commit the revision points to.
* tree listing: ``GET {endpoint}/api/datasets/{repo_id}/tree/{sha}[/{quote(dir, safe="")}]``
  with ``recursive=true|false`` and ``expand=false`` → JSON list of
  ``{type: "file"|"directory", path, size, oid, lfs?: {oid, size, pointerSize}}``, paginated
  with a ``Link: <...>; rel="next"`` header.

Files are selected from ``definitions/``, ``solutions/``, ``workloads/``, ``traces/`` and
root-level ``*.json``/``*.jsonl``; ``blob/`` only with ``include_blobs=True``. Why an entry is
refused is a key of ``tracehouse.rejects.HUB_LISTING_REASONS`` or ``UNSAFE_NAME_REASONS``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from tracehouse.fetch.hub.client import (
    HubError,
    RetryPolicy,
    auth_headers,
    get_json,
    given_or_own_client,
    hub_endpoint,
    hub_token,
    metadata_deadline,
    same_origin,
)
from tracehouse.fetch.hub.uri import HubDatasetRef, as_ref
from tracehouse.fetch.safety import UnsafePathError, check_remote_path
from tracehouse.kernelindex import is_commit_sha
from tracehouse.rejects import HUB_FAILURE_REASONS, HUB_LISTING_REASONS, UNSAFE_NAME_REASONS

#: Top-level folders fetched by default; ``blob/`` (large safetensors) only on request.
DATA_DIRS: tuple[str, ...] = ("definitions", "solutions", "workloads", "traces")
BLOB_DIR = "blob"
ROOT_FILE_SUFFIXES: tuple[str, ...] = (".json", ".jsonl")

REMOTE_FILE_REASONS = (
    UNSAFE_NAME_REASONS.keys() | HUB_LISTING_REASONS.keys() | HUB_FAILURE_REASONS.keys()
)
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# The Hub pages a tree by 1,000 entries (50 with expand): 1,000 pages are 50,000 to 1,000,000
# files per folder, far beyond any FlashInfer-Trace dataset; a server linking on for ever is
# stopped here (and by the deadline) instead of being asked again and again.
MAX_LISTING_PAGES = 1000


def is_git_blob_id(value: object) -> bool:
    """A git blob id is a SHA-1 object name, of the same form as a commit sha (the one rule)."""
    return is_commit_sha(value)


def is_sha256_hex(value: object) -> bool:
    """64 lowercase hex characters, nothing more: an LFS object id."""
    return isinstance(value, str) and _SHA256_HEX.fullmatch(value) is not None


def resolve(
    client: httpx.Client,
    base: str,
    ref: HubDatasetRef,
    headers: Mapping[str, str],
    policy: RetryPolicy,
    deadline: float | None = None,
) -> str:
    """The commit sha the Hub says ``ref.revision`` points to (HubError if it says no sha),
    answered by ``deadline`` (a ``time.monotonic()``; default ``policy.deadline_s`` from now)."""
    url = f"{base}/api/datasets/{ref.repo_id}/revision/{quote(ref.revision, safe='')}"
    _, data = get_json(
        client,
        url,
        headers=headers,
        params=None,
        policy=policy,
        what=f"resolve {ref.uri}",
        deadline=deadline,
    )
    sha = data.get("sha") if isinstance(data, dict) else None
    if not is_commit_sha(sha):
        raise HubError(f"resolve {ref.uri}: the Hub's answer has no 40-hex 'sha' (got {sha!r})")
    assert isinstance(sha, str)
    if is_commit_sha(ref.revision) and sha != ref.revision:
        raise HubError(
            f"resolve {ref.uri}: asked for commit {ref.revision}, the Hub answered {sha}"
        )
    return sha


def resolve_revision(
    ref: HubDatasetRef | str,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    client: httpx.Client | None = None,
    retry: RetryPolicy | None = None,
) -> str:
    """The 40-hex commit sha that ``ref.revision`` (branch, tag or commit) points to right now.

    Raises RevisionNotFoundError / RepositoryNotFoundError / HubHTTPError for definitive answers,
    HubError when transient failures outlast the retry budget.
    """
    ref = as_ref(ref)
    policy = retry or RetryPolicy()
    headers = auth_headers(hub_token(token))
    with given_or_own_client(client, policy) as http:
        return resolve(http, hub_endpoint(endpoint), ref, headers, policy)


@dataclass(frozen=True)
class RemoteFile:
    """One selected file of the listing."""

    path: str
    size: int  # bytes of the real content (the LFS object for LFS files)
    oid: str  # content key: git blob sha1 for regular files, sha256 for LFS files
    git_oid: str  # the listing's ``oid`` (for LFS files: the pointer's git blob sha1)
    lfs: bool


@dataclass(frozen=True)
class RejectedRemoteFile:
    """A listed file that is not in the snapshot, and why: ``reason`` is a key of
    ``rejects.UNSAFE_NAME_REASONS``, ``HUB_LISTING_REASONS`` or ``HUB_FAILURE_REASONS``."""

    path: str
    reason: str
    message: str

    def __post_init__(self) -> None:
        if self.reason not in REMOTE_FILE_REASONS:
            raise ValueError(f"unregistered reason {self.reason!r} for {self.path!r}")


#: Same shape; a file that was selected and safe but could not be fetched and verified.
FailedRemoteFile = RejectedRemoteFile


def _iter_tree(
    client: httpx.Client,
    base: str,
    repo_id: str,
    sha: str,
    folder: str,
    *,
    recursive: bool,
    headers: Mapping[str, str],
    policy: RetryPolicy,
    deadline: float,
) -> Iterator[Any]:
    url = f"{base}/api/datasets/{repo_id}/tree/{sha}"
    if folder:
        url += "/" + quote(folder, safe="")
    params: dict[str, str] | None = {
        "recursive": "true" if recursive else "false",
        "expand": "false",
    }
    origin = httpx.URL(base)
    seen: set[str] = set()
    what = f"list {repo_id}@{sha}/{folder}"
    for _ in range(MAX_LISTING_PAGES):
        response, page = get_json(
            client, url, headers=headers, params=params, policy=policy, what=what, deadline=deadline
        )
        if not isinstance(page, list):
            raise HubError(f"{what}: expected a JSON list, got {type(page).__name__}")
        yield from page
        next_url = response.links.get("next", {}).get("url")
        if not next_url:
            return
        next_abs = response.url.join(next_url)
        if not same_origin(next_abs, origin):
            raise HubError(f"{what}: pagination link leaves the Hub: {next_abs}")
        if str(next_abs) in seen:
            raise HubError(f"{what}: pagination loops back to {next_abs}")
        seen.add(str(next_abs))
        url, params = str(next_abs), None
    raise HubError(f"{what}: the listing goes on past {MAX_LISTING_PAGES:,} pages")


def _parse_entry(entry: Mapping[str, Any]) -> RemoteFile | str:
    """A RemoteFile, or an error message for a malformed entry."""
    size, oid, lfs = entry.get("size"), entry.get("oid"), entry.get("lfs")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return f"size is not a non-negative integer: {size!r}"
    if not isinstance(oid, str) or not is_git_blob_id(oid):
        return f"oid is not a 40-hex git blob id: {oid!r}"
    if lfs is None:
        return RemoteFile(path=entry["path"], size=size, oid=oid, git_oid=oid, lfs=False)
    if not isinstance(lfs, Mapping):
        return f"lfs is not an object: {lfs!r}"
    lfs_oid, lfs_size = lfs.get("oid"), lfs.get("size")
    if not isinstance(lfs_oid, str) or not is_sha256_hex(lfs_oid):
        return f"lfs.oid is not a 64-hex sha256: {lfs_oid!r}"
    if not isinstance(lfs_size, int) or isinstance(lfs_size, bool) or lfs_size < 0:
        return f"lfs.size is not a non-negative integer: {lfs_size!r}"
    return RemoteFile(path=entry["path"], size=lfs_size, oid=lfs_oid, git_oid=oid, lfs=True)


def _selected(path: str, include_blobs: bool) -> bool:
    top, sep, _ = path.partition("/")
    if not sep:
        return path.endswith(ROOT_FILE_SUFFIXES)
    return top in DATA_DIRS or (include_blobs and top == BLOB_DIR)


def list_selected(
    client: httpx.Client,
    base: str,
    repo_id: str,
    sha: str,
    *,
    include_blobs: bool,
    headers: Mapping[str, str],
    policy: RetryPolicy,
    deadline: float | None = None,
) -> tuple[list[RemoteFile], list[RejectedRemoteFile]]:
    """The selected files and the refused entries, every page listed by ``deadline`` (a
    ``time.monotonic()``; default ``policy.deadline_s`` from now)."""
    selection = _Selection(include_blobs)
    subdirs: list[str] = []
    common = {
        "headers": headers,
        "policy": policy,
        "deadline": metadata_deadline(policy) if deadline is None else deadline,
    }
    for entry in _iter_tree(client, base, repo_id, sha, "", recursive=False, **common):
        sub = selection.take(entry, "")
        if sub is not None and sub not in subdirs:
            subdirs.append(sub)
    for sub in subdirs:
        for entry in _iter_tree(client, base, repo_id, sha, sub, recursive=True, **common):
            selection.take(entry, sub)
    return selection.result()


def select_listed(
    entries: Iterable[Any], *, include_blobs: bool
) -> tuple[list[RemoteFile], list[RejectedRemoteFile]]:
    """The selected files and refused entries of a whole recursive listing held locally (the
    tree listing huggingface_hub caches, or one derived from its snapshot links), by the same
    rules as ``list_selected``."""
    selection = _Selection(include_blobs)
    for entry in entries:
        selection.take(entry, None)
    return selection.result()


class _Selection:
    """The files selected from listing entries, and the entries refused and why."""

    def __init__(self, include_blobs: bool) -> None:
        self.include_blobs = include_blobs
        self.wanted_dirs = (*DATA_DIRS, BLOB_DIR) if include_blobs else DATA_DIRS
        self.files: dict[str, RemoteFile] = {}
        self.rejected: list[RejectedRemoteFile] = []

    def take(self, entry: Any, folder: str | None) -> str | None:
        """Record one entry of the listing of ``folder`` (``""`` the root, listed flat; None a
        whole recursive listing); return the name of a top-level folder to descend into."""
        rejected = self.rejected
        if not isinstance(entry, Mapping):
            rejected.append(RejectedRemoteFile(repr(entry)[:200], "bad_entry", "not a JSON object"))
            return None
        kind, path = entry.get("type"), entry.get("path")
        try:
            check_remote_path(path)
        except UnsafePathError as exc:
            shown = path if isinstance(path, str) else repr(path)
            rejected.append(RejectedRemoteFile(shown, exc.reason, exc.message))
            return None
        assert isinstance(path, str)
        if folder is None:
            inside = True
        elif not folder:
            inside = "/" not in path
        else:
            inside = path.startswith(folder + "/")
        if not inside:
            rejected.append(
                RejectedRemoteFile(
                    path, "unexpected_location", f"listing of {folder or '/'!r} returned {path!r}"
                )
            )
            return None
        if kind == "directory":
            return path if folder == "" and path in self.wanted_dirs else None
        if kind != "file" or not _selected(path, self.include_blobs):
            return None
        parsed = _parse_entry(entry)
        if isinstance(parsed, str):
            rejected.append(RejectedRemoteFile(path, "bad_entry", parsed))
        elif path in self.files:
            rejected.append(RejectedRemoteFile(path, "duplicate", f"{path!r} is listed twice"))
        else:
            self.files[path] = parsed
        return None

    def result(self) -> tuple[list[RemoteFile], list[RejectedRemoteFile]]:
        files, rejected = dict(self.files), list(self.rejected)
        # A path cannot be both a file and the folder of other files.
        folders: set[str] = set()
        for path in files:
            parts = path.split("/")
            folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
        for path in sorted(folders & files.keys()):
            del files[path]
            rejected.append(
                RejectedRemoteFile(
                    path, "path_conflict", f"{path!r} is also the folder of other files"
                )
            )
        return sorted(files.values(), key=lambda f: f.path), rejected


def list_remote_files(
    ref: HubDatasetRef | str,
    sha: str,
    *,
    include_blobs: bool = False,
    endpoint: str | None = None,
    token: str | bool | None = None,
    client: httpx.Client | None = None,
    retry: RetryPolicy | None = None,
) -> tuple[list[RemoteFile], list[RejectedRemoteFile]]:
    """The selected files at commit ``sha`` (sorted by path) and the listed files rejected."""
    if not is_commit_sha(sha):
        raise ValueError(f"sha must be a 40-hex commit id (see resolve_revision), got {sha!r}")
    ref = as_ref(ref)
    policy = retry or RetryPolicy()
    headers = auth_headers(hub_token(token))
    base = hub_endpoint(endpoint)
    with given_or_own_client(client, policy) as http:
        return list_selected(
            http,
            base,
            ref.repo_id,
            sha,
            include_blobs=include_blobs,
            headers=headers,
            policy=policy,
        )


def file_list_digest(files: list[RemoteFile]) -> str:
    """``sha256:<hex>`` over the lines ``path\\toid\\tsize\\n`` sorted by path.

    Paths are safe names (no tab or newline), so the encoding is unambiguous.
    """
    digest = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        digest.update(f"{f.path}\t{f.oid}\t{f.size}\n".encode())
    return f"sha256:{digest.hexdigest()}"
