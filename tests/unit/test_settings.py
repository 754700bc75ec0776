"""Issue 10, part 6: one declaration of the settings, used by the CLI and the Dagster resource;
a flag overrides the environment only when it is given."""

from __future__ import annotations

import fcntl
import time
from pathlib import Path

import pytest

from pipelines.defs.resources import WarehouseResource
from tests.conftest import run_cli
from tests.fixtures.hostile_corpus import write_plain_dataset
from tracehouse.settings import SETTINGS, Settings, SettingsError, env_name, load_settings


def test_flags_win_only_when_given() -> None:
    environ = {"TRACEHOUSE_WORKERS": "3", "TRACEHOUSE_LOCK_TIMEOUT_S": "7"}
    assert load_settings(environ).workers == 3
    assert load_settings(environ, workers=None).workers == 3  # a flag that was not given
    assert load_settings(environ, workers=5).workers == 5
    assert load_settings(environ).lock_timeout_s == 7.0
    assert load_settings({}).lock_timeout_s == Settings.lock_timeout_s
    assert load_settings({}).source is None  # no implicit demo source


def test_a_bad_value_is_named_where_it_came_from() -> None:
    with pytest.raises(SettingsError, match=r"^--workers 0: must be between 1 and 64"):
        load_settings({}, workers=0)
    with pytest.raises(SettingsError, match=r"^workers 0: must be between 1 and 64"):
        load_settings({}, origin="field", workers=0)
    with pytest.raises(SettingsError, match=r"^TRACEHOUSE_WORKERS=0: must be between 1 and 64"):
        load_settings({"TRACEHOUSE_WORKERS": "0"})
    with pytest.raises(SettingsError, match=r"^workers 0: must be between 1 and 64"):
        WarehouseResource(workers=0).settings()


def test_every_setting_is_documented_once_and_reaches_the_cli_help() -> None:
    help_text = run_cli("build", "--help").stdout + run_cli("changes", "--help").stdout
    for spec in SETTINGS:
        assert spec.metadata["doc"], spec.name
        flag = spec.metadata["flag"]
        if flag is not None and spec.name != "warehouse":
            assert flag in help_text, flag
            assert env_name(spec.name) in help_text, spec.name
        elif flag is None and spec.name != "sources":  # the build's list of the others
            assert f"  {env_name(spec.name)}: " in help_text, spec.name


@pytest.mark.integration
def test_the_wait_flag_no_longer_hides_the_environment(tmp_path: Path) -> None:
    """TRACEHOUSE_LOCK_TIMEOUT_S=0 refuses at once while another build holds the lock; the
    --wait flag, when given, still wins."""
    source, warehouse = tmp_path / "dataset", tmp_path / "warehouse"
    write_plain_dataset(source, "A", files=1, lines=5)
    warehouse.mkdir()
    args = ["build", "--source", str(source), "--warehouse", str(warehouse)]
    with (warehouse / ".build.lock").open("a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        started = time.monotonic()
        at_once = run_cli(*args, env={"TRACEHOUSE_LOCK_TIMEOUT_S": "0"})
        at_once_s = time.monotonic() - started
        started = time.monotonic()
        flag = run_cli(*args, "--wait", "2", env={"TRACEHOUSE_LOCK_TIMEOUT_S": "0"})
        flag_s = time.monotonic() - started
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    assert at_once.returncode == 2 and "waited 0 s" in at_once.stderr, at_once.stderr
    assert flag.returncode == 2 and "waited 2 s" in flag.stderr, flag.stderr
    assert flag_s >= 2.0 and at_once_s < flag_s - 1.5, (at_once_s, flag_s)
