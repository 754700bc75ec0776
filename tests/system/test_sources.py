"""Several sources in one warehouse, and every revision of a source remembered (issue 12).

- The golden corpus as a sequence of revisions (its trace lines split by observed_at into three
  cumulative snapshots, each a git commit of a test repository) built into one warehouse:
  run_history knows every run's first snapshot, leader_changes equals a computation written
  here from each generation's own ranks, and the current tables equal a from-scratch build of
  the last revision.
- The demo data and a sample folder as two sources: their cohorts rank together, and removing
  one gives back exactly the other's single-source warehouse.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import build, run_cli
from tests.fixtures.shared_data import GOLDEN_DIR, SAMPLES_DIR, requires_shared
from tracehouse.demo.generate import generate_dataset
from tracehouse.warehouse import Warehouse, connect_read_only

SNAPSHOTS = 3
# Tables that describe the warehouse's own past, not the current state of its sources: a
# warehouse that read several revisions holds more of them than a from-scratch one.
HISTORY_TABLES = {"source_snapshots", "run_appearances", "run_disappearances"}


def rows(warehouse: Path, sql: str) -> list[dict[str, Any]]:
    connection = connect_read_only(Warehouse(warehouse))
    try:
        cursor = connection.execute(sql)
        names = [d[0] for d in cursor.description or []]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        connection.close()


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
            "GIT_AUTHOR_DATE": "2026-08-16T00:00:00Z",
            "GIT_COMMITTER_DATE": "2026-08-16T00:00:00Z",
            "PATH": "/usr/bin:/bin",
        },
    ).stdout.strip()


def _timestamp(line: str) -> str:
    """The line's evaluation timestamp as written ('' when it has none: it comes first)."""
    try:
        record = json.loads(line)
    except ValueError:
        return ""
    evaluation = record.get("evaluation") if isinstance(record, dict) else None
    stamp = evaluation.get("timestamp") if isinstance(evaluation, dict) else None
    return stamp if isinstance(stamp, str) else ""


def export(warehouse: Path, out: Path) -> dict[str, bytes]:
    result = run_cli("export", "--snapshot", str(out), "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.parquet"))}


def leaders(warehouse: Path) -> dict[str, tuple[str, int]]:
    """The rank-1 run of every comparison key of the current generation, from its own tables:
    the fastest eligible run, then the first observed, then the smallest run id."""
    found: dict[str, tuple[str, int]] = {}
    ordered = rows(
        warehouse,
        "SELECT r.comparison_key, r.run_id, r.latency_ns, r.observed_at FROM runs r "
        "JOIN run_rankings k USING (run_id) WHERE k.eligible",
    )
    ordered.sort(
        key=lambda r: (
            r["comparison_key"],
            r["latency_ns"],
            r["observed_at"] is None,
            r["observed_at"] or 0,
            r["run_id"],
        )
    )
    for row in ordered:
        found.setdefault(row["comparison_key"], (row["run_id"], row["latency_ns"]))
    return found


def expected_leader_changes(
    states: list[dict[str, tuple[str, int]]], present: list[dict[str, set[str]]]
) -> list[tuple[str, int, str, str | None, str | None]]:
    """Per comparison key, each state whose leader differs from the state before, with the
    cause (the view's documented rules, computed here in Python)."""
    changes = []
    keys = sorted({key for state in states for key in state})
    for key in keys:
        previous: tuple[str, int] | None = None
        for number, state in enumerate(states, start=1):
            leader = state.get(key)
            if leader == previous:
                continue
            if previous is None:
                cause = "first"
            elif leader is None:
                cause = "withdrawn"
            elif leader[1] < previous[1]:
                cause = "faster"
            elif previous[0] not in present[number - 1].get(key, set()):
                cause = "withdrawn"
            else:
                cause = "tie"
            changes.append(
                (
                    key,
                    number,
                    cause,
                    previous[0] if previous else None,
                    leader[0] if leader else None,
                )
            )
            previous = leader
    return sorted(changes, key=lambda c: (c[0], c[1]))


def eligible_runs(warehouse: Path) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for row in rows(
        warehouse,
        "SELECT r.comparison_key, r.run_id FROM runs r "
        "JOIN run_rankings k USING (run_id) WHERE k.eligible",
    ):
        found.setdefault(row["comparison_key"], set()).add(row["run_id"])
    return found


@pytest.mark.slow
@requires_shared
def test_revisions_of_the_golden_corpus_are_remembered(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    dataset = GOLDEN_DIR / "dataset"
    repo = tmp_path / "golden-series"
    shutil.copytree(dataset, repo)
    # Every trace file's lines in observed order, so each snapshot is a prefix of each file and
    # a line keeps its number (and its run id) from the snapshot it first appears in on.
    trace_files = sorted((repo / "traces").rglob("*.jsonl"))
    ordered: dict[Path, list[str]] = {}
    for path in trace_files:
        lines = path.read_text().splitlines(keepends=True)
        ordered[path] = [
            line for _, line in sorted(enumerate(lines), key=lambda i: (_timestamp(i[1]), i[0]))
        ]
    stamps = sorted({_timestamp(line) for lines in ordered.values() for line in lines} - {""})
    cuts = [stamps[len(stamps) * k // SNAPSHOTS - 1] for k in range(1, SNAPSHOTS)] + [stamps[-1]]
    git(repo, "init", "-q")
    warehouse = tmp_path / "warehouse"
    first_snapshot: dict[tuple[str, int], int] = {}
    states: list[dict[str, tuple[str, int]]] = []
    present: list[dict[str, set[str]]] = []
    shas = []
    for number, cut in enumerate(cuts, start=1):
        for path, lines in ordered.items():
            kept = [line for line in lines if _timestamp(line) <= cut]
            path.write_text("".join(kept))
            rel = str(path.relative_to(repo))
            for index in range(len(kept)):
                first_snapshot.setdefault((rel, index + 1), number)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"snapshot {number}")
        shas.append(git(repo, "rev-parse", "HEAD"))
        result = build(repo, warehouse)
        assert not result.up_to_date
        states.append(leaders(warehouse))
        present.append(eligible_runs(warehouse))
    assert len(set(shas)) == SNAPSHOTS

    snapshots = rows(warehouse, "SELECT * FROM source_snapshots ORDER BY snapshot_number")
    assert [(s["snapshot_number"], s["resolved_sha"]) for s in snapshots] == list(
        enumerate(shas, start=1)
    )
    # run_history: every run once per range, each with the snapshot its line first appeared in.
    history = rows(warehouse, "SELECT * FROM run_history")
    runs = rows(warehouse, "SELECT run_id, source_file, source_line FROM runs")
    assert len(runs) > 1000
    by_run = {}
    for entry in history:
        by_run.setdefault(entry["run_id"], []).append(entry)
    for run in runs:
        (entry,) = by_run[run["run_id"]]
        assert entry["current"] and entry["last_snapshot_number"] == SNAPSHOTS
        expected = first_snapshot[(run["source_file"], run["source_line"])]
        assert entry["first_snapshot_number"] == expected, run
        assert entry["first_snapshot_id"] == snapshots[expected - 1]["snapshot_id"]
    assert {e["first_snapshot_number"] for e in history} == set(range(1, SNAPSHOTS + 1))
    assert len(history) == len(runs)  # a cumulative series only adds

    # leader_changes equals the walk over each generation's own rank-1 runs.
    found = rows(
        warehouse,
        "SELECT comparison_key, snapshot_number, cause, previous_run_id, run_id "
        "FROM leader_changes ORDER BY comparison_key, snapshot_number",
    )
    got = [
        (r["comparison_key"], r["snapshot_number"], r["cause"], r["previous_run_id"], r["run_id"])
        for r in found
    ]
    expected_changes = expected_leader_changes(states, present)
    assert got == expected_changes
    assert {c[2] for c in expected_changes} >= {"first", "faster"}
    # Since before the first build: every snapshot's changes of a leader.
    listed = run_cli(
        "changes", "--since", "2000-01-01", "--format", "json", "--warehouse", str(warehouse)
    )
    assert listed.returncode == 0, listed.stderr
    # A solution replacing its own result within noise is counted, not listed (issue 27): the
    # listed changes and the counted ones are together every change of a leader.
    listed_json = json.loads(listed.stdout)
    changes_of_leaders = listed_json["leader_changes"]
    later_changes = [(c[0], c[1]) for c in expected_changes if c[2] != "first"]
    shown = sorted((c["comparison_key"], c["snapshot_number"]) for c in changes_of_leaders)
    assert set(shown) <= set(later_changes)
    assert len(shown) + listed_json["within_noise"]["leader_changes"] == len(later_changes)

    # The current tables equal a from-scratch build of the last revision.
    scratch = tmp_path / "scratch"
    build(repo, scratch)
    ours = export(warehouse, tmp_path / "ours-export")
    theirs = export(scratch, tmp_path / "scratch-export")
    assert set(ours) == set(theirs)
    for name in sorted(set(ours) - {f"{t}.parquet" for t in HISTORY_TABLES}):
        assert ours[name] == theirs[name], name


@pytest.mark.slow
@requires_shared
def test_two_sources_rank_together_and_removing_one_restores_the_other(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    generate_dataset(demo, definitions=3, workloads_per_definition=3, solutions_per_definition=3)
    sample = tmp_path / "sample"
    shutil.copytree(SAMPLES_DIR / "hf_v3_layout", sample)
    # The sample re-measures the demo's first cohort: a copy of its trace files under another
    # author, so the two sources share comparison keys.
    shared = next(p for p in sorted((demo / "traces").rglob("*.jsonl")) if p.stat().st_size)
    target = sample / "traces" / "fork" / shared.relative_to(demo / "traces")
    target.parent.mkdir(parents=True)
    shutil.copyfile(shared, target)
    for folder in ("definitions", "solutions", "workloads"):
        shutil.copytree(demo / folder, sample / folder, dirs_exist_ok=True)
    revision = "1" * 40
    both = tmp_path / "both"
    build(demo, both, revision=revision)
    build(sample, both, revision=revision)
    listing = run_cli("sources", "--format", "json", "--warehouse", str(both))
    assert listing.returncode == 0, listing.stderr
    held = json.loads(listing.stdout)
    assert sorted(s["source"] for s in held) == ["demo", "sample"]
    assert all(s["runs"] > 0 and s["snapshot_number"] == 1 for s in held)

    # Cross-source cohorts: one cohort per comparison key over both sources' runs, ranked
    # together; the copied lines are the same runs (same digests) and count once.
    cohorts = rows(
        both,
        "SELECT r.comparison_key, list(DISTINCT r.source ORDER BY r.source) AS sources, "
        "count(DISTINCT coalesce(r.run_digest, r.line_digest)) AS distinct_runs, "
        "any_value(k.cohort_size) AS cohort_size, count(DISTINCT k.cohort_size) AS sizes, "
        "max(k.rank) AS worst_rank FROM runs r JOIN run_rankings k USING (run_id) "
        "WHERE k.eligible GROUP BY 1",
    )
    mixed = [c for c in cohorts if c["sources"] == ["demo", "sample"]]
    assert mixed, "no cohort spans both sources"
    for cohort in cohorts:
        assert cohort["sizes"] == 1 and cohort["cohort_size"] == cohort["distinct_runs"]
    duplicated = rows(
        both,
        "SELECT run_digest, count(*) AS n, count(DISTINCT k.rank) AS ranks FROM runs "
        "JOIN run_rankings k USING (run_id) WHERE k.eligible AND run_digest IS NOT NULL "
        "GROUP BY 1 HAVING count(DISTINCT source) > 1",
    )
    assert duplicated and all(d["n"] == 2 and d["ranks"] == 1 for d in duplicated)

    # Building the sample again (changed) replaces its rows only: the demo's parts stay.
    demo_parts = {
        p.name: p.stat().st_ino for p in (both / "current" / "runs.parquet").rglob("*.parquet")
    }
    removed = run_cli("remove-source", "sample", "--warehouse", str(both))
    assert removed.returncode == 0, removed.stderr
    assert "removed source sample" in removed.stdout
    after = {
        p.name: p.stat().st_ino for p in (both / "current" / "runs.parquet").rglob("*.parquet")
    }
    assert after.items() <= demo_parts.items()  # the demo's files, linked, not rewritten

    alone = tmp_path / "alone"
    build(demo, alone, revision=revision)
    ours = export(both, tmp_path / "both-export")
    theirs = export(alone, tmp_path / "alone-export")
    assert set(ours) == set(theirs)
    for name in sorted(ours):
        if name == "source_snapshots.parquet":  # built_at: when each build ran
            continue
        assert ours[name] == theirs[name], name
    snapshots = [
        pq.read_table(tmp_path / f"{which}-export" / "source_snapshots.parquet")
        .drop_columns(["built_at"])
        .to_pylist()
        for which in ("both", "alone")
    ]
    assert snapshots[0] == snapshots[1]

    # One-line errors for names the warehouse does not hold, and for its last source.
    unknown = run_cli("remove-source", "sample", "--warehouse", str(both))
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == (
        f"tracehouse remove-source: no source 'sample' in {both} (it holds: demo)"
    )
    last = run_cli("remove-source", "demo", "--warehouse", str(both))
    assert last.returncode == 2 and len(last.stderr.strip().splitlines()) == 1
    assert "the only source" in last.stderr


@pytest.mark.slow
def test_a_name_already_given_to_another_folder_is_refused(tmp_path: Path) -> None:
    first = tmp_path / "a" / "data"
    second = tmp_path / "b" / "data"
    generate_dataset(first, definitions=2, workloads_per_definition=2, solutions_per_definition=2)
    shutil.copytree(first, second)
    warehouse = tmp_path / "w"
    assert run_cli("build", "--source", str(first), "--warehouse", str(warehouse)).returncode == 0
    refused = run_cli("build", "--source", str(second), "--warehouse", str(warehouse))
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "Pass --source-name" in refused.stderr
    named = run_cli(
        "build", "--source", str(second), "--source-name", "copy", "--warehouse", str(warehouse)
    )
    assert named.returncode == 0, named.stderr
    held = rows(warehouse, "SELECT source, runs FROM source_summary ORDER BY source")
    assert [h["source"] for h in held] == ["copy", "data"]
    assert held[0]["runs"] == held[1]["runs"] > 0
    # Same files, two sources: two runs each, with their own ids.
    assert rows(warehouse, "SELECT count(DISTINCT run_id) = count(*) AS ok FROM runs")[0]["ok"]


@pytest.mark.integration
@requires_shared
def test_dagster_builds_one_partition_per_configured_source(tmp_path: Path) -> None:
    """TRACEHOUSE_SOURCES names the sources; observing them (`observe_sources_job`) makes each
    a partition of the tables, and building a partition builds that source, under that name,
    into the shared warehouse (`dg launch`, as the README runs it)."""
    import os

    warehouse = tmp_path / "warehouse"
    (tmp_path / "dagster").mkdir()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")}
    environment.update(
        DAGSTER_HOME=str(tmp_path / "dagster"),
        TRACEHOUSE_WAREHOUSE=str(warehouse),
        TRACEHOUSE_SOURCES=f"v3={SAMPLES_DIR / 'hf_v3_layout'};"
        f"fork={SAMPLES_DIR / 'intel_sycl_fork_2026-09'}",
    )
    environment["VIRTUAL_ENV"] = str(Path(sys.executable).parents[1])
    dg = str(Path(sys.executable).with_name("dg"))
    commands = [["launch", "--job", "observe_sources_job"]] + [
        ["launch", "--job", "build_warehouse_job", "--partition", partition]
        for partition in ("fork", "v3")
    ]
    for command in commands:
        done = subprocess.run(
            [dg, *command],
            capture_output=True,
            text=True,
            env=environment,
            cwd=Path(__file__).resolve().parents[2],
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    held = rows(warehouse, "SELECT source, uri, runs FROM source_summary ORDER BY source")
    assert [(h["source"], Path(h["uri"]).name) for h in held] == [
        ("fork", "intel_sycl_fork_2026-09"),
        ("v3", "hf_v3_layout"),
    ]
    assert all(h["runs"] > 0 for h in held)


@pytest.mark.slow
def test_a_warehouse_of_an_older_tracehouse_is_rebuilt_not_misread(tmp_path: Path) -> None:
    """A generation without sources.json (one source, the layout before several): reads say to
    rebuild, in one line, and a build starts afresh beside it."""
    dataset = tmp_path / "data"
    generate_dataset(dataset, definitions=2, workloads_per_definition=2, solutions_per_definition=2)
    warehouse = tmp_path / "w"
    assert run_cli("build", "--source", str(dataset), "--warehouse", str(warehouse)).returncode == 0
    (warehouse / "current" / "sources.json").unlink()
    (warehouse / "current" / "files.json").unlink()  # an older tracehouse wrote neither
    read = run_cli("query", "SELECT count(*) FROM runs", "--warehouse", str(warehouse))
    assert read.returncode == 2 and len(read.stderr.strip().splitlines()) == 1
    assert "built by an older tracehouse" in read.stderr
    rebuilt = run_cli("build", "--source", str(dataset), "--warehouse", str(warehouse))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert rows(warehouse, "SELECT source, snapshot_number FROM source_summary") == [
        {"source": "data", "snapshot_number": 1}
    ]
