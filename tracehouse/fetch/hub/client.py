"""Talking to the Hub over HTTP: endpoint and token, errors, the retry policy, and a JSON GET that
retries transient failures.

Endpoint and token are chosen like the official client: explicit argument, else the
``HF_ENDPOINT`` environment variable (default ``https://huggingface.co``, trailing ``/`` removed)
and ``HF_TOKEN`` (falling back to the legacy ``HUGGING_FACE_HUB_TOKEN``) sent as
``Authorization: Bearer``, else the token file ``hf auth login`` writes (``$HF_TOKEN_PATH``, default
``$HF_HOME/token``, ``HF_HOME`` defaulting to ``~/.cache/huggingface``). The environment is read at
call time. The token is only ever sent in that header: no message, log or file names it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
import functools
import os
import random
import re
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import certifi
import httpx
import orjson

DEFAULT_ENDPOINT = "https://huggingface.co"
USER_AGENT = f"tracehouse/0.1 httpx/{httpx.__version__}"

_RATELIMIT = re.compile(r"r\s*=\s*(\d+)\s*;\s*t\s*=\s*(\d+)")
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")
#: Answers worth asking again (after a wait): timeouts, rate limits, server trouble.
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
RETRY_EXCEPTIONS: tuple[type[Exception], ...] = (
    httpx.TimeoutException,  # connect/read/write/pool timeouts
    httpx.NetworkError,  # ConnectError, ReadError (resets mid-body), WriteError, CloseError
    httpx.RemoteProtocolError,  # peer closed before the announced Content-Length arrived
)


def hub_endpoint(endpoint: str | None = None) -> str:
    """The Hub base URL: ``endpoint`` if given, else ``$HF_ENDPOINT``, else huggingface.co;
    anything but an http(s) URL with a host is refused (HubError naming where it came from)."""
    shown = "endpoint" if endpoint else "HF_ENDPOINT"
    value = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).strip()
    try:
        url = httpx.URL(value)
    except (httpx.InvalidURL, ValueError, TypeError):
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise HubError(f"{shown}={value!r}: must be an http:// or https:// URL with a host")
    return value.rstrip("/")


def hub_token_file() -> Path:
    """Where ``hf auth login`` stores the token: ``$HF_TOKEN_PATH``, else ``$HF_HOME/token``."""
    explicit = os.environ.get("HF_TOKEN_PATH")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME")
    if not home:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
        home = os.path.join(cache, "huggingface")
    return Path(home).expanduser() / "token"


def hub_token(token: str | bool | None = None) -> str | None:
    """The token to send: a string as given; ``False`` for none; None/True look where the Hub's
    own client looks.

    ``HF_TOKEN``, else ``HUGGING_FACE_HUB_TOKEN``, else the token file (``hub_token_file``);
    blank values count as unset.
    """
    if token is False:
        return None
    if isinstance(token, str):
        return token.strip() or None
    value = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or ""
    if value.strip():
        return value.strip()
    try:
        return hub_token_file().read_text().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


# huggingface_hub's own switch; the same values count as true (its constants._is_true).
OFFLINE_VARIABLE = "HF_HUB_OFFLINE"
TRUE_VALUES = frozenset({"1", "on", "yes", "true"})


def hub_offline(offline: bool = False) -> bool:
    """True when no request may be made: ``offline`` given, or ``HF_HUB_OFFLINE`` set true."""
    return offline or os.environ.get(OFFLINE_VARIABLE, "").strip().lower() in TRUE_VALUES


class HubError(RuntimeError):
    """The Hub could not be read (revision or listing); no snapshot was produced."""


class HubHTTPError(HubError):
    """The Hub answered a metadata request with a status that is not retried."""

    def __init__(self, message: str, *, status_code: int, error_code: str | None, url: str):
        super().__init__(message)
        self.status_code = status_code
        self.error_code = error_code  # the Hub's X-Error-Code header, e.g. "RevisionNotFound"
        self.url = url


class RepositoryNotFoundError(HubHTTPError):
    """404 for the repo (or 401/403 hiding a private or gated one)."""


class RevisionNotFoundError(HubHTTPError):
    """The repo exists but the branch, tag or commit does not."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. Every request (revision, listing page, file body) has its own budget.

    Delays grow as ``backoff_initial_s * 2**(n-1)`` up to ``backoff_max_s``, each multiplied by a
    random factor in ``[1 - jitter, 1 + jitter]``. A 429/503 with ``Retry-After`` (seconds or an
    HTTP-date) or a ``RateLimit: ...;r=0;t=N`` header waits that long instead, capped at
    ``max_retry_after_s``. A metadata request gives up after ``max_attempts`` attempts or when the
    next wait would end after its deadline, ``deadline_s``. A file body has ``deadline_s +
    missing / min_bytes_per_s`` per attempt (``missing``: the bytes it still lacks; a read
    waiting longer, a stall, or a body still arriving then, a trickle, ends the attempt, and the
    next one resumes with ``Range``), and gives up after ``max_attempts`` attempts or when the
    whole fetch's deadline (below) comes first. ``integrity_attempts`` bounds retries after a
    wrong ETag or hash. ``sleep`` is injectable so tests can record waits instead of sleeping.

    ``fetch_dataset`` bounds a whole fetch as well: the revision and the listing (every page)
    together within ``deadline_s``, and everything, bodies included, within
    ``fetch_deadline_s``, so neither a trickling answer nor an endless listing nor a listed size
    (which the server chooses) can stretch it.
    """

    max_attempts: int = 8
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    jitter: float = 0.25
    max_retry_after_s: float = 120.0
    deadline_s: float = 600.0
    min_bytes_per_s: float = 256 * 1024
    integrity_attempts: int = 2
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0
    fetch_deadline_s: float = 3600.0
    sleep: Callable[[float], None] = time.sleep

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.max_retry_after_s))
        base = min(self.backoff_max_s, self.backoff_initial_s * 2 ** (attempt - 1))
        return max(0.0, base * (1.0 + self.jitter * (2.0 * random.random() - 1.0)))

    def timeout(self) -> httpx.Timeout:
        return httpx.Timeout(
            connect=self.connect_timeout_s,
            read=self.read_timeout_s,
            write=self.read_timeout_s,
            pool=self.deadline_s,
        )

    def body_deadline_s(self, size: int) -> float:
        return self.deadline_s + size / self.min_bytes_per_s

    @classmethod
    def within(cls, seconds: float, fetch_seconds: float | None = None) -> RetryPolicy:
        """A policy whose metadata requests give up after ``seconds`` in total (connect
        attempts included), so an offline machine fails fast, and whose whole fetch gives up
        after ``fetch_seconds`` (default: the class default)."""
        return cls(
            deadline_s=seconds,
            connect_timeout_s=min(cls.connect_timeout_s, seconds),
            fetch_deadline_s=cls.fetch_deadline_s if fetch_seconds is None else fetch_seconds,
        )


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait, from Retry-After or an exhausted RateLimit header."""
    value = (headers.get("Retry-After") or "").strip()
    if value:
        if _DECIMAL.fullmatch(value):
            return float(value)
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            when = None
        if when is not None:
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.UTC)
            return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())
    match = _RATELIMIT.search(headers.get("RateLimit") or "")
    if match and int(match.group(1)) == 0:
        return float(match.group(2))
    return None


def same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    """Same scheme, host and port: a response or link that is still the Hub, not a CDN."""
    return (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)


LOGIN_HINT = "log in with `hf auth login` or set HF_TOKEN to a token that may read it"


def raise_http_error(response: httpx.Response, what: str) -> NoReturn:
    """Raise the HubHTTPError (or subclass) that a definitive, non-retried answer means."""
    code = response.status_code
    error_code = response.headers.get("X-Error-Code")
    message = f"{what}: HTTP {code} from {response.request.url}"
    if error_code:
        message += f" ({error_code})"
    if code == 401:  # no token, or one the Hub does not accept
        message += f"; {LOGIN_HINT}"
    kwargs: dict[str, Any] = {
        "status_code": code,
        "error_code": error_code,
        "url": str(response.request.url),
    }
    if error_code == "RevisionNotFound":
        raise RevisionNotFoundError(message, **kwargs)
    if error_code == "RepoNotFound" or code in (401, 403):
        raise RepositoryNotFoundError(message, **kwargs)
    raise HubHTTPError(message, **kwargs)


# A revision answer or a listing page is a few hundred KB; anything far larger is not one.
MAX_METADATA_BYTES = 32 << 20
#: Transport failures that asking again will not cure: a redirect to file:// or to an invalid
#: URL, a redirect loop. They end the request with one line naming it.
PERMANENT_EXCEPTIONS: tuple[type[Exception], ...] = (
    httpx.UnsupportedProtocol,
    httpx.TooManyRedirects,
    httpx.InvalidURL,
)


def metadata_deadline(policy: RetryPolicy) -> float:
    """The ``time.monotonic()`` by which a metadata request of ``policy`` must be answered."""
    return time.monotonic() + policy.deadline_s


def _read_within(response: httpx.Response, deadline: float, what: str) -> bytes | None:
    """The body of ``response`` as it arrives, or None when ``deadline`` passed first (a server
    trickling a byte at a time never trips the per-read timeout)."""
    chunks: list[bytes] = []
    received = 0
    for chunk in response.iter_bytes():
        received += len(chunk)
        if received > MAX_METADATA_BYTES:
            raise HubError(
                f"{what}: the answer from {response.request.url} is larger than "
                f"{MAX_METADATA_BYTES:,} bytes"
            )
        chunks.append(chunk)
        if time.monotonic() > deadline:
            return None
    return b"".join(chunks)


def get_json(
    client: httpx.Client,
    url: str,
    *,
    headers: Mapping[str, str],
    params: Mapping[str, str] | None,
    policy: RetryPolicy,
    what: str,
    deadline: float | None = None,
) -> tuple[httpx.Response, Any]:
    """GET a JSON document, retrying transient failures, all attempts and the whole body by
    ``deadline`` (a ``time.monotonic()``; default ``policy.deadline_s`` from now)."""
    started = time.monotonic()
    if deadline is None:
        deadline = started + policy.deadline_s
    attempt = 0
    while True:
        attempt += 1
        retry_after: float | None = None
        # No attempt may run past the deadline: an unanswered request ends with it.
        remaining = max(0.1, deadline - time.monotonic())
        timeout = httpx.Timeout(
            connect=min(policy.connect_timeout_s, remaining),
            read=min(policy.read_timeout_s, remaining),
            write=min(policy.read_timeout_s, remaining),
            pool=remaining,
        )
        try:
            with client.stream(
                "GET", url, headers=headers, params=params, follow_redirects=True, timeout=timeout
            ) as response:
                if response.status_code == 200:
                    content = _read_within(response, deadline, what)
                    if content is None:
                        error = "the answer was still arriving when the time ran out"
                    else:
                        try:
                            return response, orjson.loads(content)
                        except orjson.JSONDecodeError as exc:
                            error = f"invalid JSON ({exc})"
                elif response.status_code in RETRY_STATUS:
                    error = f"HTTP {response.status_code}"
                    retry_after = retry_after_s(response.headers)
                else:
                    raise_http_error(response, what)
        except PERMANENT_EXCEPTIONS as exc:
            raise HubError(f"{what}: {type(exc).__name__}: {exc}") from None
        except RETRY_EXCEPTIONS as exc:
            error = f"{type(exc).__name__}: {exc}"
        wait = policy.delay(attempt, retry_after)
        now = time.monotonic()
        if attempt >= policy.max_attempts or now + wait > deadline:
            raise HubError(
                f"{what}: giving up after {attempt} attempts in {now - started:.1f} s "
                f"(limit {policy.deadline_s:g} s); last error: {error}"
            )
        policy.sleep(wait)


def auth_headers(token: str | None) -> dict[str, str]:
    """The only place the token is put: the Authorization header of requests to the Hub."""
    return {"Authorization": f"Bearer {token}"} if token else {}


@functools.lru_cache(maxsize=4)
def _tls_context_for(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    if cafile:
        return ssl.create_default_context(cafile=cafile)
    if capath:
        return ssl.create_default_context(capath=capath)
    return ssl.create_default_context(cafile=certifi.where())


def _tls_context() -> ssl.SSLContext:
    """httpx's default verification (SSL_CERT_FILE, SSL_CERT_DIR, else certifi), built once.

    Loading the CA bundle dominates creating an httpx.Client; the sensor and tests create many.
    """
    return _tls_context_for(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


def make_client(policy: RetryPolicy, max_connections: int) -> httpx.Client:
    """A client for the Hub: TLS verified as httpx does, our User-Agent, the policy's timeouts."""
    return httpx.Client(
        verify=_tls_context(),
        follow_redirects=True,
        timeout=policy.timeout(),
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
        headers={"User-Agent": USER_AGENT},
    )


def given_or_own_client(
    client: httpx.Client | None, policy: RetryPolicy
) -> contextlib.AbstractContextManager[httpx.Client]:
    """``client`` as it is (the caller closes it), else a new one closed on leaving."""
    return contextlib.nullcontext(client) if client is not None else make_client(policy, 2)
