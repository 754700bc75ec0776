"""Typed settings: command-line flags first, then ``TRACEHOUSE_*`` environment variables, then
safe local defaults. Every command and every Dagster asset reads settings through here, once.

This module is imported on the fast path of ``tracehouse build`` (a warm build must cost a few
tens of milliseconds), so it uses a plain dataclass instead of a settings framework.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

ENV_PREFIX = "TRACEHOUSE_"


def _default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


@dataclass(frozen=True)
class Settings:
    """Everything a build or a query needs to know.

    Each field maps to the environment variable ``TRACEHOUSE_<FIELD NAME IN UPPER CASE>``.
    """

    # Folder that holds the warehouse (Parquet tables, tracehouse.duckdb, build cache).
    warehouse: Path = Path("warehouse")
    # A dataset folder or an ``hf://datasets/<org>/<name>[@<revision>]`` URI.
    source: str = "data/demo"
    # The 40-hex dataset revision that implementation digests embed (KernelIndex §8). A Hub
    # source resolves it itself; for a local folder it is read from the folder's git HEAD when
    # there is one, else it must be given here (implementation and run digests stay empty).
    revision: str | None = None
    # Optional leaderboard baseline map ({definition: {"default": solution, <device>: solution}}),
    # the format of FlashInfer-Bench's web/apps/web/data/baselines.json.
    baselines_file: Path | None = None
    # Take every record through the exact per-line path instead of the columnar one (the
    # reference implementation, to check the fast path against; same tables, slower).
    exact: bool = False
    # Worker processes used to parse trace files.
    workers: int = field(default_factory=_default_workers)
    # Seconds a build waits for another build of the same warehouse to finish; 0 = refuse at once.
    lock_timeout_s: float = 600.0
    # Also download blob/ (safetensors) from the Hub; never parsed, only mirrored.
    include_blobs: bool = False
    # Where Hub downloads are cached; defaults to <warehouse>/cache/hub.
    hub_cache: Path | None = None

    @property
    def hub_cache_dir(self) -> Path:
        return self.hub_cache if self.hub_cache is not None else self.warehouse / "cache" / "hub"


def _coerce(name: str, annotation: Any, text: str) -> Any:
    kind = str(annotation)
    if "Path" in kind:
        return Path(text) if text else None
    if "bool" in kind:
        return text.strip().lower() in {"1", "true", "yes", "on"}
    if "int" in kind:
        return int(text)
    if "float" in kind:
        return float(text)
    return text or None if "None" in kind else text


def load_settings(environ: dict[str, str] | None = None, **overrides: Any) -> Settings:
    """Settings from flags (``overrides``; ``None`` means "not given"), then the environment."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for spec in fields(Settings):
        env_value = env.get(ENV_PREFIX + spec.name.upper())
        if env_value is not None:
            try:
                values[spec.name] = _coerce(spec.name, spec.type, env_value)
            except ValueError as error:
                raise ValueError(
                    f"{ENV_PREFIX}{spec.name.upper()}={env_value!r} is not a valid {spec.type}"
                ) from error
    for name, value in overrides.items():
        if value is not None:
            values[name] = value
    settings = replace(Settings(), **values)
    if isinstance(settings.warehouse, str):
        settings = replace(settings, warehouse=Path(settings.warehouse))
    return settings
