"""Iceberg consumers see what each column means (issue 21): every published table's fields carry
their doc from `schemas`, read back by pyiceberg itself over moto's S3 server on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.object_store import local_s3_server
from tests.conftest import run_cli
from tracehouse import schemas
from tracehouse.demo import generate_dataset
from tracehouse.publish.iceberg.tables import MARTS, PUBLISHED_TABLES, sort_terms

pytestmark = pytest.mark.integration
BUCKET = "tracehouse-docs"

# An outside consumer: pyiceberg on the same catalog, nothing of tracehouse imported.
READ_DOCS = """
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
catalog = SqlCatalog("tracehouse", uri=sys.argv[1], **{
    "s3.endpoint": sys.argv[2], "s3.access-key-id": "testing",
    "s3.secret-access-key": "testing", "s3.region": "us-east-1"})
out = {}
for (namespace, name) in catalog.list_tables("tracehouse"):
    table = catalog.load_table((namespace, name))
    schema = table.schema()
    out[name] = {
        "docs": {f.name: f.doc for f in schema.fields},
        "schema_id": schema.schema_id,
        "location": table.location(),
        "files": sorted(task.file.file_path for task in table.scan().plan_files()),
        "sort": [[schema.find_column_name(f.source_id), str(f.direction), str(f.null_order)]
                 for f in table.sort_order().fields],
        "partition": [schema.find_column_name(f.source_id) for f in table.spec().fields],
    }
    if name in ("run_rankings", "run_summary"):
        ranks = table.scan(selected_fields=("run_id", "rank")).to_arrow().to_pylist()
        out[name]["ranks"] = sorted([r["run_id"], r["rank"]] for r in ranks)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    with local_s3_server(BUCKET) as environment:
        yield {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": environment["AWS_ENDPOINT_URL"],
        }


def _published(catalog: str, s3: dict[str, str]) -> dict[str, dict]:
    result = subprocess.run(
        [sys.executable, "-c", READ_DOCS, catalog, s3["AWS_ENDPOINT_URL"]],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_every_published_field_has_its_doc(tmp_path: Path, s3: dict[str, str]) -> None:
    source = tmp_path / "demo"
    generate_dataset(source, seed=9, definitions=2, workloads_per_definition=2)
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    env = {**s3, "TRACEHOUSE_STAGING": str(tmp_path / "staging")}
    where = ("--warehouse", f"s3://{BUCKET}/docs", "--catalog", catalog)

    def build(revision: str) -> None:
        result = run_cli("build", "--source", str(source), *where, "--revision", revision, env=env)
        assert result.returncode == 0, result.stderr

    build("1" * 40)
    first = _published(catalog, s3)
    assert set(PUBLISHED_TABLES) <= set(first)
    for table in PUBLISHED_TABLES:
        published = first[table]
        declared = {c.name: c.doc for c in schemas.TABLES[table].columns}
        assert published["docs"] == declared, table
        assert all(published["docs"].values()), table
        # every data file under the table's own location
        assert all(f.startswith(published["location"] + "/data/") for f in published["files"])
        # the order its files are written in, and one partition per source
        expected_sort = [
            [column, "ASC", "NULLS FIRST" if first_nulls else "NULLS LAST"]
            for column, first_nulls in sort_terms(table)
        ]
        assert [[c, d.upper(), n.upper()] for c, d, n in published["sort"]] == expected_sort
        assert published["partition"] == (["source"] if "source" in declared else [])
    assert first["runs"]["files"] and first["runs"]["sort"][0][0] == "source_file"

    # the product: ranks and the main marts, read by pyiceberg, equal what tracehouse shows
    for mart in MARTS:
        assert first[mart]["files"], mart
        assert all(f.startswith(first[mart]["location"] + "/data/") for f in first[mart]["files"])
        declared = schemas.TABLES.get(mart) or schemas.VIEWS.get(mart)
        assert declared is not None, f"mart {mart} is not declared in schemas"
        assert first[mart]["docs"] == {c.name: c.doc for c in declared.columns}, mart
        assert all(first[mart]["docs"].values()), mart
    shown = run_cli(
        "query", "SELECT run_id, rank FROM run_summary", "--format", "json", "--limit", "0",
        *where, env=env,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    expected_ranks = sorted([r["run_id"], r["rank"]] for r in json.loads(shown.stdout))
    assert any(rank is not None for _, rank in expected_ranks)
    assert first["run_rankings"]["ranks"] == expected_ranks
    assert first["run_summary"]["ranks"] == expected_ranks

    # a later build re-documents and re-sorts nothing: the schemas stay as they were
    build("2" * 40)
    second = _published(catalog, s3)
    for table in (*PUBLISHED_TABLES, *MARTS):
        for key in ("docs", "schema_id", "sort", "partition", "location"):
            assert second[table][key] == first[table][key], (table, key)


def test_one_catalog_serves_several_warehouses_each_in_its_own_namespace(
    tmp_path: Path, s3: dict[str, str]
) -> None:
    """As a shared REST or Glue catalog does: a second warehouse takes its own `--namespace`;
    without one it is refused in one line that names the flag."""
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    env = {**s3, "TRACEHOUSE_STAGING": str(tmp_path / "staging-a")}
    counts = {}
    for name, definitions, namespace in (("a", 2, None), ("b", 3, "team_b")):
        source = tmp_path / f"source-{name}"
        generate_dataset(source, seed=4, definitions=definitions, workloads_per_definition=2)
        where = ["--warehouse", f"s3://{BUCKET}/wh-{name}", "--catalog", catalog]
        if namespace is not None:
            where += ["--namespace", namespace]
        own = {**env, "TRACEHOUSE_STAGING": str(tmp_path / f"staging-{name}")}
        if namespace is not None:  # first without a namespace: refused, naming the flag
            refused = run_cli("build", "--source", str(source), *where[:4], env=own)
            assert refused.returncode == 2, refused.stderr
            assert len(refused.stderr.strip().splitlines()) == 1
            assert "--namespace" in refused.stderr and f"s3://{BUCKET}/wh-a" in refused.stderr
        built = run_cli("build", "--source", str(source), *where, env=own)
        assert built.returncode == 0, built.stderr
        reader = {**s3, "TRACEHOUSE_STAGING": str(tmp_path / f"reader-{name}")}
        shown = run_cli(
            "query", "SELECT count(DISTINCT definition) AS n FROM runs", "--format", "json",
            *where, env=reader,
        )  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        counts[name] = json.loads(shown.stdout)[0]["n"]
    assert counts == {"a": 2, "b": 3}
    listing = subprocess.run(
        [sys.executable, "-c", LIST_NAMESPACES, catalog, s3["AWS_ENDPOINT_URL"]],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert listing.returncode == 0, listing.stderr
    assert json.loads(listing.stdout) == {
        "team_b": f"s3://{BUCKET}/wh-b/team_b/runs",
        "tracehouse": f"s3://{BUCKET}/wh-a/tracehouse/runs",
    }


LIST_NAMESPACES = """
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
catalog = SqlCatalog("tracehouse", uri=sys.argv[1], **{
    "s3.endpoint": sys.argv[2], "s3.access-key-id": "testing",
    "s3.secret-access-key": "testing", "s3.region": "us-east-1"})
print(json.dumps({ns[0]: catalog.load_table((ns[0], "runs")).location()
                  for ns in catalog.list_namespaces()}))
"""
