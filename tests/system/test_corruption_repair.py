"""Issues 16 and 25: a damaged warehouse is detected and repaired by the next build.

Each generation records its files, their sizes and SHA-256 digests (the published DuckDB file:
its size), and its schema version when it is published (files.json). A deleted `runs` part made
queries silently answer 1,404 of 1,490 runs while `build` said "up to date"; a truncated DuckDB
file failed every read while `build` said the same; a truncated part shared with the cache or a
garbage sources.json made even `build --force` fail for ever; a lost `current` link made the
next build a first build without the shrink guard. Issue 25: a flipped bit (same size) changed a
run's latency with no warning and `build --force` re-published it from the hard-linked cache;
same-size garbage in a part made every read fail without saying why and `--force` fail for ever;
`rollback` switched to a damaged generation; a warehouse of the previous release broke the read
commands while `build` said "up to date". Every step here is the real `tracehouse` command.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from tests.conftest import files_outside, one_error_line, run_cli
from tests.fixtures.hostile_corpus import CLI, write_plain_dataset
from tracehouse.publish import generations
from tracehouse.warehouse import Warehouse, source_key

pytestmark = pytest.mark.integration

COUNT_RUNS = "SELECT count(*) AS n FROM runs"


tracehouse = run_cli  # the real command in its own process


def run_count(warehouse: Path) -> int:
    result = tracehouse("query", COUNT_RUNS, "--warehouse", str(warehouse), "--format", "csv")
    assert result.returncode == 0, result.stderr
    return int(result.stdout.splitlines()[1])


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path, int]:
    source = tmp_path / "dataset"
    write_plain_dataset(source, "A", files=4, lines=20)
    warehouse = tmp_path / "w"
    result = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    return source, warehouse, run_count(warehouse)


def _first_runs_part(generation: Path) -> Path:
    return sorted((generation / "runs.parquet").rglob("*.parquet"))[0]


def _delete_a_runs_part(generation: Path) -> Path:
    part = _first_runs_part(generation)
    part.unlink()
    return part


def _truncate_the_duckdb_file(generation: Path) -> Path:
    path = generation / "tracehouse.duckdb"
    os.truncate(path, 1000)
    return path


def _truncate_a_part_the_cache_also_holds(generation: Path) -> Path:
    part = _first_runs_part(generation)
    assert part.stat().st_nlink == 1  # the cache holds a copy, not the same file
    os.truncate(part, part.stat().st_size // 2)
    return part


def _same_size_garbage_in_a_runs_part(generation: Path) -> Path:
    part = _first_runs_part(generation)
    size = part.stat().st_size
    part.write_bytes((b"garbage!" * (size // 8 + 1))[:size])
    return part


def _garbage_sources(generation: Path) -> Path:
    path = generation / "sources.json"
    path.write_text("{garbage")
    return path


@pytest.mark.parametrize(
    "damage",
    [
        _delete_a_runs_part,
        _truncate_the_duckdb_file,
        _truncate_a_part_the_cache_also_holds,
        _same_size_garbage_in_a_runs_part,
        _garbage_sources,
    ],
    ids=lambda f: f.__name__.strip("_"),
)
@pytest.mark.parametrize("force", [False, True], ids=["build", "build --force"])
def test_damage_is_detected_by_reads_and_repaired_by_the_next_build(
    built: tuple[Path, Path, int], damage: Callable[[Path], Path], force: bool, tmp_path: Path
) -> None:
    source, warehouse, runs = built
    damaged = damage(Warehouse(warehouse).require_current())
    outside = files_outside(tmp_path, warehouse)

    for read in (("query", COUNT_RUNS), ("leaderboard", "gemm_n4_k4")):
        result = tracehouse(*read, "--warehouse", str(warehouse))
        line = one_error_line(result)
        assert "is damaged" in line and str(damaged) in line and "tracehouse build" in line, line

    repaired = tracehouse(
        "build",
        "--source",
        str(source),
        "--warehouse",
        str(warehouse),
        *(["--force"] if force else []),
    )
    assert repaired.returncode == 0, repaired.stderr
    assert repaired.stderr == ""
    repair_lines = [line for line in repaired.stdout.splitlines() if "repaired:" in line]
    assert len(repair_lines) == 1 and str(damaged) in repair_lines[0], repaired.stdout
    assert run_count(warehouse) == runs
    again = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    assert again.returncode == 0 and "up to date" in again.stdout, again.stdout
    assert files_outside(tmp_path, warehouse) == outside


def test_a_lost_current_link_keeps_the_shrink_guard(built: tuple[Path, Path, int]) -> None:
    source, warehouse, runs = built
    (warehouse / "current").unlink()
    for part in sorted((source / "traces").rglob("*.jsonl"))[1:]:  # three of four files gone
        part.unlink()
    refused = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    line = one_error_line(refused)
    assert "shrink" in line or "runs" in line, line
    assert Warehouse(warehouse).current_generation() is None  # nothing was published

    write_plain_dataset(source, "A", files=4, lines=20)
    rebuilt = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert f"repaired: {warehouse / 'current'}: missing" in rebuilt.stdout, rebuilt.stdout
    assert run_count(warehouse) == runs


def test_a_repair_never_drops_another_source_silently(tmp_path: Path) -> None:
    """With a damaged part of source B, rebuilding A on the last intact generation (which
    predates B) would publish a warehouse without B: refused in one line; building B repairs."""
    first, second = tmp_path / "a", tmp_path / "b"
    write_plain_dataset(first, "A", files=2, lines=10)
    write_plain_dataset(second, "B", files=2, lines=10)
    warehouse = tmp_path / "w"
    for folder, name in ((first, "A"), (second, "B")):
        result = tracehouse(
            "build", "--source", str(folder), "--source-name", name, "--warehouse", str(warehouse)
        )
        assert result.returncode == 0, result.stderr
    both = run_count(warehouse)
    current = Warehouse(warehouse).require_current()
    part = sorted((current / "runs.parquet" / source_key("B")).rglob("*.parquet"))[0]
    part.unlink()

    refused = tracehouse(
        "build", "--source", str(first), "--source-name", "A", "--warehouse", str(warehouse)
    )
    line = one_error_line(refused)
    assert str(part) in line and "'B'" in line and "cannot re-read" in line, line
    assert Warehouse(warehouse).current_generation() == current  # nothing was published

    repaired = tracehouse(
        "build", "--source", str(second), "--source-name", "B", "--warehouse", str(warehouse)
    )
    assert repaired.returncode == 0, repaired.stderr
    assert "repaired:" in repaired.stdout and str(part) in repaired.stdout
    assert run_count(warehouse) == both


LATENCIES = "SELECT run_id, latency_ms FROM runs ORDER BY run_id"


def _latencies(warehouse: Path) -> list[str]:
    result = tracehouse("query", LATENCIES, "--warehouse", str(warehouse), "--format", "csv")
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def _flip_a_latency_bit(part: Path) -> None:
    """Flip the one bit of ``part`` that changes a latency_ms value and leaves the file
    readable, with every other value as it was: what a disk's bit rot does silently."""
    data = part.read_bytes()
    before = pq.read_table(io.BytesIO(data)).to_pylist()
    footer = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
    column = next(
        footer.column(i)
        for i in range(footer.num_columns)
        if footer.column(i).path_in_schema == "latency_ms"
    )
    start = column.dictionary_page_offset or column.data_page_offset
    for offset in range(start, start + column.total_compressed_size):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[offset] ^= 1 << bit
            try:
                after = pq.read_table(io.BytesIO(bytes(flipped))).to_pylist()
            except Exception:  # a flip that breaks the page: try the next one
                continue
            changed = {k for a, b in zip(before, after, strict=True) for k in a if a[k] != b[k]}
            if changed == {"latency_ms"}:
                part.write_bytes(bytes(flipped))
                return
    raise AssertionError(f"no bit of {part} changes a latency alone")


@pytest.mark.slow
@pytest.mark.parametrize("force", [False, True], ids=["build", "build --force"])
def test_a_flipped_bit_in_a_runs_part_is_detected_and_repaired_from_the_source(
    built: tuple[Path, Path, int], force: bool
) -> None:
    """Same size, one bit: the size check cannot see it, the recorded SHA-256 does. The build
    re-reads the source (the cache holds a copy, not the damaged file) and the repaired value
    is the source's again."""
    source, warehouse, _ = built
    from_source = _latencies(warehouse)
    part = _first_runs_part(Warehouse(warehouse).require_current())
    cached = warehouse / "cache/parts/runs" / part.name.split("-")[0]
    assert cached.is_dir() and not any(
        os.path.samefile(part, copy) for copy in cached.glob("*.parquet")
    )
    _flip_a_latency_bit(part)
    assert _latencies(warehouse) != from_source  # the wrong value reads as a value

    repaired = tracehouse(
        "build",
        "--source",
        str(source),
        "--warehouse",
        str(warehouse),
        *(["--force"] if force else []),
    )
    assert repaired.returncode == 0 and repaired.stderr == "", repaired.stderr
    repair_lines = [line for line in repaired.stdout.splitlines() if "repaired:" in line]
    assert len(repair_lines) == 1 and str(part) in repair_lines[0], repaired.stdout
    assert "SHA-256" in repair_lines[0]
    assert _latencies(warehouse) == from_source
    again = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    assert again.returncode == 0 and "up to date" in again.stdout, again.stdout


def test_same_size_garbage_in_the_published_duckdb_file_is_repaired_by_the_next_build(
    built: tuple[Path, Path, int],
) -> None:
    """files.json records the published DuckDB file by its size alone (a client may rewrite it;
    it is whole while DuckDB opens it), so a build that relies on the generation opens it: bytes
    garbled at the same size are found there, named, and the file is written again."""
    source, warehouse, runs = built
    generation = Warehouse(warehouse).require_current()
    published = generation / "tracehouse.duckdb"
    size = published.stat().st_size
    entry = json.loads((generation / "files.json").read_text())["files"]["tracehouse.duckdb"]
    assert entry == {"size": size}
    published.chmod(0o644)  # sealed read-only
    published.write_bytes((b"garbage!" * (size // 8 + 1))[:size])

    repaired = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    assert repaired.returncode == 0 and repaired.stderr == "", repaired.stderr
    repair_lines = [line for line in repaired.stdout.splitlines() if "repaired:" in line]
    assert len(repair_lines) == 1 and str(published) in repair_lines[0], repaired.stdout
    assert "unreadable" in repair_lines[0]
    current = Warehouse(warehouse).require_current() / "tracehouse.duckdb"
    assert run_count(warehouse) == runs
    connection = duckdb.connect(str(current), read_only=True)
    try:
        assert connection.execute("SELECT count(*) FROM runs").fetchone() == (runs,)
    finally:
        connection.close()


def _two_generations(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """A warehouse built from variant A then B of a source (every file differs, so every
    runs part of the first generation is its own): (source, warehouse, first, second)."""
    source, warehouse = tmp_path / "dataset", tmp_path / "w"
    folders = []
    for variant in ("A", "B"):
        write_plain_dataset(source, variant, files=2, lines=10)
        result = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
        assert result.returncode == 0, result.stderr
        folders.append(Warehouse(warehouse).require_current())
    return source, warehouse, folders[0], folders[1]


@pytest.mark.slow
def test_rollback_refuses_a_damaged_generation(tmp_path: Path) -> None:
    _, warehouse, first, second = _two_generations(tmp_path)
    part = _first_runs_part(first)
    assert part.stat().st_nlink == 1  # the second generation does not share it
    _flip_a_latency_bit(part)

    refused = tracehouse("rollback", "--warehouse", str(warehouse))
    line = one_error_line(refused)
    assert f"generation {first.name} is damaged" in line and str(part) in line, line
    assert "nothing was switched" in line
    assert Warehouse(warehouse).current_generation() == second


def _holds_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (Linux: its /proc/<pid>/fd links)."""
    folder = Path(f"/proc/{pid}/fd")
    try:
        links = [os.readlink(folder / fd) for fd in os.listdir(folder)]
    except OSError:
        return False
    return str(path) in links


@pytest.mark.slow
def test_a_rollback_does_not_undo_a_build_published_while_it_waited(tmp_path: Path) -> None:
    """`tracehouse rollback` started while a build holds the lock: the build publishes, then
    the rollback gets the lock. It used to read "previous" before the lock and its target
    after, undo that build and print `now 000004 (was 000004)`; now it resolves both under
    the lock, and says in one line that the current generation moved."""
    source, warehouse, first, second = _two_generations(tmp_path)
    write_plain_dataset(source, "A", files=2, lines=10)
    third = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    assert third.returncode == 0, third.stderr
    published = Warehouse(warehouse).require_current()
    generations.rollback(Warehouse(warehouse), second)  # the state the rollback starts from

    lock_path = warehouse / ".build.lock"
    with lock_path.open("a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # a build is running
        rollback = subprocess.Popen(
            [*CLI, "rollback", "--warehouse", str(warehouse)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while not _holds_open(rollback.pid, lock_path):  # it waits for the lock now
                assert rollback.poll() is None, rollback.communicate()
                assert time.monotonic() < deadline, "the rollback never reached the lock"
                time.sleep(0.02)
            # the build publishes its generation
            generations.rollback(Warehouse(warehouse), published)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
        out, err = rollback.communicate(timeout=300)

    lines = err.splitlines()
    assert rollback.returncode == 2 and len(lines) == 1, (rollback.returncode, out, err)
    assert f"changed from {second.name} to {published.name}" in lines[0], lines[0]
    assert "nothing was switched" in lines[0]
    assert Warehouse(warehouse).current_generation() == published  # the build is not undone

    # Nothing moving meanwhile: it switches, naming what it switched from and to.
    rolled = tracehouse("rollback", "--warehouse", str(warehouse))
    assert rolled.returncode == 0, rolled.stderr
    assert f"now {second.name} (was {published.name})" in rolled.stdout, rolled.stdout
    assert Warehouse(warehouse).current_generation() == second


READ_COMMANDS = {
    "leaderboard": ("leaderboard", "gemm_n4_k4"),
    "report": ("report", "--out", "{out}/report"),
    "changes": ("changes",),
    "export": ("export", "--snapshot", "{out}/snapshot"),
    "query": ("query", COUNT_RUNS),
}


def _record_another_schema_version(generation: Path) -> None:
    listing = generation / "files.json"
    record = json.loads(listing.read_text())
    record["schema_version"] = "0" * 16
    listing.write_text(json.dumps(record))


def _record_as_the_release_before_versions(generation: Path) -> None:
    """files.json as the release before schema versions wrote it: sizes only."""
    listing = generation / "files.json"
    record = json.loads(listing.read_text())
    listing.write_text(json.dumps({rel: e["size"] for rel, e in record["files"].items()}))


@pytest.mark.slow
@pytest.mark.parametrize(
    "older",
    [_record_another_schema_version, _record_as_the_release_before_versions],
    ids=lambda f: f.__name__.strip("_"),
)
def test_an_older_schema_version_is_named_by_reads_and_rebuilt_by_build(
    built: tuple[Path, Path, int], older: Callable[[Path], None], tmp_path: Path
) -> None:
    source, warehouse, runs = built
    generation = Warehouse(warehouse).require_current()
    older(generation)
    for name, command in READ_COMMANDS.items():
        args = [a.format(out=tmp_path) for a in command]
        line = one_error_line(tracehouse(*args, "--warehouse", str(warehouse)))
        assert f"tracehouse {name}:" in line and generation.name in line, line
        assert "run `tracehouse build --warehouse" in line, line

    rebuilt = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    assert rebuilt.returncode == 0 and rebuilt.stderr == "", rebuilt.stderr
    assert "up to date" not in rebuilt.stdout
    assert f"upgraded: generation {generation.name}" in rebuilt.stdout, rebuilt.stdout
    assert run_count(warehouse) == runs
    for command in READ_COMMANDS.values():
        args = [a.format(out=tmp_path / "after") for a in command]
        result = tracehouse(*args, "--warehouse", str(warehouse))
        assert result.returncode == 0, (args, result.stderr)


@pytest.mark.slow
def test_an_upgrade_that_would_restart_run_history_is_refused_saying_why(tmp_path: Path) -> None:
    """Rebuilt by another schema version, a warehouse's run history starts again: the shrink
    guard refuses to drop its ended ranges, and its line says that is why (not "check the
    source"); --allow-shrink rebuilds it."""
    source, warehouse = tmp_path / "dataset", tmp_path / "w"
    for variant in ("A", "B"):  # B deletes a trace file: its runs' history ranges end
        write_plain_dataset(source, variant, files=3, lines=6)
        result = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
        assert result.returncode == 0, result.stderr
    current = Warehouse(warehouse).require_current()
    _record_another_schema_version(current)

    refused = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    line = one_error_line(refused)
    assert "refused to publish: run_disappearances" in line, line
    assert f"generation {current.name} was built by another version" in line, line
    assert "run history starts again" in line and "--allow-shrink" in line, line
    assert "Check the source" not in line, line
    assert Warehouse(warehouse).current_generation() == current

    upgraded = tracehouse(
        "build", "--source", str(source), "--warehouse", str(warehouse), "--allow-shrink"
    )
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"upgraded: generation {current.name}" in upgraded.stdout, upgraded.stdout


@pytest.mark.slow
def test_an_older_warehouse_of_several_sources_is_not_upgraded_by_dropping_one(
    tmp_path: Path,
) -> None:
    """Nothing of an older schema version is reused: building source A on it alone would
    publish a warehouse without B. Refused in one line naming B, the warehouse unchanged."""
    first, second = tmp_path / "a", tmp_path / "b"
    write_plain_dataset(first, "A", files=1, lines=5)
    write_plain_dataset(second, "B", files=1, lines=5)
    warehouse = tmp_path / "w"
    for folder, name in ((first, "A"), (second, "B")):
        result = tracehouse(
            "build", "--source", str(folder), "--source-name", name, "--warehouse", str(warehouse)
        )
        assert result.returncode == 0, result.stderr
    current = Warehouse(warehouse).require_current()
    _record_another_schema_version(current)

    refused = tracehouse(
        "build", "--source", str(first), "--source-name", "A", "--warehouse", str(warehouse)
    )
    line = one_error_line(refused)
    assert "'B'" in line and "cannot re-read" in line and current.name in line, line
    assert Warehouse(warehouse).current_generation() == current


@pytest.mark.slow
def test_a_damaged_staging_part_is_parsed_again_not_reused(
    built: tuple[Path, Path, int],
) -> None:
    """The parse cache (cache/staging/) records each part's SHA-256 in the build manifest: a
    part with other bytes of the same size is not reused, its group is parsed again."""
    source, warehouse, _ = built
    from_source = _latencies(warehouse)
    staged = sorted((warehouse / "cache/staging").glob("*.runs.*.parquet"))[0]
    size = staged.stat().st_size
    staged.write_bytes((b"garbage!" * (size // 8 + 1))[:size])

    rebuilt = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse), "--force")
    assert rebuilt.returncode == 0 and rebuilt.stderr == "", rebuilt.stderr
    assert "files parsed 1, reused 3" in rebuilt.stdout, rebuilt.stdout
    assert _latencies(warehouse) == from_source
    assert staged.read_bytes()[:4] == b"PAR1"  # written again from the source file
