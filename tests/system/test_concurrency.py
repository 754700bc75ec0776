"""Issue 6, part 4: one writer at a time, and readers never blocked nor shown a half-built state.

A second build of the same warehouse while one runs either refuses at once (``--no-wait``:
exit code 2, a message naming the situation, no traceback) or waits and completes after the
first. Readers polling during a build of a changed source see the old counts until the new
generation is published, then the new counts, and nothing in between.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.hostile_corpus import (
    CLI,
    build,
    reader_counts,
    run_cli,
    write_plain_dataset,
)
from tracehouse.warehouse import Warehouse, connect_read_only

pytestmark = pytest.mark.integration


def _start_build(source: Path, warehouse: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, "build", "--source", str(source), "--warehouse", str(warehouse), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_lock_holder(
    warehouse: Path, process: subprocess.Popen[str], timeout: float = 60
) -> None:
    """Until the build has taken the lock (it writes its pid into .build.lock)."""
    lock = warehouse / ".build.lock"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if lock.read_text().strip() == f"pid {process.pid}":
                return
        except OSError:
            pass
        assert process.poll() is None, "the first build ended before taking the lock"
        time.sleep(0.005)
    raise AssertionError("the first build never took the lock")


def _in_process_counts(warehouse: Path) -> tuple[int, int, int]:
    connection = connect_read_only(Warehouse(warehouse))
    try:
        row = connection.execute(
            "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM implementations), "
            "(SELECT count(*) FROM rejects)"
        ).fetchone()
        assert row is not None
        return (int(row[0]), int(row[1]), int(row[2]))
    finally:
        connection.close()


@pytest.fixture(scope="module")
def built_states(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A warehouse built from variant A of a source, and the reader counts of A and of B."""
    base = tmp_path_factory.mktemp("concurrency")
    source, warehouse = base / "dataset", base / "warehouse-A"
    counts: dict[str, dict[str, Any]] = {}
    write_plain_dataset(source, "B", lines=1200)
    assert build(source, base / "reference-B").returncode == 0
    counts["B"] = reader_counts(base / "reference-B")["counts"]
    write_plain_dataset(source, "A", lines=1200)
    result = build(source, warehouse)
    assert result.returncode == 0, result.stderr
    counts["A"] = reader_counts(warehouse)["counts"]
    for state in counts.values():
        state.pop("source_snapshots")
    assert counts["A"] != counts["B"]
    return {"source": source, "warehouse": warehouse, "counts": counts, "published": "A"}


@pytest.fixture
def two_states(built_states: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The shared warehouse at its published variant ("old"), the source switched to the
    other one ("new"). Tests take turns: each starts from the state the previous one left."""
    old = built_states["published"]
    new = "B" if old == "A" else "A"
    write_plain_dataset(built_states["source"], new, lines=1200)
    counts = built_states["counts"]
    yield {**built_states, "old": counts[old], "new": counts[new]}
    seen = reader_counts(built_states["warehouse"])["counts"]
    seen.pop("source_snapshots")
    built_states["published"] = new if seen == counts[new] else old


def test_second_build_no_wait_refuses_then_waiting_build_completes_after(
    two_states: dict[str, Any],
) -> None:
    source, warehouse = two_states["source"], two_states["warehouse"]
    first = _start_build(source, warehouse, "--workers", "1")
    try:
        _wait_for_lock_holder(warehouse, first)
        refused = run_cli(
            "build", "--source", str(source), "--warehouse", str(warehouse), "--no-wait"
        )
        assert first.poll() is None, (
            "the first build must still be running for this test to mean anything"
        )
        assert refused.returncode == 2
        assert "Traceback" not in refused.stderr
        assert "another build" in refused.stderr and str(warehouse) in refused.stderr
        assert f"pid {first.pid}" in refused.stderr

        second = _start_build(source, warehouse, "--wait", "300")
        time.sleep(0.3)
        assert second.poll() is None, "the waiting build must wait for the first"
        first_out, first_err = first.communicate(timeout=300)
        first_done = time.monotonic()
        second_out, second_err = second.communicate(timeout=300)
        second_done = time.monotonic()
    finally:
        for process in (first,):
            if process.poll() is None:
                process.kill()
    assert first.returncode == 0, first_err
    assert second.returncode == 0, second_err
    assert "Traceback" not in first_err + second_err
    assert second_done >= first_done
    assert "built" in first_out
    assert "up to date" in second_out  # it waited, then found the first one's result current
    seen = reader_counts(warehouse)["counts"]
    seen.pop("source_snapshots")
    assert seen == two_states["new"]


def test_readers_see_old_state_until_publish_then_new(two_states: dict[str, Any]) -> None:
    source, warehouse = two_states["source"], two_states["warehouse"]
    old, new = two_states["old"], two_states["new"]
    old_key = (old["runs"], old["implementations"], old["rejects"])
    new_key = (new["runs"], new["implementations"], new["rejects"])
    fast: list[tuple[float, tuple[int, int, int]]] = []
    cli: list[tuple[float, dict[str, Any]]] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def poll_in_process() -> None:
        try:
            while not stop.is_set():
                fast.append((time.monotonic(), _in_process_counts(warehouse)))
                time.sleep(0.005)
        except BaseException as error:
            errors.append(error)

    def poll_cli() -> None:
        while not stop.is_set():
            seen = reader_counts(warehouse)
            counts = seen.get("counts", seen)
            counts.pop("source_snapshots", None)
            cli.append((time.monotonic(), counts))

    threads = [threading.Thread(target=poll_in_process), threading.Thread(target=poll_cli)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.5)
        started = time.monotonic()
        process = _start_build(source, warehouse, "--workers", "2")
        out, err = process.communicate(timeout=300)
        finished = time.monotonic()
        assert process.returncode == 0, err
        time.sleep(0.5)
        while not any(t > finished for t, _ in cli):
            time.sleep(0.1)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
    assert not errors, errors
    assert "built" in out

    answers = [key for _, key in fast]
    assert set(answers) <= {old_key, new_key}, set(answers) - {old_key, new_key}
    first_new = answers.index(new_key)
    assert all(key == old_key for key in answers[:first_new]), "old state seen after the new one"
    assert all(key == new_key for key in answers[first_new:]), "old state seen after the new one"
    during = [key for t, key in fast if started <= t <= finished]
    assert old_key in during, "readers were not answered while the build ran"
    for _, counts in cli:
        assert counts in (old, new), counts
    assert cli[-1][1] == new
    print(f"\nreaders during one build: {len(fast)} in-process answers, {len(cli)} CLI answers")
