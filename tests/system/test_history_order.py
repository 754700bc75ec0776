"""run_history's files in run_id order, in bounded memory: a build that compares every run
(a cold build, a new revision) sorts its history a run_id range at a time once it holds more
than ``finalize.SORTED_WRITE_ROWS`` rows; sorted whole, 2,000,000 runs ran out of finalize's
memory limit. Range by range or whole, the files hold the same rows in the same order."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import build
from tracehouse.assemble import finalize
from tracehouse.demo import generate_dataset
from tracehouse.schemas import HISTORY_TABLES

pytestmark = pytest.mark.integration

REVISIONS = ("a" * 40, "b" * 40)


def _history_files(warehouse: Path) -> dict[str, list[list[dict[str, object]]]]:
    """Each history table's delta files (empty ones left out), oldest first, as rows in file order."""
    current = warehouse / "current"
    tables: dict[str, list[list[dict[str, object]]]] = {}
    for table in HISTORY_TABLES:
        files = sorted((current / f"{table}.parquet").glob("*/0*.parquet"))
        tables[table] = [pq.read_table(path).to_pylist() for path in files]
    return tables


def _build_two_revisions(source: Path, warehouse: Path) -> None:
    """A cold build (every run appears), then a new revision with one trace file gone (its
    runs disappear)."""
    build(source, warehouse, revision=REVISIONS[0], workers=1)
    removed = max((source / "traces").rglob("*.jsonl"))
    kept = removed.read_bytes()
    removed.unlink()
    try:
        build(source, warehouse, revision=REVISIONS[1], workers=1, allow_shrink=True)
    finally:
        removed.write_bytes(kept)


def test_history_sorted_a_range_at_a_time_is_the_history_sorted_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "dataset"
    generate_dataset(source, seed=5, definitions=3, workloads_per_definition=3)

    _build_two_revisions(source, tmp_path / "whole")
    whole = _history_files(tmp_path / "whole")

    # Ranges of ~3 rows: the cold build's ~140 runs are sorted in ~50 ranges.
    monkeypatch.setattr(finalize, "SORTED_WRITE_ROWS", 3)
    ranged: list[int] = []
    split = finalize._run_id_ranges

    def recorded(count: int) -> list[tuple[str | None, str | None]]:
        ranged.append(count)
        return split(count)

    monkeypatch.setattr(finalize, "_run_id_ranges", recorded)
    _build_two_revisions(source, tmp_path / "ranges")
    ranges = _history_files(tmp_path / "ranges")

    assert max(ranged) > 30  # the cold build's appearances, in that many ranges
    assert ranges == whole
    appearances, disappearances = whole["run_appearances"], whole["run_disappearances"]
    assert [len(rows) > 100 for rows in appearances] == [True]
    assert [len(rows) > 0 for rows in disappearances] == [True]
    for rows in [*appearances, *disappearances]:
        run_ids = [row["run_id"] for row in rows]
        assert run_ids == sorted(run_ids)
    # No scratch file is left beside the spill folder's own.
    assert not list((tmp_path / "ranges").rglob("*.unsorted"))


def test_ranges_that_miss_rows_fail_the_build_and_publish_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ranges hold every run id by construction; were one left out, the build stops before
    publishing a history short of runs, and the next build is whole again."""
    source, warehouse = tmp_path / "dataset", tmp_path / "wh"
    generate_dataset(source, seed=5, definitions=2, workloads_per_definition=3)
    monkeypatch.setattr(finalize, "SORTED_WRITE_ROWS", 3)
    split = finalize._run_id_ranges
    monkeypatch.setattr(finalize, "_run_id_ranges", lambda count: split(count)[1:])
    with pytest.raises(RuntimeError, match=r"run_appearances: [\d,]+ rows sorted of [\d,]+"):
        build(source, warehouse, revision=REVISIONS[0], workers=1)
    assert not warehouse.exists()
    assert not list(tmp_path.rglob("*.unsorted"))

    monkeypatch.setattr(finalize, "_run_id_ranges", split)
    build(source, warehouse, revision=REVISIONS[0], workers=1)
    appearances = _history_files(warehouse)["run_appearances"]
    assert [len(rows) for rows in appearances] == [
        len(pq.read_table(warehouse / "current" / "runs.parquet"))
    ]
