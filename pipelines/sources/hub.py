"""Fetch a FlashInfer-Trace dataset from the Hugging Face Hub into a local, content-addressed cache.

The builder reads a plain local folder; this module produces one, ``cache_dir/snapshots/<sha>/``,
from a dataset repo such as ``hf://datasets/flashinfer-ai/flashinfer-trace``. It talks to the Hub's
HTTP API with httpx directly (no ``huggingface_hub``), so retries, integrity checks and what is
written where are all decided here.

Hub endpoints used (the same URLs ``huggingface_hub`` builds; checked against its 2.x source):

* revision info: ``GET {endpoint}/api/datasets/{repo_id}/revision/{quote(revision, safe="")}``
  → JSON object whose ``sha`` is the 40-hex commit the revision points to.
* tree listing: ``GET {endpoint}/api/datasets/{repo_id}/tree/{sha}[/{quote(dir, safe="")}]``
  with ``recursive=true|false`` and ``expand=false`` → JSON list of
  ``{type: "file"|"directory", path, size, oid, lfs?: {oid, size, pointerSize}}``, paginated
  with a ``Link: <...>; rel="next"`` header.
* file body: ``GET {endpoint}/datasets/{repo_id}/resolve/{sha}/{quote(path)}``; the Hub answers
  regular files itself (``ETag`` = quoted git blob sha1) and LFS files with a redirect to a CDN
  carrying ``X-Linked-Etag`` (sha256) and ``X-Linked-Size``; ``X-Repo-Commit`` names the commit.
  httpx drops the ``Authorization`` header when a redirect leaves the Hub's origin.

Endpoint and token are chosen like the official client: explicit argument, else the
``HF_ENDPOINT`` environment variable (default ``https://huggingface.co``, trailing ``/`` removed)
and ``HF_TOKEN`` (falling back to the legacy ``HUGGING_FACE_HUB_TOKEN``) sent as
``Authorization: Bearer``, else the token file ``hf auth login`` writes (``$HF_TOKEN_PATH``, default
``$HF_HOME/token``, ``HF_HOME`` defaulting to ``~/.cache/huggingface``). The environment is read at
call time. The token is only ever sent in that header: no message, log or file names it.

Cache layout (``cache_dir``)::

    blobs/<oid>              verified file bodies, read-only; oid = git blob sha1 (40 hex) for
                             regular files, LFS sha256 (64 hex) for LFS files
    snapshots/<sha>/<path>   the dataset at commit <sha>: hard links to blobs/ (copies where
                             linking fails); contains exactly the selected, verified files
    manifests/<sha>.json     the selected listing, rejected and failed files of the last fetch
    locks/<sha>.lock         flock taken while a snapshot folder is pruned and re-linked
    tmp/                     in-flight downloads (``*.part``) and links; renamed into place

Files are selected from ``definitions/``, ``solutions/``, ``workloads/``, ``traces/`` and
root-level ``*.json``/``*.jsonl``; ``blob/`` only with ``include_blobs=True``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
import functools
import hashlib
import os
import random
import re
import shutil
import ssl
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote, unquote

import certifi
import httpx
import orjson

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

from pipelines.sources.safety import UnsafePathError, check_remote_path, safe_join

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_REVISION = "main"
USER_AGENT = f"tracehouse/0.1 httpx/{httpx.__version__}"

#: Top-level folders fetched by default; ``blob/`` (large safetensors) only on request.
DATA_DIRS: tuple[str, ...] = ("definitions", "solutions", "workloads", "traces")
BLOB_DIR = "blob"
ROOT_FILE_SUFFIXES: tuple[str, ...] = (".json", ".jsonl")

#: Why a listed file was left out of the snapshot without being downloaded. Codes from
#: :data:`pipelines.sources.safety.REJECT_REASONS` are used as well (unsafe names).
LISTING_REJECT_REASONS: dict[str, str] = {
    "bad_entry": "the listing entry has a missing or malformed size, oid or lfs field",
    "duplicate": "the same path is listed twice",
    "path_conflict": "the path is listed as a file and is also the parent folder of other files",
    "unexpected_location": "a folder listing returned a path outside that folder",
}

#: Why a selected file is missing from the snapshot after a fetch (``HubSnapshot.failed``).
FAILURE_REASONS: dict[str, str] = {
    "hash_mismatch": "the body's hash differs from the oid in the listing (after retrying)",
    "size_mismatch": "the body, or its announced length, differs from the size in the listing",
    "etag_mismatch": "the ETag / X-Linked-Etag differs from the oid in the listing (after retrying)",
    "commit_mismatch": "X-Repo-Commit names another commit than the one resolved",
    "http_error": "the Hub answered with a status that is not worth retrying (403, 404, ...)",
    "retries_exhausted": "timeouts, resets, 429 or 5xx persisted beyond the retry budget",
    "timeout": "the per-file time budget ran out while the body was arriving",
    "io_error": "the local cache could not be written",
}

_SHA1_HEX = re.compile(r"^[0-9a-f]{40}$")
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_REPO_PART = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$")
_SPECIAL_REF = re.compile(r"^refs/(?:pr/[0-9]+|convert/[A-Za-z0-9_.-]+)$")
_BAD_REVISION_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_RATELIMIT = re.compile(r"r\s*=\s*(\d+)\s*;\s*t\s*=\s*(\d+)")
_DECIMAL = re.compile(r"^[0-9]+(?:\.[0-9]+)?$")
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_RETRY_EXCEPTIONS: tuple[type[Exception], ...] = (
    httpx.TimeoutException,  # connect/read/write/pool timeouts
    httpx.NetworkError,  # ConnectError, ReadError (resets mid-body), WriteError, CloseError
    httpx.RemoteProtocolError,  # peer closed before the announced Content-Length arrived
)


# --------------------------------------------------------------------------------------------
# References


@dataclass(frozen=True)
class HubDatasetRef:
    """A dataset repo on the Hub and the revision (branch, tag or commit) to read."""

    repo_id: str  # "<org>/<name>"
    revision: str = DEFAULT_REVISION

    def __post_init__(self) -> None:
        problem = _repo_id_problem(self.repo_id) or _revision_problem(self.revision)
        if problem:
            raise ValueError(problem)

    @property
    def uri(self) -> str:
        """Canonical ``hf://`` form; ``parse_hub_uri(ref.uri) == ref``."""
        base = f"hf://datasets/{self.repo_id}"
        if self.revision == DEFAULT_REVISION:
            return base
        return f"{base}@{quote(self.revision, safe='')}"


def parse_hub_uri(text: str) -> HubDatasetRef | None:
    """Parse ``hf://datasets/<org>/<name>[@<revision>]``.

    Returns None when ``text`` does not start with ``hf://`` (it is then a local path or another
    scheme); raises ValueError with the reason for a malformed ``hf://`` URI.

    The revision is percent-decoded, so a branch named ``feature/x`` is written
    ``@feature%2Fx``. A raw ``/`` after ``@`` is accepted only in the Hub's special refs
    ``refs/pr/<n>`` and ``refs/convert/<name>`` (as ``huggingface_hub``'s ``HfFileSystem`` does);
    anything else with a raw ``/`` would be a path inside the repo, which is not supported. A
    single trailing ``/`` is ignored. Org and name follow the Hub's rules: ASCII letters, digits,
    ``_ . -``, at most 96 characters, not starting/ending with ``.`` or ``-``, no ``--``/``..``.
    """
    if not isinstance(text, str) or not text.startswith("hf://"):
        return None
    rest = text[len("hf://") :]
    if not rest.startswith("datasets/"):
        kind = rest.split("/", 1)[0] or "(nothing)"
        raise ValueError(
            f"{text!r}: only dataset repos are supported, as hf://datasets/<org>/<name>[@<revision>]"
            f" (got {kind!r} after hf://)"
        )
    rest = rest[len("datasets/") :]
    if "?" in rest or "#" in rest:
        raise ValueError(f"{text!r}: query strings and fragments are not supported in hf:// URIs")
    rest = rest.removesuffix("/")
    repo_part, at, rev_part = rest.partition("@")
    parts = repo_part.split("/")
    if len(parts) != 2 or not all(parts):
        if at == "" and len(parts) > 2:
            raise ValueError(
                f"{text!r}: expected hf://datasets/<org>/<name>[@<revision>]; paths inside the repo"
                " are not supported"
            )
        raise ValueError(f"{text!r}: expected hf://datasets/<org>/<name>[@<revision>]")
    problem = _repo_id_problem(repo_part)
    if problem:
        raise ValueError(f"{text!r}: {problem}")
    if not at:
        return HubDatasetRef(repo_id=repo_part)
    if rev_part == "":
        raise ValueError(f"{text!r}: empty revision after '@'")
    if "/" in rev_part and not _SPECIAL_REF.match(rev_part):
        raise ValueError(
            f"{text!r}: revision {rev_part!r} contains '/'; write a branch or tag with a slash"
            " percent-encoded (e.g. 'feature%2Fx'); paths inside the repo are not supported"
        )
    try:
        revision = unquote(rev_part, errors="strict")
    except UnicodeDecodeError:
        raise ValueError(f"{text!r}: revision is not valid percent-encoded UTF-8") from None
    problem = _revision_problem(revision)
    if problem:
        raise ValueError(f"{text!r}: {problem}")
    return HubDatasetRef(repo_id=repo_part, revision=revision)


def _repo_id_problem(repo_id: str) -> str | None:
    """Why ``repo_id`` is not ``<org>/<name>`` under the Hub's naming rules, or None."""
    parts = repo_id.split("/") if isinstance(repo_id, str) else []
    if len(parts) != 2:
        return f"repo id {repo_id!r} is not of the form <org>/<name>"
    for part in parts:
        if not _REPO_PART.match(part) or "--" in part or ".." in part:
            return (
                f"invalid repo name component {part!r} (letters, digits, '_', '.', '-';"
                " at most 96 characters; no leading/trailing '.' or '-'; no '--' or '..')"
            )
    if parts[1].endswith(".git"):
        return "repo name must not end with '.git'"
    return None


def _revision_problem(revision: str) -> str | None:
    """Why ``revision`` cannot be a git branch, tag or commit name, or None."""
    if (
        not isinstance(revision, str)
        or not revision
        or _BAD_REVISION_CHARS.search(revision)
        or ".." in revision
        or "@{" in revision
        or revision.startswith("/")
        or revision.endswith("/")
        or "//" in revision
        or revision.endswith(".lock")
    ):
        return f"{revision!r} is not a valid git revision name"
    return None


def _as_ref(ref: HubDatasetRef | str) -> HubDatasetRef:
    if isinstance(ref, HubDatasetRef):
        return ref
    parsed = parse_hub_uri(ref)
    if parsed is None:
        raise ValueError(f"{ref!r} is not an hf://datasets/... URI")
    return parsed


# --------------------------------------------------------------------------------------------
# Endpoint, token, errors, retry policy


def hub_endpoint(endpoint: str | None = None) -> str:
    """The Hub base URL: ``endpoint`` if given, else ``$HF_ENDPOINT``, else huggingface.co."""
    value = endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    return value.rstrip("/")


def hub_token_file() -> Path:
    """Where ``hf auth login`` stores the token: ``$HF_TOKEN_PATH``, else ``$HF_HOME/token``."""
    explicit = os.environ.get("HF_TOKEN_PATH")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME")
    if not home:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
        home = os.path.join(cache, "huggingface")
    return Path(home).expanduser() / "token"


def hub_token(token: str | bool | None = None) -> str | None:
    """The token to send: a string as given; ``False`` for none; None/True look where the Hub's
    own client looks.

    ``HF_TOKEN``, else ``HUGGING_FACE_HUB_TOKEN``, else the token file (``hub_token_file``);
    blank values count as unset.
    """
    if token is False:
        return None
    if isinstance(token, str):
        return token.strip() or None
    value = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or ""
    if value.strip():
        return value.strip()
    try:
        return hub_token_file().read_text().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


class HubError(RuntimeError):
    """The Hub could not be read (revision or listing); no snapshot was produced."""


class HubHTTPError(HubError):
    """The Hub answered a metadata request with a status that is not retried."""

    def __init__(self, message: str, *, status_code: int, error_code: str | None, url: str):
        super().__init__(message)
        self.status_code = status_code
        self.error_code = error_code  # the Hub's X-Error-Code header, e.g. "RevisionNotFound"
        self.url = url


class RepositoryNotFoundError(HubHTTPError):
    """404 for the repo (or 401/403 hiding a private or gated one)."""


class RevisionNotFoundError(HubHTTPError):
    """The repo exists but the branch, tag or commit does not."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. Every request (revision, listing page, file body) has its own budget.

    Delays grow as ``backoff_initial_s * 2**(n-1)`` up to ``backoff_max_s``, each multiplied by a
    random factor in ``[1 - jitter, 1 + jitter]``. A 429/503 with ``Retry-After`` (seconds or an
    HTTP-date) or a ``RateLimit: ...;r=0;t=N`` header waits that long instead, capped at
    ``max_retry_after_s``. A request gives up after ``max_attempts`` attempts or when the next wait
    would end after its deadline: ``deadline_s`` for metadata, ``deadline_s + size /
    min_bytes_per_s`` for a body (checked between chunks too, so a trickling body cannot hang).
    ``integrity_attempts`` bounds retries after a wrong ETag or hash. ``sleep`` is injectable so
    tests can record waits instead of sleeping.
    """

    max_attempts: int = 8
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    jitter: float = 0.25
    max_retry_after_s: float = 120.0
    deadline_s: float = 600.0
    min_bytes_per_s: float = 256 * 1024
    integrity_attempts: int = 2
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0
    sleep: Callable[[float], None] = time.sleep

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.max_retry_after_s))
        base = min(self.backoff_max_s, self.backoff_initial_s * 2 ** (attempt - 1))
        return max(0.0, base * (1.0 + self.jitter * (2.0 * random.random() - 1.0)))

    def timeout(self) -> httpx.Timeout:
        return httpx.Timeout(
            connect=self.connect_timeout_s,
            read=self.read_timeout_s,
            write=self.read_timeout_s,
            pool=self.deadline_s,
        )

    def body_deadline_s(self, size: int) -> float:
        return self.deadline_s + size / self.min_bytes_per_s

    @classmethod
    def within(cls, seconds: float) -> RetryPolicy:
        """A policy whose metadata requests give up after ``seconds`` in total (connect
        attempts included), so an offline machine fails fast."""
        return cls(deadline_s=seconds, connect_timeout_s=min(cls.connect_timeout_s, seconds))


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait, from Retry-After or an exhausted RateLimit header."""
    value = (headers.get("Retry-After") or "").strip()
    if value:
        if _DECIMAL.match(value):
            return float(value)
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            when = None
        if when is not None:
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.UTC)
            return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())
    match = _RATELIMIT.search(headers.get("RateLimit") or "")
    if match and int(match.group(1)) == 0:
        return float(match.group(2))
    return None


def _same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    return (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)


def _raise_http_error(response: httpx.Response, what: str) -> NoReturn:
    code = response.status_code
    error_code = response.headers.get("X-Error-Code")
    message = f"{what}: HTTP {code} from {response.request.url}"
    if error_code:
        message += f" ({error_code})"
    kwargs: dict[str, Any] = {
        "status_code": code,
        "error_code": error_code,
        "url": str(response.request.url),
    }
    if error_code == "RevisionNotFound":
        raise RevisionNotFoundError(message, **kwargs)
    if error_code == "RepoNotFound" or code in (401, 403):
        raise RepositoryNotFoundError(message, **kwargs)
    raise HubHTTPError(message, **kwargs)


def _get_json(
    client: httpx.Client,
    url: str,
    *,
    headers: Mapping[str, str],
    params: Mapping[str, str] | None,
    policy: RetryPolicy,
    what: str,
) -> tuple[httpx.Response, Any]:
    """GET a JSON document, retrying transient failures (the whole body is read inside the loop)."""
    started = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        retry_after: float | None = None
        # No attempt may run past the deadline: an unanswered request ends with it.
        remaining = max(0.1, policy.deadline_s - (time.monotonic() - started))
        timeout = httpx.Timeout(
            connect=min(policy.connect_timeout_s, remaining),
            read=min(policy.read_timeout_s, remaining),
            write=min(policy.read_timeout_s, remaining),
            pool=remaining,
        )
        try:
            response = client.get(
                url, headers=headers, params=params, follow_redirects=True, timeout=timeout
            )
            if response.status_code == 200:
                try:
                    return response, orjson.loads(response.content)
                except orjson.JSONDecodeError as exc:
                    error = f"invalid JSON ({exc})"
            elif response.status_code in _RETRY_STATUS:
                error = f"HTTP {response.status_code}"
                retry_after = _retry_after_s(response.headers)
            else:
                _raise_http_error(response, what)
        except _RETRY_EXCEPTIONS as exc:
            error = f"{type(exc).__name__}: {exc}"
        wait = policy.delay(attempt, retry_after)
        elapsed = time.monotonic() - started
        if attempt >= policy.max_attempts or elapsed + wait > policy.deadline_s:
            raise HubError(
                f"{what}: giving up after {attempt} attempts in {elapsed:.1f} s "
                f"(limit {policy.deadline_s:g} s); last error: {error}"
            )
        policy.sleep(wait)


def _auth_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@functools.lru_cache(maxsize=4)
def _tls_context_for(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    if cafile:
        return ssl.create_default_context(cafile=cafile)
    if capath:
        return ssl.create_default_context(capath=capath)
    return ssl.create_default_context(cafile=certifi.where())


def _tls_context() -> ssl.SSLContext:
    """httpx's default verification (SSL_CERT_FILE, SSL_CERT_DIR, else certifi), built once.

    Loading the CA bundle dominates creating an httpx.Client; the sensor and tests create many.
    """
    return _tls_context_for(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


def _make_client(policy: RetryPolicy, max_connections: int) -> httpx.Client:
    return httpx.Client(
        verify=_tls_context(),
        follow_redirects=True,
        timeout=policy.timeout(),
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
        headers={"User-Agent": USER_AGENT},
    )


# --------------------------------------------------------------------------------------------
# Revision and listing


def _resolve(
    client: httpx.Client,
    base: str,
    ref: HubDatasetRef,
    headers: Mapping[str, str],
    policy: RetryPolicy,
) -> str:
    url = f"{base}/api/datasets/{ref.repo_id}/revision/{quote(ref.revision, safe='')}"
    _, data = _get_json(
        client, url, headers=headers, params=None, policy=policy, what=f"resolve {ref.uri}"
    )
    sha = data.get("sha") if isinstance(data, dict) else None
    if not isinstance(sha, str) or not _SHA1_HEX.match(sha):
        raise HubError(f"resolve {ref.uri}: the Hub's answer has no 40-hex 'sha' (got {sha!r})")
    if _SHA1_HEX.match(ref.revision) and sha != ref.revision:
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
    ref = _as_ref(ref)
    policy = retry or RetryPolicy()
    headers = _auth_headers(hub_token(token))
    if client is not None:
        return _resolve(client, hub_endpoint(endpoint), ref, headers, policy)
    with _make_client(policy, 2) as own:
        return _resolve(own, hub_endpoint(endpoint), ref, headers, policy)


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
    """A listed file that is not in the snapshot, and why (``reason`` is a short code)."""

    path: str
    reason: str
    message: str


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
    while True:
        response, page = _get_json(
            client, url, headers=headers, params=params, policy=policy, what=what
        )
        if not isinstance(page, list):
            raise HubError(f"{what}: expected a JSON list, got {type(page).__name__}")
        yield from page
        next_url = response.links.get("next", {}).get("url")
        if not next_url:
            return
        next_abs = response.url.join(next_url)
        if not _same_origin(next_abs, origin):
            raise HubError(f"{what}: pagination link leaves the Hub: {next_abs}")
        if str(next_abs) in seen:
            raise HubError(f"{what}: pagination loops back to {next_abs}")
        seen.add(str(next_abs))
        url, params = str(next_abs), None


def _parse_entry(entry: Mapping[str, Any]) -> RemoteFile | str:
    """A RemoteFile, or an error message for a malformed entry."""
    size, oid, lfs = entry.get("size"), entry.get("oid"), entry.get("lfs")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return f"size is not a non-negative integer: {size!r}"
    if not isinstance(oid, str) or not _SHA1_HEX.match(oid):
        return f"oid is not a 40-hex git blob id: {oid!r}"
    if lfs is None:
        return RemoteFile(path=entry["path"], size=size, oid=oid, git_oid=oid, lfs=False)
    if not isinstance(lfs, Mapping):
        return f"lfs is not an object: {lfs!r}"
    lfs_oid, lfs_size = lfs.get("oid"), lfs.get("size")
    if not isinstance(lfs_oid, str) or not _SHA256_HEX.match(lfs_oid):
        return f"lfs.oid is not a 64-hex sha256: {lfs_oid!r}"
    if not isinstance(lfs_size, int) or isinstance(lfs_size, bool) or lfs_size < 0:
        return f"lfs.size is not a non-negative integer: {lfs_size!r}"
    return RemoteFile(path=entry["path"], size=lfs_size, oid=lfs_oid, git_oid=oid, lfs=True)


def _selected(path: str, include_blobs: bool) -> bool:
    top, sep, _ = path.partition("/")
    if not sep:
        return path.endswith(ROOT_FILE_SUFFIXES)
    return top in DATA_DIRS or (include_blobs and top == BLOB_DIR)


def _list_selected(
    client: httpx.Client,
    base: str,
    repo_id: str,
    sha: str,
    *,
    include_blobs: bool,
    headers: Mapping[str, str],
    policy: RetryPolicy,
) -> tuple[list[RemoteFile], list[RejectedRemoteFile]]:
    files: dict[str, RemoteFile] = {}
    rejected: list[RejectedRemoteFile] = []
    wanted_dirs = (*DATA_DIRS, BLOB_DIR) if include_blobs else DATA_DIRS

    def take(entry: Any, folder: str) -> str | None:
        """Record one entry; return the name of a top-level folder to descend into, if any."""
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
        inside = "/" not in path if not folder else path.startswith(folder + "/")
        if not inside:
            rejected.append(
                RejectedRemoteFile(
                    path, "unexpected_location", f"listing of {folder or '/'!r} returned {path!r}"
                )
            )
            return None
        if kind == "directory":
            return path if not folder and path in wanted_dirs else None
        if kind != "file" or not _selected(path, include_blobs):
            return None
        parsed = _parse_entry(entry)
        if isinstance(parsed, str):
            rejected.append(RejectedRemoteFile(path, "bad_entry", parsed))
        elif path in files:
            rejected.append(RejectedRemoteFile(path, "duplicate", f"{path!r} is listed twice"))
        else:
            files[path] = parsed
        return None

    subdirs: list[str] = []
    common = {"headers": headers, "policy": policy}
    for entry in _iter_tree(client, base, repo_id, sha, "", recursive=False, **common):
        sub = take(entry, "")
        if sub is not None and sub not in subdirs:
            subdirs.append(sub)
    for sub in subdirs:
        for entry in _iter_tree(client, base, repo_id, sha, sub, recursive=True, **common):
            take(entry, sub)

    # A path cannot be both a file and the folder of other files.
    folders: set[str] = set()
    for path in files:
        parts = path.split("/")
        folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
    for path in sorted(folders & files.keys()):
        del files[path]
        rejected.append(
            RejectedRemoteFile(path, "path_conflict", f"{path!r} is also the folder of other files")
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
    if not _SHA1_HEX.match(sha):
        raise ValueError(f"sha must be a 40-hex commit id (see resolve_revision), got {sha!r}")
    ref = _as_ref(ref)
    policy = retry or RetryPolicy()
    headers = _auth_headers(hub_token(token))
    base = hub_endpoint(endpoint)
    if client is not None:
        return _list_selected(
            client,
            base,
            ref.repo_id,
            sha,
            include_blobs=include_blobs,
            headers=headers,
            policy=policy,
        )
    with _make_client(policy, 2) as own:
        return _list_selected(
            own, base, ref.repo_id, sha, include_blobs=include_blobs, headers=headers, policy=policy
        )


def file_list_digest(files: list[RemoteFile]) -> str:
    """``sha256:<hex>`` over the lines ``path\\toid\\tsize\\n`` sorted by path.

    Paths are safe names (no tab or newline), so the encoding is unambiguous.
    """
    digest = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        digest.update(f"{f.path}\t{f.oid}\t{f.size}\n".encode())
    return f"sha256:{digest.hexdigest()}"


# --------------------------------------------------------------------------------------------
# Downloads


class _Transient(Exception):
    """Worth retrying, resuming from the bytes already written."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


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
class _Job:
    client: httpx.Client
    base: str
    repo_id: str
    sha: str
    headers: Mapping[str, str]
    policy: RetryPolicy
    blobs_dir: Path
    tmp_dir: Path


@dataclass
class _Outcome:
    file: RemoteFile
    ok: bool
    received: int = 0
    reason: str = ""
    message: str = ""


def _check_hub_headers(response: httpx.Response, job: _Job, f: RemoteFile) -> None:
    """Compare the Hub's metadata headers (not a CDN's) with the listing."""
    origin = httpx.URL(job.base)
    hub_responses = [r for r in (*response.history, response) if _same_origin(r.url, origin)]
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
        and (_SHA1_HEX.match(announced) or _SHA256_HEX.match(announced))
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


def _stream_once(job: _Job, f: RemoteFile, body: _Body, url: str, deadline: float) -> None:
    headers = {**job.headers, "Accept-Encoding": "identity"}
    if body.have:
        headers["Range"] = f"bytes={body.have}-"
    try:
        with job.client.stream("GET", url, headers=headers, follow_redirects=True) as response:
            code = response.status_code
            if code in _RETRY_STATUS:
                raise _Transient(f"HTTP {code}", _retry_after_s(response.headers))
            if code == 416 and body.have:
                raise _Permanent(
                    "size_mismatch",
                    f"{f.path}: the server has no bytes past {body.have} of {f.size}",
                )
            if code not in (200, 206):
                raise _Permanent("http_error", f"{f.path}: HTTP {code} from {response.url}")
            _check_hub_headers(response, job, f)
            if code == 206:
                match = _CONTENT_RANGE.match(response.headers.get("Content-Range", "").strip())
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
                    raise _Permanent(
                        "timeout", f"{f.path}: {body.have} of {f.size} bytes when the time ran out"
                    )
    except _RETRY_EXCEPTIONS as exc:
        raise _Transient(f"{type(exc).__name__}: {exc}") from exc
    if body.have < f.size:
        raise _Transient(f"body ended after {body.have} of {f.size} bytes")


def _download(job: _Job, f: RemoteFile) -> _Outcome:
    """Fetch one blob into ``blobs/<oid>``; never raises for problems with this one file."""
    url = f"{job.base}/datasets/{job.repo_id}/resolve/{job.sha}/{quote(f.path)}"
    policy = job.policy
    started = time.monotonic()
    deadline = started + policy.body_deadline_s(f.size)
    tmp_path = job.tmp_dir / f"{f.oid}.{uuid.uuid4().hex}.part"
    body: _Body | None = None
    try:
        with open(tmp_path, "wb") as fh:
            body = _Body(fh, f)
            transient = integrity = 0
            while True:
                try:
                    _stream_once(job, f, body, url, deadline)
                    if body.hasher.hexdigest() != f.oid:
                        raise _Integrity(
                            "hash_mismatch",
                            f"{f.path}: body hashes to {body.hasher.hexdigest()}, listing says {f.oid}",
                        )
                    break
                except _Transient as exc:
                    transient += 1
                    wait = policy.delay(transient, exc.retry_after)
                    if transient >= policy.max_attempts or time.monotonic() + wait > deadline:
                        raise _Permanent(
                            "retries_exhausted",
                            f"{f.path}: gave up after {transient} attempts: {exc}",
                        ) from exc
                    policy.sleep(wait)
                except _Integrity as exc:
                    integrity += 1
                    if integrity >= policy.integrity_attempts:
                        raise _Permanent(exc.reason, str(exc)) from exc
                    body.reset()
                    policy.sleep(policy.delay(integrity))
        os.chmod(tmp_path, 0o444)
        os.replace(tmp_path, job.blobs_dir / f.oid)
        return _Outcome(f, ok=True, received=body.received)
    except _Permanent as exc:
        return _Outcome(f, False, body.received if body else 0, exc.reason, str(exc))
    except OSError as exc:
        return _Outcome(f, False, body.received if body else 0, "io_error", f"{f.path}: {exc}")
    finally:
        tmp_path.unlink(missing_ok=True)


def _blob_is_valid(path: Path, f: RemoteFile, verify: bool) -> bool:
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


# --------------------------------------------------------------------------------------------
# Snapshot


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
    tmp = tmp_dir / f"link.{uuid.uuid4().hex}"
    try:
        try:
            os.link(blob, tmp)
        except OSError:
            shutil.copyfile(blob, tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


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
    ref = _as_ref(ref)
    policy = retry or RetryPolicy()
    base = hub_endpoint(endpoint)
    headers = _auth_headers(hub_token(token))
    workers = max(1, int(max_concurrency))
    cache_dir = Path(cache_dir)
    own_client = client is None
    http = client if client is not None else _make_client(policy, workers + 1)
    try:
        sha = _resolve(http, base, ref, headers, policy)
        files, rejected = _list_selected(
            http,
            base,
            ref.repo_id,
            sha,
            include_blobs=include_blobs,
            headers=headers,
            policy=policy,
        )
        blobs_dir, tmp_dir = cache_dir / "blobs", cache_dir / "tmp"
        root = snapshot_root(cache_dir, sha)
        for folder in (blobs_dir, tmp_dir, root, cache_dir / "manifests"):
            folder.mkdir(parents=True, exist_ok=True)

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
            if _blob_is_valid(blobs_dir / oid, group[0], verify_cached):
                done_files += len(group)
                done_bytes += sum(f.size for f in group)
            else:
                (blobs_dir / oid).unlink(missing_ok=True)
                pending.append(group[0])
        if progress and done_files:
            progress(done_files, total_files, done_bytes, total_bytes)

        job = _Job(http, base, ref.repo_id, sha, headers, policy, blobs_dir, tmp_dir)
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hub-fetch")
        futures = [pool.submit(_download, job, f) for f in pending]
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
    tmp = tmp_dir / f"manifest.{uuid.uuid4().hex}"
    tmp.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    os.replace(tmp, snapshot.manifest_path)
