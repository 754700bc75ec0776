"""A warehouse that uses its memory (issue 18): one dataset built as several git revisions of
one source, judged across them.

Each revision is a new benchmark run of the same solutions on the same workloads (a trace file
rewritten and committed), with a few percent of run-to-run noise on every result. In the last
revision one solution is 2x slower everywhere and a broken one is fixed. The real `tracehouse
build` reads each revision from the folder's git HEAD; `tracehouse changes` must flag exactly the
slowed solution's workloads, none of the noise, list the fix as newly passing, and continue the
record history across revisions (checked against a walk of the history written here). A second
source that does not change is left untouched, and `--source` shows only what it names.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipelines.changes import EXIT_REGRESSIONS_FOUND, WIDTH
from pipelines.warehouse import Warehouse, connect_read_only
from tests.conftest import run_cli
from tests.hostile_corpus import definition_object, solution_object, trace_object

pytestmark = [  # the tests read a series of four CLI builds, or build their own
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
    pytest.mark.slow,
]

DEFINITION = "gemm_n4_k4"
WORKLOADS = [f"w-{i:02d}" for i in range(4)]
STEADY = ("alice_steady", "bob_steady")
SLOWED = "carol_slowed"  # 2x slower in the last revision
FIXED = "dave_fixed"  # RUNTIME_ERROR until the last revision, PASSED in it
SOLUTIONS = (*STEADY, SLOWED, FIXED)
REVISIONS = 4
NOISE = 0.03  # every result is its base latency times 1 +/- up to 3 %
BASE_NS = {"alice_steady": 40_000, "bob_steady": 55_000, SLOWED: 47_000, FIXED: 30_000}
START = datetime(2026, 3, 1, 8, 0, 0)


@dataclass(frozen=True)
class Result:
    revision: int  # 1-based: the snapshot that first holds it
    solution: str
    workload: str
    status: str
    latency_ns: int | None
    observed_at: datetime


def revision_results(revision: int, hardware_offset: int = 0) -> list[Result]:
    """The benchmark run committed as ``revision``: every solution on every workload."""
    noise = random.Random(revision * 1000 + hardware_offset)
    # Revision 3 is a run recovered late: measured before revision 2's, read after it. The
    # warehouse orders results by the snapshot that first held them, then observed_at.
    day = {1: 0, 2: 7, 3: 3, 4: 14}[revision]
    results = []
    for s, solution in enumerate(SOLUTIONS):
        for w, workload in enumerate(WORKLOADS):
            moment = START + timedelta(days=day, minutes=10 * s + w)
            if solution == FIXED and revision < REVISIONS:
                results.append(Result(revision, solution, workload, "RUNTIME_ERROR", None, moment))
                continue
            base = BASE_NS[solution] * (1 + 0.1 * w)
            if solution == SLOWED and revision == REVISIONS:
                base *= 2
            latency = round(base * (1 + noise.uniform(-NOISE, NOISE)))
            results.append(Result(revision, solution, workload, "PASSED", latency, moment))
    return results


def write_revision(folder: Path, results: list[Result], hardware: str = "NVIDIA B200") -> None:
    """The dataset of one revision: definitions, solutions, and the run's trace file."""
    definition = definition_object(DEFINITION)
    (folder / "definitions" / "gemm").mkdir(parents=True, exist_ok=True)
    (folder / "definitions" / "gemm" / f"{DEFINITION}.json").write_text(json.dumps(definition))
    fixed = any(r.solution == FIXED and r.status == "PASSED" for r in results)
    for solution in SOLUTIONS:
        author = solution.split("_")[0]
        target = folder / "solutions" / author / "gemm" / DEFINITION
        target.mkdir(parents=True, exist_ok=True)
        content = "def run(A, B, C):\n    C.copy_(A @ B.T)\n"
        if solution == FIXED and not fixed:
            content = "def run(A, B, C):\n    raise RuntimeError('broken')\n"
        body = solution_object(solution, author, DEFINITION, content)
        (target / f"{solution}.json").write_text(json.dumps(body))
    lines = []
    for result in results:
        trace = trace_object(
            result.workload,
            definition=DEFINITION,
            solution=result.solution,
            status=result.status,
            latency=(result.latency_ns or 0) / 1e6,
        )
        trace["workload"]["axes"]["M"] = 8 * (WORKLOADS.index(result.workload) + 1)
        trace["evaluation"]["environment"]["hardware"] = hardware
        trace["evaluation"]["timestamp"] = result.observed_at.isoformat(timespec="microseconds")
        lines.append(json.dumps(trace))
    traces = folder / "traces" / "gemm"
    traces.mkdir(parents=True, exist_ok=True)
    (traces / f"{DEFINITION}.jsonl").write_text("\n".join(lines) + "\n")


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
            "PATH": "/usr/bin:/bin",
        },
    ).stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def cli_build(repo: Path, warehouse: Path) -> None:
    result = run_cli("build", "--source", str(repo), "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr


def changes(warehouse: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("changes", "--warehouse", str(warehouse), *args)


def changes_json(warehouse: Path, *args: str) -> dict[str, Any]:
    result = changes(warehouse, "--format", "json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def rows(warehouse: Path, sql: str) -> list[dict[str, Any]]:
    connection = connect_read_only(Warehouse(warehouse))
    try:
        cursor = connection.execute(sql)
        names = [d[0] for d in cursor.description or []]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        connection.close()


def fits(text: str) -> None:
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert too_wide == [], too_wide


@dataclass
class Series:
    repo: Path
    warehouse: Path
    shas: list[str]
    results: list[Result]  # every revision's, in revision order


def build_series(root: Path) -> Series:
    """The revisions committed one by one to a git repository, each built as it is made."""
    repo = root / "gpu-runs"
    repo.mkdir()
    git(repo, "init", "-q")
    warehouse = root / "warehouse"
    shas, results = [], []
    for revision in range(1, REVISIONS + 1):
        run = revision_results(revision)
        write_revision(repo, run)
        shas.append(commit(repo, f"benchmark run {revision}"))
        cli_build(repo, warehouse)
        results += run
    return Series(repo, warehouse, shas, results)


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> Series:
    return build_series(tmp_path_factory.mktemp("history"))


def test_every_revision_is_a_snapshot_read_from_git(series: Series) -> None:
    snapshots = rows(
        series.warehouse,
        "SELECT snapshot_number, resolved_sha FROM source_snapshots ORDER BY snapshot_number",
    )
    assert [(s["snapshot_number"], s["resolved_sha"]) for s in snapshots] == list(
        enumerate(series.shas, start=1)
    )
    # The current runs are the last revision's only; the history holds all of them, once each.
    assert rows(series.warehouse, "SELECT count(*) AS n FROM runs") == [
        {"n": len(SOLUTIONS) * len(WORKLOADS)}
    ]
    history = rows(
        series.warehouse,
        "SELECT solution, workload_uuid, latency_ns, first_snapshot_number FROM latency_history",
    )
    expected = sorted(
        (r.solution, r.workload, r.latency_ns, r.revision)
        for r in series.results
        if r.status == "PASSED"
    )
    got = sorted(
        (h["solution"], h["workload_uuid"], h["latency_ns"], h["first_snapshot_number"])
        for h in history
    )
    assert got == expected


def test_exactly_the_slowed_solutions_workloads_are_flagged(series: Series) -> None:
    report = changes_json(series.warehouse)
    (window,) = report["windows"]
    assert window["before"]["snapshot_number"] == REVISIONS - 1
    assert window["after"]["snapshot_number"] == REVISIONS
    flagged = sorted((r["solution"], r["workload_uuid"]) for r in report["regressions"])
    assert flagged == [(SLOWED, w) for w in WORKLOADS]
    for regression in report["regressions"]:
        assert regression["history_size"] == REVISIONS - 1
        assert 0.85 < regression["relative_change"] < 1.15  # about 2x against its history
    assert report["improvements"] == []
    assert report["history_too_short"] == []
    # The fix: newly passing on every workload, RUNTIME_ERROR before.
    passing = sorted((r["solution"], r["workload_uuid"]) for r in report["newly_passing"])
    assert passing == [(FIXED, w) for w in WORKLOADS]
    assert {(r["status_before"], r["status_after"]) for r in report["newly_passing"]} == {
        ("RUNTIME_ERROR", "PASSED")
    }
    assert report["newly_failing"] == []
    assert report["solutions_appeared"] == report["solutions_disappeared"] == []
    assert report["workloads_appeared"] == report["workloads_disappeared"] == []


def test_no_noise_is_flagged_in_any_revision(series: Series) -> None:
    """Every result of every revision: only the slowed solution's last results are judged a
    regression, nothing an improvement; the first results say their history is too short."""
    verdicts = rows(
        series.warehouse,
        "SELECT solution, workload_uuid, verdict, history_size, first_snapshot_number"
        " FROM latency_verdicts",
    )
    for v in verdicts:
        key = (v["solution"], v["workload_uuid"], v["first_snapshot_number"])
        if v["solution"] == SLOWED and v["first_snapshot_number"] == REVISIONS:
            assert v["verdict"] == "regression", key
        elif v["history_size"] == 0:
            assert v["verdict"] == "first result", key
        elif v["history_size"] < 2:
            assert v["verdict"] == "history too short", key
        else:
            assert v["verdict"] == "within noise", key
    assert {v["first_snapshot_number"] for v in verdicts} == set(range(1, REVISIONS + 1))


def test_fail_on_regression_exits_1_and_says_why_in_one_line(series: Series) -> None:
    plain = changes(series.warehouse)
    assert plain.returncode == 0, plain.stderr
    fits(plain.stdout)
    assert "regressions: 4" in plain.stdout and "newly passing: 4" in plain.stdout
    assert SLOWED in plain.stdout and "z +" in plain.stdout
    failing = changes(series.warehouse, "--fail-on-regression")
    assert failing.returncode == EXIT_REGRESSIONS_FOUND == 1
    assert failing.stdout == plain.stdout
    (line,) = failing.stderr.splitlines()
    assert line.startswith("tracehouse changes: 4 regression(s) in source gpu-runs")
    assert SLOWED in line
    # Since revision 2 the slowdown is still there; since the current one nothing is new.
    assert (
        changes(series.warehouse, "--since", series.shas[1], "--fail-on-regression").returncode == 1
    )
    current = changes(series.warehouse, "--since", series.shas[-1][:12], "--fail-on-regression")
    assert current.returncode == 0, current.stderr
    assert "regressions: 0" in current.stdout


def test_machine_formats(series: Series) -> None:
    import csv
    import io

    result = changes(series.warehouse, "--format", "csv")
    assert result.returncode == 0, result.stderr
    table = list(csv.DictReader(io.StringIO(result.stdout)))
    sections = defaultdict(list)
    for row in table:
        sections[row["section"]].append(row)
    assert sorted(r["workload_uuid"] for r in sections["regressions"]) == WORKLOADS
    assert {r["solution"] for r in sections["newly_passing"]} == {FIXED}
    assert {r["source"] for r in table} == {"gpu-runs"}


def test_since_a_date_compares_with_the_last_build_before_it(series: Series) -> None:
    built = rows(
        series.warehouse, "SELECT snapshot_number, built_at FROM source_snapshots ORDER BY 1"
    )
    between = built[1]["built_at"] + (built[2]["built_at"] - built[1]["built_at"]) / 2
    report = changes_json(series.warehouse, "--since", between.astimezone(UTC).isoformat())
    assert report["windows"][0]["before"]["snapshot_number"] == 2
    assert len(report["regressions"]) == len(WORKLOADS)
    everything = changes_json(series.warehouse, "--since", "2000-01-01")
    assert everything["windows"][0]["before"] is None
    assert len(everything["solutions_appeared"]) == len(SOLUTIONS)
    assert len(everything["workloads_appeared"]) == len(WORKLOADS)


def independent_record_walk(results: list[Result]) -> list[tuple[str, str, int, str | None]]:
    """§11.2 over the history, walked here: per workload (one comparison key each), results
    in the order the warehouse read them (revision, then observed_at, fastest first)."""
    by_key: dict[str, list[Result]] = defaultdict(list)
    for result in results:
        if result.status == "PASSED":
            by_key[result.workload].append(result)
    events = []
    for workload, members in by_key.items():
        best: Result | None = None
        for r in sorted(members, key=lambda r: (r.revision, r.observed_at, r.latency_ns)):
            assert r.latency_ns is not None
            if best is None or r.latency_ns < (best.latency_ns or 0):
                events.append((workload, r.solution, r.latency_ns, best.solution if best else None))
                best = r
    return sorted(events)


def test_record_events_continue_the_story_across_revisions(series: Series) -> None:
    events = rows(
        series.warehouse,
        "SELECT workload_uuid, solution, latency_ns, previous_solution, first_snapshot_number"
        " FROM record_events",
    )
    got = sorted(
        (e["workload_uuid"], e["solution"], e["latency_ns"], e["previous_solution"]) for e in events
    )
    assert got == independent_record_walk(series.results)
    # Only the first revision's records are first results; later ones took them over.
    firsts = [e for e in events if e["previous_solution"] is None]
    assert len(firsts) == len(WORKLOADS)
    assert {e["first_snapshot_number"] for e in firsts} == {1}
    # `changes` lists the holders of the last revision only; the fixed solution is fastest.
    report = changes_json(series.warehouse)
    expected_new = [
        e
        for e in got
        if (e[0], e[1], e[2])
        in {
            (r.workload, r.solution, r.latency_ns)
            for r in series.results
            if r.revision == REVISIONS
        }
    ]
    assert (
        sorted(
            (e["workload_uuid"], e["solution"], e["latency_ns"], e["previous_solution"])
            for e in report["record_holders"]
        )
        == expected_new
    )
    assert {e["first_snapshot_number"] for e in report["record_holders"]} == {REVISIONS}
    holders = {e["workload_uuid"]: e["solution"] for e in report["record_holders"]}
    assert holders == dict.fromkeys(WORKLOADS, FIXED)  # the last holder of each: the fix


def test_going_back_to_an_earlier_revision_is_history_too(tmp_path: Path) -> None:
    """Rebuilding revision 3 after 4: a new snapshot with revision 3's state, reported as a
    return to it; its results were seen before and nothing is judged or walked again."""
    series = build_series(tmp_path)
    warehouse, repo = series.warehouse, series.repo
    git(repo, "checkout", "-q", series.shas[REVISIONS - 2])
    before_events = rows(warehouse, "SELECT count(*) AS n FROM record_events")
    before_results = rows(warehouse, "SELECT count(*) AS n FROM latency_history")
    cli_build(repo, warehouse)
    snapshots = rows(
        warehouse,
        "SELECT snapshot_number, snapshot_id, resolved_sha FROM source_snapshots ORDER BY 1",
    )
    assert len(snapshots) == REVISIONS + 1
    assert snapshots[-1]["resolved_sha"] == series.shas[REVISIONS - 2]
    assert snapshots[-1]["snapshot_id"] == snapshots[REVISIONS - 2]["snapshot_id"]
    assert rows(warehouse, "SELECT count(*) AS n FROM record_events") == before_events
    assert rows(warehouse, "SELECT count(*) AS n FROM latency_history") == before_results

    report = changes_json(warehouse, "--fail-on-regression")
    (window,) = report["windows"]
    assert window["returns_to"]["snapshot_number"] == REVISIONS - 1
    assert window["before"]["snapshot_number"] == REVISIONS
    assert report["regressions"] == report["record_holders"] == []
    failing = sorted((r["solution"], r["workload_uuid"]) for r in report["newly_failing"])
    assert failing == [(FIXED, w) for w in WORKLOADS]  # the fix is gone again
    text = changes(warehouse)
    assert text.returncode == 0, text.stderr
    fits(text.stdout)
    assert (
        f"went back: snapshot {REVISIONS + 1} is the state of snapshot {REVISIONS - 1} again"
        in text.stdout
    )


def test_two_sources_only_one_changes(tmp_path: Path) -> None:
    """A second source (another GPU, its own comparison keys) built once between the first
    source's revisions: its rows stay exactly as built, and `--source` shows only what it
    names; without it each source has its own heading."""
    changing = tmp_path / "b200-runs"
    changing.mkdir()
    git(changing, "init", "-q")
    steady = tmp_path / "h200-runs"
    steady.mkdir()
    git(steady, "init", "-q")
    write_revision(steady, revision_results(1, hardware_offset=7), hardware="NVIDIA H200")
    commit(steady, "h200 run")
    warehouse = tmp_path / "warehouse"
    steady_rows = None
    for revision in range(1, REVISIONS + 1):
        write_revision(changing, revision_results(revision))
        commit(changing, f"benchmark run {revision}")
        cli_build(changing, warehouse)
        if revision == 1:
            cli_build(steady, warehouse)
            steady_rows = rows(
                warehouse,
                "SELECT * EXCLUDE (last_snapshot_id) FROM run_history"
                " WHERE source = 'h200-runs' ORDER BY run_id",
            )
    assert steady_rows
    assert (
        rows(
            warehouse,
            "SELECT * EXCLUDE (last_snapshot_id) FROM run_history"
            " WHERE source = 'h200-runs' ORDER BY run_id",
        )
        == steady_rows
    )
    only_changing = changes_json(warehouse, "--source", "b200-runs")
    assert [w["source"] for w in only_changing["windows"]] == ["b200-runs"]
    assert sorted(r["workload_uuid"] for r in only_changing["regressions"]) == WORKLOADS
    only_steady = changes_json(warehouse, "--source", str(steady))
    assert [w["source"] for w in only_steady["windows"]] == ["h200-runs"]
    for section, entries in only_steady.items():
        if isinstance(entries, list) and section != "windows":
            assert all(e["source"] == "h200-runs" for e in entries), section
    assert only_steady["regressions"] == []
    for section, entries in only_changing.items():
        if isinstance(entries, list) and section != "windows":
            assert all(e["source"] == "b200-runs" for e in entries), section
    both = changes(warehouse)
    assert both.returncode == 0, both.stderr
    fits(both.stdout)
    assert "source b200-runs: snapshot 3 -> 4" in both.stdout
    assert "source h200-runs: everything up to snapshot 1" in both.stdout
    one = changes(warehouse, "--source", "h200-runs")
    assert "b200-runs" not in one.stdout


def test_dagster_check_warns_on_the_slowed_solution(series: Series) -> None:
    """The WARN check reads what `changes` compares by default: the last revision's results."""
    import dagster as dg

    from pipelines.defs import assets, checks
    from pipelines.defs.resources import WarehouseResource

    on_views = [
        check
        for check in checks.asset_checks
        if all(key.asset_key in assets.warehouse_views.keys for key in check.check_keys)
    ]
    result = dg.materialize(
        [assets.warehouse_views, *on_views],
        resources={"warehouse": WarehouseResource(warehouse=str(series.warehouse))},
    )
    assert result.success
    (evaluation,) = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "no_new_regressions"
    ]
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
    assert evaluation.metadata["new_regressions"].value == len(WORKLOADS)
    assert all(line.startswith(SLOWED) for line in evaluation.metadata["largest"].value)


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed")
def test_report_has_a_what_changed_page_per_source(series: Series, tmp_path: Path) -> None:
    from pipelines.report_changes import change_page_name
    from tests.browser import Chromium, png_pixels

    out = tmp_path / "report"
    written = run_cli("report", "--out", str(out), "--warehouse", str(series.warehouse))
    assert written.returncode == 0, written.stderr
    index = (out / "index.html").read_text()
    (folder,) = set(re.findall(r"href='(pages-[0-9a-f]+)/changes/", index))
    page = out / folder / "changes" / change_page_name("gpu-runs")
    assert page.is_file()
    expected = changes_json(series.warehouse)
    with Chromium(tmp_path / "profile") as browser:
        visit = browser.visit(
            page.resolve().as_uri(),
            ready="Array.from(document.querySelectorAll('.plotly-graph-div'))"
            ".every(div => div.querySelector('svg.main-svg'))",
        )
        assert visit.errors == [], visit.errors
        own = f"file://{out.resolve()}/"
        assert [u for u in visit.requests if not u.startswith((own, "data:"))] == []
        shown = browser.evaluate(
            "Object.fromEntries(Array.from(document.querySelectorAll('table[id]')).map(t => "
            "[t.id, Array.from(t.querySelectorAll('tbody tr')).filter(r => !r.querySelector("
            "'td.empty')).map(r => Object.fromEntries(Array.from(r.querySelectorAll('td'))"
            ".map(td => [td.dataset.column, td.dataset.value]))) ]))"
        )
        # one chart per flagged solution x workload, each with every revision's result
        points = browser.evaluate(
            "Array.from(document.querySelectorAll('.plotly-graph-div'))"
            ".map(div => div.data[0].y.length)"
        )
        shot = browser.screenshot(tmp_path / "changes.png", scale=0.3)
    assert sorted(r["workload_uuid"] for r in shown["regressions-0"]) == WORKLOADS
    assert {r["solution"] for r in shown["regressions-0"]} == {SLOWED}
    assert [r["latency_ns"] for r in shown["regressions-0"]] == [
        str(r["latency_ns"]) for r in expected["regressions"]
    ]
    assert {r["solution"] for r in shown["newly-passing-0"]} == {FIXED}
    assert shown["improvements-0"] == shown["newly-failing-0"] == []
    assert points == [REVISIONS] * len(WORKLOADS)
    width, height, pixels = png_pixels(shot)
    assert width > 100 and height > 100 and len(set(pixels)) > 50
