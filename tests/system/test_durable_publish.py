"""A published generation is on disk before it becomes current: every file below it (the parts in
its table folders, not only its top-level files) and every folder of it, its name in the
generations folder included, is fsynced before the ``current`` link moves to it. Otherwise a
power loss right after a build could leave ``current`` naming parts whose bytes never reached
the disk. A power loss cannot be staged here; the build's own fsync calls are recorded (each is
still made) with the link's target at that moment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import build
from tracehouse.demo import generate_dataset

REVISION = "de" * 20


def _inode(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_dev, info.st_ino


@pytest.mark.parametrize("change", ["first build", "one trace file changed"])
def test_every_file_and_folder_of_a_generation_is_fsynced_before_it_is_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    source, warehouse = tmp_path / "demo", tmp_path / "wh"
    generate_dataset(source, seed=5, definitions=2, workloads_per_definition=2)
    if change != "first build":
        build(source, warehouse, revision=REVISION)
        trace_file = sorted(source.glob("traces/**/*.jsonl"))[0]
        lines = trace_file.read_bytes().splitlines(keepends=True)
        trace_file.write_bytes(b"".join(lines[:-1]))  # its last run gone

    current = warehouse / "current"
    fsynced: set[tuple[int, int, str | None]] = set()  # (dev, ino, the link's target then)
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        info = os.fstat(fd)
        target = os.readlink(current) if current.is_symlink() else None
        fsynced.add((info.st_dev, info.st_ino, target))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    before = os.readlink(current) if current.is_symlink() else None
    build(source, warehouse, revision=REVISION)
    monkeypatch.undo()

    generation = current.resolve()
    assert os.readlink(current) != before  # a new generation was published
    # everything synced while ``current`` still named the previous generation (or nothing)
    synced = {(dev, ino) for dev, ino, target in fsynced if target == before}
    below = [Path(folder) / name for folder, _, names in os.walk(generation) for name in names]
    folders = [Path(folder) for folder, _, _ in os.walk(generation)]
    parts = [path for path in below if path.parent != generation]
    assert parts, "the generation has parts in table folders"
    not_synced = [
        str(path.relative_to(generation))
        for path in [*below, *folders]
        if not path.is_symlink() and _inode(path) not in synced
    ]
    assert not_synced == []
    assert _inode(generation.parent) in synced  # the generation's own name


def test_the_current_generations_file_list_is_replaced_whole_when_its_views_are_written_again(
    tmp_path: Path,
) -> None:
    """The Dagster view assets rewrite the published file of the current generation and record
    its new size in ``files.json``, which readers check: the list is replaced in one rename, so
    a reader (or a crash) never meets it half written. A reader that opened the old list keeps
    reading it whole."""
    from pipelines.defs.assets import recreate_views
    from tracehouse.settings import load_settings
    from tracehouse.warehouse import FILES_LIST, generation_damage

    source, warehouse = tmp_path / "demo", tmp_path / "wh"
    generate_dataset(source, seed=6, definitions=2, workloads_per_definition=2)
    build(source, warehouse, revision=REVISION)
    generation = (warehouse / "current").resolve()
    listed = generation / FILES_LIST
    with listed.open("rb") as reader:
        before = listed.read_bytes()
        recreate_views(load_settings(environ={}, warehouse=warehouse, source=str(source)))
        # another file took its name: the old one is whole, for whoever still reads it
        assert os.fstat(reader.fileno()).st_ino != listed.stat().st_ino
        assert reader.read() == before
    assert generation_damage(generation, content=True) is None  # the new list is the truth
