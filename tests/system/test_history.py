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

from tests.conftest import run_cli
from tests.fixtures.hostile_corpus import definition_object, solution_object, trace_object
from tracehouse.serve.changes import EXIT_REGRESSIONS_FOUND
from tracehouse.serve.changes_text import WIDTH
from tracehouse.warehouse import Warehouse, connect_read_only

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


def changes(
    warehouse: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli("changes", "--warehouse", str(warehouse), *args, env=env)


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
    walked_new = [
        e
        for e in got
        if (e[0], e[1], e[2])
        in {
            (r.workload, r.solution, r.latency_ns)
            for r in series.results
            if r.revision == REVISIONS
        }
    ]
    # A solution beating its own record by noise (every such step here: the steady ones are
    # within 3 %) is no new record holder; `changes` counts it instead of listing it.
    expected_new = [e for e in walked_new if e[1] != e[3]]
    assert (
        sorted(
            (e["workload_uuid"], e["solution"], e["latency_ns"], e["previous_solution"])
            for e in report["record_holders"]
        )
        == expected_new
    )
    assert report["within_noise"]["record_holders"] == len(walked_new) - len(expected_new)
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
    from tests.fixtures.browser import Chromium, png_pixels
    from tracehouse.serve.report_changes import change_page_name

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
    # workloads by their axes (M=8 … M=32), as every page names them
    assert sorted(r["workload"] for r in shown["regressions-0"]) == sorted(
        f"M={8 * (WORKLOADS.index(w) + 1)}" for w in WORKLOADS
    )
    assert {r["solution"] for r in shown["regressions-0"]} == {SLOWED}
    assert [r["latency_ns"] for r in shown["regressions-0"]] == [
        str(r["latency_ns"]) for r in expected["regressions"]
    ]
    assert {r["solution"] for r in shown["newly-passing-0"]} == {FIXED}
    assert shown["improvements-0"] == shown["newly-failing-0"] == []
    assert points == [REVISIONS] * len(WORKLOADS)
    width, height, pixels = png_pixels(shot)
    assert width > 100 and height > 100 and len(set(pixels)) > 50


# Issue 27: a regression is seen where people look -------------------------------------------

NARROW = {"COLUMNS": "80"}


def leaderboard_rows(warehouse: Path) -> dict[str, str]:
    """The leaderboard as printed in 80 columns: each solution's row, by solution."""
    board = run_cli("leaderboard", DEFINITION, "--warehouse", str(warehouse), env=NARROW)
    assert board.returncode == 0, board.stderr
    fits(board.stdout)
    found = {}
    for line in board.stdout.splitlines():
        words = line.split()
        if words and words[0].isdigit() and len(words) > 1:
            found[words[1]] = line
    assert set(found) == set(SOLUTIONS), board.stdout
    return found


def leaderboard_json(warehouse: Path, *args: str) -> dict[str, dict[str, Any]]:
    board = run_cli("leaderboard", DEFINITION, "--warehouse", str(warehouse), *args)
    assert board.returncode == 0, board.stderr
    return {row["solution"]: row for row in json.loads(board.stdout)}


def check_the_leaderboard_shows_the_latest_changes(warehouse: Path, was: str) -> None:
    """The slowed solution's row says `regressed: was <its earlier figure>`, the fixed one's
    `newly passing`, no other row says either; json, csv and --wide carry the same."""
    shown = leaderboard_rows(warehouse)
    assert re.search(rf"regressed: was {was}", shown[SLOWED]), shown[SLOWED]
    assert "newly passing 4" in shown[FIXED], shown[FIXED]
    for solution in STEADY:
        assert "regressed" not in shown[solution] and "newly" not in shown[solution]
    assert "regressed" not in shown[FIXED]
    rows = leaderboard_json(warehouse, "--format", "json")
    assert rows[SLOWED]["latest_change"] == "regressed"
    assert rows[SLOWED]["regressed_workloads"] == len(WORKLOADS)
    assert rows[FIXED]["latest_change"] == "newly passing"
    assert rows[FIXED]["newly_passing_workloads"] == len(WORKLOADS)
    assert all(rows[s]["latest_change"] is None for s in STEADY)
    # the earlier latency: about half the current one (it was 2x faster)
    earlier = rows[SLOWED]["earlier_latency_us"]
    assert 0.45 < earlier / rows[SLOWED]["latency_us"] < 0.55
    import csv
    import io

    table = run_cli("leaderboard", DEFINITION, "--warehouse", str(warehouse), "--format", "csv")
    by_solution = {r["solution"]: r for r in csv.DictReader(io.StringIO(table.stdout))}
    assert by_solution[SLOWED]["latest_change"] == "regressed"
    assert by_solution[SLOWED]["earlier_latency_us"] == str(earlier)
    wide = run_cli("leaderboard", DEFINITION, "--warehouse", str(warehouse), "--wide")
    assert "latest_change" in wide.stdout.splitlines()[0]
    assert "earlier_geomean_speedup" in wide.stdout.splitlines()[0]


def test_the_leaderboard_marks_the_regressed_solution(series: Series) -> None:
    # no baseline in this dataset: the earlier figure is the latency
    check_the_leaderboard_shows_the_latest_changes(series.warehouse, was=r"\d+\.\d\d µs")


def test_changes_names_workloads_by_axes_and_puts_the_worst_first(series: Series) -> None:
    text = changes(series.warehouse, env=NARROW)
    assert text.returncode == 0, text.stderr
    fits(text.stdout)
    failing = changes(series.warehouse, "--fail-on-regression")
    (line,) = failing.stderr.splitlines()
    summary = line.removeprefix("tracehouse changes: ")
    # the text starts with the same one-line summary, wrapped
    start = text.stdout.split("\nsource gpu-runs:")[0]
    assert " ".join(start.split()) == summary
    assert re.search(r"workload M=\d+$", summary), summary
    report = changes_json(series.warehouse)
    changes_in_order = [r["relative_change"] for r in report["regressions"]]
    assert changes_in_order == sorted(changes_in_order, reverse=True)
    worst = report["regressions"][0]
    assert f"{worst['relative_change']:+.1%}" in summary
    # workloads by their axes, uuids only with --wide
    assert "M=8" in text.stdout and "w-00" not in text.stdout
    wide = changes(series.warehouse, "--wide", env=NARROW)
    fits(wide.stdout)
    assert "(workload w-00)" in wide.stdout
    # each leader change names both solutions in full, both latencies, the change in percent
    leader_lines = [line for line in text.stdout.splitlines() if " -> " in line]
    taken = [line for line in leader_lines if line.strip().startswith("alice_steady")]
    assert taken and all(
        re.fullmatch(r"\s+alice_steady \S+ µs -> dave_fixed \S+ µs -\d+\.\d%", line)
        for line in taken
    ), taken
    assert len(report["leader_changes"]) == len(WORKLOADS)
    assert {(r["previous_solution"], r["solution"]) for r in report["leader_changes"]} == {
        ("alice_steady", FIXED)
    }
    assert "revision no revision" not in text.stdout


@dataclass
class FolderSeries:
    folders: list[Path]
    warehouse: Path
    noise_only: dict[str, Any]  # `changes --format json` after the third run
    noise_only_text: str


def build_folder_series(root: Path) -> FolderSeries:
    """Each benchmark run in a folder of its own (as `flashinfer-bench run` or a CI artifact
    leaves them), the first built as a source, each later one recorded as its next revision;
    a baseline map gives the leaderboard a speedup."""
    warehouse = root / "warehouse"
    baselines = root / "baselines.json"
    baselines.write_text(json.dumps({DEFINITION: {"default": STEADY[0]}}))
    folders, noise_only, noise_only_text = [], {}, ""
    for revision in range(1, REVISIONS + 1):
        folder = root / f"run{revision}"
        write_revision(folder, revision_results(revision))
        folders.append(folder)
        flags = ["--revision-of", "run1"] if revision > 1 else []
        built = run_cli(
            "build", "--source", str(folder), "--warehouse", str(warehouse),
            "--baselines", str(baselines), *flags,
        )  # fmt: skip
        assert built.returncode == 0, built.stderr
        if revision == REVISIONS - 1:  # a re-run with only noise
            noise_only = changes_json(warehouse)
            noise_only_text = changes(warehouse, env=NARROW).stdout
    return FolderSeries(folders, warehouse, noise_only, noise_only_text)


@pytest.fixture(scope="module")
def folder_series(tmp_path_factory: pytest.TempPathFactory) -> FolderSeries:
    return build_folder_series(tmp_path_factory.mktemp("folders"))


def test_a_rerun_with_only_noise_changes_nothing(folder_series: FolderSeries) -> None:
    report, text = folder_series.noise_only, folder_series.noise_only_text
    assert report["regressions"] == report["improvements"] == []
    assert report["leader_changes"] == [] and report["record_holders"] == []
    assert report["within_noise"]["leader_changes"] > 0  # they were there, and are no change
    assert report["newly_passing"] == report["newly_failing"] == []
    fits(text)
    assert text.startswith("no regression in source run1")
    assert "leader changes (rank-1 run replaced): 0;" in text
    assert "regressions: 0" in text
    assert "revision no revision" not in text and "no revision" in text


def test_one_folder_per_run_recorded_as_revisions(folder_series: FolderSeries) -> None:
    warehouse = folder_series.warehouse
    listed = run_cli("sources", "--warehouse", str(warehouse), "--format", "json")
    (source,) = json.loads(listed.stdout)
    assert source["source"] == "run1" and source["snapshot_number"] == REVISIONS
    assert source["uri"] == str(folder_series.folders[-1].resolve())
    report = changes_json(warehouse)
    flagged = sorted((r["solution"], r["workload_uuid"]) for r in report["regressions"])
    assert flagged == [(SLOWED, w) for w in WORKLOADS]
    passing = sorted((r["solution"], r["workload_uuid"]) for r in report["newly_passing"])
    assert passing == [(FIXED, w) for w in WORKLOADS]
    # with a baseline the earlier figure is the speedup it had: about twice today's
    check_the_leaderboard_shows_the_latest_changes(warehouse, was=r"0\.8\d\d×")
    rows = leaderboard_json(warehouse, "--format", "json")
    assert 1.9 < rows[SLOWED]["earlier_geomean_speedup"] / rows[SLOWED]["geomean_speedup"] < 2.1
    # no revision: the export says so, not "see identityError"
    out = folder_series.warehouse.parent / "ki.json"
    export = run_cli("export", "--kernelindex", DEFINITION, str(out), "--warehouse", str(warehouse))
    assert export.returncode == 0, export.stderr
    assert "without a manifest (no dataset revision: pass --revision" in export.stdout
    assert "identityError" not in export.stdout


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed")
def test_the_report_of_folder_runs_shows_the_regression_first(
    folder_series: FolderSeries, tmp_path: Path
) -> None:
    """The same first screen as for revisions read from git (tests/system/test_report.py): one folder
    per run, recorded as revisions, is the same story."""
    from tests.fixtures.browser import Chromium
    from tests.system.test_report import check_what_changed_on_the_first_screen

    out = tmp_path / "report"
    made = run_cli("report", "--warehouse", str(folder_series.warehouse), "--out", str(out))
    assert made.returncode == 0, made.stderr
    with Chromium(tmp_path / "profile") as browser:
        worst = check_what_changed_on_the_first_screen(browser, out)
    assert worst["solution"]["text"] == SLOWED


def test_revision_of_refuses_a_mistake_in_one_line(
    folder_series: FolderSeries, tmp_path: Path
) -> None:
    from tests.conftest import one_error_line

    warehouse = folder_series.warehouse
    before = rows(warehouse, "SELECT * FROM source_snapshots ORDER BY snapshot_number")
    other = tmp_path / "other-dataset"
    (other / "definitions").mkdir(parents=True)
    (other / "definitions" / "rmsnorm_h64.json").write_text(
        json.dumps(definition_object("rmsnorm_h64"))
    )
    (other / "traces").mkdir()
    refused = run_cli(
        "build", "--source", str(other), "--warehouse", str(warehouse), "--revision-of", "run1"
    )
    line = one_error_line(refused)
    assert "--revision-of 'run1'" in line and "shares none of its definitions" in line
    assert "rmsnorm_h64" in line and DEFINITION in line
    unknown = run_cli(
        "build", "--source", str(folder_series.folders[0]), "--warehouse", str(warehouse),
        "--revision-of", "nope",
    )  # fmt: skip
    assert "--revision-of 'nope': the warehouse has no source of that name" in (
        one_error_line(unknown)
    )
    renamed = run_cli(
        "build", "--source", str(folder_series.folders[0]), "--warehouse", str(warehouse),
        "--source-name", "run1",
    )  # fmt: skip
    assert "--revision-of run1 to record it as that source's next revision" in (
        one_error_line(renamed)
    )
    assert rows(warehouse, "SELECT * FROM source_snapshots ORDER BY snapshot_number") == before


def test_separate_sources_compare_pass_fail_as_latency(
    folder_series: FolderSeries, tmp_path: Path
) -> None:
    """The third and fourth runs built as two sources: the fix is still newly passing, against
    the state of the source built before (as latency is judged against every earlier
    result)."""
    warehouse = tmp_path / "warehouse"
    for folder in folder_series.folders[2:]:
        built = run_cli("build", "--source", str(folder), "--warehouse", str(warehouse))
        assert built.returncode == 0, built.stderr
    report = changes_json(warehouse, "--source", "run4")
    passing = sorted((r["solution"], r["workload_uuid"]) for r in report["newly_passing"])
    assert passing == [(FIXED, w) for w in WORKLOADS]
    assert {r["compared_with"] for r in report["newly_passing"]} == {"run3"}
    text = changes(warehouse, "--source", "run4", env=NARROW)
    fits(text.stdout)
    assert "(as source run3 had it)" in text.stdout


def test_a_first_build_has_no_earlier_state_to_compare_statuses_with(
    folder_series: FolderSeries, tmp_path: Path
) -> None:
    """One source, one snapshot: no window has a state before it and no other source holds
    one, so `changes` does not run the status query, which would have found no row."""
    from tracehouse.serve import changes
    from tracehouse.serve.changes_sql import STATUS_CHANGES_SQL

    warehouse = tmp_path / "warehouse"
    built = run_cli(
        "build", "--source", str(folder_series.folders[3]), "--warehouse", str(warehouse)
    )
    assert built.returncode == 0, built.stderr
    connection = connect_read_only(Warehouse(warehouse))
    try:
        snapshots = changes._snapshots(connection)
        windows = changes.change_windows(snapshots, since=None, source=None)
        assert [window.before for window in windows] == [None]
        changes._register_windows(connection, windows)
        assert changes._rows(connection, STATUS_CHANGES_SQL) == []
        assert changes._status_changes(connection, snapshots, windows) == []
    finally:
        connection.close()
    report = changes_json(warehouse)
    assert report["newly_passing"] == [] and report["newly_failing"] == []
