"""Verified download of one file body into the blob store ``cache_dir/blobs/<oid>``.

``GET {endpoint}/datasets/{repo_id}/resolve/{sha}/{quote(path)}``: the Hub answers regular files
itself (``ETag`` = quoted git blob sha1) and LFS files with a redirect to a CDN carrying
``X-Linked-Etag`` (sha256) and ``X-Linked-Size``; ``X-Repo-Commit`` names the commit. httpx drops
the ``Authorization`` header when a redirect leaves the Hub's origin.

A body is streamed into a ``*.part`` file in the cache's ``tmp/`` folder while it is hashed,
resumed with ``Range`` after a cut, and renamed into ``blobs/`` only when its size and hash equal
the listing's. Why a file fails is a key of ``tracehouse.rejects.HUB_FAILURE_REASONS``.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from tracehouse.fetch.hub.client import (
    PERMANENT_EXCEPTIONS,
    RETRY_EXCEPTIONS,
    RETRY_STATUS,
    RetryPolicy,
    retry_after_s,
    same_origin,
)
from tracehouse.fetch.hub.listing import RemoteFile, is_git_blob_id, is_sha256_hex
from tracehouse.files import replace_atomically

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


class _Transient(Exception):
    """Worth retrying, resuming from the bytes already written. ``timed_out``: the attempt
    stalled or ran out of its time budget (rather than being refused or cut)."""

    def __init__(self, message: str, retry_after: float | None = None, timed_out: bool = False):
        super().__init__(message)
        self.retry_after = retry_after
        self.timed_out = timed_out


class _Integrity(Exception):
    """Wrong ETag or hash: retry from scratch, a bounded number of times."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class _Permanent(Exception):
    """This file fails; do not retry."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def _new_hasher(f: RemoteFile) -> Any:
    if f.lfs:
        return hashlib.sha256()
    hasher = hashlib.sha1()  # git blob id: sha1(b"blob <size>\0" + body)
    hasher.update(b"blob %d\0" % f.size)
    return hasher


class _Body:
    """A partial download: the temp file, the running hash and the counts."""

    def __init__(self, fh: Any, f: RemoteFile):
        self.fh = fh
        self.file = f
        self.hasher = _new_hasher(f)
        self.have = 0  # bytes of the body written so far
        self.received = 0  # body bytes that came over the network, including discarded ones

    def reset(self) -> None:
        self.fh.seek(0)
        self.fh.truncate()
        self.hasher = _new_hasher(self.file)
        self.have = 0

    def write(self, chunk: bytes) -> None:
        self.fh.write(chunk)
        self.hasher.update(chunk)
        self.have += len(chunk)


def _normalize_etag(value: str | None) -> str | None:
    if not value:
        return None
    value = value.strip()
    value = value.removeprefix("W/")
    return value.strip('"').lower() or None


@dataclass
class DownloadJob:
    """What every download of one fetch shares: the client, the commit and the cache folders."""

    client: httpx.Client
    base: str
    repo_id: str
    sha: str
    headers: Mapping[str, str]
    policy: RetryPolicy
    blobs_dir: Path
    tmp_dir: Path
    # time.monotonic() by which the whole fetch ends: no body may outlast it, whatever size
    # the listing gives it.
    deadline: float = float("inf")


@dataclass
class Outcome:
    """How one download ended: ``reason`` and ``message`` are set when it failed."""

    file: RemoteFile
    ok: bool
    received: int = 0
    reason: str = ""
    message: str = ""


def _check_hub_headers(response: httpx.Response, job: DownloadJob, f: RemoteFile) -> None:
    """Compare the Hub's metadata headers (not a CDN's) with the listing."""
    origin = httpx.URL(job.base)
    hub_responses = [r for r in (*response.history, response) if same_origin(r.url, origin)]
    commit = linked_etag = etag = linked_size = None
    for r in hub_responses:
        commit = commit or r.headers.get("X-Repo-Commit")
        linked_etag = linked_etag or r.headers.get("X-Linked-Etag")
        etag = etag or r.headers.get("ETag")
        linked_size = linked_size or r.headers.get("X-Linked-Size")
    if commit and commit.strip().lower() != job.sha:
        raise _Permanent(
            "commit_mismatch", f"{f.path}: X-Repo-Commit is {commit!r}, expected {job.sha}"
        )
    announced = _normalize_etag(linked_etag) or _normalize_etag(etag)
    if (
        announced
        and (is_git_blob_id(announced) or is_sha256_hex(announced))
        and announced not in (f.oid, f.git_oid)
    ):
        raise _Integrity(
            "etag_mismatch", f"{f.path}: ETag {announced} but the listing says {f.oid}"
        )
    if linked_size is not None and linked_size.strip().isdigit() and int(linked_size) != f.size:
        raise _Permanent(
            "size_mismatch", f"{f.path}: X-Linked-Size is {linked_size}, the listing says {f.size}"
        )


def _announced_length(response: httpx.Response) -> int | None:
    """Content-Length of the body as it will be read (None if unknown or compressed)."""
    length = (response.headers.get("Content-Length") or "").strip()
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity") or not length.isdigit():
        return None
    return int(length)


def _stream_once(job: DownloadJob, f: RemoteFile, body: _Body, url: str, deadline: float) -> None:
    """One attempt at the rest of the body, ended by ``deadline`` (a ``time.monotonic()``): a
    read that waits past it (a stall) or a body still arriving then is given up, to be
    resumed; only when ``deadline`` is the whole fetch's does the file fail."""
    headers = {**job.headers, "Accept-Encoding": "identity"}
    if body.have:
        headers["Range"] = f"bytes={body.have}-"
    remaining = max(0.1, deadline - time.monotonic())
    policy = job.policy
    timeout = httpx.Timeout(
        connect=min(policy.connect_timeout_s, remaining),
        read=min(policy.read_timeout_s, remaining),
        write=min(policy.read_timeout_s, remaining),
        pool=remaining,
    )
    try:
        with job.client.stream(
            "GET", url, headers=headers, follow_redirects=True, timeout=timeout
        ) as response:
            code = response.status_code
            if code in RETRY_STATUS:
                raise _Transient(f"HTTP {code}", retry_after_s(response.headers))
            if code == 416 and body.have:
                raise _Permanent(
                    "size_mismatch",
                    f"{f.path}: the server has no bytes past {body.have} of {f.size}",
                )
            if code not in (200, 206):
                raise _Permanent("http_error", f"{f.path}: HTTP {code} from {response.url}")
            _check_hub_headers(response, job, f)
            if code == 206:
                match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
                if not match or int(match.group(1)) != body.have:
                    body.reset()  # not the range we asked for: start over without Range
                    raise _Transient(
                        f"unexpected Content-Range {response.headers.get('Content-Range')!r}"
                    )
                if match.group(3) != "*" and int(match.group(3)) != f.size:
                    raise _Permanent(
                        "size_mismatch",
                        f"{f.path}: Content-Range total is {match.group(3)}, the listing says {f.size}",
                    )
            elif body.have:
                body.reset()  # the server ignored Range and sends the whole body
            announced = _announced_length(response)
            if announced is not None and announced != f.size - body.have:
                raise _Permanent(
                    "size_mismatch",
                    f"{f.path}: the server announces {announced + body.have} bytes,"
                    f" the listing says {f.size}",
                )
            for chunk in response.iter_bytes():  # as it arrives: nothing buffered is lost on a cut
                body.received += len(chunk)
                if body.have + len(chunk) > f.size:
                    raise _Permanent(
                        "size_mismatch",
                        f"{f.path}: the body is longer than the listed {f.size} bytes",
                    )
                body.write(chunk)
                if time.monotonic() > deadline:
                    if deadline >= job.deadline:
                        raise _Permanent("timeout", _out_of_time(f, body))
                    raise _Transient(
                        f"{body.have} of {f.size} bytes when the attempt's time ran out",
                        timed_out=True,
                    )
    except PERMANENT_EXCEPTIONS as exc:  # a redirect to file:// or in a loop
        raise _Permanent("bad_redirect", f"{f.path}: {type(exc).__name__}: {exc}") from None
    except RETRY_EXCEPTIONS as exc:
        stalled = isinstance(exc, httpx.TimeoutException)
        raise _Transient(f"{type(exc).__name__}: {exc}", timed_out=stalled) from exc
    if body.have < f.size:
        raise _Transient(f"body ended after {body.have} of {f.size} bytes")


def _out_of_time(f: RemoteFile, body: _Body) -> str:
    return f"{f.path}: {body.have} of {f.size} bytes when the time ran out"


def download(job: DownloadJob, f: RemoteFile) -> Outcome:
    """Fetch one blob into ``blobs/<oid>``; never raises for problems with this one file."""
    url = f"{job.base}/datasets/{job.repo_id}/resolve/{job.sha}/{quote(f.path)}"
    policy = job.policy
    bodies: list[_Body] = []  # the one body, for its byte count whatever happens

    def fill(part: Path) -> None:
        with open(part, "wb") as fh:
            body = _Body(fh, f)
            bodies.append(body)
            transient = integrity = 0
            while True:
                # Each attempt has the budget of the bytes still missing, so a body that stalls
                # or trickles once is resumed instead of failing the build; the attempts
                # together end with the whole fetch (job.deadline), whatever the sizes.
                attempt_by = time.monotonic() + policy.body_deadline_s(f.size - body.have)
                try:
                    _stream_once(job, f, body, url, min(job.deadline, attempt_by))
                    if body.hasher.hexdigest() != f.oid:
                        raise _Integrity(
                            "hash_mismatch",
                            f"{f.path}: body hashes to {body.hasher.hexdigest()}, listing says {f.oid}",
                        )
                    break
                except _Transient as exc:
                    transient += 1
                    wait = policy.delay(transient, exc.retry_after)
                    out_of_time = time.monotonic() + wait > job.deadline
                    if out_of_time and exc.timed_out:
                        raise _Permanent("timeout", _out_of_time(f, body)) from exc
                    if out_of_time or transient >= policy.max_attempts:
                        raise _Permanent(
                            "timeout" if exc.timed_out else "retries_exhausted",
                            f"{f.path}: gave up after {transient} attempts: {exc}",
                        ) from exc
                    policy.sleep(wait)
                except _Integrity as exc:
                    integrity += 1
                    if integrity >= policy.integrity_attempts:
                        raise _Permanent(exc.reason, str(exc)) from exc
                    body.reset()
                    policy.sleep(policy.delay(integrity))
        os.chmod(part, 0o444)  # blobs are read-only: snapshots hard-link them

    # A unique name: another process sharing the cache may be fetching the same oid.
    part = temporary_in(job.tmp_dir, f.oid, ".part")
    try:
        replace_atomically(job.blobs_dir / f.oid, fill, temporary=part)
    except _Permanent as exc:
        return Outcome(f, False, _received(bodies), exc.reason, str(exc))
    except OSError as exc:
        return Outcome(f, False, _received(bodies), "io_error", f"{f.path}: {exc}")
    return Outcome(f, ok=True, received=_received(bodies))


# `<what>.<pid>-<32 hex>[.part]`: the pid of the process writing it, so the next fetch can tell
# what a killed one left behind from what a running one is still writing.
_TEMPORARY = re.compile(r".+\.([0-9]+)-[0-9a-f]{32}(?:\.part)?")
# A name without a pid (written before they carried one) is left this long before it goes.
_UNOWNED_TEMPORARY_S = 24 * 3600


def temporary_in(tmp_dir: Path, what: str, suffix: str = "") -> Path:
    """A name in the cache's ``tmp/`` that no other writer uses and ``sweep`` can attribute."""
    return tmp_dir / f"{what}.{os.getpid()}-{uuid.uuid4().hex}{suffix}"


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, as another user's process
        return True
    return True


def sweep(tmp_dir: Path) -> None:
    """Remove what killed fetches left in ``tmp/`` (``*.part`` bodies, links, manifests): files
    whose writer is no longer running; those of running fetches stay."""
    try:
        entries = list(os.scandir(tmp_dir))
    except OSError:
        return
    now = time.time()
    for entry in entries:
        match = _TEMPORARY.fullmatch(entry.name)
        try:
            if match is not None:
                stale = not _running(int(match.group(1)))
            else:
                stale = now - entry.stat(follow_symlinks=False).st_mtime > _UNOWNED_TEMPORARY_S
            if stale:
                os.unlink(entry.path)
        except OSError:
            continue  # another process removed or renamed it meanwhile


def _received(bodies: list[_Body]) -> int:
    return bodies[0].received if bodies else 0


def blob_is_valid(path: Path, f: RemoteFile, verify: bool) -> bool:
    """True when the cached blob has the listed size (and, with ``verify``, the listed hash)."""
    try:
        if not path.is_file() or path.stat().st_size != f.size:
            return False
        if not verify:
            return True
        hasher = _new_hasher(f)
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                hasher.update(chunk)
        return hasher.hexdigest() == f.oid
    except OSError:
        return False
