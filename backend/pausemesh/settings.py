"""Settings: ``PAUSEMESH_*`` environment variables, a ``.env`` file and CLI overrides.

Precedence, highest first: CLI flags (``overrides``), the process environment, the
``.env`` file, the defaults. Everything is validated once, at start, and a bad value is
reported with the name of the setting (``SettingsError``).

Each field's bounds sit beside it as a msgspec ``Meta`` (``ge``/``le``, ``pattern``...);
``msgspec`` enforces them and the message is written from the same ``Meta``, so a bound is
stated once. The server key itself (reading, creating, rotating) is ``pausemesh.server_key``.
"""

from __future__ import annotations

import os
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import msgspec
from dotenv import dotenv_values
from msgspec import Meta

from pausemesh.core.errors import SettingsError
from pausemesh.core.hosts import is_loopback_host
from pausemesh.core.limits import RATE_LIMIT_PATTERN, RateLimit

__all__ = (
    "ENV_PREFIX",
    "LOG_LEVELS",
    "MIN_SECRET_KEY_BYTES",
    "Settings",
    "load_settings",
    "with_overrides",
)

ENV_PREFIX = "PAUSEMESH_"
LogLevel = Literal["critical", "error", "warning", "info", "debug"]
LogFormat = Literal["text", "json"]
# ``stores.sqlite.database.SqliteSync``, named here so that loading settings imports no store
# (aiosqlite); mypy checks the two agree where ``bootstrap`` passes one to the other.
SqliteSync = Literal["ack", "commit"]
LOG_LEVELS: tuple[str, ...] = typing.get_args(LogLevel)
MIN_SECRET_KEY_BYTES = 32

# ``Meta.extra`` keys this module reads (msgspec carries them; only this module interprets them).
_MIN_BYTES = "min_bytes"  # each key at least this many UTF-8 bytes (a key is bytes, not chars)
_SEPARATOR = "separator"  # the value is a list joined by this
_LOWER = "lower"  # compared case-insensitively: stored lower-cased

_KEY = Meta(extra={_MIN_BYTES: MIN_SECRET_KEY_BYTES})
_KEYS = Meta(extra={_MIN_BYTES: MIN_SECRET_KEY_BYTES, _SEPARATOR: ","})
_TEXT = Meta(min_length=1)
# scheme://host[:port], no path, no trailing slash (what a browser sends in Origin).
_ORIGIN = r"https?://[^/,\s]+"
_ORIGIN_LIST = rf"^\s*{_ORIGIN}\s*(,\s*{_ORIGIN}\s*)*$"
# A host name, an IPv4 address or a bracketed IPv6 one, without a port; ``*.`` before a name
# covers its subdomains, and ``*`` alone any Host.
_HOST = r"\*|(\*\.)?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?|\[[0-9A-Fa-f:.]+\]"
_HOST_LIST = rf"^\s*({_HOST})\s*(,\s*({_HOST})\s*)*$"


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    """Validated runtime settings (one instance per process, never mutated)."""

    host: Annotated[str, _TEXT] = "127.0.0.1"
    port: Annotated[int, Meta(ge=1, le=65_535)] = 8787
    # Worker processes serving one port (``pausemesh serve``/``demo``); they share the store.
    workers: Annotated[int, Meta(ge=1, le=64)] = 1
    # Two connections (writer, reader) each get their own ``:memory:`` database, so neither
    # it nor a URI is a usable path; tests that want no file use the in-memory store.
    database_path: Annotated[
        str,
        Meta(
            min_length=1,
            pattern=r"^(?!:memory:$)(?!file:)",
            description="a file path (not :memory: or a URI)",
        ),
    ] = "./data/pausemesh.db"
    # When a SQLite commit reaches the disk: ``commit`` keeps ``synchronous=FULL`` (the fsync
    # inside COMMIT: no reader sees a commit before the disk); ``ack`` fsyncs the write-ahead
    # log after the file's write turn is given back, before any write is acknowledged.
    sqlite_sync: SqliteSync = "commit"
    # A PostgreSQL DSN; when set it wins over ``database_path``.
    database_url: (
        Annotated[str, Meta(pattern=r"^postgres(ql)?://", description="a postgresql:// URL")] | None
    ) = None
    database_schema: Annotated[
        str,
        Meta(
            min_length=1,
            pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
            description="a plain SQL identifier",
            extra={_LOWER: True},
        ),
    ] = "pausemesh"
    secret_key: Annotated[str, _KEY] | None = None
    secret_key_file: str | None = None
    # Retired keys, comma-separated: tokens issued under them can still be re-derived.
    previous_secret_keys: Annotated[str, _KEYS] | None = None
    token_ttl_seconds: Annotated[int, Meta(ge=30, le=604_800)] = 900
    # The furthest ahead a pause's deadline may be set (REST expiresAt, MCP task ttl, an
    # agent's expires_in/expires_at): 90 days; beyond it INVALID_EXPIRY (or invalid params).
    max_pause_ttl_seconds: Annotated[int, Meta(ge=60, le=31_536_000)] = 7_776_000
    max_payload_bytes: Annotated[int, Meta(ge=1_024, le=10_485_760)] = 65_536
    # The most an AG-UI thread's stored record (messages, state, open questions) may hold: a run
    # whose input would grow it past this is refused (RUN_ERROR THREAD_TOO_LARGE). 8 MiB.
    max_thread_bytes: Annotated[int, Meta(ge=65_536, le=268_435_456)] = 8_388_608
    # How many of a thread's newest messages a reload carries (the snapshot, /connect); older
    # ones come a page at a time from GET /agui/threads/{id}/messages.
    snapshot_messages: Annotated[int, Meta(ge=1, le=10_000)] = 100
    # How many of a thread's newest messages a framework agent's new user turn reads as the
    # model's history (pydantic-ai): a run's cost, and the prompt, stay bounded on a thread of
    # weeks (no model's context holds it whole anyway); an answer to a pause reads none.
    agent_history_messages: Annotated[int, Meta(ge=1, le=100_000)] = 200
    # What an AG-UI input that arrives while a run holds its thread gets (docs/agui.md, "Double
    # texting"): reject (THREAD_BUSY), enqueue, interrupt or rollback; a request may choose
    # for itself in forwardedProps.pausemesh.doubleTexting.
    double_texting: Literal["reject", "enqueue", "interrupt", "rollback"] = "reject"
    # How many inputs one thread may have waiting (enqueue, interrupt, rollback).
    thread_queue_limit: Annotated[int, Meta(ge=1, le=1_000)] = 16
    log_level: LogLevel = "info"
    # ``json``: one JSON object per line (for a log collector); ``text`` for a terminal.
    log_format: LogFormat = "text"
    # One line per request on ``pausemesh.access`` (method, route, status, duration, bytes).
    access_log: bool = True
    # Serve ``GET /metrics`` (Prometheus text format) beside the probes.
    metrics: bool = False
    # When set, ``GET /metrics`` answers only ``Authorization: Bearer <this token>`` (else 401).
    metrics_token: (
        Annotated[
            str,
            Meta(
                pattern=r"^[A-Za-z0-9\-._~+/]{16,512}=*$",
                description="a bearer token: 16 to 512 of A-Z a-z 0-9 - . _ ~ + /",
            ),
        ]
        | None
    ) = None
    # Where the generated key file lives; defaults to the database file's directory.
    data_dir: str | None = None
    sweep_interval_seconds: Annotated[float, Meta(ge=0.05, le=3600.0)] = 1.0
    # Threads idle longer than this many days are erased in the background; None keeps all.
    retention_days: Annotated[int, Meta(ge=1, le=36_500)] | None = None
    retention_interval_seconds: Annotated[float, Meta(ge=1.0, le=86_400.0)] = 3600.0
    # "module:attribute" of an async principal resolver (see pausemesh.web.auth).
    principal_resolver: str | None = None
    insecure_no_auth: bool = False
    # "module:attr" (or "path.py:attr") of the agent ``pausemesh serve`` runs on /agui.
    agent: str | None = None
    # This replica's name, stable across its restarts (``pausemesh serve`` uses host:port): a
    # restart frees the run leases its dead predecessor held. Unique among live replicas.
    instance_name: (
        Annotated[
            str,
            Meta(
                pattern=r"^[A-Za-z0-9._:-]{1,200}$",
                description="letters, digits and . _ : - (at most 200)",
            ),
        ]
        | None
    ) = None
    # The longest an agent may run before its run ends with RUN_ERROR RUN_TIMEOUT.
    run_timeout_seconds: Annotated[float, Meta(ge=1.0, le=86_400.0)] = 600.0
    # Browser origins (comma-separated) allowed to call the API cross-site; none by default.
    cors_origins: (
        Annotated[
            str,
            Meta(
                pattern=_ORIGIN_LIST,
                description="comma-separated origins such as https://app.example.com",
            ),
        ]
        | None
    ) = None
    # Host names (comma-separated) the server answers to besides the loopback ones, e.g. the name
    # a proxy forwards. Unset: loopback names only on a loopback bind, any Host on another one.
    allowed_hosts: (
        Annotated[
            str,
            Meta(
                pattern=_HOST_LIST,
                description=(
                    "comma-separated host names without a port (api.example.com, *.example.com,"
                    " 10.0.0.5, [::1]) or *"
                ),
                extra={_LOWER: True},
            ),
        ]
        | None
    ) = None
    # Runs started per principal (per client address without a resolver), e.g. 120/minute:
    # POST /agui, continuation create and resume, MCP tools/call, A2A SendMessage. Off when
    # unset. Shared by replicas on PostgreSQL, per process on SQLite.
    rate_limit: (
        Annotated[
            str,
            Meta(
                pattern=RATE_LIMIT_PATTERN,
                description="a count per second, minute or hour, such as 120/minute",
            ),
        ]
        | None
    ) = None
    # Open SSE streams that end by themselves (AG-UI runs and connects, A2A streamed
    # messages) one principal may hold in this process.
    max_streams_per_principal: Annotated[int, Meta(ge=1, le=100_000)] = 32
    # Idle tails (AG-UI thread tails, MCP GET streams and tasks/result, A2A subscriptions) one
    # principal may hold in this process: a count apart, so tails never block a run.
    max_tails_per_principal: Annotated[int, Meta(ge=1, le=100_000)] = 32
    # A stream whose reader takes longer than this to accept one write is dropped (its run ends).
    send_timeout_seconds: Annotated[float, Meta(ge=0.1, le=3600.0)] = 30.0
    # Seconds between keep-alive comments on an idle stream (runs and live tails), so proxies
    # keep the connection and a dead client is noticed.
    keepalive_seconds: Annotated[float, Meta(ge=0.1, le=3600.0)] = 15.0
    # How long an idle keep-alive HTTP connection stays open (uvicorn's own default, 5 s).
    # Behind a proxy that keeps connections to the server, it must outlast the proxy's idle
    # timeout, or the proxy can send a request on a connection the server is closing (a 502).
    idle_connection_seconds: Annotated[int, Meta(ge=1, le=3600)] = 5
    # A connection whose request line and headers are not all in this long after they began
    # is closed (a client trickling header bytes holds no connection past it); bodies and
    # streamed responses are not timed.
    header_timeout_seconds: Annotated[float, Meta(ge=0.5, le=600.0)] = 10.0
    # On SIGTERM: how long in-flight runs may go on before they end with SERVER_SHUTTING_DOWN.
    shutdown_grace_seconds: Annotated[float, Meta(ge=0.0, le=3600.0)] = 10.0
    # A run lease's TTL: how long a thread stays busy after its process died unseen.
    lease_seconds: Annotated[float, Meta(ge=1.0, le=300.0)] = 5.0
    # Built-in bearer identity (pausemesh.credentials): JWT access tokens checked against a
    # JWKS, and/or API keys whose hashes live in a file. Both exclusive with principal_resolver.
    auth_jwks_url: (
        Annotated[
            str,
            Meta(
                pattern=r"^(https://|file://|http://)\S+$",
                description="an https:// or file:// URL (http:// only for a loopback host)",
            ),
        ]
        | None
    ) = None
    auth_issuer: Annotated[str, _TEXT] | None = None
    auth_audience: Annotated[str, _TEXT] | None = None
    auth_principal_claim: Annotated[str, _TEXT] = "sub"
    # A claim holding the caller's roles (a list or a space-separated string); a dotted path
    # (``realm_access.roles``) reaches into nested claims.
    auth_roles_claim: Annotated[str, _TEXT] | None = None
    # Clock skew tolerated on exp/nbf.
    auth_leeway_seconds: Annotated[int, Meta(ge=0, le=300)] = 30
    # An unknown kid refetches the JWKS at most this often (a flood of forged kids costs the
    # identity provider nothing); a cached JWKS older than auth_jwks_cache_seconds is refetched.
    auth_jwks_refresh_seconds: Annotated[float, Meta(ge=0.0, le=3600.0)] = 30.0
    auth_jwks_cache_seconds: Annotated[float, Meta(ge=1.0, le=86_400.0)] = 3600.0
    # The API key file ``pausemesh keys create`` writes (only key hashes in it).
    auth_api_keys_file: Annotated[str, _TEXT] | None = None
    # ``pausemesh demo`` only: the demo airline's booking file (default: airline.db in the data
    # directory; replicas share one) and its simulated network latency.
    demo_airline_path: Annotated[str, _TEXT] | None = None
    demo_airline_latency_seconds: Annotated[float, Meta(ge=0.0, le=30.0)] = 0.0
    # A2A push notifications: webhook ranges/hosts allowed besides public addresses
    # ("loopback", "private", "link-local" or host names, comma-separated), and delivery.
    a2a_push_allow: (
        Annotated[
            str,
            Meta(
                pattern=r"^[A-Za-z0-9.\-]+(\s*,\s*[A-Za-z0-9.\-]+)*$",
                description="comma-separated loopback, private, link-local or host names",
            ),
        ]
        | None
    ) = None
    a2a_push_max_attempts: Annotated[int, Meta(ge=1, le=100)] = 12
    a2a_push_backoff_seconds: Annotated[float, Meta(ge=0.05, le=3600.0)] = 1.0
    a2a_push_backoff_max_seconds: Annotated[float, Meta(ge=0.05, le=86_400.0)] = 300.0
    a2a_push_lease_seconds: Annotated[float, Meta(ge=1.0, le=3600.0)] = 30.0
    a2a_push_timeout_seconds: Annotated[float, Meta(ge=0.5, le=300.0)] = 10.0
    a2a_push_poll_seconds: Annotated[float, Meta(ge=0.05, le=3600.0)] = 1.0
    # Event webhooks (docs/approvals.md): a JSON file of subscriptions, each a URL, its events,
    # filters and signing secrets; delivered from the outbox with the a2a_push_* delivery
    # settings and under PAUSEMESH_A2A_PUSH_ALLOW.
    webhooks_file: Annotated[str, _TEXT] | None = None
    # One-click decision links in webhook bodies (docs/approvals.md), one per approver of a
    # pause with a choice; public_url: where people reach this server (default: host:port).
    decision_links: bool = False
    public_url: Annotated[str, Meta(pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$")] | None = None
    # ``pausemesh demo`` only: bookings priced above this need a manager's approval.
    demo_approval_threshold: Annotated[int, Meta(ge=0, le=1_000_000)] = 500
    # ``pausemesh demo`` only: a pydantic-ai model ("openai:gpt-4o-mini", "test") that drives
    # the demo agent instead of its rules (needs the pydantic-ai extra; demo/model_agent.py).
    example_model: Annotated[str, _TEXT] | None = None

    @classmethod
    def load(
        cls,
        *,
        environ: Mapping[str, str] | None = None,
        env_file: str | Path | None = ".env",
        overrides: Mapping[str, object] | None = None,
    ) -> Settings:
        """The settings of this process, validated (``load_settings``; hosts call this one)."""
        return load_settings(environ=environ, env_file=env_file, overrides=overrides)

    @property
    def uses_postgres(self) -> bool:
        return self.database_url is not None

    @property
    def uses_bearer_auth(self) -> bool:
        """A built-in bearer resolver is configured (JWT, API keys or both)."""
        return self.auth_jwks_url is not None or self.auth_api_keys_file is not None

    @property
    def rate_limit_rule(self) -> RateLimit | None:
        """``rate_limit`` parsed (None when off)."""
        return None if self.rate_limit is None else RateLimit.parse(self.rate_limit)

    @property
    def allowed_origins(self) -> tuple[str, ...]:
        """``cors_origins`` as a tuple of lower-cased origins (empty when unset)."""
        if self.cors_origins is None:
            return ()
        return tuple(o.strip().lower() for o in self.cors_origins.split(",") if o.strip())

    @property
    def allowed_host_names(self) -> tuple[str, ...]:
        """``allowed_hosts`` as a tuple of lower-cased entries (empty when unset)."""
        if self.allowed_hosts is None:
            return ()
        return tuple(h.strip().lower() for h in self.allowed_hosts.split(",") if h.strip())

    @property
    def resolved_data_dir(self) -> Path:
        if self.data_dir is not None:
            return Path(self.data_dir)
        return Path(self.database_path).parent

    def __repr__(self) -> str:
        # Settings end up in logs and tracebacks; the key and the DSN's password must not.
        shown = {
            f.name: "[REDACTED]"
            if f.name in {"secret_key", "previous_secret_keys", "database_url", "metrics_token"}
            and getattr(self, f.name)
            else getattr(self, f.name)
            for f in fields(self)
        }
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


# -- reading one field --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Field:
    """One setting as declared: its type (with ``Meta``), the base type and the ``Meta``."""

    env_name: str
    annotation: Any
    base: Any
    meta: Meta
    optional: bool


@cache
def _declared() -> dict[str, _Field]:
    hints = typing.get_type_hints(Settings, include_extras=True)
    declared: dict[str, _Field] = {}
    for name, annotation in hints.items():
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = (
            typing.get_origin(annotation) in {typing.Union, types.UnionType} and len(inner) == 1
        )
        base = inner[0] if optional else annotation
        meta = Meta()
        if typing.get_origin(base) is Annotated:
            base, *extras = typing.get_args(base)
            meta = next((m for m in extras if isinstance(m, Meta)), meta)
        declared[name] = _Field(ENV_PREFIX + name.upper(), annotation, base, meta, optional)
    return declared


def _rule(field: _Field) -> str:
    """What a valid value looks like, in words, from the field's type and ``Meta``."""
    meta = field.meta
    if field.base is int:
        return f"an integer between {meta.ge} and {meta.le}"
    if field.base is float:
        return f"a number between {meta.ge} and {meta.le}"
    if field.base is bool:
        return "a boolean (true/false)"
    if typing.get_origin(field.base) is Literal:
        return "one of: " + ", ".join(typing.get_args(field.base))
    return meta.description or "valid"


def _parse_bool(raw: object) -> object:
    if isinstance(raw, bool):
        return raw
    word = str(raw).strip().lower()
    if word in {"1", "true", "yes", "on"}:
        return True
    if word in {"0", "false", "no", "off", ""}:
        return False
    return raw


def _parse_int(raw: object) -> object:
    if isinstance(raw, (bool, int)):
        return raw  # msgspec refuses a bool where an int is due
    try:
        return int(str(raw).strip(), 10)
    except ValueError:
        return raw


def _parse_float(raw: object) -> object:
    try:
        return float(raw) if isinstance(raw, (int, float, str)) else raw
    except ValueError:
        return raw


# Unparseable text is passed on unchanged: msgspec then refuses it with the field's message.
_PARSERS: dict[object, Callable[[object], object]] = {
    bool: _parse_bool,
    int: _parse_int,
    float: _parse_float,
}


def _parse(field: _Field, raw: object) -> object:
    """Text (or a CLI value) into the field's base type; bounds are checked afterwards."""
    parser = _PARSERS.get(field.base)
    if parser is not None:
        return parser(raw)
    text = str(raw).strip()
    return text.lower() if typing.get_origin(field.base) is Literal else text


def _check_bytes(field: _Field, text: str) -> None:
    extra = field.meta.extra or {}
    minimum = extra.get(_MIN_BYTES)
    if minimum is None:
        return
    separator = extra.get(_SEPARATOR)
    keys = text.split(separator) if separator else [text]
    if any(len(key.strip().encode()) < minimum for key in keys):
        raise SettingsError(f"{field.env_name} must be at least {minimum} bytes per key")


def _coerce(name: str, raw: object) -> Any:
    field = _declared()[name]
    value = _parse(field, raw)
    if value == "" and field.base is str:
        if field.optional:
            return None
        raise SettingsError(f"{field.env_name} must not be empty")
    try:
        value = msgspec.convert(value, field.annotation)
    except msgspec.ValidationError:
        raise SettingsError(f"{field.env_name} must be {_rule(field)}") from None
    if isinstance(value, str):
        _check_bytes(field, value)
        if (field.meta.extra or {}).get(_LOWER):
            value = value.lower()
    return value


def load_settings(
    *,
    environ: Mapping[str, str] | None = None,
    env_file: str | Path | None = ".env",
    overrides: Mapping[str, object] | None = None,
    require_key: bool = True,
) -> Settings:
    """Merge defaults, ``env_file``, ``environ`` and ``overrides``; validate everything.

    ``overrides`` uses field names (``port``, ``database_path``...); ``None`` values are
    ignored, so argparse namespaces can be passed through as they are. ``require_key=False``
    is for commands that never issue or check a token (``inspect``, ``stats``): they read
    PostgreSQL without the replicas' shared key.
    """
    environ = os.environ if environ is None else environ
    known = {f.name for f in fields(Settings)}
    raw: dict[str, object] = {}
    sources: list[Mapping[str, str | None]] = []
    if env_file is not None and Path(env_file).is_file():
        sources.append(dotenv_values(env_file))
    sources.append(environ)
    for source in sources:
        for key, value in source.items():
            if not key.startswith(ENV_PREFIX) or value is None:
                continue
            field_name = key[len(ENV_PREFIX) :].lower()
            if field_name in known:
                raw[field_name] = value
    for name, override in (overrides or {}).items():
        if name not in known:
            raise SettingsError(f"unknown setting {name!r}")
        if override is not None:
            raw[name] = override
    settings = Settings(**{k: _coerce(k, v) for k, v in raw.items()})
    if settings.secret_key is not None and settings.secret_key_file is not None:
        raise SettingsError(
            "PAUSEMESH_SECRET_KEY and PAUSEMESH_SECRET_KEY_FILE are exclusive; set only one"
        )
    if (
        require_key
        and settings.uses_postgres
        and settings.secret_key is None
        and settings.secret_key_file is None
    ):
        raise SettingsError(
            "PAUSEMESH_SECRET_KEY (or PAUSEMESH_SECRET_KEY_FILE) is required with"
            " PAUSEMESH_DATABASE_URL: every replica must share one server key"
        )
    if settings.token_ttl_seconds > settings.max_pause_ttl_seconds:
        raise SettingsError(
            "PAUSEMESH_TOKEN_TTL_SECONDS must not exceed PAUSEMESH_MAX_PAUSE_TTL_SECONDS"
            " (the default deadline is a deadline too)"
        )
    _check_auth(settings)
    return settings


def _check_auth(settings: Settings) -> None:
    """The built-in resolvers' settings agree with each other (checked once, at start)."""
    if settings.uses_bearer_auth and settings.principal_resolver is not None:
        raise SettingsError(
            "PAUSEMESH_PRINCIPAL_RESOLVER and PAUSEMESH_AUTH_JWKS_URL/PAUSEMESH_AUTH_API_KEYS_FILE"
            " are exclusive: choose the custom resolver or the built-in bearer one"
        )
    url = settings.auth_jwks_url
    if url is None:
        return
    if settings.auth_issuer is None or settings.auth_audience is None:
        # Without both, a token the same identity provider issued for another app would pass.
        raise SettingsError(
            "PAUSEMESH_AUTH_ISSUER and PAUSEMESH_AUTH_AUDIENCE are required with"
            " PAUSEMESH_AUTH_JWKS_URL"
        )
    if url.startswith("http://"):
        host = urlsplit(url).hostname or ""
        if not is_loopback_host(host):
            raise SettingsError(
                "PAUSEMESH_AUTH_JWKS_URL must be https:// (http:// only for a loopback host)"
            )


def with_overrides(settings: Settings, **changes: Any) -> Settings:
    """A copy with ``changes`` applied (tests and embedding hosts)."""
    return replace(settings, **changes)
