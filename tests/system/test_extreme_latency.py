"""Issue 16: one extreme latency costs only its line. ``1e308`` ms once ended the build in
``internal error: OverflowError``; values beyond int64 nanoseconds (``1e300``, ``2**63``) or
rounding to 0 ns (``1e-7``, ``5e-324``) made a publish invariant refuse the whole source. Each is
now a reject naming its file, line and reason, and the good lines beside them are published."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.hostile_corpus import (
    DEFINITION,
    definition_object,
    solution_object,
    trace_object,
)
from tests.fixtures.hostile_corpus import run_cli as tracehouse

pytestmark = pytest.mark.integration

EXTREMES = ("1e308", "1e300", "9223372036854775808", "1e-7", "5e-324")


def dataset(tmp_path: Path, trace_lines: list[str]) -> Path:
    """One definition, one solution, and ``trace_lines`` as traces/t.jsonl."""
    source = tmp_path / "dataset"
    (source / "definitions" / "gemm").mkdir(parents=True)
    (source / "definitions" / "gemm" / f"{DEFINITION}.json").write_text(
        json.dumps(definition_object())
    )
    (source / "solutions").mkdir()
    (source / "solutions" / "alice_gemm_v1.json").write_text(json.dumps(solution_object()))
    (source / "traces").mkdir()
    (source / "traces" / "t.jsonl").write_text("\n".join(trace_lines) + "\n")
    return source


def test_extreme_latencies_are_rejected_per_line_and_the_rest_published(tmp_path: Path) -> None:
    good = [
        json.dumps(trace_object(f"00000000-0000-0000-0000-{i:012d}", latency=0.5 + i))
        for i in range(6)
    ]
    extreme = [
        json.dumps(trace_object(f"10000000-0000-0000-0000-{i:012d}", latency=0.5)).replace(
            '"latency_ms": 0.5', f'"latency_ms": {value}'
        )
        for i, value in enumerate(EXTREMES)
    ]
    assert all(value in line for value, line in zip(EXTREMES, extreme, strict=True))
    source = dataset(tmp_path, good[:3] + extreme + good[3:])
    warehouse = tmp_path / "warehouse"

    built = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    assert built.returncode == 0, built.stderr
    assert "internal error" not in built.stderr

    def rows(sql: str) -> list[dict[str, object]]:
        answer = tracehouse("query", sql, "--format", "json", "--warehouse", str(warehouse))
        assert answer.returncode == 0, answer.stderr
        return json.loads(answer.stdout)

    rejects = rows("SELECT file, line, reason, message FROM rejects ORDER BY line")
    assert [(r["file"], r["line"], r["reason"]) for r in rejects] == [
        ("traces/t.jsonl", line, "invalid_latency") for line in range(4, 9)
    ]
    assert all("latency_ms" in str(r["message"]) for r in rejects)
    assert rows("SELECT count(*) AS n FROM runs") == [{"n": len(good)}]


def test_an_integer_timestamp_is_said_as_what_it_is(tmp_path: Path) -> None:
    """Issue 16: an epoch-number timestamp was reported as "missing"."""
    good = trace_object("00000000-0000-0000-0000-000000000001")
    epoch = trace_object("00000000-0000-0000-0000-000000000002")
    epoch["evaluation"]["timestamp"] = 1773757240
    source = dataset(tmp_path, [json.dumps(good), json.dumps(epoch)])
    warehouse = tmp_path / "warehouse"
    built = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    assert built.returncode == 0, built.stderr
    answer = tracehouse(
        "query", "SELECT line, reason, message FROM rejects", "--format", "json",
        "--warehouse", str(warehouse),
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    (reject,) = json.loads(answer.stdout)
    assert reject["line"] == 2 and reject["reason"] == "invalid_field"
    assert "int '1773757240'" in reject["message"] and "missing" not in reject["message"]
