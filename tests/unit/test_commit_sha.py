"""One rule for a dataset revision (a git commit sha), used by every place that reads one.

`kernelindex.is_commit_sha` uses fullmatch: `'a' * 40 + '\\n'` is not a commit sha. A `$`-anchored
`re.match` accepts it (`$` also matches before a final newline), which is how one copy of the
rule once let it through while another refused it.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixtures.hub_server import FakeHub
from tracehouse import kernelindex
from tracehouse.fetch.hub import (
    HubDatasetRef,
    HubError,
    list_remote_files,
    parse_hub_uri,
    resolve_revision,
)
from tracehouse.fetch.local import git_revision

SHA = "a" * 40
SHA_NEWLINE = SHA + "\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (SHA, True),
        ("0123456789abcdef0123456789abcdef01234567", True),
        (SHA_NEWLINE, False),
        ("\n" + SHA, False),
        (SHA + " ", False),
        ("A" * 40, False),
        ("a" * 39, False),
        ("a" * 41, False),
        ("g" * 40, False),
        ("", False),
    ],
)
def test_is_commit_sha(text: str, expected: bool) -> None:
    assert kernelindex.is_commit_sha(text) is expected


def test_a_non_string_is_not_a_commit_sha() -> None:
    assert not kernelindex.is_commit_sha(None)
    assert not kernelindex.is_commit_sha(SHA.encode())


def test_implementation_digest_refuses_a_revision_with_a_trailing_newline() -> None:
    solution = {"name": "s", "definition": "d", "spec": {"language": "triton"}, "sources": []}
    definition = {"inputs": {"x": {"dtype": "float16"}}}
    kernelindex.implementation_digest(solution, definition, "sha256:" + "0" * 64, SHA)
    with pytest.raises(kernelindex.IdentityError) as caught:
        kernelindex.implementation_digest(solution, definition, "sha256:" + "0" * 64, SHA_NEWLINE)
    assert caught.value.code == "invalid_revision"


@pytest.mark.parametrize("command", ["build", "demo"])
def test_cli_revision_flag_refuses_a_trailing_newline(tmp_path: Path, command: str) -> None:
    (tmp_path / "dataset").mkdir()
    result = run_cli(
        command,
        "--source",
        str(tmp_path / "dataset"),
        "--warehouse",
        str(tmp_path / "warehouse"),
        "--revision",
        SHA_NEWLINE,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "--revision" in result.stderr and "not a commit sha" in result.stderr
    assert not (tmp_path / "warehouse" / "current").exists()
    assert list((tmp_path / "dataset").iterdir()) == []  # the demo generated nothing


def test_cli_revision_environment_variable_refuses_a_trailing_newline(tmp_path: Path) -> None:
    (tmp_path / "dataset" / "traces").mkdir(parents=True)  # a dataset, so the revision is judged
    result = run_cli(
        "build",
        "--source",
        str(tmp_path / "dataset"),
        "--warehouse",
        str(tmp_path / "warehouse"),
        # Settings trim surrounding whitespace from environment values (as `$(cat file)` leaves
        # a newline), so the newline is put inside the value here.
        env={"TRACEHOUSE_REVISION": SHA_NEWLINE + "x"},
    )
    assert result.returncode == 2, result.stderr
    assert "not a commit sha" in result.stderr


def test_hub_uri_revision_refuses_a_trailing_newline() -> None:
    assert parse_hub_uri(f"hf://datasets/org/name@{SHA}").revision == SHA
    with pytest.raises(ValueError, match="not a valid git revision name"):
        parse_hub_uri(f"hf://datasets/org/name@{SHA}%0A")


def test_cli_hub_uri_revision_refuses_a_trailing_newline(tmp_path: Path) -> None:
    # Refused while parsing the URI, before any request is made.
    result = run_cli(
        "build",
        "--source",
        f"hf://datasets/org/name@{SHA}%0A",
        "--warehouse",
        str(tmp_path / "warehouse"),
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "not a valid git revision name" in result.stderr


def _git_folder(tmp_path: Path, head: str, refs: dict[str, str] | None = None) -> Path:
    git = tmp_path / ".git"
    git.mkdir()
    (git / "HEAD").write_text(head)
    for name, text in (refs or {}).items():
        (git / name).parent.mkdir(parents=True, exist_ok=True)
        (git / name).write_text(text)
    return tmp_path


def test_git_head_reading_takes_the_sha_without_git_s_line_ending(tmp_path: Path) -> None:
    # Git ends HEAD and ref files with a newline; it is the file's, not the sha's.
    assert git_revision(_git_folder(tmp_path, SHA_NEWLINE)) == SHA


def test_git_ref_reading_takes_the_sha_without_git_s_line_ending(tmp_path: Path) -> None:
    folder = _git_folder(tmp_path, "ref: refs/heads/main\n", {"refs/heads/main": SHA_NEWLINE})
    assert git_revision(folder) == SHA


@pytest.mark.parametrize(
    "head", [SHA_NEWLINE + "x", SHA + "\n" + SHA, SHA.upper(), SHA[:-1] + "\n"]
)
def test_git_head_reading_refuses_what_is_not_one_commit_sha(tmp_path: Path, head: str) -> None:
    assert git_revision(_git_folder(tmp_path, head)) is None


def test_git_ref_reading_refuses_a_sha_followed_by_more_lines(tmp_path: Path) -> None:
    folder = _git_folder(
        tmp_path, "ref: refs/heads/main\n", {"refs/heads/main": SHA_NEWLINE + SHA + "\n"}
    )
    assert git_revision(folder) is None


def test_packed_refs_reading_refuses_a_sha_with_a_newline(tmp_path: Path) -> None:
    # A packed-refs line `<sha> <ref>`: a carriage return before the space is not part of a sha.
    packed = f"# pack-refs with: peeled\n{SHA}\r refs/heads/main\n"
    folder = _git_folder(tmp_path, "ref: refs/heads/main\n", {"packed-refs": packed})
    assert git_revision(folder) is None
    (folder / ".git" / "packed-refs").write_text(f"{SHA} refs/heads/main\n")
    assert git_revision(folder) == SHA


# The Hub client takes a commit sha in four more places: a URI's repo part and revision (above),
# the revision endpoint's answer, the `sha` argument of a listing, and each listed blob id.


class _RevisionAnswer(http.server.BaseHTTPRequestHandler):
    """A Hub revision endpoint whose answer names a sha with a trailing newline."""

    def do_GET(self) -> None:
        body = json.dumps({"id": "org/name", "sha": SHA_NEWLINE}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def revision_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RevisionAnswer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_hub_revision_answer_with_a_trailing_newline_is_refused(revision_server: str) -> None:
    with pytest.raises(HubError, match="no 40-hex 'sha'"):
        resolve_revision("hf://datasets/org/name", endpoint=revision_server, token=False)


def test_hub_listing_refuses_a_sha_with_a_trailing_newline() -> None:
    # Refused before any request: the endpoint below would not answer.
    with pytest.raises(ValueError, match="40-hex commit id"):
        list_remote_files("hf://datasets/org/name", SHA_NEWLINE, endpoint="http://127.0.0.1:9")


def test_hub_reference_and_uri_refuse_a_newline_anywhere() -> None:
    assert HubDatasetRef("org/name", SHA).revision == SHA
    with pytest.raises(ValueError):
        HubDatasetRef("org/name", SHA_NEWLINE)
    for uri in (f"hf://datasets/org/name@{SHA}\n", "hf://datasets/org/name\n"):
        with pytest.raises(ValueError):
            parse_hub_uri(uri)


def test_hub_listing_entry_with_a_newline_in_its_blob_id_is_rejected(tmp_path: Path) -> None:
    with FakeHub(repo_id="org/name") as hub:
        sha = hub.commit(
            {"traces/a.jsonl": b"{}\n", "traces/b.jsonl": b"[]\n"},
            listing_overrides={"traces/a.jsonl": {"oid": SHA_NEWLINE}},
        )
        files, rejected = list_remote_files(
            "hf://datasets/org/name", sha, endpoint=hub.endpoint, token=False
        )
    assert [f.path for f in files] == ["traces/b.jsonl"]
    assert [(r.path, r.reason) for r in rejected] == [("traces/a.jsonl", "bad_entry")]
