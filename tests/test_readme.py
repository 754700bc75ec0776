"""The README and the docs/ pages are a contract: their commands, paths and names exist and
work (style rule 9). The README stays short and links every page; the pages hold the manual."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.cli import build_parser
from pipelines.demo import generate_dataset
from pipelines.rejects import REJECT_REASONS
from pipelines.schemas import TABLES, VIEWS
from pipelines.settings import DERIVED, ENV_PREFIX, Settings
from tests import docs_tables

ROOT = Path(__file__).resolve().parents[1]
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
        "docs/tables.md is stale: run `.venv/bin/python -m tests.docs_tables > docs/tables.md`"
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


@pytest.mark.integration
def test_dagster_materialize_command_works_as_written(tmp_path: Path) -> None:
    generate_dataset(
        tmp_path / "demo",
        seed=3,
        definitions=3,
        workloads_per_definition=3,
        solutions_per_definition=3,
    )
    (tmp_path / "home").mkdir()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")}
    environment.update(
        DAGSTER_HOME=str(tmp_path / "home"),
        TRACEHOUSE_SOURCE=str(tmp_path / "demo"),
        TRACEHOUSE_WAREHOUSE=str(tmp_path / "warehouse"),
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "dagster",
            "asset",
            "materialize",
            "-m",
            "pipelines.definitions",
            "--select",
            "*",
        ],
        capture_output=True,
        text=True,
        env=environment,
        cwd=ROOT,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "warehouse" / "tracehouse.duckdb").exists()
