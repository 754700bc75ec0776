"""Record history, regressions and `tracehouse changes` (issue 12, phase 1).

Real warehouses built into temporary folders, read with DuckDB; the command runs as a
subprocess; the Dagster check through ``dg.materialize``. Expected values come from
KernelIndex's own export (record_events.csv) or from independent computations written here.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from pipelines.defs import assets, checks
from pipelines.defs.resources import WarehouseResource
from tests.conftest import build, run_cli
from tests.fixtures.hostile_corpus import definition_object, solution_object, trace_object
from tests.fixtures.shared_data import GOLDEN_DIR, requires_shared
from tracehouse import schemas
from tracehouse.demo import generate_dataset
from tracehouse.serve.changes import EXIT_REGRESSIONS_FOUND
from tracehouse.settings import Settings
from tracehouse.sql_files import sql_path, sql_shown
from tracehouse.warehouse import Warehouse, connect_read_only

REVISION = "0123456789abcdef0123456789abcdef01234567"
DEFAULTS = Settings()


def rows(warehouse: Path, sql: str, parameters: dict[str, Any] | None = None) -> list[dict]:
    connection = connect_read_only(Warehouse(warehouse))
    try:
        cursor = connection.execute(sql, parameters or {})
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        connection.close()


def kernelindex_time(value: datetime | None) -> str:
    """observedAt as KernelIndex writes it (§9.5): milliseconds and `Z`."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# --------------------------------------------------------------------------------------------
# record_events


@requires_shared
def test_record_events_equal_kernelindex_record_events_row_for_row(
    golden_warehouse: Path,
) -> None:
    with (GOLDEN_DIR / "record_events.csv").open(newline="") as handle:
        reader = csv.DictReader(handle)
        expected = list(reader)
        columns = reader.fieldnames
    assert columns is not None
    ours = rows(golden_warehouse, 'SELECT * FROM record_events ORDER BY comparison_key, "at"')
    assert set(columns) <= set(ours[0]), set(columns) - set(ours[0])

    def text(value: Any) -> str:
        if isinstance(value, datetime):
            return kernelindex_time(value)
        return "" if value is None else str(value)

    got = [{name: text(row[name]) for name in columns} for row in ours]
    assert len(got) == len(expected) == 1226
    for i, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        assert mine == theirs, f"row {i + 2} of record_events.csv"


def independent_record_walk(runs: list[dict]) -> list[tuple[str, str, str | None]]:
    """§11.2 walked in Python: (comparison_key, run_id, displaced run_id) per event."""
    by_key: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        by_key[run["comparison_key"]].append(run)
    events = []
    for key, members in by_key.items():
        best: dict | None = None
        for run in sorted(members, key=lambda r: (r["observed_at"], r["latency_ns"], r["run_id"])):
            if best is None or run["latency_ns"] < best["latency_ns"]:
                events.append((key, run["run_id"], best["run_id"] if best else None))
                best = run
    return sorted(events, key=lambda e: (e[0], e[1]))


@pytest.fixture(scope="module")
def demo_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    generate_dataset(root / "dataset", seed=11)
    build(root / "dataset", root / "warehouse", revision=REVISION)
    return root / "warehouse"


@pytest.mark.slow
def test_record_events_follow_the_rule_on_the_demo_data(demo_warehouse: Path) -> None:
    """The demo holds many solutions per comparison key, so records change hands often."""
    eligible = rows(
        demo_warehouse,
        "SELECT run_id, comparison_key, observed_at, latency_ns FROM run_summary WHERE eligible",
    )
    events = rows(
        demo_warehouse,
        "SELECT comparison_key, run_id, previous_run_id, record_number, held_until, next_run_id,"
        ' "at", observed_at FROM record_events',
    )
    expected = independent_record_walk(eligible)
    got = sorted((e["comparison_key"], e["run_id"], e["previous_run_id"]) for e in events)
    assert got == expected
    assert sum(1 for e in events if e["previous_run_id"] is not None) > 50
    # Each comparison key has exactly one current holder, and its chain is consistent.
    by_key: dict[str, list[dict]] = defaultdict(list)
    for event in events:
        by_key[event["comparison_key"]].append(event)
    assert len(by_key) == len({run["comparison_key"] for run in eligible})
    for chain in by_key.values():
        chain.sort(key=lambda e: e["record_number"])
        assert [e["record_number"] for e in chain] == list(range(1, len(chain) + 1))
        assert chain[-1]["held_until"] is None and chain[-1]["next_run_id"] is None
        for earlier, later in zip(chain, chain[1:], strict=False):
            assert earlier["next_run_id"] == later["run_id"]
            assert later["previous_run_id"] == earlier["run_id"]
            assert earlier["held_until"] == later["at"] == later["observed_at"]


@pytest.mark.slow
def test_a_zero_fib_score_is_explained_in_the_leaderboard(demo_warehouse: Path) -> None:
    """fib× 0.000 beside a geo× above 1 is no contradiction: FlashInfer-Bench zeroes a solution
    with any failed workload; the row and the legend say so (issue 27). One snapshot: nothing
    reads as regressed."""
    zeroed = rows(
        demo_warehouse,
        "SELECT definition, solution FROM leaderboard WHERE fib_all_gpus_avg_speedup = 0"
        " ORDER BY 1, 2",
    )
    assert zeroed
    definition = zeroed[0]["definition"]
    board = run_cli(
        "leaderboard", definition, "--warehouse", str(demo_warehouse), env={"COLUMNS": "100"}
    )
    assert board.returncode == 0, board.stderr
    table_rows = [line for line in board.stdout.splitlines() if line[:1].isdigit()]
    zero_rows = [line for line in table_rows if " 0.000 " in line]
    # the note comes last, so an elided note still ends with it
    assert zero_rows and all(line.endswith(": a failure") for line in zero_rows), zero_rows
    assert "FlashInfer-Bench scores 0 for a solution with any failed workload" in " ".join(
        board.stdout.split()
    )
    assert "regressed" not in board.stdout and "newly passing" not in board.stdout


@pytest.mark.slow
def test_record_events_take_eligibility_from_run_rankings(demo_warehouse: Path) -> None:
    """Only runs run_rankings calls eligible hold records, and every eligible cohort has one."""
    ineligible_holders = rows(
        demo_warehouse,
        "SELECT count(*) AS n FROM record_events AS e JOIN run_rankings AS k USING (run_id)"
        " WHERE NOT k.eligible",
    )
    assert ineligible_holders == [{"n": 0}]
    # The rule lives in run_rankings.sql; run_history keeps its verdict per range, and
    # record_events walks latency_history, which keeps only the eligible ranges.
    present = sql_path("assemble/history_present_runs").read_text().lower()
    assert "run_rankings" in present and "k.eligible" in present
    appearances = sql_path("assemble/run_appearances").read_text().lower()
    assert "history_present_runs" in appearances and "p.eligible" in appearances
    history = sql_path("latency_history").read_text().lower()
    assert "where h.eligible" in history
    for name in ("record_events", "latency_history"):
        text = sql_path(name).read_text().lower()
        assert "ki_status" not in text and "'passed'" not in text


@pytest.mark.slow
@requires_shared
def test_record_page_shows_the_record_history(golden_warehouse: Path) -> None:
    """For a run that took a record (KernelIndex's own event), the page says since when and from
    whom; the run it displaced says who took it and when."""
    with (GOLDEN_DIR / "record_events.csv").open(newline="") as handle:
        takeover = next(row for row in csv.DictReader(handle) if row["previous_solution"])
    ((holder, displaced),) = [
        (row["run_id"], row["previous_run_id"])
        for row in rows(
            golden_warehouse,
            'SELECT run_id, previous_run_id FROM record_events WHERE comparison_key = $key AND "at" = $at',
            {"key": takeover["comparison_key"], "at": takeover["at"]},
        )
    ]
    page = run_cli("record", holder, "--warehouse", str(golden_warehouse))
    assert page.returncode == 0, page.stderr
    assert (
        f"record since {takeover['at']}, took it from {takeover['previous_solution']}"
        in page.stdout
    )
    assert f"(observed {takeover['previous_observed_at']})" in page.stdout
    assert f"{takeover['at']}  {takeover['solution']}" in page.stdout  # the history block
    before = run_cli("record", displaced, "--warehouse", str(golden_warehouse))
    assert before.returncode == 0, before.stderr
    assert f"held until {takeover['at']}, taken by {takeover['solution']}" in before.stdout
    assert "← this run" in page.stdout and "← this run" in before.stdout


# --------------------------------------------------------------------------------------------
# regressions: a small dataset with a seeded slowdown and a noisy re-run

SOLUTION = "alice_gemm_v1"
START = datetime(2026, 3, 1, 12, 0, 0)

# (workload uuid, latencies in ms in observed order). The history of each is four re-runs at
# about 0.100 ms; the last run is the one judged.
SERIES = {
    # +30 % against a history of spread ~0.001 ms: z far above 5, change above 10 %: flagged.
    "w-seeded-regression": [0.100, 0.101, 0.099, 0.1005, 0.130],
    # +1.9 % with the same spread: z about 2: noise, not flagged.
    "w-noisy-rerun": [0.100, 0.101, 0.099, 0.1005, 0.102],
    # identical history (no spread, z = +inf) but only +2 %: the minimum change keeps it quiet.
    "w-flat-history": [0.100, 0.100, 0.100, 0.100, 0.102],
    # faster is never a regression.
    "w-faster": [0.100, 0.101, 0.099, 0.1005, 0.050],
}


def write_series_dataset(root: Path) -> Path:
    """A dataset in the current layout: one definition, one solution, a trace file whose lines
    run in reverse time order (file order must not matter, observed_at does)."""
    definition = definition_object()
    (root / "definitions" / "gemm").mkdir(parents=True)
    (root / "definitions" / "gemm" / f"{definition['name']}.json").write_text(
        json.dumps(definition)
    )
    solution_folder = root / "solutions" / "alice" / "gemm" / definition["name"]
    solution_folder.mkdir(parents=True)
    (solution_folder / f"{SOLUTION}.json").write_text(json.dumps(solution_object()))
    lines = []
    for w, (uuid, latencies) in enumerate(SERIES.items()):
        for i, latency in enumerate(latencies):
            trace = trace_object(uuid, latency=latency)
            # a workload of its own shape, so each series is its own comparison key
            trace["workload"]["axes"]["M"] = 8 * (w + 1)
            moment = START + timedelta(days=i, minutes=w)
            trace["evaluation"]["timestamp"] = moment.isoformat(timespec="microseconds")
            lines.append(json.dumps(trace))
    trace_folder = root / "traces" / "alice" / "gemm"
    trace_folder.mkdir(parents=True)
    (trace_folder / f"{definition['name']}.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    return root


@pytest.fixture(scope="module")
def series_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("series")
    source = write_series_dataset(root / "dataset")
    build(source, root / "warehouse", revision=REVISION)
    return root / "warehouse"


def expected_flags(
    min_history: int = DEFAULTS.regression_min_history,
    min_change: float = DEFAULTS.regression_min_change,
    z_threshold: float = DEFAULTS.regression_z_threshold,
) -> set[tuple[str, int]]:
    """The method computed here from SERIES in Python: (workload, index of the flagged run)."""
    flagged = set()
    for uuid, latencies in SERIES.items():
        nanos = [round(ms * 1e6) for ms in latencies]
        for i in range(len(nanos)):
            history = nanos[:i]
            if len(history) < max(min_history, 1):
                continue
            mean = statistics.fmean(history)
            spread = statistics.stdev(history) if len(history) > 1 else 0.0
            no_spread_z = math.inf if nanos[i] > mean else 0.0
            z = (nanos[i] - mean) / spread if spread > 0 else no_spread_z
            if nanos[i] / mean - 1 >= min_change and z >= z_threshold:
                flagged.add((uuid, i))
    return flagged


def test_a_seeded_regression_is_flagged_and_noise_is_not(series_warehouse: Path) -> None:
    assert expected_flags() == {("w-seeded-regression", 4)}
    found = rows(
        series_warehouse,
        "SELECT workload_uuid, solution, latency_ns, history_size, history_mean_ns,"
        " relative_change, z_score, previous_latency_ns FROM regressions",
    )
    assert len(found) == 1
    (flag,) = found
    assert (flag["workload_uuid"], flag["solution"]) == ("w-seeded-regression", SOLUTION)
    assert flag["latency_ns"] == 130_000
    assert flag["history_size"] == 4
    assert flag["history_mean_ns"] == pytest.approx(100_125)
    assert flag["relative_change"] == pytest.approx(130_000 / 100_125 - 1)
    assert flag["z_score"] == pytest.approx(
        (130_000 - 100_125) / statistics.stdev([100_000, 101_000, 99_000, 100_500])
    )
    assert flag["previous_latency_ns"] == 100_500


@requires_shared
def test_the_default_limits_flag_none_of_the_golden_corpus_reruns(golden_warehouse: Path) -> None:
    """The corpus's re-runs of one solution on one comparison key are run-to-run noise (the
    README's figures: under 3 % from their earlier mean for 90 %, under 10 % for 99 %)."""
    judged = rows(
        golden_warehouse,
        "SELECT solution, comparison_key, latency_ns FROM latency_history"
        " ORDER BY solution, comparison_key, first_seen_at, observed_at, run_id",
    )
    changes: list[float] = []
    history: dict[tuple[str, str], list[int]] = defaultdict(list)
    for row in judged:
        earlier = history[(row["solution"], row["comparison_key"])]
        if earlier:
            changes.append(row["latency_ns"] / statistics.fmean(earlier) - 1)
        earlier.append(row["latency_ns"])
    changes.sort()
    assert len(changes) > 300
    assert changes[int(0.9 * len(changes))] < 0.03
    assert changes[int(0.99 * len(changes))] < 0.10
    assert rows(golden_warehouse, "SELECT count(*) AS n FROM regressions") == [{"n": 0}]


def test_the_limits_are_settings(series_warehouse: Path) -> None:
    """Each limit changes the verdict exactly as the method computed in Python says."""
    for env, limits in (
        ({"TRACEHOUSE_REGRESSION_MIN_CHANGE": "0.01"}, {"min_change": 0.01}),
        ({"TRACEHOUSE_REGRESSION_MIN_CHANGE": "0.5"}, {"min_change": 0.5}),
        ({"TRACEHOUSE_REGRESSION_MIN_HISTORY": "5"}, {"min_history": 5}),
        ({"TRACEHOUSE_REGRESSION_Z_THRESHOLD": "1"}, {"z_threshold": 1.0}),
        (
            {"TRACEHOUSE_REGRESSION_MIN_HISTORY": "1", "TRACEHOUSE_REGRESSION_MIN_CHANGE": "0"},
            {"min_history": 1, "min_change": 0.0},
        ),
    ):
        result = run_cli(
            "query",
            "SELECT workload_uuid, latency_ns FROM regressions",
            "--format",
            "json",
            "--warehouse",
            str(series_warehouse),
            env=env,
        )
        assert result.returncode == 0, result.stderr
        got = {(row["workload_uuid"], row["latency_ns"]) for row in json.loads(result.stdout)}
        want = {(uuid, round(SERIES[uuid][i] * 1e6)) for uuid, i in expected_flags(**limits)}
        assert got == want, env


@pytest.mark.slow
def test_changes_command_lists_the_regression_and_fails_only_when_asked(
    series_warehouse: Path,
) -> None:
    """One snapshot: everything is new since nothing, and every re-run is judged against the
    earlier ones of its series."""
    warehouse = ["--warehouse", str(series_warehouse)]
    plain = run_cli("changes", *warehouse)
    assert plain.returncode == 0, plain.stderr
    assert "source dataset: everything up to snapshot 1" in plain.stdout
    assert "regressions: 1\n" in plain.stdout
    # the workload by its axes (w-seeded-regression is M=8), the mean -> the new latency
    assert f"  {SOLUTION}\n    gemm_n4_k4 · M=8 · B200\n" in plain.stdout
    assert "    100.1 µs -> 130.0 µs +29.8%, vs the mean of 4 earlier, z +" in plain.stdout
    assert "improvements: 1\n" in plain.stdout  # w-faster halves against its history
    # one comparison key per workload; records walked here from SERIES
    takeovers = firsts = 0
    for latencies in SERIES.values():
        best = None
        for latency in latencies:
            if best is None or latency < best:
                takeovers, firsts = (takeovers + 1, firsts) if best else (takeovers, firsts + 1)
                best = latency
    # a solution beating its own record within noise is no new record holder, only counted
    document = json.loads(run_cli("changes", "--format", "json", *warehouse).stdout)
    listed, within_noise = len(document["record_holders"]), document["within_noise"]
    assert listed + within_noise["record_holders"] == takeovers + firsts
    assert within_noise["record_holders"] > 0
    assert f"new record holders: {listed}; {within_noise['record_holders']} more" in plain.stdout
    assert plain.stdout.count("first result in its comparison group") == firsts

    failing = run_cli("changes", "--fail-on-regression", *warehouse)
    assert failing.returncode == EXIT_REGRESSIONS_FOUND == 1
    assert failing.stdout == plain.stdout
    assert failing.stderr == (
        "tracehouse changes: 1 regression(s) in source dataset of 1 solution(s) "
        f"({SOLUTION}); worst {SOLUTION} +29.8% on gemm_n4_k4 workload M=8\n"
    )
    wide = run_cli("changes", "--fail-on-regression", "--wide", *warehouse)
    assert wide.stderr.endswith("workload M=8 (workload w-seeded-regression)\n")

    relaxed = run_cli("changes", "--fail-on-regression", "--min-change", "0.5", *warehouse)
    assert relaxed.returncode == 0, relaxed.stderr
    assert "regressions: 0\n" in relaxed.stdout and relaxed.stderr == ""

    document = json.loads(run_cli("changes", "--format", "json", *warehouse).stdout)
    assert [r["workload_uuid"] for r in document["regressions"]] == ["w-seeded-regression"]
    assert document["thresholds"] == {
        "min_history": DEFAULTS.regression_min_history,
        "min_change": DEFAULTS.regression_min_change,
        "z_threshold": DEFAULTS.regression_z_threshold,
    }
    assert document["regressions"][0]["observed_at"].endswith("Z")
    # The second re-run has one earlier result: too few for a z-score, and said so.
    short = run_cli("changes", "--min-change", "0.005", "--format", "json", *warehouse)
    too_short = json.loads(short.stdout)["history_too_short"]
    assert {r["history_size"] for r in too_short} == {1}
    assert all(abs(r["relative_change"]) >= 0.005 for r in too_short)
    text = run_cli("changes", "--min-change", "0.005", *warehouse).stdout
    assert "of 1 earlier, too few for a z-score" in text


@pytest.mark.slow
def test_changes_since_a_date_and_a_revision(series_warehouse: Path) -> None:
    """--since names an earlier state: a date, each source's last build at or before it (a
    date before the first build compares with nothing); a revision, the snapshot that read it
    (the current one: nothing is new)."""
    warehouse = ["--warehouse", str(series_warehouse)]
    everything = json.loads(run_cli("changes", "--format", "json", *warehouse).stdout)
    early = json.loads(
        run_cli("changes", "--since", "2026-03-04", "--format", "json", *warehouse).stdout
    )
    assert early == {**everything, "since": "2026-03-04"}
    (built,) = rows(series_warehouse, "SELECT built_at FROM source_snapshots")
    after_build = (built["built_at"] + timedelta(seconds=1)).astimezone(UTC).isoformat()
    none_yet = run_cli("changes", "--since", after_build, "--fail-on-regression", *warehouse)
    assert none_yet.returncode == 0, none_yet.stderr
    assert "regressions: 0\n" in none_yet.stdout
    assert "no build of this source since then" in none_yet.stdout
    current = run_cli("changes", "--since", REVISION[:10], "--fail-on-regression", *warehouse)
    assert current.returncode == 0, current.stderr
    assert "source dataset: snapshot 1 -> 1" in current.stdout
    assert "regressions: 0\n" in current.stdout and "new record holders: 0\n" in current.stdout


def test_changes_refuses_bad_arguments_in_one_line(series_warehouse: Path, tmp_path: Path) -> None:
    warehouse = ["--warehouse", str(series_warehouse)]
    for args, env, needle in (
        (["--since", "last tuesday"], {}, "--since 'last tuesday': neither an ISO date/time"),
        (["--since", "2026-02-30"], {}, "--since '2026-02-30': not a valid date/time"),
        (["--source", "elsewhere"], {}, "--source 'elsewhere': not a source of this warehouse"),
        (["--min-history", "0"], {}, "--min-history 0: must be between 1 and 1,000,000"),
        (["--min-history", "1e30"], {}, "argument --min-history: invalid int value: '1e30'"),
        (
            ["--min-history", str(10**30)],
            {},
            f"--min-history {10**30}: must be between 1 and 1,000,000",
        ),
        (["--z-threshold", "-1"], {}, "--z-threshold -1.0: must be a finite number >= 0"),
        (["--min-change", "1e400"], {}, "--min-change inf: must be a finite number >= 0"),
        (
            [],
            {"TRACEHOUSE_REGRESSION_MIN_CHANGE": "lots"},
            "TRACEHOUSE_REGRESSION_MIN_CHANGE='lots'",
        ),
    ):
        result = run_cli("changes", *args, *warehouse, env=env)
        assert result.returncode == 2, (args, result.stdout)
        assert result.stderr.count("\n") == 1 and needle in result.stderr, result.stderr
        assert result.stderr.startswith("tracehouse changes: ")
    missing = run_cli("changes", "--warehouse", str(tmp_path / "none"))
    assert missing.returncode == 2 and "no warehouse at" in missing.stderr


@pytest.mark.slow
def test_changes_since_an_earlier_snapshot_compares_with_it(tmp_path: Path) -> None:
    """Two builds of a changing folder: `--since` the first snapshot (its id's prefix) is the
    default comparison here, and names what the second build removed."""
    source = write_series_dataset(tmp_path / "dataset")
    warehouse = tmp_path / "warehouse"
    build(source, warehouse, revision=REVISION)
    (first,) = rows(warehouse, "SELECT snapshot_id FROM source_snapshots")
    trace = next((source / "traces").rglob("*.jsonl"))
    kept = trace.read_text().splitlines(keepends=True)[0]
    trace.write_text(kept)
    build(source, warehouse, revision=REVISION, allow_shrink=True)  # the shrink is the point
    assert len(rows(warehouse, "SELECT snapshot_id FROM source_snapshots")) == 2
    since = run_cli(
        "changes",
        "--since",
        first["snapshot_id"][:12],
        "--format",
        "json",
        "--warehouse",
        str(warehouse),
    )
    assert since.returncode == 0, since.stderr
    report = json.loads(since.stdout)
    assert report == {
        **json.loads(run_cli("changes", "--format", "json", "--warehouse", str(warehouse)).stdout),
        "since": first["snapshot_id"][:12],
    }
    (window,) = report["windows"]
    assert (window["before"]["snapshot_number"], window["after"]["snapshot_number"]) == (1, 2)
    # The one line kept is the last workload's last run: the other workloads disappeared.
    remaining = json.loads(kept)["workload"]["uuid"]
    assert sorted(w["name"] for w in report["workloads_disappeared"]) == sorted(
        set(SERIES) - {remaining}
    )
    assert report["regressions"] == report["record_holders"] == []
    same_source = run_cli("changes", "--source", str(source), "--warehouse", str(warehouse))
    assert same_source.returncode == 0, same_source.stderr


@pytest.mark.slow
def test_the_dagster_check_warns_on_a_regression_without_blocking(
    series_warehouse: Path,
) -> None:
    resource = WarehouseResource(warehouse=str(series_warehouse))
    on_views = [
        check
        for check in checks.asset_checks
        if all(key.asset_key in assets.warehouse_views.keys for key in check.check_keys)
    ]
    selected = [assets.warehouse_views, *on_views]
    result = dg.materialize(selected, resources={"warehouse": resource})
    assert result.success
    (evaluation,) = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "no_new_regressions"
    ]
    assert not evaluation.passed
    assert evaluation.severity == dg.AssetCheckSeverity.WARN
    assert not evaluation.blocking
    assert evaluation.metadata["new_regressions"].value == 1
    (largest,) = evaluation.metadata["largest"].value
    assert largest.startswith(f"{SOLUTION} · gemm_n4_k4 · workload w-seeded-regression")
    # With a limit that makes the slowdown ordinary, the same check passes.
    relaxed = dg.materialize(
        selected,
        resources={
            "warehouse": WarehouseResource(
                warehouse=str(series_warehouse), regression_min_change=0.5
            )
        },
    )
    assert all(e.passed for e in relaxed.get_asset_check_evaluations())


# --------------------------------------------------------------------------------------------
# documentation of the views


def test_every_view_is_declared_with_its_columns(series_warehouse: Path) -> None:
    connection = duckdb.connect(str(series_warehouse / "tracehouse.duckdb"), read_only=True)
    try:
        stored = {
            name
            for (name,) in connection.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary"
            ).fetchall()
        }
        for view in schemas.VIEWS.values():
            described = [row[0] for row in connection.execute(f"DESCRIBE {view.name}").fetchall()]
            assert described == view.column_names, view.name
            assert all(column.doc for column in view.columns), view.name
            assert sql_path(view.name).exists()
    finally:
        connection.close()
    # Every view of sql/ is declared in schemas.VIEWS (sql_files creates exactly those).
    assert set(schemas.VIEWS) <= stored - set(schemas.TABLES)
    listing = run_cli("tables")
    for view in schemas.VIEWS.values():
        assert f"{view.name} (view, {sql_shown(view.name)})" in listing.stdout
