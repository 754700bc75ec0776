"""The parser workers' pool over a build: a first build of a source starts its fork server before
the plan (the server imports the parser's modules on the core the plan leaves idle), and the
server is gone before finalize; a build that parses one changed file never starts one."""

from __future__ import annotations

from multiprocessing import forkserver
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import build
from tracehouse import build as build_module
from tracehouse.assemble import finalize
from tracehouse.demo import generate_dataset

pytestmark = pytest.mark.integration

REVISION = "cd" * 20


def _server() -> tuple[int | None, list[str]]:
    """The fork server's pid (None when none runs) and the modules it preloads."""
    server = forkserver._forkserver  # type: ignore[attr-defined]
    return server._forkserver_pid, list(server._preload_modules)


def test_a_first_build_starts_the_fork_server_before_its_plan_and_stops_it_before_finalize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, warehouse = tmp_path / "demo", tmp_path / "wh"
    generate_dataset(source, seed=21, definitions=3, workloads_per_definition=3)
    at_plan: list[tuple[int | None, list[str]]] = []
    at_finalize: list[tuple[int | None, list[str]]] = []
    plan_files, finalize_generation = build_module.plan_files, finalize.finalize

    def recording_plan(*args: Any, **kwargs: Any) -> Any:
        at_plan.append(_server())
        return plan_files(*args, **kwargs)

    def recording_finalize(**kwargs: Any) -> Any:
        at_finalize.append(_server())
        return finalize_generation(**kwargs)

    monkeypatch.setattr(build_module, "plan_files", recording_plan)
    monkeypatch.setattr(finalize, "finalize", recording_finalize)

    first = build(source, warehouse, revision=REVISION, workers=2)
    assert first.files_parsed == len(list(source.rglob("*.jsonl")))  # traces and workloads
    [(pid, preloaded)] = at_plan
    assert pid is not None and preloaded == ["tracehouse.ingest.worker"]
    assert at_finalize[0][0] is None  # stopped once the parse ended

    # One changed file is parsed alone, in this process: no server, early or late.
    changed = sorted((source / "traces").rglob("*.jsonl"))[0]
    changed.write_bytes(b"".join(changed.read_bytes().splitlines(keepends=True)[:-1]))
    second = build(source, warehouse, revision=REVISION, workers=2)
    assert second.files_parsed == 1
    assert at_plan[1][0] is None and at_finalize[1][0] is None
