"""tracehouse.fetch.hub against a real HTTP server (tests/fixtures/hub_server.py) on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.fixtures.hub_server import FakeHub, Fault, RequestRecord, git_blob_oid, http_date
from tracehouse.fetch.hub import (
    HubDatasetRef,
    HubError,
    RepositoryNotFoundError,
    RetryPolicy,
    RevisionNotFoundError,
    fetch_dataset,
    list_remote_files,
    parse_hub_uri,
    resolve_revision,
)
from tracehouse.fetch.safety import UnsafePathError, check_remote_path
from tracehouse.rejects import HUB_FAILURE_REASONS as FAILURE_REASONS
from tracehouse.rejects import HUB_LISTING_REASONS as LISTING_REJECT_REASONS
from tracehouse.rejects import UNSAFE_NAME_REASONS

REPO = "flashinfer-ai/flashinfer-trace"
URI = f"hf://datasets/{REPO}"
GOLDEN = Path(__file__).resolve().parents[3] / "shared/golden/kernelindex-2026-08-16/dataset"
requires_golden = pytest.mark.skipif(not GOLDEN.is_dir(), reason="shared golden dataset not found")

BIG_TRACE = "traces/baseline/gemm/gemm_big.jsonl"
BLOB = "blob/workloads/gemm/gemm_big/gemm_big_0001.safetensors"


class SleepRecorder:
    """Stands in for time.sleep: records the requested waits, returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, seconds: float) -> None:
        with self._lock:
            self.waits.append(seconds)


def fast_policy(sleeper: SleepRecorder | None = None, **overrides: float) -> RetryPolicy:
    params: dict = {
        "backoff_initial_s": 0.001,
        "backoff_max_s": 0.005,
        "read_timeout_s": 5.0,
        "connect_timeout_s": 5.0,
        "deadline_s": 20.0,
        "sleep": sleeper or SleepRecorder(),
    }
    params.update(overrides)
    return RetryPolicy(**params)


def small_dataset() -> dict[str, bytes]:
    line = (
        b'{"definition":"gemm_big","workload":{"axes":{"M":%d}},"solution":"s","evaluation":null}\n'
    )
    return {
        "definitions/gemm/gemm_big.json": b'{"name": "gemm_big", "op_type": "gemm"}',
        "definitions/rmsnorm/rmsnorm_h128.json": b'{"name": "rmsnorm_h128"}\n',
        "workloads/gemm/gemm_big.jsonl": b'{"definition":"gemm_big"}\n',
        "solutions/baseline/gemm/gemm_big/torch_matmul.json": b'{"name": "torch_matmul"}',
        "traces/baseline/rmsnorm/rmsnorm_h128.jsonl": b"",  # empty files exist in the wild
        BIG_TRACE: b"".join(line % i for i in range(4000)),  # ~350 KB: several chunks
        "README.md": b"# not selected\n",
        "tests/references/test_gemm_big.py": b"# not selected\n",
        "dataset_info.json": b'{"root": "level json is selected"}',
        BLOB: hashlib.sha256(b"seed").digest() * 8192,  # 256 KiB, served as LFS via the "CDN"
    }


def selected(files: dict[str, bytes], include_blobs: bool = False) -> dict[str, bytes]:
    def keep(path: str) -> bool:
        top, sep, _ = path.partition("/")
        if not sep:
            return path.endswith((".json", ".jsonl"))
        return top in {"definitions", "solutions", "workloads", "traces"} or (
            include_blobs and top == "blob"
        )

    return {p: c for p, c in files.items() if keep(p)}


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def body_requests(hub: FakeHub, path: str) -> list[RequestRecord]:
    return [r for r in hub.requests if r.kind in ("resolve", "cdn") and r.target == path]


def _serve(monkeypatch: pytest.MonkeyPatch, page_size: int):
    with FakeHub(repo_id=REPO, page_size=page_size) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint + "/")  # trailing slash is stripped
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
        yield server


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch):
    """Tiny listing pages, so the small dataset exercises pagination."""
    yield from _serve(monkeypatch, page_size=4)


@pytest.fixture
def golden_hub(monkeypatch: pytest.MonkeyPatch):
    """The Hub's page size (1000 entries), for the 200-file golden dataset."""
    yield from _serve(monkeypatch, page_size=1000)


# ---- URIs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "repo_id", "revision"),
    [
        (URI, REPO, "main"),
        (URI + "/", REPO, "main"),
        (URI + "@v1.0", REPO, "v1.0"),
        (URI + "@" + "a" * 40, REPO, "a" * 40),
        (URI + "@refs/pr/3", REPO, "refs/pr/3"),
        (URI + "@refs%2Fpr%2F3", REPO, "refs/pr/3"),
        (URI + "@refs/convert/parquet", REPO, "refs/convert/parquet"),
        (URI + "@feature%2Fnew-traces", REPO, "feature/new-traces"),
        ("hf://datasets/user_1/my.data-set@dev", "user_1/my.data-set", "dev"),
    ],
)
def test_parse_hub_uri_accepts(text: str, repo_id: str, revision: str) -> None:
    assert parse_hub_uri(text) == HubDatasetRef(repo_id=repo_id, revision=revision)


@pytest.mark.parametrize(
    "text",
    ["data/demo", "/abs/path", "https://huggingface.co/datasets/a/b", "HF://datasets/a/b", ""],
)
def test_parse_hub_uri_ignores_other_schemes(text: str) -> None:
    assert parse_hub_uri(text) is None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("hf://flashinfer-ai/flashinfer-trace", "only dataset repos"),
        ("hf://spaces/a/b", "only dataset repos"),
        ("hf://datasets/only-name", "expected hf://datasets/<org>/<name>"),
        ("hf://datasets/a/b/traces", "paths inside the repo"),
        ("hf://datasets//b", "expected hf://datasets/<org>/<name>"),
        ("hf://datasets/a/b@", "empty revision"),
        ("hf://datasets/a/b@feature/x", "percent-encoded"),
        ("hf://datasets/-a/b", "invalid repo name"),
        ("hf://datasets/a/b..c", "invalid repo name"),
        ("hf://datasets/a/b--c", "invalid repo name"),
        ("hf://datasets/a/b.git", "must not end with '.git'"),
        ("hf://datasets/a/b?revision=x", "query strings"),
        ("hf://datasets/a/b@x..y", "not a valid git revision"),
        ("hf://datasets/a/b@has%20space", "not a valid git revision"),
        ("hf://datasets/a/b@%FF", "percent-encoded UTF-8"),
    ],
)
def test_parse_hub_uri_rejects_malformed(text: str, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_hub_uri(text)
    assert fragment in str(info.value)
    assert text in str(info.value)


@pytest.mark.parametrize(
    ("repo_id", "revision"),
    [
        ("a", "main"),
        ("a/b/c", "main"),
        ("../x", "main"),
        ("a/b", ""),
        ("a/b", "x\ny"),
        ("a/b", ".."),
    ],
)
def test_hub_dataset_ref_validates(repo_id: str, revision: str) -> None:
    with pytest.raises(ValueError):
        HubDatasetRef(repo_id, revision)


@settings(max_examples=40, deadline=None)
@given(
    org=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,10}[A-Za-z0-9]", fullmatch=True),
    revision=st.text(alphabet="abcXYZ019._-/+", min_size=1, max_size=20),
)
def test_uri_round_trips(org: str, revision: str) -> None:
    assume("--" not in org)
    try:
        ref = parse_hub_uri(f"hf://datasets/{org}/data@{quote(revision, safe='')}")
    except ValueError:
        assume(False)
        return
    assert ref is not None and ref.revision == revision
    assert parse_hub_uri(ref.uri) == ref


# ---- safety ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "empty"),
        ("/etc/passwd", "absolute"),
        ("C:/x.json", "drive"),
        ("traces\\x.jsonl", "backslash"),
        ("traces/a\x00b", "control_char"),
        ("traces/a\nb", "control_char"),
        ("traces/a\x9bb", "control_char"),
        ("traces/a\u2028b", "control_char"),
        ("traces//a", "empty_component"),
        ("traces/", "empty_component"),
        ("traces/./a", "dot_component"),
        ("traces/../../a", "dot_dot"),
        ("..", "dot_dot"),
        ("traces/" + "x" * 256, "too_long"),
        ("traces/\ud800", "invalid_unicode"),
        (None, "not_a_string"),
    ],
)
def test_check_remote_path_rejects(name: object, reason: str) -> None:
    with pytest.raises(UnsafePathError) as info:
        check_remote_path(name)
    assert info.value.reason == reason
    assert reason in UNSAFE_NAME_REASONS


@pytest.mark.parametrize("name", ["a.json", "traces/b/c..d.jsonl", "x/.hidden", "ünï/çødé.json"])
def test_check_remote_path_accepts(name: str) -> None:
    assert check_remote_path(name) == name


# ---- revisions ---------------------------------------------------------------------------------


def test_resolve_revision(hub: FakeHub) -> None:
    first = hub.commit(small_dataset())
    hub.set_ref("v1", first)
    second = hub.commit({BIG_TRACE: b"{}\n"})
    policy = fast_policy()
    assert resolve_revision(URI, retry=policy) == second
    assert resolve_revision(f"{URI}@v1", retry=policy) == first
    assert resolve_revision(HubDatasetRef(REPO, first), retry=policy) == first
    hub.set_ref("feature/x", first)
    assert resolve_revision(f"{URI}@feature%2Fx", retry=policy) == first
    assert any(r.revision == "feature/x" for r in hub.requests)
    with pytest.raises(RevisionNotFoundError):
        resolve_revision(f"{URI}@nope", retry=policy)
    with pytest.raises(RepositoryNotFoundError):
        resolve_revision("hf://datasets/someone/else", retry=policy)


def test_resolve_revision_with_explicit_endpoint_and_client(hub: FakeHub, monkeypatch) -> None:
    sha = hub.commit(small_dataset())
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # would fail if read
    with httpx.Client() as client:
        assert resolve_revision(URI, endpoint=hub.endpoint, client=client) == sha


def test_revision_is_resolved_first_and_only_the_sha_is_read(hub: FakeHub, tmp_path: Path) -> None:
    files = small_dataset()
    old = hub.commit(files)
    pushed: list[str] = []

    def push_after_resolve(record: RequestRecord) -> None:
        if record.kind == "revision" and not pushed:
            pushed.append(hub.commit({BIG_TRACE: b'{"moved": true}\n'}))

    hub.on_request = push_after_resolve
    snap = fetch_dataset(URI, tmp_path / "cache", retry=fast_policy())
    assert pushed and hub.head() != old
    assert snap.resolved_sha == old and snap.requested_revision == "main"
    assert hub.requests[0].kind == "revision"
    reads = [r for r in hub.requests if r.kind in ("tree", "resolve")]
    assert reads and all(r.revision == old for r in reads)
    assert tree_bytes(snap.root) == selected(files)
    assert snap.root == tmp_path / "cache" / "snapshots" / old


# ---- snapshots and the cache --------------------------------------------------------------------


@requires_golden
def test_snapshot_equals_served_folder(golden_hub: FakeHub, tmp_path: Path) -> None:
    served = FakeHub.read_folder(GOLDEN)
    extra = {BLOB: b"\x00" * 1000, "README.md": b"readme", "dataset_info.json": b"{}"}
    sha = golden_hub.commit({**served, **extra})
    calls: list[tuple[int, int, int, int]] = []
    snap = fetch_dataset(
        URI,
        tmp_path / "cache",
        retry=fast_policy(),
        progress=lambda *a: calls.append(a),
    )
    expected = selected({**served, **extra})
    assert BLOB not in expected and "README.md" not in expected
    assert tree_bytes(snap.root) == expected
    assert not (snap.root / "blob").exists()
    assert snap.complete and not snap.rejected
    assert (snap.files, snap.bytes) == (len(expected), sum(map(len, expected.values())))
    assert snap.resolved_sha == sha and snap.repo_id == REPO and snap.source_uri == URI
    assert snap.fetched_at.tzinfo is not None
    assert snap.file_list_digest.startswith("sha256:") and len(snap.file_list_digest) == 71
    assert sorted(snap.transferred_files) == sorted(expected)
    assert snap.transferred_bytes == snap.bytes
    assert calls[0] == (0, len(expected), 0, snap.bytes)
    assert calls[-1] == (len(expected), len(expected), snap.bytes, snap.bytes)
    assert all(a[0] <= b[0] and a[2] <= b[2] for a, b in zip(calls, calls[1:], strict=False))
    assert snap.manifest_path is not None and snap.manifest_path.is_file()
    # the same content is addressable by oid
    some = "definitions/gemm/gemm_n128_k2048.json"
    blob = tmp_path / "cache" / "blobs" / git_blob_oid(served[some])
    assert blob.read_bytes() == served[some]
    assert os.path.samefile(blob, snap.root / some)


@requires_golden
def test_refetch_transfers_nothing_and_new_commit_only_the_changed_file(
    golden_hub: FakeHub, tmp_path: Path
) -> None:
    served = FakeHub.read_folder(GOLDEN)
    old = golden_hub.commit(served)
    cache = tmp_path / "cache"
    first = fetch_dataset(URI, cache, retry=fast_policy())
    assert first.complete

    golden_hub.reset_counters()
    again = fetch_dataset(URI, cache, retry=fast_policy())
    assert sum(golden_hub.body_transfers.values()) == 0
    assert again.transferred_files == [] and again.transferred_bytes == 0
    assert again.file_list_digest == first.file_list_digest
    assert tree_bytes(again.root) == served

    trace = "traces/baseline/gemm/gemm_n128_k2048.jsonl"
    changed = served[trace] + b'{"definition":"gemm_n128_k2048","appended":true}\n'
    new = golden_hub.commit({trace: changed})
    golden_hub.reset_counters()
    updated = fetch_dataset(URI, cache, retry=fast_policy())
    assert updated.resolved_sha == new != old
    assert dict(golden_hub.body_transfers) == {trace: 1}
    assert updated.transferred_files == [trace]
    assert updated.transferred_bytes == len(changed)
    assert updated.file_list_digest != first.file_list_digest
    assert tree_bytes(updated.root) == {**served, trace: changed}
    assert tree_bytes(first.root) == served  # the old snapshot is left as it was


def test_include_blobs_uses_lfs_redirect_and_prunes_when_dropped(
    hub: FakeHub, tmp_path: Path
) -> None:
    files = small_dataset()
    hub.commit(files)
    cache = tmp_path / "cache"
    with_blobs = fetch_dataset(URI, cache, include_blobs=True, retry=fast_policy())
    assert tree_bytes(with_blobs.root) == selected(files, include_blobs=True)
    blob_reqs = body_requests(hub, BLOB)
    assert [(r.kind, r.status) for r in blob_reqs] == [("resolve", 302), ("cdn", 200)]
    lfs_oid = hashlib.sha256(files[BLOB]).hexdigest()
    assert (cache / "blobs" / lfs_oid).read_bytes() == files[BLOB]
    listed, _ = list_remote_files(URI, with_blobs.resolved_sha, include_blobs=True)
    assert {f.path: f.lfs for f in listed}[BLOB] is True

    without = fetch_dataset(URI, cache, retry=fast_policy())
    assert without.root == with_blobs.root
    assert tree_bytes(without.root) == selected(files)
    assert not (without.root / "blob").exists()
    assert without.transferred_files == []


def test_a_link_to_a_folder_in_the_snapshot_is_neither_followed_nor_removed(
    hub: FakeHub, tmp_path: Path
) -> None:
    """The snapshot folder may be another tool's: a link it holds where tracehouse would write
    a folder is left as it is, and the files below it fail instead of being written through it
    (they used to be written after the link was removed)."""
    files = small_dataset()
    sha = hub.commit(files)
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    outside.mkdir()
    link = cache / "snapshots" / sha / "workloads"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside, target_is_directory=True)
    snap = fetch_dataset(URI, cache, retry=fast_policy())
    assert [(f.path, f.reason) for f in snap.failed] == [
        ("workloads/gemm/gemm_big.jsonl", "io_error")
    ]
    assert "is a link" in snap.failed[0].message
    assert link.is_symlink() and list(outside.iterdir()) == []
    assert (snap.root / BIG_TRACE).read_bytes() == files[BIG_TRACE]  # the others are there


def test_caller_supplied_client_follows_the_lfs_redirect(hub: FakeHub, tmp_path: Path) -> None:
    files = small_dataset()
    hub.commit(files)
    with httpx.Client() as client:  # httpx does not follow redirects by default
        snap = fetch_dataset(URI, tmp_path / "c", include_blobs=True, client=client)
        assert not client.is_closed
    assert snap.complete and (snap.root / BLOB).read_bytes() == files[BLOB]


def test_identical_bodies_are_downloaded_once(hub: FakeHub, tmp_path: Path) -> None:
    files = small_dataset()
    copy = "traces/baseline/gemm/gemm_big_copy.jsonl"
    hub.commit({**files, copy: files[BIG_TRACE]})
    snap = fetch_dataset(URI, tmp_path / "c", retry=fast_policy())
    assert hub.body_transfers[BIG_TRACE] + hub.body_transfers[copy] == 1
    assert (snap.root / copy).read_bytes() == (snap.root / BIG_TRACE).read_bytes()
    assert snap.files == len(selected(files)) + 1


def test_verify_cached_replaces_a_corrupted_blob(hub: FakeHub, tmp_path: Path) -> None:
    files = small_dataset()
    hub.commit(files)
    cache = tmp_path / "cache"
    fetch_dataset(URI, cache, retry=fast_policy())
    blob = cache / "blobs" / git_blob_oid(files[BIG_TRACE])
    blob.chmod(0o644)
    data = bytearray(blob.read_bytes())
    data[100] ^= 0xFF
    blob.write_bytes(bytes(data))
    hub.reset_counters()
    trusting = fetch_dataset(URI, cache, retry=fast_policy())
    assert trusting.transferred_files == []  # same size: trusted without verify_cached
    verifying = fetch_dataset(URI, cache, retry=fast_policy(), verify_cached=True)
    assert verifying.transferred_files == [BIG_TRACE]
    assert (verifying.root / BIG_TRACE).read_bytes() == files[BIG_TRACE]


# ---- faults that must be survived --------------------------------------------------------------

FAULTS = {
    "revision_500": [Fault("status", endpoint="revision", times=2)],
    "revision_reset": [Fault("reset", endpoint="revision")],
    "tree_root_503": [Fault("status", endpoint="tree", pattern="", status=503, times=2)],
    "tree_traces_500": [Fault("status", endpoint="tree", pattern="traces")],
    "tree_truncated": [Fault("truncate", endpoint="tree", pattern="definitions")],
    "tree_reset": [Fault("reset", endpoint="tree", pattern="solutions")],
    "body_500": [Fault("status", pattern=BIG_TRACE, times=3)],
    "body_502_all_files": [Fault("status", status=502, times=None, max_per_target=1)],
    "body_reset": [Fault("reset", pattern=BIG_TRACE)],
    "body_truncated": [Fault("truncate", pattern=BIG_TRACE, fraction=0.4)],
    "body_truncated_twice": [Fault("truncate", pattern=BIG_TRACE, fraction=0.3, times=2)],
    "body_wrong_etag": [Fault("wrong_etag", pattern=BIG_TRACE)],
    "body_no_length": [Fault("no_length", pattern=BIG_TRACE)],
    "lfs_cdn_reset": [Fault("reset", pattern=BLOB)],
    "lfs_cdn_truncated": [Fault("truncate", pattern=BLOB)],
    "lfs_wrong_linked_etag": [Fault("wrong_etag", pattern=BLOB)],
    "lfs_hub_503": [Fault("status", pattern=BLOB, status=503)],
    "random_everywhere": [
        Fault(kind, endpoint="any", times=None, probability=0.15, max_per_target=2)
        for kind in ("status", "reset", "truncate")
    ],
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_faults_are_survived(hub: FakeHub, tmp_path: Path, name: str) -> None:
    files = small_dataset()
    hub.commit(files)
    hub.inject(*FAULTS[name])
    snap = fetch_dataset(URI, tmp_path / "cache", include_blobs=True, retry=fast_policy())
    assert snap.complete, snap.failed
    assert tree_bytes(snap.root) == selected(files, include_blobs=True)
    assert any(r.fault for r in hub.requests), "the fault never fired"
    assert not list((tmp_path / "cache" / "tmp").iterdir())  # no partial file left behind


def test_resume_uses_range_after_a_cut_body(hub: FakeHub, tmp_path: Path) -> None:
    files = small_dataset()
    hub.commit(files)
    hub.inject(Fault("truncate", pattern=BIG_TRACE, fraction=0.5))
    snap = fetch_dataset(URI, tmp_path / "cache", retry=fast_policy())
    assert snap.complete
    reqs = body_requests(hub, BIG_TRACE)
    assert [r.status for r in reqs] == [200, 206]
    assert reqs[1].range == f"bytes={len(files[BIG_TRACE]) // 2}-"
    big = next(p for p in snap.transferred_files if p == BIG_TRACE)
    assert big and snap.transferred_bytes == snap.bytes  # resumed, nothing fetched twice


def test_server_without_range_support_restarts_the_body(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with FakeHub(repo_id=REPO, supports_range=False) as server:
        files = small_dataset()
        server.commit(files)
        server.inject(Fault("truncate", pattern=BIG_TRACE, fraction=0.5))
        snap = fetch_dataset(URI, tmp_path / "c", endpoint=server.endpoint, retry=fast_policy())
    assert snap.complete
    assert (snap.root / BIG_TRACE).read_bytes() == files[BIG_TRACE]
    assert [r.status for r in body_requests(server, BIG_TRACE)] == [200, 200]


def test_retry_after_is_honoured(hub: FakeHub, tmp_path: Path) -> None:
    hub.commit(small_dataset())
    hub.inject(
        Fault("status", endpoint="revision", status=429, retry_after="7"),
        Fault("status", endpoint="tree", pattern="", status=503, retry_after=http_date(10)),
        Fault("status", pattern=BIG_TRACE, status=429, retry_after="3"),
    )
    sleeper = SleepRecorder()
    snap = fetch_dataset(URI, tmp_path / "cache", retry=fast_policy(sleeper))
    assert snap.complete
    assert 7.0 in sleeper.waits and 3.0 in sleeper.waits
    assert any(5.0 <= w <= 10.0 for w in sleeper.waits), sleeper.waits


def test_retry_after_beyond_the_deadline_gives_up(hub: FakeHub) -> None:
    hub.commit(small_dataset())
    hub.inject(Fault("status", endpoint="revision", status=503, retry_after="600"))
    with pytest.raises(
        HubError, match=r"giving up after 1 attempts in .* s \(limit 5 s\); last error: HTTP 503"
    ):
        resolve_revision(URI, retry=fast_policy(deadline_s=5.0, max_retry_after_s=900.0))


def test_retry_after_is_capped(hub: FakeHub) -> None:
    hub.commit(small_dataset())
    hub.inject(Fault("status", endpoint="revision", status=429, retry_after="86400"))
    sleeper = SleepRecorder()
    resolve_revision(URI, retry=fast_policy(sleeper, max_retry_after_s=2.0))
    assert sleeper.waits == [2.0]


def test_slow_body_times_out_and_is_retried(hub: FakeHub, tmp_path: Path) -> None:
    files = small_dataset()
    hub.commit(files)
    hub.inject(Fault("slow", pattern=BIG_TRACE, pieces=2, delay_s=1.0))
    snap = fetch_dataset(URI, tmp_path / "cache", retry=fast_policy(read_timeout_s=0.3))
    assert snap.complete
    # counted when sending starts (the slow answer is still running); more if the box is loaded
    assert hub.body_transfers[BIG_TRACE] >= 2


# ---- faults that fail one file, never the whole fetch ------------------------------------------


def test_persistent_errors_fail_only_that_file(hub: FakeHub, tmp_path: Path) -> None:
    files = small_dataset()
    hub.commit(
        files,
        hostile_entries=[
            ("traces", {"type": "file", "path": "traces/gone.jsonl", "size": 3, "oid": "1" * 40})
        ],
    )
    hub.inject(Fault("status", pattern=BIG_TRACE, status=500, times=None))
    snap = fetch_dataset(URI, tmp_path / "cache", retry=fast_policy(max_attempts=3))
    reasons = {f.path: f.reason for f in snap.failed}
    assert reasons == {BIG_TRACE: "retries_exhausted", "traces/gone.jsonl": "http_error"}
    assert set(reasons.values()) <= FAILURE_REASONS.keys()
    assert len(body_requests(hub, BIG_TRACE)) == 3
    expected = selected(files)
    del expected[BIG_TRACE]
    assert tree_bytes(snap.root) == expected
    assert not snap.complete and snap.files == len(expected)


def test_hash_and_size_mismatches_are_failures(hub: FakeHub, tmp_path: Path) -> None:
    files = small_dataset()
    lying_hash = "definitions/gemm/gemm_big.json"
    too_big = "workloads/gemm/gemm_big.jsonl"
    too_small = BIG_TRACE
    hub.commit(
        files,
        listing_overrides={
            lying_hash: {"oid": git_blob_oid(b"something else entirely")},  # ETag agrees with it
            too_big: {"size": 10**9},
            too_small: {"size": 10},
        },
    )
    hub.inject(Fault("no_length", pattern=too_small, times=None))  # no Content-Length to check
    snap = fetch_dataset(URI, tmp_path / "cache", retry=fast_policy())
    reasons = {f.path: f.reason for f in snap.failed}
    assert reasons == {
        lying_hash: "hash_mismatch",
        too_big: "size_mismatch",
        too_small: "size_mismatch",
    }
    assert len(body_requests(hub, lying_hash)) == 2  # retried once, then given up
    assert snap.transferred_bytes < 2 * len(files[lying_hash]) + 10 + 2 * 65536
    for path in reasons:
        assert not (snap.root / path).exists()
    assert not (tmp_path / "cache" / "blobs" / git_blob_oid(b"something else entirely")).exists()
    assert not list((tmp_path / "cache" / "tmp").iterdir())
    assert snap.files == len(selected(files)) - 3


def test_persistent_wrong_etag_fails_the_file(hub: FakeHub, tmp_path: Path) -> None:
    hub.commit(small_dataset())
    hub.inject(Fault("wrong_etag", pattern=BIG_TRACE, times=None))
    snap = fetch_dataset(URI, tmp_path / "cache", retry=fast_policy())
    assert [(f.path, f.reason) for f in snap.failed] == [(BIG_TRACE, "etag_mismatch")]
    assert hub.body_transfers[BIG_TRACE] == 2


def test_trickling_body_hits_the_file_deadline(hub: FakeHub, tmp_path: Path) -> None:
    hub.commit(small_dataset())
    hub.inject(Fault("slow", pattern=BIG_TRACE, pieces=20, delay_s=0.15, times=None))
    # Each attempt has 1 s; every one trickles past it (and is resumed where it stopped).
    policy = fast_policy(deadline_s=1.0, min_bytes_per_s=1e12, read_timeout_s=2.0, max_attempts=3)
    snap = fetch_dataset(URI, tmp_path / "cache", retry=policy)
    assert [(f.path, f.reason) for f in snap.failed] == [(BIG_TRACE, "timeout")]
    assert hub.body_transfers[BIG_TRACE] == 3  # counted as each answer starts


def test_listing_that_never_recovers_raises(hub: FakeHub, tmp_path: Path) -> None:
    hub.commit(small_dataset())
    hub.inject(Fault("status", endpoint="tree", pattern="traces", times=None))
    with pytest.raises(HubError, match="giving up after 3 attempts"):
        fetch_dataset(URI, tmp_path / "cache", retry=fast_policy(max_attempts=3))


# ---- hostile listings --------------------------------------------------------------------------


def test_hostile_names_are_rejected_and_nothing_escapes(hub: FakeHub, tmp_path: Path) -> None:
    files = small_dataset()
    marker = uuid.uuid4().hex
    abs_target = Path("/tmp") / f"hub-escape-{marker}.json"

    def entry(path: object, **extra: object) -> dict:
        return {"type": "file", "path": path, "size": 4, "oid": git_blob_oid(b"evil"), **extra}

    hostile = [
        ("", entry("../" * 6 + f"escape-{marker}.json")),
        ("", entry(str(abs_target))),
        ("", entry("C:evil.json")),
        ("traces", entry("traces/" + "../" * 8 + f"escape2-{marker}.jsonl")),
        ("traces", entry("traces\\..\\..\\evil.jsonl")),
        ("traces", entry("traces/bell\x07.jsonl")),
        ("traces", entry("traces/esc\x1b[31m.jsonl")),
        ("traces", entry("traces//double.jsonl")),
        ("traces", entry("traces/./dot.jsonl")),
        ("traces", entry("traces/x/")),
        ("traces", entry(12345)),
        ("traces", entry("definitions/sneaky.json")),  # outside the folder being listed
        ("traces", entry("traces/bad_size.jsonl", size="4")),
        ("traces", entry("traces/bad_oid.jsonl", oid="../../../../etc/passwd")),
        ("traces", entry("traces/bad_lfs.jsonl", lfs={"oid": "zz", "size": 4})),
        ("traces", entry(BIG_TRACE)),  # listed twice
        ("traces", entry("traces/baseline/gemm")),  # a file that is also a folder
    ]
    hub.commit(files, hostile_entries=hostile)
    cache = tmp_path / "cache"
    snap = fetch_dataset(URI, cache, retry=fast_policy())

    got = {(r.path, r.reason) for r in snap.rejected}
    assert got == {
        ("../" * 6 + f"escape-{marker}.json", "dot_dot"),
        (str(abs_target), "absolute"),
        ("C:evil.json", "drive"),
        ("traces/" + "../" * 8 + f"escape2-{marker}.jsonl", "dot_dot"),
        ("traces\\..\\..\\evil.jsonl", "backslash"),
        ("traces/bell\x07.jsonl", "control_char"),
        ("traces/esc\x1b[31m.jsonl", "control_char"),
        ("traces//double.jsonl", "empty_component"),
        ("traces/./dot.jsonl", "dot_component"),
        ("traces/x/", "empty_component"),
        ("12345", "not_a_string"),
        ("definitions/sneaky.json", "unexpected_location"),
        ("traces/bad_size.jsonl", "bad_entry"),
        ("traces/bad_oid.jsonl", "bad_entry"),
        ("traces/bad_lfs.jsonl", "bad_entry"),
        (BIG_TRACE, "duplicate"),
        ("traces/baseline/gemm", "path_conflict"),
    }
    assert {
        r.reason for r in snap.rejected
    } <= UNSAFE_NAME_REASONS.keys() | LISTING_REJECT_REASONS.keys()
    assert all(r.message for r in snap.rejected)
    # none of them was requested, and nothing was written outside the cache
    requested = {r.target for r in hub.requests if r.kind == "resolve"}
    assert requested == set(selected(files))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]
    assert not abs_target.exists()
    assert not any(marker in p.name for p in Path("/tmp").iterdir())
    assert snap.complete and tree_bytes(snap.root) == selected(files)
    manifest = snap.manifest_path
    assert manifest is not None and b"path_conflict" in manifest.read_bytes()


# ---- auth --------------------------------------------------------------------------------------


def test_hf_token_is_sent_as_bearer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with FakeHub(repo_id=REPO, token="hf_secret") as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
        files = small_dataset()
        server.commit(files)

        monkeypatch.delenv("HF_TOKEN", raising=False)
        with pytest.raises(RepositoryNotFoundError):
            resolve_revision(URI, retry=fast_policy())

        monkeypatch.setenv("HF_TOKEN", "hf_secret")
        server.reset_counters()
        snap = fetch_dataset(URI, tmp_path / "cache", include_blobs=True, retry=fast_policy())
        assert snap.complete
        hub_reqs = [r for r in server.requests if r.kind in ("revision", "tree", "resolve")]
        assert hub_reqs and all(r.authorization == "Bearer hf_secret" for r in hub_reqs)
        cdn = [r for r in server.requests if r.kind == "cdn"]
        assert cdn and all(r.authorization is None for r in cdn)  # not forwarded off the Hub

        monkeypatch.setenv("HF_TOKEN", "wrong")
        assert resolve_revision(URI, token="hf_secret", retry=fast_policy()) == server.head()
        monkeypatch.setenv("HF_TOKEN", "hf_secret")
        with pytest.raises(RepositoryNotFoundError):
            resolve_revision(URI, token=False, retry=fast_policy())
        monkeypatch.delenv("HF_TOKEN")
        monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "hf_secret")
        assert resolve_revision(URI, retry=fast_policy()) == server.head()
