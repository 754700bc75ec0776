"""The tests are in tiers (docs/layout.md): every test file lives in one tier's folder, the
helpers they share in tests/fixtures/, and each tier has its make target."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
TIERS = ("unit", "sql", "system", "contract")


def test_every_test_file_is_in_a_tier_and_every_helper_in_fixtures() -> None:
    loose = sorted(
        p.name for p in TESTS.glob("*.py") if p.name not in {"__init__.py", "conftest.py"}
    )
    assert not loose, f"put these in tests/{'|'.join(TIERS)}/ or tests/fixtures/: {loose}"
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {*TIERS, "fixtures"}, folders
    for tier in TIERS:
        # a package each, so two tiers may hold files of the same name
        assert (TESTS / tier / "__init__.py").is_file(), tier
        assert list((TESTS / tier).glob("test_*.py")), tier
    assert not list((TESTS / "fixtures").glob("test_*.py"))


def test_each_tier_has_its_make_target() -> None:
    makefile = (TESTS.parent / "Makefile").read_text()
    for tier in ("unit", "system", "contract"):
        assert re.search(rf"(?m)^test-{tier}: .*\n\t.*(?i:pytest).* tests/{tier}\b", makefile), tier
    assert re.search(r"(?m)^test-unit: .*\n\t.*(?i:pytest).* tests/sql\b", makefile)
    assert re.search(r"(?m)^test: lint typecheck test-all$", makefile)
