"""Every corpus exports exactly what main exported before the ingest rewrite (issue 26).

The committed digests (tests/fixtures/oracle/export_digests.json, written by `python -m
tests.fixtures.export_oracle --write`) are the oracle for any build path: the sample folders, the golden
corpus, the demo data and the hostile corpus, each built by the real CLI with a dataset
revision and exported with `tracehouse export --snapshot`. A table that differs is named.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.export_oracle import committed, corpora, export_digests
from tests.fixtures.shared_data import requires_shared

SHARED_CORPORA = [name for name in corpora() if name not in ("demo", "hostile")]


def _check(name: str, base: Path) -> None:
    expected = committed()[name]
    actual = export_digests(name, base)
    assert sorted(actual) == sorted(expected), "the exported tables differ"
    changed = [table for table in expected if actual[table] != expected[table]]
    assert not changed, f"{name}: exports changed in {changed}"


@pytest.mark.integration
@pytest.mark.parametrize("name", ["demo", "hostile"])
def test_generated_corpus_exports_are_unchanged(name: str, tmp_path: Path) -> None:
    _check(name, tmp_path)


@requires_shared
@pytest.mark.integration
@pytest.mark.parametrize("name", SHARED_CORPORA)
def test_shared_corpus_exports_are_unchanged(name: str, tmp_path: Path) -> None:
    _check(name, tmp_path)


def test_every_corpus_has_committed_digests() -> None:
    names = set(corpora())
    if not SHARED_CORPORA:
        names |= {name for name in committed() if name not in ("demo", "hostile")}
    assert set(committed()) == names
