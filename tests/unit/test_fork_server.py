"""The parser workers' fork server lives only while a parse of this process uses it: it holds
its preloaded modules, and finalize (a build's peak of memory) runs after the parse."""

from __future__ import annotations

import os
from multiprocessing import forkserver

import pytest

from tracehouse import interrupts


def _server_pid() -> int | None:
    return forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_fork_server_stops_when_the_last_parse_ends() -> None:
    with interrupts.fork_server():
        first = _server_pid()
        assert first is not None and _alive(first)
        with interrupts.fork_server():  # a second parse of the same process (Dagster threads)
            assert _server_pid() == first
        assert _server_pid() == first and _alive(first)  # the first parse still uses it
    assert _server_pid() is None and not _alive(first)
    with interrupts.fork_server():  # the next parse starts a new one
        second = _server_pid()
        assert second is not None and second != first and _alive(second)
    assert _server_pid() is None and not _alive(second)


def test_the_fork_server_stops_when_a_parse_fails() -> None:
    started: list[int | None] = []
    with pytest.raises(RuntimeError), interrupts.fork_server():
        started.append(_server_pid())
        raise RuntimeError("a failed task")
    [pid] = started
    assert _server_pid() is None and pid is not None and not _alive(pid)
