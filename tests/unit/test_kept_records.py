"""Issue 10, part 4: keep what FlashInfer-Bench keeps.

The rules are small pure functions (``transforms/timestamps.py``, ``transforms/evaluation_rules.py``)
that every ingest path calls; they are tested here directly, then on the real samples: the
"Solution skipped after N failures" records of the Intel fork and the Hub v3 layout are kept,
flagged ``evaluated = false``, and counted apart in the views. (The hostile corpus in
tests/fixtures/hostile_corpus.py adds runs with non-ISO timestamps and non-finite latencies.)
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixtures.shared_data import SAMPLES_DIR, requires_shared
from tracehouse.read.evaluation_rules import (
    Latency,
    LatencyProblem,
    read_latency,
    was_evaluated,
)
from tracehouse.read.timestamps import observed_at


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-17T14:20:40.993273", datetime(2026, 3, 17, 14, 20, 40, 993000, tzinfo=UTC)),
        ("2026-03-17T14:20:40+02:00", datetime(2026, 3, 17, 12, 20, 40, tzinfo=UTC)),
        ("2026-03-17 14:20", datetime(2026, 3, 17, 14, 20, tzinfo=UTC)),
        ("2026-03-17", datetime(2026, 3, 17, tzinfo=UTC)),
        ("1710684040", datetime(2024, 3, 17, 14, 0, 40, tzinfo=UTC)),
        ("1710684040.5", datetime(2024, 3, 17, 14, 0, 40, 500000, tzinfo=UTC)),
        ("1710684040123", datetime(2024, 3, 17, 14, 0, 40, 123000, tzinfo=UTC)),
        ("Tue Mar 17 14:20:40 2026", None),  # no zone, no standard: ambiguous
        ("unknown", None),
        ("2026-13-45", None),
        ("17", None),
        ("   ", None),
    ],
)
def test_observed_at(text: str, expected: datetime | None) -> None:
    assert observed_at(text) == expected


def test_was_evaluated() -> None:
    skipped = "Solution skipped after 3 failures. Last error: [1/3] nvcc ..."
    assert was_evaluated("COMPILE_ERROR", skipped) is False
    assert was_evaluated("COMPILE_ERROR", "Solution skipped after 1 failure.") is False
    assert was_evaluated("COMPILE_ERROR", "error: nvcc failed") is True
    assert was_evaluated("RUNTIME_ERROR", skipped) is True  # only the runner's skip record
    assert was_evaluated("PASSED", "") is True


def test_read_latency() -> None:
    assert read_latency(0.5, "latency_ms", required=True) == Latency(0.5, None)
    for value, special in [
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        (None, "absent"),
        (10**400, "Infinity"),
    ]:
        assert read_latency(value, "latency_ms", required=True) == Latency(None, special), value
    assert read_latency(0.0, "reference_latency_ms", required=False) == Latency(0.0, None)
    for bad in (0, -1.0, True, "0.5", [1]):
        with pytest.raises(LatencyProblem):
            read_latency(bad, "latency_ms", required=True)


def _skipped_lines(folder: Path) -> int:
    """Records whose log says the runner skipped them, counted from the raw files."""
    count = 0
    for path in folder.rglob("traces/**/*.jsonl"):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            evaluation = json.loads(line).get("evaluation") or {}
            if str(evaluation.get("log", "")).startswith("Solution skipped after"):
                count += 1
    return count


def _query(warehouse: Path, sql: str) -> list[dict]:
    result = run_cli("query", sql, "--format", "json", "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@requires_shared
@pytest.mark.integration
@pytest.mark.parametrize("sample", ["intel_sycl_fork_2026-09", "hf_v3_layout"])
def test_skipped_records_are_kept_and_told_apart(sample: str, tmp_path: Path) -> None:
    folder = SAMPLES_DIR / sample
    expected = _skipped_lines(folder)
    assert expected > 0
    warehouse = tmp_path / "warehouse"
    result = run_cli("build", "--source", str(folder), "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    (runs,) = _query(
        warehouse,
        "SELECT count(*) FILTER (WHERE NOT evaluated) AS skipped, "
        "count(*) FILTER (WHERE NOT evaluated AND status <> 'COMPILE_ERROR') AS other_status "
        "FROM runs",
    )
    assert runs == {"skipped": expected, "other_status": 0}
    (summary,) = _query(
        warehouse, "SELECT count(*) FILTER (WHERE NOT evaluated) AS skipped FROM run_summary"
    )
    (board,) = _query(warehouse, "SELECT sum(runs_not_evaluated)::BIGINT AS n FROM leaderboard")
    assert summary["skipped"] == expected
    # The leaderboard counts runs with a solution name; the samples' skipped records all have one.
    assert board["n"] == expected
