"""The export oracle: SHA-256 digests of `tracehouse export --snapshot` for every corpus.

Committed before the ingest rewrite (issue 26) so that any later build path can be held to the
exports main produced: every sample folder, the golden corpus, the demo data (seed 7) and the
hostile corpus, each built by the real CLI with a dataset revision (so every digest is
computed). `python -m tests.export_oracle --write` rewrites tests/oracle/export_digests.json;
do that only for a change of an export made on purpose, and say which tables changed and why.

Each table's digest covers its Arrow schema and every row in order. Two things are normalised
because they name where the corpus lay, not what it holds: the `uri` of a source (a scratch
folder here, another checkout on CI) and the `snapshot_id` hashed over it, each replaced by its
order of first appearance. `source_snapshots` carries the build's wall-clock time (`built_at`),
left out. (`ingest_paths`, which counted the records each internal ingest path took, was left
out whole while it existed; issue 26 removed the table.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from tests.shared_data import GOLDEN_DIR, SAMPLES_DIR
from tracehouse.fetch.local import DATA_FOLDERS

DIGESTS_FILE = Path(__file__).parent / "oracle" / "export_digests.json"
REVISION = "a" * 40
# What a table's digest leaves out: build-describing columns, or the whole table (None).
LEFT_OUT: dict[str, tuple[str, ...] | None] = {
    "source_snapshots": ("built_at",),
}


def sample_folders() -> list[Path]:
    if not SAMPLES_DIR.is_dir():
        return []
    # web_baseline_config holds only baselines.json: not a dataset, refused by the build
    return sorted(
        p
        for p in SAMPLES_DIR.iterdir()
        if p.is_dir() and any((p / name).is_dir() for name in DATA_FOLDERS)
    )


def _demo(base: Path) -> Path:
    from tracehouse.demo import generate_dataset

    generate_dataset(base / "demo", seed=7)
    return base / "demo"


def _hostile(base: Path) -> Path:
    from tests.hostile_corpus import build_corpus

    return build_corpus(base / "hostile").root


def corpora() -> dict[str, Callable[[Path], Path]]:
    """Corpus name → a function that returns its folder (generating it under a scratch base)."""
    found: dict[str, Callable[[Path], Path]] = {}
    for folder in sample_folders():
        found[f"sample/{folder.name}"] = lambda _base, folder=folder: folder
    if (GOLDEN_DIR / "dataset").is_dir():
        found["golden"] = lambda _base: GOLDEN_DIR / "dataset"
    found["demo"] = _demo
    found["hostile"] = _hostile
    return found


def _cli(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"tracehouse {' '.join(args)} failed: {done.stderr[-2000:]}")


LOCATION_COLUMNS = ("uri", "snapshot_id")


def table_digest(path: Path) -> str:
    table = pq.read_table(path)
    dropped = LEFT_OUT.get(path.name.removesuffix(".parquet")) or ()
    table = table.drop_columns(list(dropped))
    rows = table.to_pylist()
    for column in LOCATION_COLUMNS:
        if column in table.column_names:
            seen: dict[object, str] = {}
            for row in rows:
                value = row[column]
                if value is not None:
                    row[column] = seen.setdefault(value, f"<{column} {len(seen) + 1}>")
    digest = hashlib.sha256(str(table.schema).encode())
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, default=repr, ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def export_digests(name: str, base: Path) -> dict[str, str]:
    """Build corpus `name` under `base`, export a snapshot, and digest each of its tables."""
    source = corpora()[name](base)
    warehouse, out = base / "warehouse", base / "export"
    _cli("build", "--source", str(source), "--warehouse", str(warehouse), "--revision", REVISION)
    _cli("export", "--warehouse", str(warehouse), "--snapshot", str(out))
    return {
        path.name.removesuffix(".parquet"): table_digest(path)
        for path in sorted(out.glob("*.parquet"))
        if LEFT_OUT.get(path.name.removesuffix(".parquet"), ()) is not None
    }


def committed() -> dict[str, dict[str, str]]:
    return json.loads(DIGESTS_FILE.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description="Digest the exports of every corpus.")
    parser.add_argument("--write", action="store_true", help="rewrite the committed digests")
    args = parser.parse_args()
    digests = {}
    for name in corpora():
        with tempfile.TemporaryDirectory() as base:
            digests[name] = export_digests(name, Path(base))
        print(name, len(digests[name]), "tables", flush=True)
    if args.write:
        DIGESTS_FILE.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    else:
        print(json.dumps(digests, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
