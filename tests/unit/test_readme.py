"""The README and the docs/ pages are a contract: their commands, paths and names exist and
work (style rule 9). The README stays short and links every page; the pages hold the manual."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import docs_tables
from tracehouse.cli_parser import build_parser
from tracehouse.rejects import REJECT_REASONS
from tracehouse.schemas import TABLES, VIEWS
from tracehouse.settings import DERIVED, ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PAGES = sorted((ROOT / "docs").glob("*.md"))
# Everything a reader is told: the README and every docs/ page.
DOCS = {"README.md": README} | {f"docs/{p.name}": p.read_text() for p in PAGES}
ALL_TEXT = "\n".join(DOCS.values())
README_LIMIT = 10_000  # characters; the manual lives in docs/


def test_the_readme_is_short_and_links_every_page() -> None:
    assert len(README) <= README_LIMIT, len(README)
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)\)", README))
    assert PAGES and {p.name for p in PAGES} <= linked, {p.name for p in PAGES} - linked


def test_the_first_two_commands_are_demo_and_test() -> None:
    first_block = README.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_every_subcommand_named_exists() -> None:
    parser = build_parser()
    choices = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    named: set[str] = set()
    for text in DOCS.values():
        code = " ".join(block.split("```", 1)[0] for block in text.split("```sh")[1:])
        named |= set(re.findall(r"(?m)^tracehouse (\w[\w-]*)", code))
        named |= set(re.findall(r"`tracehouse (\w[\w-]*)", text))
    assert named <= set(choices), named - set(choices)


def test_every_path_named_exists() -> None:
    missing: list[str] = []
    named = 0
    for name, text in DOCS.items():
        paths = set(re.findall(r"`((?:pipelines|sql|tests|docs|bench|data|\.ci)/[\w./-]*)`", text))
        links = set(re.findall(r"\]\(([\w./-]+)(?:#[\w-]*)?\)", text))
        here = (ROOT / name).parent
        named += len(paths) + len(links)
        missing += [f"{name}: {p}" for p in paths if not (ROOT / p.split(" ")[0]).exists()]
        missing += [f"{name}: {p}" for p in links if not (here / p).exists()]
    assert named and not missing, missing


def test_the_tables_page_is_generated_from_the_schemas() -> None:
    assert docs_tables.committed() == docs_tables.page(), (
        "docs/tables.md is stale: run `.venv/bin/python -m tests.fixtures.docs_tables > docs/tables.md`"
    )


def test_every_table_and_reject_reason_is_documented() -> None:
    tables_page = (ROOT / "docs" / "tables.md").read_text()
    for table in TABLES:
        assert f"| `{table}` |" in tables_page, table
    for reason in REJECT_REASONS:
        assert f"`{reason}`" in ALL_TEXT, reason
    for view in VIEWS:
        assert f"| `{view}` |" in tables_page, view


def test_every_setting_is_named() -> None:
    for name in Settings.__dataclass_fields__:
        if name in DERIVED:  # set from TRACEHOUSE_WAREHOUSE, not a variable of its own
            continue
        assert re.search(rf"`{ENV_PREFIX}{name.upper()}[`=]", ALL_TEXT), name


def _dagster_block() -> str:
    """docs/dagster.md's Dagster commands: the block that starts `dg dev`."""
    page = (ROOT / "docs" / "dagster.md").read_text()
    code = [block.split("```", 1)[0] for block in page.split("```sh")[1:]]
    (block,) = [commands for commands in code if "dg dev" in commands]
    return block


def _graphql(port: int, query: str) -> dict[str, Any]:
    import json
    import urllib.request

    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.load(reply)["data"]


SENSORS_QUERY = """{ sensorsOrError(repositorySelector: {repositoryName: "__repository__",
  repositoryLocationName: "tracehouse"}) { ... on Sensors { results { name
  sensorState { status } } } } }"""
STALENESS_QUERY = "{ assetNodes { assetKey { path } staleStatus } }"
RUNS_QUERY = "{ runsOrError { ... on Runs { results { jobName status tags { key value } } } } }"


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# The docs' server, and the one they name beside it (`dagster dev`, loading workspace.yaml).
SERVERS = {
    "dg dev": "dg dev -h 127.0.0.1 -p 3000",
    "dagster dev": "dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000",
}


@dataclass(frozen=True)
class Walkthrough:
    """The demo and docs/dagster.md's block up to its server, run once for both servers."""

    demo: Path
    warehouse: Path
    home: Path  # DAGSTER_HOME as the commands left it (each server gets a copy)
    environment: dict[str, str]
    printed: str  # what the commands before the server printed
    before: tuple[str, str]  # the demo's revision and generation before the commands


def _tracehouse() -> str:
    return str(Path(sys.executable).with_name("tracehouse"))


def _demo_state(warehouse: Path, environment: dict[str, str]) -> tuple[str, str]:
    revision = subprocess.run(
        [
            _tracehouse(),
            "query",
            "SELECT revision FROM source_summary",
            "--format",
            "csv",
            "--warehouse",
            str(warehouse),
        ],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    ).stdout
    return revision, (warehouse / "current").resolve().name


def _in_walkthrough(block: str, walkthrough: Walkthrough, home: Path) -> str:
    return (
        block.replace("$PWD/.dagster_home", str(home))
        .replace("TRACEHOUSE_SOURCE=data/demo", f"TRACEHOUSE_SOURCE={walkthrough.demo}")
        .replace("TRACEHOUSE_WAREHOUSE=warehouse", f"TRACEHOUSE_WAREHOUSE={walkthrough.warehouse}")
    )


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory: pytest.TempPathFactory) -> Walkthrough:
    """`tracehouse demo`, then every command of the block before the server, in order."""
    base = tmp_path_factory.mktemp("walkthrough")
    demo, warehouse, home = base / "demo", base / "warehouse", base / "home"
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("TRACEHOUSE_", "DAGSTER_"))
    }
    bin_dir = str(Path(sys.executable).parent)
    environment.update(
        PATH=f"{bin_dir}:{environment.get('PATH', '')}", VIRTUAL_ENV=str(Path(bin_dir).parent)
    )
    made = subprocess.run(
        [_tracehouse(), "demo", "--source", str(demo), "--warehouse", str(warehouse)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )
    assert made.returncode == 0, made.stderr
    before = _demo_state(warehouse, environment)
    block = _dagster_block()
    assert SERVERS["dg dev"] in block and "# or: dagster dev -w workspace.yaml" in block
    (served,) = [line for line in block.splitlines() if line.startswith(SERVERS["dg dev"])]
    walkthrough = Walkthrough(demo, warehouse, home, environment, "", before)
    commands = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _in_walkthrough(block, walkthrough, home)
         .replace(served, "")],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert commands.returncode == 0, commands.stdout[-3000:] + commands.stderr[-3000:]
    return replace(walkthrough, printed=commands.stderr + commands.stdout)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("server", sorted(SERVERS))
def test_the_dagster_commands_act_on_the_ui_dg_dev_starts(
    server: str, walkthrough: Walkthrough, tmp_path: Path
) -> None:
    """docs/dagster.md's Dagster block, run in order against the demo warehouse: `dg dev` serves the
    code location the other commands act on (its GraphQL shows the automation sensor RUNNING
    and both runs), no command prints a warning, and the demo keeps its revision and
    generation. Headless Chromium then shows the stages as asset groups and the report's
    description rendered. The commands before the server run once (the `walkthrough`
    fixture); each server starts on a copy of the Dagster home they left."""
    import shutil
    import signal
    import time

    from tests.fixtures.browser import Chromium, chromium_path

    home = tmp_path / "home"
    shutil.copytree(walkthrough.home, home)
    environment = walkthrough.environment
    warehouse = walkthrough.warehouse

    def demo_state() -> tuple[str, str]:
        return _demo_state(warehouse, environment)

    before = walkthrough.before
    port = _free_port()
    # The block's exports (the setting the server reads), then the server itself.
    block = _dagster_block()
    exports = [line for line in block.splitlines() if line.startswith("export ")]
    (served,) = [line for line in block.splitlines() if line.startswith(SERVERS["dg dev"])]
    script = _in_walkthrough(
        "\n".join([*exports, served.replace(SERVERS["dg dev"], SERVERS[server])]),
        walkthrough,
        home,
    ).replace("-p 3000", f"-p {port}")
    assert f"-p {port}" in script and str(home) in script
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        shell = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=ROOT,
            env=environment,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        # The commands run in order; the last one, `dg dev`, serves until stopped.
        deadline = time.monotonic() + 900
        sensors: dict[str, str] = {}
        while time.monotonic() < deadline and len(sensors) < 2:
            assert shell.poll() is None, err.read_text()[-3000:]
            try:
                found = _graphql(port, SENSORS_QUERY)["sensorsOrError"]["results"]
                sensors = {s["name"]: s["sensorState"]["status"] for s in found}
            except OSError:
                time.sleep(1)
        assert sensors == {
            "tracehouse_automation": "RUNNING",
            "source_partitions_sensor": "RUNNING",
        }
        runs = _graphql(port, RUNS_QUERY)["runsOrError"]["results"]
        assert sorted((r["jobName"], r["status"]) for r in runs) == [
            ("build_warehouse_job", "SUCCESS"),
            ("observe_sources_job", "SUCCESS"),
        ]
        (build,) = [r for r in runs if r["jobName"] == "build_warehouse_job"]
        assert {"key": "dagster/partition", "value": "demo"} in build["tags"]
        assert demo_state() == before  # same revision, no new generation
        # Observed, then built unchanged: the UI shows every asset fresh.
        nodes = _graphql(port, STALENESS_QUERY)["assetNodes"]
        assert {"/".join(n["assetKey"]["path"]): n["staleStatus"] for n in nodes} == {
            "/".join(n["assetKey"]["path"]): "FRESH" for n in nodes
        }
        assert len(nodes) == 22  # ingest_paths left the warehouse (issue 26)
        printed = walkthrough.printed + err.read_text() + out.read_text()
        if server == "dagster dev":  # Dagster's own note that `dg dev` supersedes it, only
            note = "SupersessionWarning: Function `dev_command` is superseded"
            assert printed.count(note) == 1
            printed = "\n".join(
                line
                for line in printed.splitlines()
                if note not in line and line.strip() != "return callback(*args, **kwargs)"
            )
        for noise in ("Warning", "Telemetry", "superseded"):
            assert noise not in printed, noise

        if chromium_path() is None:
            pytest.skip("chromium is not installed (apt-get install -y chromium)")
        # Dagster's "Join the community" dialog comes up a moment after a page loads: wait for
        # it (a few seconds at most) and dismiss it, so the screenshots show the page.
        skip_welcome = (
            "new Promise(done => { let tries = 0; const look = () => {"
            " const b = [...document.querySelectorAll('button')]"
            ".find(b => b.innerText.trim() === 'Skip');"
            " if (b) { b.click(); done(true); } else if (++tries > 20) { done(false); }"
            " else { setTimeout(look, 250); } }; look(); })"
        )
        with Chromium(tmp_path / "profile") as browser:
            browser.visit(
                f"http://127.0.0.1:{port}/asset-groups",
                ready="['source', 'tables', 'views', 'report'].every(g => "
                "[...document.querySelectorAll('div, span')].some(e => e.innerText === g))",
                timeout_s=180,
            )
            browser.evaluate(skip_welcome)
            browser.screenshot(tmp_path / "asset_graph.png", full_page=False)
            browser.visit(
                f"http://127.0.0.1:{port}/assets/tracehouse/report",
                ready="document.body.innerText.includes('written into')",
                timeout_s=180,
            )
            browser.evaluate(skip_welcome)
            text = browser.evaluate("document.body.innerText")
            browser.screenshot(tmp_path / "report_asset.png", full_page=False)
        assert "written into the warehouse's report/ folder" in text
        assert "written into /report" not in text
    finally:
        # dg dev and what it started (its own session), nothing else.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGINT)  # Ctrl-C: it stops what it started
            with contextlib.suppress(subprocess.TimeoutExpired):
                shell.wait(timeout=30)
            os.killpg(shell.pid, signal.SIGKILL)  # whatever did not stop
