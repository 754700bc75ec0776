"""A small, real HTTP server that speaks the part of the Hugging Face Hub API the fetcher uses.

``FakeHub`` keeps dataset repos in memory as git-like commits (path → bytes), serves them on
127.0.0.1 with the Hub's URLs and headers, counts body transfers per path, logs every request,
and can misbehave on purpose (fault injection, hostile listings). Use it as a context manager::

    with FakeHub() as hub:
        sha = hub.commit(FakeHub.read_folder(folder))
        os.environ["HF_ENDPOINT"] = hub.endpoint

Served endpoints (as on huggingface.co):

* ``GET /api/datasets/<org>/<name>/revision/<rev>`` → ``{"id", "sha", "siblings", ...}``;
  404 with ``X-Error-Code: RevisionNotFound`` / ``RepoNotFound``.
* ``GET /api/datasets/<org>/<name>/tree/<rev>[/<folder>]?recursive=&expand=&cursor=`` → a JSON
  page of entries; ``Link: <...>; rel="next"`` when more pages follow (``page_size``).
* ``GET|HEAD /datasets/<org>/<name>/resolve/<rev>/<path>`` → the body with ``X-Repo-Commit``,
  ``ETag`` (quoted git blob sha1), ``Accept-Ranges``, ``Content-Length``; ``Range`` → 206. LFS
  files (``lfs_patterns``) answer ``302`` to a "CDN" URL on another origin (``localhost``
  instead of ``127.0.0.1``) with ``X-Linked-Etag`` (sha256) and ``X-Linked-Size``.
"""

from __future__ import annotations

import contextlib
import email.utils
import fnmatch
import hashlib
import json
import random
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit


def git_blob_oid(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def lfs_pointer(content: bytes) -> bytes:
    sha = hashlib.sha256(content).hexdigest()
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(content)}\n".encode()


@dataclass(frozen=True)
class Fault:
    """One kind of misbehaviour, applied to matching requests.

    kind: ``status`` (answer ``status``, with ``retry_after`` as Retry-After if given),
    ``reset`` (send ``fraction`` of the body, then a TCP RST), ``truncate`` (announce the full
    length, send ``fraction``, close), ``wrong_etag`` (a different 40-hex ETag), ``slow`` (send
    the body in ``pieces`` with ``delay_s`` before each), ``stall`` (send ``fraction`` of the
    body, nothing for ``delay_s``, then the rest), ``no_length`` (no Content-Length,
    body delimited by closing the connection), ``trickle`` (no Content-Length, the body
    repeated one ``pieces``-th at a time every ``delay_s`` until the client leaves),
    ``redirect`` (a 302 to ``location``; empty: to the request's own URL).
    endpoint: ``revision``, ``tree``, ``body`` or ``any``; ``pattern`` is an fnmatch pattern on
    the file path (body), the folder (tree, ``""`` for the root) or the revision.
    times: how many times it fires in total (None: no limit); ``probability`` draws from the
    hub's seeded RNG; ``max_per_target`` caps firings per path/folder/revision.
    """

    kind: str
    endpoint: str = "body"
    pattern: str = "*"
    times: int | None = 1
    probability: float = 1.0
    max_per_target: int | None = None
    status: int = 500
    retry_after: str | None = None
    fraction: float = 0.5
    pieces: int = 2
    delay_s: float = 0.0
    location: str = ""


@dataclass
class _FaultState:
    fault: Fault
    fired: int = 0
    per_target: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class RequestRecord:
    seq: int  # arrival order
    method: str
    kind: str  # revision | tree | resolve | cdn | other
    revision: str | None  # as it appeared in the URL (decoded)
    target: str | None  # file path, tree folder
    status: int
    authorization: str | None
    range: str | None
    fault: str | None


@dataclass
class _Commit:
    sha: str
    files: dict[str, bytes]
    hostile_entries: list[tuple[str, dict[str, Any]]]
    listing_overrides: dict[str, dict[str, Any]]


class _ClientGone(Exception):
    pass


class FakeHub:
    """An in-memory Hub serving dataset repos over real HTTP on 127.0.0.1."""

    def __init__(
        self,
        *,
        repo_id: str = "flashinfer-ai/flashinfer-trace",
        token: str | None = None,
        page_size: int = 50,
        lfs_patterns: Iterable[str] = ("*.safetensors",),
        lfs_redirect: bool = True,
        supports_range: bool = True,
        cdn_host: str = "localhost",
        seed: int = 0,
        endless_pages: bool = False,
    ) -> None:
        self.repo_id = repo_id
        self.token = token
        self.page_size = page_size
        self.lfs_patterns = tuple(lfs_patterns)
        self.lfs_redirect = lfs_redirect
        self.supports_range = supports_range
        self.endless_pages = endless_pages  # every tree page links to a next one
        self._cdn_host = cdn_host
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._commits: dict[str, _Commit] = {}
        self._refs: dict[str, str] = {}
        self._faults: list[_FaultState] = []
        self._counter = 0
        self.body_transfers: Counter[str] = Counter()
        self._records: list[RequestRecord] = []
        # Requests that arrived before the last reset_counters are not recorded after it: a
        # request is recorded once its answer is sent, which may be after a reset.
        self._counted_from = 0
        self._arrivals = 0
        self.on_request: Callable[[RequestRecord], None] | None = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- repository state ------------------------------------------------------------------

    @staticmethod
    def read_folder(folder: Path) -> dict[str, bytes]:
        """All files below ``folder`` as ``{posix relative path: bytes}``."""
        return {
            p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(Path(folder).rglob("*"))
            if p.is_file()
        }

    def commit(
        self,
        changes: Mapping[str, bytes | None],
        *,
        branch: str = "main",
        hostile_entries: Iterable[tuple[str, dict[str, Any]]] = (),
        listing_overrides: Mapping[str, dict[str, Any]] | None = None,
    ) -> str:
        """A new commit on ``branch``: its parent's files with ``changes`` applied (None deletes).

        ``hostile_entries`` are raw listing entries added to the listing of a folder (``""`` is
        the root); ``listing_overrides`` replace fields of a file's listing entry (and the
        metadata headers derived from it), while the body served stays the real content.
        """
        with self._lock:
            parent = self._refs.get(branch)
            files = dict(self._commits[parent].files) if parent else {}
            for path, content in changes.items():
                if content is None:
                    files.pop(path, None)
                else:
                    files[path] = content
            self._counter += 1
            digest = hashlib.sha1(f"{parent}:{self._counter}".encode())
            for path in sorted(files):
                digest.update(f"{path}\0{git_blob_oid(files[path])}\n".encode())
            sha = digest.hexdigest()
            self._commits[sha] = _Commit(
                sha, files, list(hostile_entries), dict(listing_overrides or {})
            )
            self._refs[branch] = sha
            return sha

    def set_ref(self, name: str, sha: str) -> None:
        with self._lock:
            self._refs[name] = sha

    def head(self, branch: str = "main") -> str:
        return self._refs[branch]

    def files_at(self, rev: str) -> dict[str, bytes]:
        return dict(self._commits[self._resolve(rev)].files)

    def inject(self, *faults: Fault) -> None:
        with self._lock:
            self._faults.extend(_FaultState(f) for f in faults)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def reset_counters(self) -> None:
        with self._lock:
            self.body_transfers.clear()
            self._records.clear()
            self._counted_from = self._arrivals + 1

    @property
    def requests(self) -> list[RequestRecord]:
        """Finished requests in arrival order (a record is added when its answer is done)."""
        with self._lock:
            return sorted(self._records, key=lambda r: r.seq)

    def _arrival(self) -> int:
        with self._lock:
            self._arrivals += 1
            return self._arrivals

    def _resolve(self, rev: str) -> str:
        if rev in self._refs:
            return self._refs[rev]
        if rev in self._commits:
            return rev
        raise KeyError(rev)

    def _is_lfs(self, path: str) -> bool:
        return any(fnmatch.fnmatch(path, pat) for pat in self.lfs_patterns)

    def _entry(self, commit: _Commit, path: str) -> dict[str, Any]:
        content = commit.files[path]
        if self._is_lfs(path):
            pointer = lfs_pointer(content)
            entry: dict[str, Any] = {
                "type": "file",
                "oid": git_blob_oid(pointer),
                "size": len(content),
                "lfs": {
                    "oid": hashlib.sha256(content).hexdigest(),
                    "size": len(content),
                    "pointerSize": len(pointer),
                },
                "path": path,
            }
        else:
            entry = {
                "type": "file",
                "oid": git_blob_oid(content),
                "size": len(content),
                "path": path,
            }
        entry.update(commit.listing_overrides.get(path, {}))
        return entry

    def _tree(self, commit: _Commit, folder: str, recursive: bool) -> list[dict[str, Any]]:
        prefix = f"{folder}/" if folder else ""
        entries: dict[str, dict[str, Any]] = {}
        for path in commit.files:
            if not path.startswith(prefix):
                continue
            rest = path[len(prefix) :].split("/")
            depth = len(rest) if recursive else 1
            for i in range(1, min(depth, len(rest) - 1) + 1):
                d = prefix + "/".join(rest[:i])
                entries[d] = {
                    "type": "directory",
                    "oid": hashlib.sha1(d.encode()).hexdigest(),
                    "size": 0,
                    "path": d,
                }
            if recursive or len(rest) == 1:
                entries[path] = self._entry(commit, path)
        listed = [entries[k] for k in sorted(entries)]
        listed.extend(e for f, e in commit.hostile_entries if f == folder)
        return listed

    def _pick_fault(
        self, endpoint: str, target: str, kinds: Iterable[str] | None = None
    ) -> Fault | None:
        with self._lock:
            for state in self._faults:
                f = state.fault
                if f.endpoint not in (endpoint, "any") or not fnmatch.fnmatchcase(
                    target, f.pattern
                ):
                    continue
                if kinds is not None and f.kind not in kinds:
                    continue
                if f.times is not None and state.fired >= f.times:
                    continue
                if f.max_per_target is not None and state.per_target[target] >= f.max_per_target:
                    continue
                if f.probability < 1.0 and self._rng.random() >= f.probability:
                    continue
                state.fired += 1
                state.per_target[target] += 1
                return f
        return None

    # ---- server ----------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        assert self._server is not None, "FakeHub is not running"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def cdn_base(self) -> str:
        assert self._server is not None
        return f"http://{self._cdn_host}:{self._server.server_address[1]}"

    def start(self) -> FakeHub:
        if self._cdn_host != "127.0.0.1":
            try:
                if socket.gethostbyname(self._cdn_host) != "127.0.0.1":
                    self._cdn_host = "127.0.0.1"
            except OSError:
                self._cdn_host = "127.0.0.1"
        server = _Server(("127.0.0.1", 0), _Handler)
        server.hub = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.02,), name="fake-hub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    hub: FakeHub

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that go away mid-body are part of the tests


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server  # type: ignore[assignment]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle + delayed ACK
        # add ~40 ms to every keep-alive response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def finish(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            super().finish()

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    # ---- routing ---------------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        hub = self.server.hub
        seq = hub._arrival()
        split = urlsplit(self.path)
        seg = split.path.split("/")[1:]
        query = parse_qs(split.query)
        self._status = 0
        self._fault: str | None = None
        kind, revision, target = "other", None, None
        try:
            if len(seg) >= 6 and seg[:2] == ["api", "datasets"] and seg[4] in ("revision", "tree"):
                kind, repo_id, revision = seg[4], f"{seg[2]}/{seg[3]}", unquote(seg[5])
                target = unquote("/".join(seg[6:]))
                if self._authorized(repo_id):
                    if kind == "revision":
                        self._revision(revision)
                    else:
                        self._tree_page(revision, target, query)
            elif len(seg) >= 6 and seg[0] == "datasets" and seg[3] == "resolve":
                kind, repo_id, revision = "resolve", f"{seg[1]}/{seg[2]}", unquote(seg[4])
                target = unquote("/".join(seg[5:]))
                if self._authorized(repo_id):
                    self._resolve_file(method, revision, target)
            elif len(seg) == 2 and seg[0] == "_cdn":
                kind, target = "cdn", query.get("path", [""])[0]
                self._cdn(method, seg[1], target)
            else:
                self._json(404, {"error": "not found"})
        except (_ClientGone, OSError):
            self.close_connection = True
        finally:
            record = RequestRecord(
                seq=seq,
                method=method,
                kind=kind,
                revision=revision,
                target=target,
                status=self._status,
                authorization=self.headers.get("Authorization"),
                range=self.headers.get("Range"),
                fault=self._fault,
            )
            with hub._lock:
                if seq >= hub._counted_from:
                    hub._records.append(record)
            if hub.on_request is not None:
                hub.on_request(record)

    def _authorized(self, repo_id: str) -> bool:
        hub = self.server.hub
        if hub.token is not None and self.headers.get("Authorization") != f"Bearer {hub.token}":
            self._json(401, {"error": "Invalid credentials"}, {"X-Error-Code": "RepoNotFound"})
            return False
        if repo_id != hub.repo_id:
            self._json(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
            return False
        return True

    def _commit_for(self, revision: str) -> _Commit | None:
        hub = self.server.hub
        with hub._lock:
            try:
                return hub._commits[hub._resolve(revision)]
            except KeyError:
                pass
        self._json(404, {"error": "Revision not found"}, {"X-Error-Code": "RevisionNotFound"})
        return None

    # ---- endpoints -------------------------------------------------------------------------

    def _revision(self, revision: str) -> None:
        hub = self.server.hub
        fault = hub._pick_fault("revision", revision)
        commit = self._commit_for(revision)
        if commit is None:
            return
        doc = {
            "_id": "fake",
            "id": hub.repo_id,
            "sha": commit.sha,
            "private": False,
            "siblings": [{"rfilename": p} for p in sorted(commit.files)],
        }
        self._send(
            200, {"Content-Type": "application/json"}, json.dumps(doc).encode(), "GET", fault
        )

    def _tree_page(self, revision: str, folder: str, query: dict[str, list[str]]) -> None:
        hub = self.server.hub
        fault = hub._pick_fault("tree", folder)
        commit = self._commit_for(revision)
        if commit is None:
            return
        recursive = query.get("recursive", ["false"])[0].lower() in ("true", "1")
        if folder and not any(p.startswith(folder + "/") for p in commit.files):
            self._json(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
            return
        entries = hub._tree(commit, folder, recursive)
        start = int(query.get("cursor", ["0"])[0])
        page = entries[start : start + hub.page_size]
        headers = {"Content-Type": "application/json"}
        if hub.endless_pages or start + hub.page_size < len(entries):
            path = urlsplit(self.path).path
            nxt = (
                f"{hub.endpoint}{path}?recursive={str(recursive).lower()}"
                f"&expand=false&cursor={start + hub.page_size}"
            )
            headers["Link"] = f'<{nxt}>; rel="next"'
        self._send(200, headers, json.dumps(page).encode(), "GET", fault)

    def _resolve_file(self, method: str, revision: str, path: str) -> None:
        hub = self.server.hub
        commit = self._commit_for(revision)
        if commit is None:
            return
        if path not in commit.files:
            self._json(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
            return
        entry = hub._entry(commit, path)
        redirect = isinstance(entry.get("lfs"), dict) and hub.lfs_redirect
        # Behind a redirect the Hub itself can only fail or lie in headers; the CDN does the rest.
        kinds = ("status", "wrong_etag") if redirect else None
        fault = hub._pick_fault("body", path, kinds) if method == "GET" else None
        headers = {"X-Repo-Commit": commit.sha, "ETag": f'"{entry["oid"]}"'}
        lfs = entry.get("lfs")
        if isinstance(lfs, dict):
            headers["X-Linked-Etag"] = f'"{lfs["oid"]}"'
            headers["X-Linked-Size"] = str(lfs["size"])
            if hub.lfs_redirect:
                sha256 = hashlib.sha256(commit.files[path]).hexdigest()
                headers["Location"] = f"{hub.cdn_base}/_cdn/{sha256}?path={quote(path, safe='')}"
                if fault is not None and fault.kind == "wrong_etag":
                    headers["X-Linked-Etag"] = '"' + "0" * 64 + '"'
                    self._fault = fault.kind
                elif fault is not None and fault.kind == "status":
                    self._send(200, {}, b"", method, fault)
                    return
                self._send(302, headers, b"", "HEAD")  # a redirect has no body to count
                return
            headers["ETag"] = f'"{lfs["oid"]}"'
        self._send_file(method, commit.files[path], path, headers, fault)

    def _cdn(self, method: str, sha256: str, path: str) -> None:
        hub = self.server.hub
        with hub._lock:
            content = next(
                (
                    c.files[path]
                    for c in hub._commits.values()
                    if path in c.files and hashlib.sha256(c.files[path]).hexdigest() == sha256
                ),
                None,
            )
        if content is None:
            self._json(404, {"error": "no such object"})
            return
        kinds = ("status", "reset", "truncate", "slow", "stall", "no_length")
        fault = hub._pick_fault("body", path, kinds) if method == "GET" else None
        self._send_file(method, content, path, {"ETag": '"cdn-etag-not-a-hash"'}, fault)

    def _send_file(
        self, method: str, content: bytes, path: str, headers: dict[str, str], fault: Fault | None
    ) -> None:
        hub = self.server.hub
        headers = {**headers, "Content-Type": "application/octet-stream"}
        status, body = 200, content
        range_header = self.headers.get("Range")
        if hub.supports_range:
            headers["Accept-Ranges"] = "bytes"
            if range_header:
                parsed = _parse_range(range_header, len(content))
                if parsed is None:
                    headers["Content-Range"] = f"bytes */{len(content)}"
                    self._send(416, headers, b"", method)
                    return
                first, last = parsed
                status, body = 206, content[first : last + 1]
                headers["Content-Range"] = f"bytes {first}-{last}/{len(content)}"
        if method == "GET" and (fault is None or fault.kind != "status"):
            with hub._lock:
                hub.body_transfers[path] += 1
        self._send(status, headers, body, method, fault)

    # ---- writing ---------------------------------------------------------------------------

    def _json(self, status: int, doc: Any, headers: Mapping[str, str] | None = None) -> None:
        body = json.dumps(doc).encode()
        self._send(status, {"Content-Type": "application/json", **(headers or {})}, body, "GET")

    def _send(
        self,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        method: str,
        fault: Fault | None = None,
    ) -> None:
        headers = dict(headers)
        if fault is not None:
            self._fault = fault.kind
            if fault.kind == "status":
                status, body = fault.status, json.dumps({"error": "injected"}).encode()
                headers = {"Content-Type": "application/json"}
                if fault.retry_after is not None:
                    headers["Retry-After"] = fault.retry_after
            elif fault.kind == "wrong_etag":
                headers["ETag"] = f'"{hashlib.sha1(b"wrong").hexdigest()}"'
            elif fault.kind == "redirect":
                status, body = 302, b""
                own = f"http://{self.headers.get('Host')}{self.path}"
                headers = {"Location": fault.location or own}
        self._status = status
        no_length = fault is not None and fault.kind in ("no_length", "trickle")
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if no_length:
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method == "HEAD":
            self.wfile.flush()
            return
        if fault is not None and fault.kind in ("reset", "truncate"):
            self.wfile.write(body[: int(len(body) * fault.fraction)])
            self.wfile.flush()
            self.close_connection = True
            if fault.kind == "reset":
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()
                raise _ClientGone
            return
        if fault is not None and fault.kind == "trickle":
            step = max(1, -(-len(body) // max(1, fault.pieces)))
            while True:  # until writing fails: the client gave up
                for i in range(0, max(len(body), 1), step):
                    time.sleep(fault.delay_s)
                    self.wfile.write(body[i : i + step] or b" ")
                    self.wfile.flush()
        if fault is not None and fault.kind == "stall":
            cut = int(len(body) * fault.fraction)
            self.wfile.write(body[:cut])
            self.wfile.flush()
            time.sleep(fault.delay_s)
            self.wfile.write(body[cut:])  # fails when the client gave up meanwhile
            self.wfile.flush()
            return
        if fault is not None and fault.kind == "slow":
            step = max(1, -(-len(body) // max(1, fault.pieces)))
            for i in range(0, max(len(body), 1), step):
                time.sleep(fault.delay_s)
                self.wfile.write(body[i : i + step])
                self.wfile.flush()
            return
        self.wfile.write(body)
        self.wfile.flush()


def _parse_range(value: str, size: int) -> tuple[int, int] | None:
    """``bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` → inclusive (first, last), None if unsatisfiable."""
    unit, _, spec = value.partition("=")
    if unit.strip() != "bytes" or "," in spec:
        return None
    first_s, _, last_s = spec.strip().partition("-")
    try:
        if first_s == "":
            n = int(last_s)
            first, last = max(0, size - n), size - 1
        else:
            first = int(first_s)
            last = int(last_s) if last_s else size - 1
    except ValueError:
        return None
    last = min(last, size - 1)
    if first >= size or first > last:
        return None
    return first, last


def http_date(seconds_from_now: float) -> str:
    """An HTTP-date (for Retry-After) ``seconds_from_now`` in the future."""
    return email.utils.formatdate(time.time() + seconds_from_now, usegmt=True)
