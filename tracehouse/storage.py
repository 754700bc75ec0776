"""Where a warehouse lives: a local folder, or object storage (``s3://bucket/prefix``) with an
Iceberg catalog that records which files make up each table.

Kept small and free of heavy imports: every command parses its settings through here. The
Iceberg side (pyiceberg, pyarrow) is in ``tracehouse.publish.iceberg``.

Credentials and the endpoint of an object store come only from the standard AWS environment
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``,
``AWS_ENDPOINT_URL``), which the S3 client reads itself; no flag takes them, so they never
appear in a command line, a log or a message.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# Object stores the warehouse may live on (pyarrow's S3 filesystem is pyiceberg's file IO).
OBJECT_STORE_SCHEMES = ("s3",)
# Catalog URIs: SQL catalogs (SQLAlchemy URLs) and the Iceberg REST protocol.
SQL_CATALOG_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg2")
REST_CATALOG_SCHEMES = ("http", "https")
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# The region the S3 client assumes when an endpoint is given without one (S3-compatible
# servers ignore it, and without a region the client would ask AWS where the bucket is).
DEFAULT_REGION = "us-east-1"


def uri_scheme(text: str) -> str | None:
    """``s3`` for ``s3://bucket``; None for a plain path."""
    match = _URI.match(text)
    return match.group(1).lower() if match else None


def object_store_problem(uri: str) -> str | None:
    """What is wrong with an object-store warehouse URI, or None."""
    scheme = uri_scheme(uri)
    if scheme not in OBJECT_STORE_SCHEMES:
        supported = ", ".join(f"{s}://bucket/prefix" for s in OBJECT_STORE_SCHEMES)
        return f"is not a folder or a supported object store ({supported})"
    parts = urlsplit(uri)
    if not parts.netloc:
        return "names no bucket (s3://bucket/prefix)"
    if parts.query or parts.fragment:
        return "may not carry a query or fragment"
    return None


def catalog_problem(uri: str | None) -> str | None:
    if uri is None:
        return None
    scheme = uri_scheme(uri)
    if scheme in SQL_CATALOG_SCHEMES or scheme in REST_CATALOG_SCHEMES:
        if scheme == "sqlite" and not uri.startswith("sqlite:///"):
            return "is not a SQLite URI with a path (sqlite:///path/catalog.db)"
        return None
    return (
        "is not a catalog URI: give sqlite:///path/catalog.db, postgresql://host/db or the "
        "http(s):// address of an Iceberg REST catalog"
    )


def redact(uri: str) -> str:
    """A URI as it may be printed: any password in it replaced by ``***``."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def default_staging(uri: str) -> Path:
    """The local folder a machine builds in for one object-store warehouse: under the user's
    cache, one folder per warehouse URI."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "tracehouse" / hashlib.sha256(uri.encode()).hexdigest()[:16]


def file_io_properties(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """pyiceberg file-IO properties from the AWS environment: the endpoint and region only.
    Keys and tokens stay in the environment, where the S3 client reads them itself."""
    env = os.environ if environ is None else environ
    properties: dict[str, str] = {}
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if endpoint:
        properties["s3.endpoint"] = endpoint
        region = region or DEFAULT_REGION
    if region:
        properties["s3.region"] = region
    return properties


def create_folder(folder: Path) -> Path | None:
    """Create ``folder`` and whatever parents it lacks; the topmost folder this created (what
    ``remove_created_folder`` removes again), or None when ``folder`` was already there."""
    top = None
    for candidate in (folder, *folder.parents):
        if candidate.exists() or candidate.is_symlink():
            break
        top = candidate
    try:
        folder.mkdir(parents=True)
    except FileExistsError:  # another process made it meanwhile: not ours to remove
        return None
    return top


def remove_created_folder(folder: Path, top: Path) -> None:
    """Remove ``folder`` with everything in it, then its parents up to ``top`` (as
    ``create_folder`` returned it) that are left empty: a command that made them and then
    failed leaves no trace of them."""
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    for parent in folder.parents:
        if not parent.is_relative_to(top):
            break
        try:
            parent.rmdir()  # only when empty: what another process put there meanwhile stays
        except OSError:
            break


def empty_folder(folder: Path) -> None:
    """Remove everything inside ``folder`` (a folder the user made empty for a build that was
    then interrupted: it is left as it was)."""
    import shutil

    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()
