"""Issue 10, part 3: every mistake a user can type is one line naming what is wrong, exit 2.

A matrix of bad arguments, bad settings and bad files goes through every subcommand of the
real `tracehouse` command (a subprocess each). Every case must exit 2 with exactly one line on
stderr that names the argument or file and says why, and never a traceback; the good warehouse
the commands point at must be byte-identical afterwards. The Hub cases run against the local
FakeHub server (tests/fixtures/hub_server.py) or a closed port on 127.0.0.1: an offline `hf://` build
fails in well under 15 s (and faster when TRACEHOUSE_HUB_TIMEOUT_S says so), and the Hub token
is found where the Hub's own client finds it, and never printed or stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.hostile_corpus import write_plain_dataset
from tests.fixtures.hub_server import FakeHub
from tests.fixtures.shared_data import SAMPLES_DIR, SHARED
from tracehouse.cli_parser import build_parser

pytestmark = pytest.mark.integration

CLI = (sys.executable, "-m", "tracehouse.cli")
RESULTS: dict[str, Any] = {}


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Any:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEHOUSE_", "HF_"))}
    environment.update(env or {})
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=environment, timeout=timeout
    )


def tree_digest(folder: Path) -> str:
    """Every path, file and link of the warehouse (the lock file records its last holder)."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.name == ".build.lock":
            continue
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
        elif path.is_symlink():
            digest.update(os.readlink(path).encode())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small dataset, its warehouse, and the files and folders the bad cases point at."""
    root = tmp_path_factory.mktemp("errors")
    dataset = root / "dataset"
    write_plain_dataset(dataset, "A", files=2, lines=10)
    warehouse = root / "warehouse"
    result = run("build", "--source", str(dataset), "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    (root / "empty").mkdir()
    (root / "a_file").write_text("not a folder\n")
    (root / "bad_json.json").write_text("{bad")
    (root / "list.json").write_text("[1, 2]")
    (root / "entry.json").write_text(json.dumps({"gemm_n4_k4": 3}))
    (root / "out_dir").mkdir()
    return {
        "root": root,
        "dataset": dataset,
        "warehouse": warehouse,
        "empty": root / "empty",
        "file": root / "a_file",
    }


def cases(p: dict[str, Path]) -> list[tuple[str, list[str], dict[str, str], str]]:
    """(name, arguments, environment, text the one line must contain)."""
    w = ["--warehouse", str(p["warehouse"])]
    src = ["--source", str(p["dataset"])]
    root = p["root"]
    build = ["build", *w]
    sample_config = (
        str(SAMPLES_DIR / "web_baseline_config") if SHARED is not None else str(p["empty"])
    )
    return [
        # build: the source
        ("build without a source", build, {}, "no source given"),
        ("source an empty folder", [*build, "--source", str(p["empty"])], {}, "not a FlashInfer-Trace dataset"),
        ("source a folder that is not a dataset", [*build, "--source", sample_config], {}, "none of definitions/"),
        ("source missing", [*build, "--source", str(root / "nope")], {}, "no such folder"),
        ("source a file", [*build, "--source", str(p["file"])], {}, "is a file"),
        ("source a Hub web page", [*build, "--source", "https://huggingface.co/datasets/org/name"], {}, "use hf://datasets/org/name"),
        ("source another URL", [*build, "--source", "https://example.com/data"], {}, "is a URL"),
        ("source a bad hf:// URI", [*build, "--source", "hf://models/org/name"], {}, "hf://"),
        ("source empty in the environment", build, {"TRACEHOUSE_SOURCE": " "}, "no source given"),
        # build: option values
        ("workers 0", [*build, *src, "--workers", "0"], {}, "--workers 0: must be between 1 and 64"),
        ("workers -3", [*build, *src, "--workers", "-3"], {}, "--workers -3: must be between 1 and 64"),
        ("workers 1000", [*build, *src, "--workers", "1000"], {}, "--workers 1000: must be between 1 and 64"),
        ("warehouse empty", ["build", *src, "--warehouse", ""], {}, "--warehouse '': must not be empty"),
        ("baselines empty", [*build, *src, "--baselines", ""], {}, "--baselines '': must not be empty"),
        ("HF_ENDPOINT a file URL", [*build, "--source", "hf://datasets/org/name"], {"HF_ENDPOINT": "file:///etc"}, "HF_ENDPOINT='file:///etc': must be an http:// or https:// URL"),
        ("HF_ENDPOINT not a URL", [*build, "--source", "hf://datasets/org/name"], {"HF_ENDPOINT": "::::"}, "HF_ENDPOINT='::::': must be an http:// or https:// URL"),
        ("workers not a number", [*build, *src, "--workers", "two"], {}, "--workers"),
        ("wait -1", [*build, *src, "--wait", "-1"], {}, "--wait -1.0: must be >= 0"),
        ("wait not a number", [*build, *src, "--wait", "soon"], {}, "--wait"),
        ("revision not a sha", [*build, *src, "--revision", "main"], {}, "--revision main: is not a commit sha"),
        ("baselines missing", [*build, *src, "--baselines", str(root / "nope.json")], {}, "nope.json"),
        ("baselines a folder", [*build, *src, "--baselines", str(root / "out_dir")], {}, "--baselines"),
        ("baselines not JSON", [*build, *src, "--baselines", str(root / "bad_json.json")], {}, "bad_json.json: not JSON"),
        ("baselines a list", [*build, *src, "--baselines", str(root / "list.json")], {}, "list.json: must be a JSON object"),
        ("baselines entry not an object", [*build, *src, "--baselines", str(root / "entry.json")], {}, "entry.json: the entry for 'gemm_n4_k4'"),
        ("warehouse a file", ["build", *src, "--warehouse", str(p["file"])], {}, "--warehouse"),
        ("unknown option", [*build, *src, "--fast"], {}, "unrecognized arguments: --fast"),
        # build: settings from the environment
        ("TRACEHOUSE_WORKERS not a number", [*build, *src], {"TRACEHOUSE_WORKERS": "zero"}, "TRACEHOUSE_WORKERS='zero' is not a valid integer"),
        ("TRACEHOUSE_WORKERS 1000", [*build, *src], {"TRACEHOUSE_WORKERS": "1000"}, "TRACEHOUSE_WORKERS=1000: must be between 1 and 64"),
        ("TRACEHOUSE_LOCK_TIMEOUT_S negative", [*build, *src], {"TRACEHOUSE_LOCK_TIMEOUT_S": "-5"}, "TRACEHOUSE_LOCK_TIMEOUT_S=-5: must be >= 0"),
        ("TRACEHOUSE_MAX_SHRINK_SHARE above 1", [*build, *src], {"TRACEHOUSE_MAX_SHRINK_SHARE": "2"}, "TRACEHOUSE_MAX_SHRINK_SHARE=2: must be a share"),
        ("TRACEHOUSE_KEEP_GENERATIONS 0", [*build, *src], {"TRACEHOUSE_KEEP_GENERATIONS": "0"}, "TRACEHOUSE_KEEP_GENERATIONS=0: must be >= 1"),
        ("TRACEHOUSE_HUB_TIMEOUT_S 0", [*build, *src], {"TRACEHOUSE_HUB_TIMEOUT_S": "0"}, "TRACEHOUSE_HUB_TIMEOUT_S=0"),
        ("TRACEHOUSE_ALLOW_SHRINK not a boolean", [*build, *src], {"TRACEHOUSE_ALLOW_SHRINK": "maybe"}, "TRACEHOUSE_ALLOW_SHRINK='maybe' is not a valid boolean"),
        ("TRACEHOUSE_WAREHOUSE a file", ["build", *src], {"TRACEHOUSE_WAREHOUSE": str(p["file"])}, "TRACEHOUSE_WAREHOUSE="),
        # the command line itself
        ("no command", [], {}, "arguments are required"),
        ("unknown command", ["frobnicate"], {}, "invalid choice: 'frobnicate'"),
        # query
        ("query empty", ["query", "", *w], {}, "the SQL is empty"),
        ("query only a comment", ["query", "-- nothing", *w], {}, "the SQL is empty"),
        ("query two statements", ["query", "SELECT 1; SELECT 2", *w], {}, "2 statements given"),
        ("query a typo", ["query", "SELEC 1", *w], {}, "syntax error"),
        ("query an unknown table", ["query", "SELECT * FROM nope", *w], {}, "nope"),
        ("query a write", ["query", "DROP TABLE runs", *w], {}, "refused"),
        ("query an unknown format", ["query", "SELECT 1", "--format", "xml", *w], {}, "invalid choice: 'xml'"),
        ("query a negative limit", ["query", "SELECT 1", "--limit", "-1", *w], {}, "--limit: must be >= 0"),
        ("query a huge limit", ["query", "SELECT 1", "--limit", "1180591620717411303424", *w], {}, "--limit: must be at most"),
        ("query a missing warehouse", ["query", "SELECT 1", "--warehouse", str(root / "nowhere")], {}, "no warehouse at"),
        ("query a warehouse that is a file", ["query", "SELECT 1", "--warehouse", str(p["file"])], {}, "is a file, not a folder"),
        # leaderboard
        ("leaderboard unknown definition", ["leaderboard", "nope", *w], {}, "no runs for definition 'nope'"),
        ("leaderboard unknown hardware", ["leaderboard", "gemm_n4_k4", "--hardware", "Z9", *w], {}, "on hardware 'Z9'"),
        ("leaderboard without a definition", ["leaderboard", *w], {}, "definition"),
        # export
        ("export nothing", ["export", *w], {}, "nothing to export"),
        ("export snapshot to a file", ["export", "--snapshot", str(p["file"]), *w], {}, "--snapshot"),
        ("export kernelindex unknown definition", ["export", "--kernelindex", "nope", str(root / "k.json"), *w], {}, "no runs for definition 'nope'"),
        ("export kernelindex to a folder", ["export", "--kernelindex", "gemm_n4_k4", str(root / "out_dir"), *w], {}, "is a folder"),
        ("export kernelindex one argument", ["export", "--kernelindex", "gemm_n4_k4", *w], {}, "expected 2 arguments"),
        # record
        ("record unknown id", ["record", "0123456789abcdef0123456789abcdef", *w], {}, "no run with id"),
        ("record too short a prefix", ["record", "abc", *w], {}, "6+ characters"),
        # demo
        ("demo into a file", ["demo", "--source", str(p["file"]), *w], {}, "--source"),
        ("demo seed not a number", ["demo", "--seed", "x", *w], {}, "--seed"),
        # report and changes
        ("report into a file", ["report", "--out", str(p["file"]), *w], {}, "--out"),
        ("changes min-history 0", ["changes", "--min-history", "0", *w], {}, "--min-history 0: must be between 1 and 1,000,000"),
        ("changes min-history 1e30", ["changes", "--min-history", "1e30", *w], {}, "argument --min-history: invalid int value: '1e30'"),
        ("changes min-history past BIGINT", ["changes", "--min-history", str(10**30), *w], {}, f"--min-history {10**30}: must be between 1 and 1,000,000"),
        ("changes since nothing known", ["changes", "--since", "deadbeef", *w], {}, "--since 'deadbeef': neither an ISO date/time"),
        ("changes negative z", ["changes", "--z-threshold", "-1", *w], {}, "--z-threshold -1.0: must be a finite number >= 0"),
        ("changes regression env", ["changes", *w], {"TRACEHOUSE_REGRESSION_MIN_CHANGE": "x"}, "TRACEHOUSE_REGRESSION_MIN_CHANGE='x' is not a valid number"),
        # generations and rollback
        ("rollback with nothing older", ["rollback", *w], {}, "no generation older"),
        ("rollback to an unknown generation", ["rollback", "99", *w], {}, "no completed generation '99'"),
        ("generations of a missing warehouse", ["generations", "--warehouse", str(root / "nowhere")], {}, "no completed generation"),
    ]  # fmt: skip


def test_every_bad_argument_is_one_line_and_exit_2(place: dict[str, Path]) -> None:
    before = tree_digest(place["warehouse"])
    matrix = cases(place)
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda case: run(*case[1], env=case[2]), matrix))
    failures = []
    for (name, args, _env, wanted), result in zip(matrix, results, strict=True):
        lines = result.stderr.splitlines()
        ok = (
            result.returncode == 2
            and len(lines) == 1
            and "Traceback" not in result.stderr
            and wanted in lines[0]
        )
        if not ok:
            failures.append((name, args, result.returncode, result.stderr[-600:]))
    assert not failures, "\n".join(map(str, failures))
    assert tree_digest(place["warehouse"]) == before, "a bad command changed the warehouse"
    subcommands = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    commands = {case[1][0] for case in matrix if case[1] and case[1][0] in subcommands}
    RESULTS.update(cases=len(matrix), commands=sorted(commands))
    print(
        f"\nbad arguments tried: {len(matrix)} across {len(commands)} commands: {sorted(commands)}"
    )


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_offline_hub_build_fails_fast_in_one_line(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    args = ["build", "--source", "hf://datasets/org/name", "--warehouse", str(tmp_path / "w")]
    started = time.monotonic()
    result = run(*args, env={"HF_ENDPOINT": endpoint})
    default_s = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert "giving up after" in result.stderr and "hf://datasets/org/name" in result.stderr
    assert default_s < 15, default_s
    started = time.monotonic()
    quick = run(*args, env={"HF_ENDPOINT": endpoint, "TRACEHOUSE_HUB_TIMEOUT_S": "1.5"})
    configured_s = time.monotonic() - started
    assert quick.returncode == 2 and "limit 1.5 s" in quick.stderr, quick.stderr
    assert configured_s < default_s and configured_s < 5, (configured_s, default_s)
    RESULTS.update(offline_default_s=default_s, offline_configured_s=configured_s)
    print(f"\noffline hf:// build: {default_s:.1f} s (default), {configured_s:.1f} s (1.5 s limit)")


def test_a_hub_that_never_answers_is_bounded_too(tmp_path: Path) -> None:
    """A server that accepts the connection and then says nothing (a black hole)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        result = run(
            "build",
            "--source",
            "hf://datasets/org/name",
            "--warehouse",
            str(tmp_path / "w"),
            env={"HF_ENDPOINT": endpoint, "TRACEHOUSE_HUB_TIMEOUT_S": "3"},
        )
        seconds = time.monotonic() - started
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert seconds < 6, seconds


TOKEN = "hf_tracehouse_SECRET_token_0123456789"


def _files_holding(folder: Path, secret: bytes) -> list[str]:
    return [
        str(path)
        for path in folder.rglob("*")
        if path.is_file() and not path.is_symlink() and secret in path.read_bytes()
    ]


def test_the_hub_token_comes_from_the_login_file_and_is_never_shown(tmp_path: Path) -> None:
    dataset = tmp_path / "dataset"
    write_plain_dataset(dataset, "A", files=2, lines=5)
    home = tmp_path / "hf_home"
    home.mkdir()
    (home / "token").write_text(TOKEN + "\n")  # what `hf auth login` writes
    warehouse = tmp_path / "warehouse"
    args = ["build", "--source", "hf://datasets/org/private", "--warehouse", str(warehouse)]
    with FakeHub(repo_id="org/private", token=TOKEN) as hub:
        hub.commit(FakeHub.read_folder(dataset))
        base = {"HF_ENDPOINT": hub.endpoint, "TRACEHOUSE_HUB_TIMEOUT_S": "3"}
        without = run(*args, env=base)
        with_file = run(*args, env={**base, "HF_HOME": str(home)})
        # HF_TOKEN wins over the file, as for the Hub's own client: a wrong one is refused.
        wrong_env = run(*args, "--force", env={**base, "HF_HOME": str(home), "HF_TOKEN": "hf_x"})
        errors_env = run(*args, env={**base, "HF_TOKEN": TOKEN + "x"})
    assert without.returncode == 2 and len(without.stderr.splitlines()) == 1, without.stderr
    assert "401" in without.stderr
    assert with_file.returncode == 0, with_file.stderr
    assert wrong_env.returncode == 2 and "401" in wrong_env.stderr, wrong_env.stderr
    for result in (without, with_file, wrong_env, errors_env):
        assert TOKEN not in result.stdout + result.stderr
    assert _files_holding(warehouse, TOKEN.encode()) == []
