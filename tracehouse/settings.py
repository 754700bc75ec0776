"""Typed settings, declared once: command-line flags first, then ``TRACEHOUSE_*`` environment
variables, then safe local defaults.

``Settings`` is the one declaration. Each field carries its meaning, its command-line flag and
its rule in ``metadata``; the ``tracehouse`` command builds its flags and help from it, and the
Dagster resource (``pipelines.defs.resources``) builds its config fields from it, so neither
declares a setting a second time. A value given by a flag (or set on the resource) wins; a flag
that is not given leaves the environment, then the default, in charge.

This module is imported on the fast path of every command, so it uses a plain dataclass instead
of a settings framework.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from tracehouse.storage import uri_scheme

ENV_PREFIX = "TRACEHOUSE_"
HUB_WEB_URL = re.compile(r"^https?://(?:www\.)?huggingface\.co/datasets/([^/@\s]+/[^/@\s]+)")

Check = Callable[[Any], "str | None"]  # a value -> the problem with it, or None


def _default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def _default_query_memory_mb() -> int:
    """A quarter of the machine's memory, at most 4 GiB: a runaway query stops long before the
    machine swaps (DuckDB's own default is 80 %)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        total = 4 << 30
    return max(256, min(4096, total // 4 >> 20))


def _at_least(minimum: float) -> Check:
    return lambda value: None if value >= minimum else f"must be >= {minimum:g}, got {value:g}"


def _between(minimum: int, maximum: int) -> Check:
    return lambda value: (
        None
        if minimum <= value <= maximum
        else f"must be between {minimum} and {maximum}, got {value}"
    )


# Parser processes, and DuckDB threads while finalizing: beyond this a machine gains nothing
# and DuckDB refuses thread counts in the thousands.
MAX_WORKERS = 64


# More earlier results than any warehouse holds would silence every verdict; the bound also
# keeps the value a DuckDB BIGINT.
MAX_REGRESSION_HISTORY = 1_000_000


def _history_length(value: int) -> str | None:
    if 1 <= value <= MAX_REGRESSION_HISTORY:
        return None
    return f"must be between 1 and {MAX_REGRESSION_HISTORY:,}, got {value:g}"


def _finite_at_least_zero(value: float) -> str | None:
    return None if 0 <= value < float("inf") else f"must be a finite number >= 0, got {value:g}"


def _share(value: float) -> str | None:
    return None if 0.0 <= value <= 1.0 else f"must be a share between 0 and 1, got {value:g}"


ICEBERG_NAMESPACE = re.compile(r"[a-z][a-z0-9_]{0,63}")


def _namespace(value: str) -> str | None:
    if ICEBERG_NAMESPACE.fullmatch(value):
        return None
    return f"must be a lower-case identifier (a-z, 0-9, _; 64 at most), got {value!r}"


def _folder_or_absent(value: Path) -> str | None:
    return "is a file, not a folder" if value.exists() and not value.is_dir() else None


def _file_or_absent(value: Path | None) -> str | None:
    if value is not None and value.is_dir():
        return "is a folder, not a file"
    return None


def _catalog(value: str | None) -> str | None:
    from tracehouse.storage import catalog_problem

    return catalog_problem(value)


def _revision(value: str | None) -> str | None:
    if value is None:
        return None
    from tracehouse.kernelindex import is_commit_sha  # the one rule; imported only when needed

    return None if is_commit_sha(value) else "is not a commit sha (40 lowercase hex characters)"


def _source(value: str | None) -> str | None:
    if value is None:
        return None
    web = HUB_WEB_URL.match(value)
    if web:
        return f"is a web page address; use hf://datasets/{web.group(1)} instead"
    if value.startswith(("http://", "https://")):
        return "is a URL; give a dataset folder or hf://datasets/<org>/<name>[@rev]"
    return None


# The source scope of FlashInfer-Bench's figures over every source together (fib_* views).
UNION_SCOPE = "(all sources)"


def _source_name(value: str | None) -> str | None:
    if value is None:
        return None
    if not value.strip() or value != value.strip():
        return "must be a non-empty name without leading or trailing spaces"
    if len(value) > 200 or not value.isprintable():
        return "must be at most 200 printable characters"
    if value == UNION_SCOPE:
        return (
            "is reserved: it names the union of every source (sql/flashinfer/fib_source_scopes.sql)"
        )
    return None


def parse_sources(value: str) -> dict[str, str]:
    """``name=folder-or-hf-uri`` pairs separated by ``;`` (the ``sources`` setting), by name."""
    found: dict[str, str] = {}
    for item in value.split(";"):
        if not item.strip():
            continue
        name, equals, uri = item.partition("=")
        name, uri = name.strip(), uri.strip()
        problem = _source_name(name) if name else "a name is empty"
        if not equals or not uri:
            raise ValueError(f"{item.strip()!r} is not name=folder-or-hf-uri")
        if problem is not None:
            raise ValueError(f"source name {name!r} {problem}")
        if name in found:
            raise ValueError(f"source name {name!r} is given twice")
        found[name] = uri
    return found


def _sources(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        parse_sources(value)
    except ValueError as error:
        return f"is not a list of name=folder-or-hf-uri pairs separated by ';': {error}"
    return None


def setting(
    default: Any,
    doc: str,
    kind: type,
    *,
    flag: str | None = None,
    check: Check | None = None,
    default_factory: Callable[[], Any] | None = None,
) -> Any:
    """A settings field with its meaning, type, command-line flag and rule."""
    metadata = {"doc": doc, "kind": kind, "flag": flag, "check": check}
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Settings:
    """Everything a build or a query needs to know.

    Each field maps to the environment variable ``TRACEHOUSE_<FIELD NAME IN UPPER CASE>``.
    """

    warehouse: Path = setting(
        Path("warehouse"),
        "Folder that holds the warehouse (Parquet tables, tracehouse.duckdb, build cache), or "
        "s3://bucket/prefix for Iceberg tables on object storage (needs a catalog; endpoint and "
        "credentials from AWS_* only).",
        Path,
        flag="--warehouse",
        check=_folder_or_absent,
    )
    catalog: str | None = setting(
        None,
        "Iceberg catalog the tables are published to: sqlite:///path/catalog.db, "
        "postgresql://host/db or an Iceberg REST endpoint http(s)://...; required for an "
        "object-store warehouse, optional for a folder (tables then also go to <folder>/iceberg).",
        str,
        flag="--catalog",
        check=_catalog,
    )
    namespace: str = setting(
        "tracehouse",
        "Iceberg namespace of this warehouse's tables in the catalog: one catalog serves several "
        "warehouses, each in a namespace of its own.",
        str,
        flag="--namespace",
        check=_namespace,
    )
    staging: Path | None = setting(
        None,
        "Local folder for build work and the read replica of an object-store warehouse "
        "(default ~/.cache/tracehouse/<digest of the warehouse URI>).",
        Path,
        check=lambda value: _folder_or_absent(value) if value is not None else None,
    )
    as_of: str | None = setting(
        None,
        "Read the warehouse as it was published for this dataset revision or snapshot id "
        "(Iceberg time travel; warehouses with a catalog only).",
        str,
        flag="--as-of",
    )
    # Not a setting of its own: the object-store URI when --warehouse / TRACEHOUSE_WAREHOUSE
    # names one; `warehouse` is then the local staging folder the build works in.
    object_store: str | None = setting(None, "The object-store URI of the warehouse.", str)
    source: str | None = setting(
        None,
        "Dataset folder or hf://datasets/<org>/<name>[@<branch|tag|sha>] to build from; there "
        "is no default (`tracehouse demo` builds the demo data).",
        str,
        flag="--source",
        check=_source,
    )
    source_name: str | None = setting(
        None,
        "Name of the source in the warehouse (`tracehouse sources`); a build replaces only the "
        "rows of its source. Default: the folder's name, or <org>/<name> of an hf:// source.",
        str,
        flag="--source-name",
        check=_source_name,
    )
    revision_of: str | None = setting(
        None,
        "Record this build's folder or hf:// dataset as the next revision of the warehouse's "
        "source of this name (`tracehouse sources`): one folder per benchmark run, one source "
        "with its history. Refused when no source has the name, or when the new folder shares "
        "none of its definitions.",
        str,
        flag="--revision-of",
        check=_source_name,
    )
    sources: str | None = setting(
        None,
        "Dagster only: several sources, one partition of the tables each, as "
        "name=folder-or-hf-uri pairs separated by ';' (without it, the one --source).",
        str,
        check=_sources,
    )
    revision: str | None = setting(
        None,
        "40-hex dataset revision that implementation and run digests embed (KernelIndex §8); a "
        "Hub source or a git clone knows its own.",
        str,
        flag="--revision",
        check=_revision,
    )
    baselines_file: Path | None = setting(
        None,
        "Leaderboard baseline map JSON, {definition: {default: solution, <device>: solution}} "
        "(FlashInfer-Bench's web/apps/web/data/baselines.json).",
        Path,
        flag="--baselines",
        check=_file_or_absent,
    )
    workers: int = setting(
        None,
        f"Worker processes that parse trace files, 1 to {MAX_WORKERS} (default: cores, at most 8).",
        int,
        flag="--workers",
        check=_between(1, MAX_WORKERS),
        default_factory=_default_workers,
    )
    lock_timeout_s: float = setting(
        600.0,
        "Seconds a build waits for another build of the same warehouse; 0 refuses at once.",
        float,
        flag="--wait",
        check=_at_least(0),
    )
    include_blobs: bool = setting(
        False,
        "Also mirror blob/ (safetensors) from the Hub; never parsed.",
        bool,
        flag="--include-blobs",
    )
    hub_cache: Path | None = setting(
        None,
        "Where Hub downloads are cached: one dataset's folder (default: its folder in the "
        "huggingface_hub cache when HF_HUB_CACHE or HF_HOME is set, else <warehouse>/cache/hub).",
        Path,
        check=lambda value: _folder_or_absent(value) if value is not None else None,
    )
    hub_offline: bool = setting(
        False,
        "Build an hf:// source from the Hub cache alone, without a single request (as "
        "HF_HUB_OFFLINE=1 does): a commit sha, or a branch or tag an online build resolved "
        "before; what the cache lacks is an error.",
        bool,
        flag="--offline",
    )
    hub_timeout_s: float = setting(
        # Below the 15 s an offline build may take in all, so process start-up and imports on a
        # loaded machine still fit.
        10.0,
        "Seconds the Hub may take to resolve the revision and list its files (every page, "
        "retries included) before the build gives up (an offline machine fails within this time).",
        float,
        check=_at_least(0.1),
    )
    hub_fetch_timeout_s: float = setting(
        # An hour moves a few GB at ordinary speeds; the FlashInfer-Trace dataset is far smaller.
        3600.0,
        "Seconds a whole Hub fetch may take, every file body included, whatever sizes the "
        "listing announces; a file still arriving then fails the build.",
        float,
        check=_at_least(0.1),
    )
    query_memory_mb: int = setting(
        None,
        "Memory a read command (query, report, export, leaderboard, changes) may use, in MiB, "
        "before DuckDB spills to <warehouse>/cache/ or stops it (default: a quarter of the "
        "machine's memory, at most 4096).",
        int,
        check=_at_least(64),
        default_factory=_default_query_memory_mb,
    )
    report_memory_mb: int = setting(
        # The report is a batch job that reads every view once: spilling costs it a few
        # seconds, holding a quarter of the machine (query_memory_mb) cost 4 GB at 1M runs.
        512,
        "Memory `tracehouse report` (and the Dagster report asset) may use for its queries, in "
        "MiB, before DuckDB spills to <warehouse>/cache/ or stops it.",
        int,
        check=_at_least(64),
    )
    build_memory_mb: int = setting(
        # 360 MB, the limit measured best (assemble.duckdb_files.BuildMemory says how).
        343,
        "Memory a build's assembly (ranks, history, invariants, the published DuckDB file) may "
        "use, in MiB, before DuckDB spills to <warehouse>/cache/ or stops the build with one "
        "line (nothing published). 1,000,000 trace lines build within the default; under ~64 "
        "not even a small source does.",
        int,
        check=_at_least(16),
    )
    query_spill_mb: int = setting(
        8192,
        "Disk a read command (query, report, export, leaderboard, changes) may spill to, in "
        "MiB, under <warehouse>/cache/query_tmp; at most half the disk space free there when "
        "it starts. Past it the command stops with one line.",
        int,
        check=_at_least(0),
    )
    query_timeout_s: float = setting(
        300.0,
        "Seconds a `tracehouse query` statement may run (all its rows written) before it is "
        "stopped with one line.",
        float,
        check=_at_least(0.1),
    )
    keep_generations: int = setting(
        3,
        "Completed generations kept on disk, the current one included (for `tracehouse rollback`).",
        int,
        check=_at_least(1),
    )
    max_shrink_share: float = setting(
        0.5,
        "Largest share of a table's rows a build may drop against the current generation "
        "before it refuses to publish (rejects excepted).",
        float,
        check=_share,
    )
    allow_shrink: bool = setting(
        False,
        "Publish even when a table shrinks by more than max_shrink_share, or the source yields "
        "no run (every record rejected).",
        bool,
        flag="--allow-shrink",
    )
    # Regression flags (sql/marts/regressions.sql): a result is a regression when at least
    # regression_min_history earlier results of the same solution on the same comparison key
    # exist (2, as Conbench's lookback z-score needs, the fewest that give a standard deviation),
    # it is at least regression_min_change slower than their mean (0.10 = 10 %; re-runs of the
    # golden corpus differ from their earlier mean by under 3 % for 90 % of them, under 10 % for
    # 99 %), and its z-score against them is at least regression_z_threshold.
    regression_min_history: int = setting(
        2,
        "Earlier results of the same solution and comparison key needed to judge a result.",
        int,
        flag="--min-history",
        check=_history_length,
    )
    regression_min_change: float = setting(
        0.10,
        "Relative slowdown against their mean that counts as a regression (0.10 = 10 %).",
        float,
        flag="--min-change",
        check=_finite_at_least_zero,
    )
    regression_z_threshold: float = setting(
        5.0,
        "Z-score against their distribution (standard deviations above their mean) that counts "
        "as a regression.",
        float,
        flag="--z-threshold",
        check=_finite_at_least_zero,
    )

    @property
    def hub_cache_dir(self) -> Path:
        """The cache of tracehouse's own choosing (hub_cache, else in the warehouse)."""
        return self.hub_cache if self.hub_cache is not None else self.warehouse / "cache" / "hub"

    def hub_cache_for(self, repo_id: str) -> Path:
        """Where the Hub dataset ``repo_id`` is cached: hub_cache when set, else the user's
        huggingface_hub cache when HF_HUB_CACHE or HF_HOME names one (its standard folder
        ``$HF_HUB_CACHE/datasets--<org>--<name>``, HF_HUB_CACHE defaulting to $HF_HOME/hub, so
        what huggingface_hub downloaded is not downloaded again), else hub_cache_dir."""
        if self.hub_cache is not None:
            return self.hub_cache
        hub_cache = os.environ.get("HF_HUB_CACHE", "").strip()
        home = os.environ.get("HF_HOME", "").strip()
        if not hub_cache and home:
            hub_cache = os.path.join(home, "hub")
        if not hub_cache:
            return self.hub_cache_dir
        return Path(hub_cache).expanduser() / ("datasets--" + repo_id.replace("/", "--"))


# Set from the warehouse setting, never by a flag, field or variable of its own.
DERIVED = frozenset({"object_store"})
SETTINGS: tuple[Field[Any], ...] = tuple(f for f in fields(Settings) if f.name not in DERIVED)


class SettingsError(ValueError):
    """A setting with a value it cannot take; the message names where the value came from."""


def describe(spec: Field[Any]) -> str:
    """The help text of one setting: its meaning and its environment variable."""
    return f"{spec.metadata['doc']} (env {env_name(spec.name)})"


def env_name(name: str) -> str:
    return ENV_PREFIX + name.upper()


def flag_of(name: str) -> str | None:
    return next(spec.metadata["flag"] for spec in SETTINGS if spec.name == name)


def _parse(kind: type, text: str) -> Any:
    if kind is Path:
        return Path(text)
    if kind is bool:
        lowered = text.strip().lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off", ""}:
            return False
        raise ValueError(f"not a boolean: {text!r}")
    if kind is int:
        return int(text)
    if kind is float:
        return float(text)
    return text


def _kind_name(kind: type) -> str:
    return {Path: "path", bool: "boolean", int: "integer", float: "number"}.get(kind, "text")


def _given(overrides: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    known = {spec.name for spec in SETTINGS}
    for name, value in overrides.items():
        if name not in known:
            raise TypeError(f"unknown setting {name!r}")
        if value is not None:
            yield name, value


def _place_object_store(values: dict[str, Any], where: dict[str, str]) -> None:
    """An object-store warehouse needs a catalog, and builds in a local staging folder."""
    from tracehouse.storage import default_staging, object_store_problem

    uri = values.get("object_store")
    if uri is None:
        return
    problem = object_store_problem(uri)
    if problem is not None:
        raise SettingsError(f"{where['object_store']}: {problem}")
    if values.get("catalog") is None:
        raise SettingsError(
            f"{where['object_store']}: an object-store warehouse needs a catalog; pass --catalog "
            "sqlite:///path/catalog.db | postgresql://host/db | http(s)://<Iceberg REST endpoint> "
            "or set TRACEHOUSE_CATALOG"
        )
    values["warehouse"] = values.get("staging") or default_staging(uri)


def load_settings(
    environ: Mapping[str, str] | None = None, *, origin: str = "flag", **overrides: Any
) -> Settings:
    """Settings from ``overrides`` (``None`` means "not given"), then the environment.

    ``origin`` says how a problem with an override is named: ``"flag"`` by its command-line
    flag (``--workers``), ``"field"`` by its name (the Dagster resource's config field).
    Every value is checked here, once; a bad one raises ``SettingsError``.
    """
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    where: dict[str, str] = {}
    given = {name for name, _ in _given(overrides)}
    for spec in SETTINGS:
        text = env.get(env_name(spec.name))
        empty = text is not None and not text.strip()
        if empty and spec.metadata["kind"] is Path and spec.name not in given:
            # As for a flag: Path("") is the current folder, and a default would be a guess
            # (`TRACEHOUSE_WAREHOUSE=$UNSET_VARIABLE` building ./warehouse).
            raise SettingsError(
                f"{env_name(spec.name)}={text!r}: must not be empty (unset it for the default)"
            )
        if text is None or (text.strip() == "" and spec.metadata["kind"] is not bool):
            continue
        if spec.name == "warehouse" and uri_scheme(text.strip()) is not None:
            values["object_store"] = text.strip()
            where["object_store"] = where["warehouse"] = f"{env_name(spec.name)}={text}"
            continue
        try:
            values[spec.name] = _parse(spec.metadata["kind"], text.strip())
        except ValueError:
            raise SettingsError(
                f"{env_name(spec.name)}={text!r} is not a valid {_kind_name(spec.metadata['kind'])}"
            ) from None
        where[spec.name] = f"{env_name(spec.name)}={text}"
    by_name = {spec.name: spec for spec in SETTINGS}
    for name, value in _given(overrides):
        kind = by_name[name].metadata["kind"]
        label = (by_name[name].metadata["flag"] if origin == "flag" else None) or name
        if name == "warehouse":
            values.pop("object_store", None)  # a flag wins over the environment, either way
            if isinstance(value, str) and uri_scheme(value) is not None:
                values["object_store"] = value
                where["object_store"] = where["warehouse"] = f"{label} {value}"
                continue
        if kind is Path and isinstance(value, str):
            if not value.strip():  # Path("") is the current folder: never a guess of ours
                raise SettingsError(f"{label} {value!r}: must not be empty")
            value = Path(value)
        values[name] = value
        where[name] = f"{label} {value}"
    _place_object_store(values, where)
    settings = replace(Settings(), **values)
    for spec in SETTINGS:
        check = spec.metadata["check"]
        problem = check(getattr(settings, spec.name)) if check is not None else None
        if problem is not None:
            raise SettingsError(f"{where.get(spec.name, spec.name)}: {problem}")
    return settings
