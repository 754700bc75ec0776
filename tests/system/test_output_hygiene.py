"""Names from a dataset, and values a user typed, never act on the terminal (issue 25): every
line a person reads, on stdout or stderr, passes through the one escaping function
(``render.safe``; ``render.message`` for one-line errors and notes).

The commands run as the user runs them, over a source whose folder name and whose solution
and definition names carry ESC sequences, BEL, BS, CR and C1 controls (CSI, NEL). The output
is read as bytes: ``text=True`` would turn a raw CR into a line break and hide it.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import run_cli_bytes
from tests.fixtures.hostile_corpus import definition_object, solution_object, trace_object

# A screen clear, a window title (OSC ... BEL), a backspace, a carriage return, CSI and NEL as
# C1 controls, DEL, and a bidi override.
HOSTILE = "\x1b[2J\x1b]0;owned\x07\x08\r\x9b31m\x85\x7f\u202e"
DEFINITION = f"gemm_{HOSTILE}_def"
SOLUTION = f"sol_{HOSTILE}_fast"
SOURCE_FOLDER = f"source_{HOSTILE}"
START = datetime(2026, 3, 1, 12, 0, 0)
# Four results of about 0.100 ms, then one 30 % slower: a regression `changes` lists.
LATENCIES = [0.100, 0.101, 0.099, 0.1005, 0.130]


run_raw = run_cli_bytes  # the real command, its output as bytes


def raw_controls(output: bytes, allowed: str = "\n") -> list[str]:
    """The control characters (C0 but ``allowed``, DEL, C1) and bidi overrides in ``output``,
    as they would reach a terminal."""
    text = output.decode("utf-8", "backslashreplace")
    return [
        char
        for char in text
        if (ord(char) < 0x20 and char not in allowed)
        or 0x7F <= ord(char) <= 0x9F
        or char in "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    ]


def assert_clean(result: subprocess.CompletedProcess[bytes], stdout_allows: str = "\n") -> None:
    assert raw_controls(result.stdout, stdout_allows) == [], result.stdout
    assert raw_controls(result.stderr) == [], result.stderr
    assert b"Traceback" not in result.stderr


def write_dataset(root: Path) -> None:
    (root / "definitions/gemm").mkdir(parents=True)
    (root / "definitions/gemm/definition.json").write_text(
        json.dumps(definition_object(DEFINITION))
    )
    solutions = root / "solutions/alice/gemm/definition"
    solutions.mkdir(parents=True)
    (solutions / "solution.json").write_text(
        json.dumps(solution_object(name=SOLUTION, definition=DEFINITION))
    )
    lines = []
    for day, latency in enumerate(LATENCIES):
        trace = trace_object("w-1", definition=DEFINITION, solution=SOLUTION, latency=latency)
        trace["evaluation"]["timestamp"] = (START + timedelta(days=day)).isoformat()
        lines.append(json.dumps(trace))
    (root / "traces/alice/gemm").mkdir(parents=True)
    (root / "traces/alice/gemm/definition.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("hygiene")
    source = root / SOURCE_FOLDER
    write_dataset(source)
    warehouse = root / f"warehouse_{HOSTILE}"
    result = run_raw("build", "--source", str(source), "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    assert_clean(result)  # the build's summary and notes name the warehouse folder
    assert b"\\x1b[2J" in result.stdout
    return source, warehouse


def test_changes_text_escapes_the_source_folder_and_every_name(built: tuple[Path, Path]) -> None:
    _, warehouse = built
    text = run_raw("changes", "--warehouse", str(warehouse))
    assert text.returncode == 0, text.stderr
    assert_clean(text)
    # the header names the source folder, the entries the solution and the definition
    # (names are elided in the middle to fit 80 columns)
    assert b"source source_\\x1b[2J\\x1b]0;owned\\x07\\x08\\r\\x9b" in text.stdout
    assert b"regressions: 1\n" in text.stdout
    assert b"  sol_\\x1b[2J" in text.stdout and b"    gemm_\\x1b[2J" in text.stdout
    # CSV quotes a cell's line breaks and tabs, as CSV does (render.write_csv), and escapes
    # every other control character; JSON escapes them all
    for output_format, allows in (("json", "\n"), ("csv", "\n\r\t")):
        machine = run_raw("changes", "--format", output_format, "--warehouse", str(warehouse))
        assert machine.returncode == 0, machine.stderr
        assert_clean(machine, stdout_allows=allows)
    # JSON keeps the names, escaped as JSON escapes: a program reads them back as they are
    document = json.loads(
        run_raw("changes", "--format", "json", "--warehouse", str(warehouse)).stdout
    )
    assert document["regressions"][0]["solution"] == SOLUTION


def test_the_regression_line_on_stderr_escapes_the_names(built: tuple[Path, Path]) -> None:
    _, warehouse = built
    failing = run_raw("changes", "--fail-on-regression", "--warehouse", str(warehouse))
    assert failing.returncode == 1
    assert_clean(failing)
    (line,) = failing.stderr.splitlines()
    assert line.startswith(b"tracehouse changes: 1 regression(s) in source source_\\x1b[2J")


def test_error_lines_escape_file_names_typed_values_and_echoed_sql(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    source, warehouse = built
    at = ["--warehouse", str(warehouse)]
    # a source whose every record is rejected: the refusal names the file
    refused_source = tmp_path / "refused"
    (refused_source / "traces/alice/gemm").mkdir(parents=True)
    (refused_source / f"traces/alice/gemm/bad_{HOSTILE}.jsonl").write_text('{"broken\n' * 2)
    (refused_source / "definitions").mkdir()
    cases = [
        (["build", "--source", str(refused_source), "--warehouse", str(tmp_path / "w")], b"bad_"),
        (["build", "--source", str(tmp_path / f"missing_{HOSTILE}"), *at], b"missing_"),
        (["build", "--source", str(source), "--source-name", f"x{HOSTILE}", *at], b"x"),
        (["query", f"SELECT '{HOSTILE}' FROM nowhere", *at], b"nowhere"),  # noqa: S608
        (["query", f"SELEKT {HOSTILE}", *at], b"SELEKT"),
        (["leaderboard", f"gemm{HOSTILE}", *at], b"gemm"),
        (["changes", "--source", f"other{HOSTILE}", *at], b"other"),
        (["record", f"run{HOSTILE}", *at], b"run"),
        (["rollback", f"gen{HOSTILE}", *at], b"gen"),
        (["build", f"--bogus{HOSTILE}"], b"--bogus"),
    ]
    for args, named in cases:
        result = run_raw(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert_clean(result)
        (line,) = result.stderr.splitlines()
        # the hostile part is there, escaped (DuckDB's message breaks the SQL at the CR and
        # quotes one of its lines)
        assert named in line, (args, line)
        assert b"\\x1b[2J" in line or b"\\x9b31m\\x85\\x7f\\u202e" in line, (args, line)
