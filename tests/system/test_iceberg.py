"""The warehouse on object storage as Apache Iceberg tables (tracehouse/publish/iceberg/).

Real parts only: moto's S3-compatible server runs on 127.0.0.1 (a free port) for the module,
the catalog is a SQLite SqlCatalog file, and every build and read is the `tracehouse` command in
its own process, as two machines sharing one warehouse would run it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.object_store import local_s3_server
from tests.conftest import GOLDEN_REVISION, run_cli
from tests.fixtures.shared_data import GOLDEN_DIR, SHARED

BUCKET = "tracehouse-test"
SECRET = "not-a-real-secret-4f1d2c"  # must never appear in any output
REVISION_A = "a" * 40
REVISION_B = "b" * 40
REVISION_C = "c" * 40

requires_golden = pytest.mark.skipif(
    SHARED is None or not GOLDEN_DIR.is_dir(),
    reason="../shared/golden/kernelindex-2026-08-16 not found beside the checkout",
)


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 (a free port), with the test bucket; stopped after the
    module."""
    with local_s3_server(BUCKET) as environment:
        yield environment["AWS_ENDPOINT_URL"]


def _aws_env(endpoint: str, staging: Path) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "TRACEHOUSE_STAGING": str(staging),
    }


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    result = run_cli(*args, env=env)
    assert SECRET not in result.stdout + result.stderr
    return result


def _ok(env: dict[str, str], *args: str) -> str:
    result = _cli(env, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _export(env: dict[str, str], out: Path, *where: str) -> dict[str, bytes]:
    _ok(env, "export", "--snapshot", str(out), *where)
    return {path.name: path.read_bytes() for path in sorted(out.iterdir())}


def _count(env: dict[str, str], table: str, *where: str) -> int:
    sql = f"SELECT count(*) AS n FROM {table}"  # noqa: S608  (our own table names)
    return json.loads(_ok(env, "query", sql, "--format", "json", *where))[0]["n"]


def _without_built_at(export: Path) -> list[dict[str, object]]:
    import pyarrow.parquet as pq

    rows = pq.read_table(export / "source_snapshots.parquet").drop_columns(["built_at"])
    return rows.to_pylist()


def _corpus(folder: Path, drop_traces: int) -> Path:
    """The golden dataset without its last ``drop_traces`` trace files (a smaller revision)."""
    shutil.copytree(GOLDEN_DIR / "dataset", folder, dirs_exist_ok=True)
    traces = sorted((folder / "traces").rglob("*.jsonl"))
    for path in traces[len(traces) - drop_traces :] if drop_traces else []:
        path.unlink()
    return folder


@pytest.mark.integration
@requires_golden
def test_golden_build_on_s3_exports_exactly_the_local_build(
    s3_endpoint: str, golden_warehouse: Path, tmp_path: Path
) -> None:
    env = _aws_env(s3_endpoint, tmp_path / "staging")
    where = ("--warehouse", f"s3://{BUCKET}/golden", "--catalog", f"sqlite:///{tmp_path}/cat.db")
    built = _ok(
        env,
        "build",
        "--source",
        str(GOLDEN_DIR / "dataset"),
        "--revision",
        GOLDEN_REVISION,
        *where,
    )
    assert f"Iceberg tables to s3://{BUCKET}/golden" in built
    # A reader on another machine: its own staging folder, only the bucket and catalog shared.
    reader = _aws_env(s3_endpoint, tmp_path / "reader")
    remote = _export(reader, tmp_path / "from-s3", *where)
    # Byte for byte the export of the build that was published (its local staging folder)...
    staged = _export({}, tmp_path / "staged", "--warehouse", str(tmp_path / "staging"))
    assert remote == staged
    # ...and of an independent local build, up to the time each build ran (built_at).
    local = _export({}, tmp_path / "local", "--warehouse", str(golden_warehouse))
    assert list(remote) == list(local)
    different = [name for name in local if remote[name] != local[name]]
    assert different == ["manifest.json", "source_snapshots.parquet"], different
    assert _without_built_at(tmp_path / "from-s3") == _without_built_at(tmp_path / "local")
    assert _count(reader, "leaderboard", *where) > 0  # the views work over the replica
    # One catalog serves one warehouse: another prefix with the same catalog is refused.
    other = _cli(reader, "query", "SELECT 1", "--warehouse", f"s3://{BUCKET}/other", *where[2:])
    assert other.returncode == 2 and len(other.stderr.strip().splitlines()) == 1
    assert f"s3://{BUCKET}/golden" in other.stderr
    # Nothing of the build's staging is needed to read: the replica came from S3 alone.
    assert not (tmp_path / "reader" / "generations").exists()
    # The tracehouse snapshot is in every Iceberg snapshot's summary.
    from tracehouse.publish.iceberg.catalog import PROPERTY_SNAPSHOT, open_catalog
    from tracehouse.settings import load_settings

    os.environ.update(reader)
    try:
        settings = load_settings(
            environ={}, warehouse=f"s3://{BUCKET}/golden", catalog=f"sqlite:///{tmp_path}/cat.db"
        )
        runs = open_catalog(settings).load_table((settings.namespace, "runs"))
    finally:
        for name in reader:
            os.environ.pop(name, None)
    snapshot_id = json.loads(
        _ok(
            reader,
            "query",
            "SELECT any_value(snapshot_id) AS s FROM runs",
            "--format",
            "json",
            *where,
        )
    )[0]["s"]
    current = runs.current_snapshot()
    assert current is not None and current.summary is not None
    assert current.summary[PROPERTY_SNAPSHOT] == snapshot_id


@pytest.mark.integration
@requires_golden
def test_time_travel_and_a_build_killed_mid_commit(s3_endpoint: str, tmp_path: Path) -> None:
    env = _aws_env(s3_endpoint, tmp_path / "staging")
    catalog_file = tmp_path / "cat.db"
    where = ("--warehouse", f"s3://{BUCKET}/travel", "--catalog", f"sqlite:///{catalog_file}")
    source = tmp_path / "dataset"

    def build(revision: str, drop: int) -> int:
        """Build and publish; the runs the build counted."""
        _corpus(source, drop)
        out = _ok(env, "build", "--source", str(source), "--revision", revision, *where)
        return int(re.search(r"(?m)^\s+runs\s+([\d,]+)$", out).group(1).replace(",", ""))  # type: ignore[union-attr]

    runs_a = build(REVISION_A, 20)
    runs_b = build(REVISION_B, 10)
    assert runs_b > runs_a
    assert _count(env, "runs", *where, "--as-of", REVISION_A) == runs_a  # time travel
    wrong = _cli(env, "query", "SELECT 1", *where, "--as-of", REVISION_C)
    assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1
    assert "--as-of" in wrong.stderr
    before = _export(env, tmp_path / "before", *where)

    # Build revision C, and SIGKILL it once its first table is committed to the catalog.
    _corpus(source, 0)
    build_c = ["build", "--source", str(source), "--revision", REVISION_C, *where]
    changed, _ = _stop_during_publish(env, build_c, catalog_file, signal.SIGKILL)
    assert changed and "tracehouse_publications" not in changed, changed
    # Another process sees the last published state, byte for byte.
    assert _export(env, tmp_path / "after-kill", *where) == before
    # Ctrl-C during the next publish: one line, exit 130, and it says the truth.
    changed, stopped = _stop_during_publish(env, build_c, catalog_file, signal.SIGINT)
    assert stopped.returncode == 130 and "tracehouse_publications" not in changed
    assert stopped.stderr.strip() == "interrupted; warehouse unchanged"
    # The next build finds its local work done (the kill came after it) and publishes it.
    rebuilt = _ok(env, "build", "--source", str(source), "--revision", REVISION_C, *where)
    assert "is up to date" in rebuilt and "published" in rebuilt
    assert _count(env, "runs", *where) > runs_b
    assert _count(env, "runs", *where, "--as-of", REVISION_B) == runs_b
    listed = _ok(env, "generations", *where, "--format", "json")
    assert [row["revision"] for row in json.loads(listed)] == [REVISION_A, REVISION_B, REVISION_C]


@pytest.mark.slow
@requires_golden
def test_folder_warehouse_with_a_catalog_inside_it(tmp_path: Path) -> None:
    """A folder warehouse reads as before; with --catalog it also publishes Iceberg tables into
    <folder>/iceberg, which --as-of reads back."""
    warehouse = tmp_path / "wh"
    where = ("--warehouse", str(warehouse), "--catalog", f"sqlite:///{warehouse}/catalog.db")
    source = tmp_path / "dataset"
    counts = []
    for revision, drop in ((REVISION_A, 40), (REVISION_B, 30)):
        _corpus(source, drop)
        out = _ok({}, "build", "--source", str(source), "--revision", revision, *where)
        assert "Iceberg tables to file://" in out
        counts.append(_count({}, "runs", "--warehouse", str(warehouse)))  # the folder, no catalog
    assert counts[1] > counts[0]
    assert _count({}, "runs", *where, "--as-of", REVISION_A) == counts[0]
    # data files under the table location (a folder per source partition)
    assert any((warehouse / "iceberg" / "tracehouse" / "runs" / "data").rglob("*.parquet"))


def _stop_during_publish(
    env: dict[str, str], args: list[str], catalog_file: Path, signum: signal.Signals
) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """Run `tracehouse build`, send ``signum`` once a table commit lands in the catalog; the
    tables whose Iceberg metadata changed, and how the process ended."""
    metadata = _table_metadata(catalog_file)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")}
    environment.update(env)
    process = subprocess.Popen(
        [sys.executable, "-m", "tracehouse.cli", *args],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while _table_metadata(catalog_file) == metadata and process.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    assert SECRET not in out + err
    changed = [t for t, m in _table_metadata(catalog_file).items() if metadata.get(t) != m]
    return changed, subprocess.CompletedProcess(args, process.returncode, out, err)


def _table_metadata(catalog_file: Path) -> dict[str, str]:
    """Each Iceberg table's current metadata file, as the SQLite catalog records it."""
    if not catalog_file.exists():
        return {}
    with sqlite3.connect(f"file:{catalog_file}?mode=ro", uri=True) as connection:
        rows = connection.execute(
            "SELECT table_name, metadata_location FROM iceberg_tables"
        ).fetchall()
    return dict(rows)


@pytest.mark.slow
def test_object_store_settings_errors_are_one_line(tmp_path: Path) -> None:
    cases = [
        (("build", "--source", str(tmp_path), "--warehouse", "s3://bucket/wh"), "needs a catalog"),
        (
            ("query", "SELECT 1", "--warehouse", "gs://bucket/wh", "--catalog", "sqlite:///x.db"),
            "gs://",
        ),
        (
            ("query", "SELECT 1", "--warehouse", "s3://bucket/wh", "--catalog", "mysql://h/db"),
            "--catalog",
        ),
        (
            (
                "rollback",
                "--warehouse",
                "s3://bucket/wh",
                "--catalog",
                f"sqlite:///{tmp_path}/c.db",
            ),
            "--as-of",
        ),
        (
            ("query", "SELECT 1", "--warehouse", str(tmp_path / "wh"), "--as-of", REVISION_A),
            "--catalog",
        ),
        (
            (
                "remove-source",
                "demo",
                "--warehouse",
                "s3://bucket/wh",
                "--catalog",
                f"sqlite:///{tmp_path}/c.db",
            ),
            "not supported",
        ),
    ]
    for args, named in cases:
        result = run_cli(*args, env={"AWS_SECRET_ACCESS_KEY": SECRET})
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, (args, result.stderr)
        assert len(lines) == 1 and named in lines[0], (args, lines)
        assert SECRET not in result.stderr + result.stdout
    environment = run_cli("query", "SELECT 1", env={"TRACEHOUSE_WAREHOUSE": "s3://bucket/wh"})
    assert environment.returncode == 2
    assert "TRACEHOUSE_WAREHOUSE=s3://bucket/wh" in environment.stderr
    assert "needs a catalog" in environment.stderr


# One writer process: commits its own source's rows of a table with a `source` column, round
# after round, as a build of that source publishes them.
WRITER = """
import sys, time, pyarrow as pa, pyarrow.parquet as pq
from pathlib import Path
from tracehouse.publish.iceberg.catalog import PROPERTY_SNAPSHOT, _ensure_namespace, open_catalog
from tracehouse.publish.iceberg.commit import publish_table
from tracehouse.settings import load_settings

source, rounds, folder = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
settings = load_settings()
catalog = open_catalog(settings)
_ensure_namespace(catalog)
time.sleep(max(0.0, float(sys.argv[4]) - time.time()))  # both writers start together
retries = 0
for round_ in range(rounds):
    local = folder / f"{source}-{round_}.parquet"
    rows = {"source": [source] * 3, "round": [round_] * 3, "item": [0, 1, 2]}
    pq.write_table(pa.table(rows), local)
    properties = {PROPERTY_SNAPSHOT: f"{source}-{round_}"}
    outcome = publish_table(catalog, "probe", local, source, properties)
    retries += outcome.retries
print(retries)
"""


@pytest.mark.integration
def test_writers_of_different_sources_commit_concurrently(s3_endpoint: str, tmp_path: Path) -> None:
    """Two processes replace their own source's rows of one table at the same moment, many
    times: every commit lands (conflicts are retried), and neither removes the other's rows."""
    rounds = 6
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")}
    environment.update(_aws_env(s3_endpoint, tmp_path / "staging"))
    environment["TRACEHOUSE_WAREHOUSE"] = f"s3://{BUCKET}/concurrent"
    environment["TRACEHOUSE_CATALOG"] = f"sqlite:///{tmp_path}/cat.db"
    start = time.time() + 8  # after both have imported pyiceberg, even on a loaded machine
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, source, str(rounds), str(tmp_path), str(start)],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for source in ("left", "right")
    ]
    outputs = [writer.communicate(timeout=300) for writer in writers]
    for writer, (_, stderr) in zip(writers, outputs, strict=True):
        assert writer.returncode == 0, stderr
    from tracehouse.publish.iceberg.catalog import open_catalog
    from tracehouse.settings import load_settings

    saved = dict(os.environ)
    os.environ.update(environment)
    try:
        settings = load_settings()
        probe = open_catalog(settings).load_table((settings.namespace, "probe"))
        rows = probe.scan().to_arrow().to_pylist()
        history = [s.summary for s in probe.snapshots() if s.summary is not None]
        spec = [field.name for field in probe.spec().fields]
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert spec == ["source"]  # each source its own partition
    last = rounds - 1
    assert sorted((r["source"], r["round"], r["item"]) for r in rows) == [
        (source, last, item) for source in ("left", "right") for item in range(3)
    ]
    committed = {s.additional_properties.get("tracehouse.snapshot-id") for s in history}
    # Every round of both writers became a snapshot of the table (none was lost to a conflict).
    assert {f"{s}-{r}" for s in ("left", "right") for r in range(rounds)} <= committed
    print("commit retries:", [int(out.strip() or 0) for out, _ in outputs])


def _two_sources(folder: Path) -> tuple[Path, Path]:
    """A demo dataset and a sample folder that re-measures the demo's first cohort (a copy of
    one of its trace files), so the two sources share comparison keys and rank together."""
    from tests.fixtures.shared_data import SAMPLES_DIR
    from tracehouse.demo.generate import generate_dataset

    demo = folder / "demo"
    generate_dataset(demo, definitions=3, workloads_per_definition=3, solutions_per_definition=3)
    sample = folder / "sample"
    shutil.copytree(SAMPLES_DIR / "hf_v3_layout", sample)
    shared = next(p for p in sorted((demo / "traces").rglob("*.jsonl")) if p.stat().st_size)
    target = sample / "traces" / "fork" / shared.relative_to(demo / "traces")
    target.parent.mkdir(parents=True)
    shutil.copyfile(shared, target)
    for name in ("definitions", "solutions", "workloads"):
        shutil.copytree(demo / name, sample / name, dirs_exist_ok=True)
    return demo, sample


def _same_but_build_times(ours: Path, theirs: Path) -> None:
    """Two exports hold the same tables: byte-identical files, except source_snapshots, whose
    built_at (and so its order across sources: build order) says when each build ran."""
    import pyarrow.parquet as pq

    mine = {p.name: p.read_bytes() for p in sorted(ours.glob("*.parquet"))}
    other = {p.name: p.read_bytes() for p in sorted(theirs.glob("*.parquet"))}
    assert list(mine) == list(other)
    for name in mine:
        if name != "source_snapshots.parquet":
            assert mine[name] == other[name], name

    def snapshots(export: Path) -> list[dict[str, object]]:
        rows = pq.read_table(export / "source_snapshots.parquet").drop_columns(["built_at"])
        return sorted(rows.to_pylist(), key=lambda r: (str(r["source"]), str(r["snapshot_id"])))

    assert snapshots(ours) == snapshots(theirs)


@pytest.mark.integration
@pytest.mark.skipif(SHARED is None, reason="../shared/samples not found beside the checkout")
def test_builds_of_two_sources_at_once_equal_building_them_in_turn(
    s3_endpoint: str, tmp_path: Path
) -> None:
    """Two machines (each its own staging folder) build different sources into one s3://
    warehouse and catalog at the same moment: both publish, and what readers get is what
    building them one after the other into a folder gives, cross-source ranks included."""
    demo, sample = _two_sources(tmp_path)
    where = ("--warehouse", f"s3://{BUCKET}/together", "--catalog", f"sqlite:///{tmp_path}/c.db")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")}
    builds = []
    for name, folder in (("demo", demo), ("sample", sample)):
        env = {**environment, **_aws_env(s3_endpoint, tmp_path / f"machine-{name}")}
        args = ["build", "--source", str(folder), "--source-name", name, "--revision", "1" * 40]
        builds.append(
            subprocess.Popen(
                [sys.executable, "-m", "tracehouse.cli", *args, *where],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for build in builds:
        out, err = build.communicate(timeout=300)
        assert build.returncode == 0, err
        assert "published" in out and SECRET not in out + err
        print(out.strip().splitlines()[-1])  # the commit retries the race cost
    reader = _aws_env(s3_endpoint, tmp_path / "reader")
    listed = json.loads(_ok(reader, "generations", *where, "--format", "json"))
    assert sorted(row["source"] for row in listed) == ["demo", "sample"]
    held = json.loads(_ok(reader, "sources", *where, "--format", "json"))
    assert [s["source"] for s in held] == ["demo", "sample"] and all(s["runs"] for s in held)
    _ok(reader, "export", "--snapshot", str(tmp_path / "at-once"), *where)

    # The same two builds one after the other, into a local folder.
    local = ("--warehouse", str(tmp_path / "local"))
    for name, folder in (("demo", demo), ("sample", sample)):
        args = ("build", "--source", str(folder), "--source-name", name, "--revision", "1" * 40)
        _ok({}, *args, *local)
    _ok({}, "export", "--snapshot", str(tmp_path / "in-turn"), *local)
    _same_but_build_times(tmp_path / "at-once", tmp_path / "in-turn")
    # The ranks span both sources: some cohort holds runs of each.
    mixed = _ok(
        reader,
        "query",
        "SELECT count(*) AS n FROM (SELECT comparison_key FROM runs JOIN run_rankings "
        "USING (run_id) WHERE eligible GROUP BY 1 HAVING count(DISTINCT source) = 2)",
        "--format",
        "json",
        *where,
    )
    assert json.loads(mixed)[0]["n"] > 0


@pytest.mark.slow
def test_a_staging_built_for_another_catalog_is_rebuilt_with_one_note(
    s3_endpoint: str, tmp_path: Path
) -> None:
    """The local staging outlived its catalog: with a new, empty catalog at the same warehouse
    URI, a build of another folder under the same name was refused, because the staging said
    the name belonged to the folder it had built for the old catalog."""
    from tracehouse.demo.generate import generate_dataset

    env = _aws_env(s3_endpoint, tmp_path / "staging")
    warehouse = f"s3://{BUCKET}/outlived"
    first, second = tmp_path / "first" / "data", tmp_path / "second" / "data"
    generate_dataset(first, seed=1, definitions=2, workloads_per_definition=2)
    generate_dataset(second, seed=2, definitions=2, workloads_per_definition=2)
    old = ("--warehouse", warehouse, "--catalog", f"sqlite:///{tmp_path}/old.db")
    _ok(env, "build", "--source", str(first), "--revision", REVISION_A, *old)

    new = ("--warehouse", warehouse, "--catalog", f"sqlite:///{tmp_path}/new.db")
    built = _ok(env, "build", "--source", str(second), "--revision", REVISION_B, *new)
    notes = [line for line in built.splitlines() if "local staging" in line]
    assert len(notes) == 1, built
    assert str(first) in notes[0] and "discarded" in notes[0], notes
    held = json.loads(_ok(env, "sources", *new, "--format", "json"))
    assert [(s["source"], s["revision"]) for s in held] == [("data", REVISION_B)], held

    again = _ok(env, "build", "--source", str(second), "--revision", REVISION_B, *new)
    assert "is up to date" in again and "local staging" not in again, again  # it agrees now
