"""The warehouse on object storage against a local folder: build and read times.

    python -m bench.object_store --lines 154000 [--repeat 3] [--out bench/results]

On the same generated dataset as ``bench.run`` (``data/bench/<lines>``), each leg a separate
process, ``--repeat`` times (median reported):

  local build   ``tracehouse build --source DIR --warehouse W`` into an empty folder
  s3 build      the same into ``s3://<bucket>/<run>`` with a SQLite catalog, from an empty
                staging folder: the same local work, plus every table committed to Iceberg on a
                local S3-compatible server (moto, 127.0.0.1)
  local query   ``tracehouse query "SELECT count(*) FROM runs"`` on the folder
  s3 query      the same on the s3:// warehouse from a new reader (empty staging: every table
                is downloaded into its replica first)
  s3 query, warm  again on the same reader (the replica is current: only the catalog is asked)

moto keeps objects in memory on this machine, so the S3 legs measure the commit protocol and
the copies, not a network; a real object store adds its latency per request. Results go to
``<out>/object_store_<lines>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.measure import measure
from bench.run import ensure_dataset, tracehouse_command

BUCKET = "tracehouse-bench"
# moto accepts any key; these only stand in for the variables a real store needs.
S3_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench-secret",
    "AWS_REGION": "us-east-1",
}
REVISION = "b" * 40
QUERY = "SELECT count(*) AS runs FROM runs"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def local_s3_server(bucket: str = BUCKET, timeout_s: float = 30) -> Iterator[dict[str, str]]:
    """moto's S3 server on 127.0.0.1 (a free port) with ``bucket`` created; yields the AWS_*
    environment that points a client at it. Stopped on exit."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    environment = {**S3_CREDENTIALS, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the local S3 server did not start") from None
                time.sleep(0.1)
        import boto3

        boto3.client(
            "s3",
            endpoint_url=environment["AWS_ENDPOINT_URL"],
            region_name=environment["AWS_REGION"],
            aws_access_key_id=environment["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=environment["AWS_SECRET_ACCESS_KEY"],
        ).create_bucket(Bucket=bucket)
        yield environment
    finally:
        server.terminate()
        server.wait(timeout=10)


def _environment(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEHOUSE_", "AWS_"))}
    env.update(extra)
    return env


def run_legs(source: Path, repeat: int, work: Path, s3: dict[str, str]) -> dict[str, Any]:
    tracehouse = tracehouse_command()
    samples: dict[str, list[Any]] = {}

    def record(leg: str, command: list[str], env: dict[str, str]) -> None:
        sample = measure(command, env=env, sample_tree=False)
        if sample.returncode != 0:
            raise RuntimeError(f"{leg} failed: {sample.stderr_tail.strip()}")
        samples.setdefault(leg, []).append(sample)

    for round_ in range(repeat):
        local = work / f"local-{round_}"
        shutil.rmtree(local, ignore_errors=True)
        build = ["build", "--source", str(source), "--revision", REVISION]
        record("local build", [*tracehouse, *build, "--warehouse", str(local)], _environment({}))
        record(
            "local query",
            [*tracehouse, "query", QUERY, "--format", "json", "--warehouse", str(local)],
            _environment({}),
        )
        where = [
            "--warehouse",
            f"s3://{BUCKET}/{uuid.uuid4().hex}",
            "--catalog",
            f"sqlite:///{work / f'catalog-{round_}.db'}",
        ]
        writer = _environment({**s3, "TRACEHOUSE_STAGING": str(work / f"writer-{round_}")})
        record("s3 build", [*tracehouse, *build, *where], writer)
        reader = _environment({**s3, "TRACEHOUSE_STAGING": str(work / f"reader-{round_}")})
        query = [*tracehouse, "query", QUERY, "--format", "json", *where]
        record("s3 query", query, reader)
        record("s3 query, warm", query, reader)
    legs = {}
    for leg, runs in samples.items():
        legs[leg] = {
            "wall_s": statistics.median(s.wall_s for s in runs),
            "cpu_s": statistics.median(s.cpu_s for s in runs),
            "runs": len(runs),
            "last_stdout": runs[-1].stdout_tail.strip()[-200:],
        }
    return legs


def render(report: dict[str, Any]) -> list[str]:
    legs = report["legs"]
    lines = [
        f"object storage vs local folder: {report['lines']:,} trace lines, "
        f"medians of {report['repeat']}",
        "| leg | wall s | CPU s | × local |",
        "|---|---|---|---|",
    ]
    for leg, figures in legs.items():
        base = "local build" if "build" in leg else "local query"
        ratio = figures["wall_s"] / legs[base]["wall_s"] if legs[base]["wall_s"] else None
        lines.append(
            f"| {leg} | {figures['wall_s']:.2f} | {figures['cpu_s']:.2f} | "
            + (f"{ratio:.2f}" if ratio is not None else "-")
            + " |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.object_store", description=__doc__)
    parser.add_argument("--lines", type=int, default=154_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--data-root", type=Path, default=Path("data/bench"))
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    source, dataset, _ = ensure_dataset(args.data_root, args.lines, args.seed)
    with (
        tempfile.TemporaryDirectory(prefix="tracehouse-s3-bench-") as folder,
        local_s3_server() as s3,
    ):
        legs = run_legs(source, args.repeat, Path(folder), s3)
    report = {"lines": args.lines, "repeat": args.repeat, "dataset": dataset, "legs": legs}
    text = render(report)
    print("\n".join(text))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"object_store_{args.lines}.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / f"object_store_{args.lines}.md").write_text("\n".join(text) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
