"""``gateway.toml``: the operator's jobs, upstreams and access, validated with every error named.

The file is trusted host input, never agent input. ``load_gateway_config`` reads it and either
returns a ``GatewayConfig`` or raises ``GatewayError(GATEWAY_CONFIG_INVALID)`` whose
``details["errors"]`` lists *every* problem found (``jobs[1].business_key: ...``), so an
operator fixes the file in one pass. Example::

    domain = "billing"
    worker = "gateway-1"

    [[upstreams]]
    id = "invoices"
    command = "/usr/bin/python3"          # absolute; or url = "http://127.0.0.1:9000/mcp"
    args = ["invoice_server.py"]

    [[jobs]]
    name = "create_invoice"               # the tool the agent sees
    upstream = "invoices"
    tool = "create_invoice"               # the upstream's tool
    business_key = "invoice:{order_id}"   # fixed, or a template over named arguments
    timeout_seconds = 10
    require_approval = false

    [access]
    local = ["operator"]                  # roles of a caller without a principal (stdio)
    [access.roles]
    operator = ["execute", "inspect"]
    auditor = ["inspect"]
    [access.principals]
    alice = ["operator"]
"""

from __future__ import annotations

import re
import string
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import GatewayError

__all__ = (
    "IDENTITY_FIELDS",
    "PERMISSIONS",
    "RESERVED_TOOLS",
    "Access",
    "GatewayConfig",
    "Job",
    "Permission",
    "Upstream",
    "load_gateway_config",
    "parse_gateway_config",
)

Permission = Literal["execute", "inspect"]
PERMISSIONS: Final = frozenset({"execute", "inspect"})

# The inspection tools every gateway serves; no job may take their names.
RESERVED_TOOLS: Final = frozenset({"continuity_status", "continuity_why"})

# Argument names that would let a caller choose identity; no agent-facing schema may hold one.
IDENTITY_FIELDS: Final = frozenset(
    {
        "operationId",
        "operation_id",
        "businessKey",
        "business_key",
        "actor",
        "session",
        "worker",
        "epoch",
        "path",
        "url",
        "report",
    }
)

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")
_MAX_UPSTREAMS = 8
_MAX_JOBS = 32
_MAX_ARGS = 32
_MAX_TEXT = 2048
_MAX_KEY = 200
_MIN_TIMEOUT = 0.1
_MAX_TIMEOUT = 300.0
DEFAULT_TIMEOUT_SECONDS: Final = 30.0


class Upstream(msgspec.Struct, frozen=True, kw_only=True):
    """One approved upstream MCP server: a stdio command or a streamable-HTTP URL."""

    id: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None

    @property
    def digest(self) -> str:
        """What the lock pins: the whole launch configuration."""
        return canonical_sha256(
            {
                "id": self.id,
                "command": self.command,
                "args": list(self.args),
                "env": dict(self.env) if self.env is not None else None,
                "cwd": self.cwd,
                "url": self.url,
            }
        )


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """One operator-approved job: one upstream tool, one business key (or key template)."""

    name: str
    upstream: str
    tool: str
    business_key: str
    require_approval: bool = False
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS

    @property
    def key_fields(self) -> tuple[str, ...]:
        """The argument names the business-key template uses (empty for a fixed key)."""
        return tuple(
            field for _, field, _, _ in string.Formatter().parse(self.business_key) if field
        )

    def business_key_for(self, arguments: Mapping[str, Any]) -> str:
        """The key for ``arguments`` (already validated against the job's closed schema)."""
        values = {}
        for field in self.key_fields:
            value = arguments.get(field)
            if isinstance(value, bool) or not isinstance(value, str | int):
                msg = f"business key argument {field!r} must be a string or an integer"
                raise GatewayError(msg, code="INVALID_ARGUMENTS", field=field)
            values[field] = value
        return self.business_key.format_map(values)


class Access(msgspec.Struct, frozen=True, kw_only=True):
    """Roles (sets of permissions) and who holds them; ``local`` is the caller without a
    principal (stdio, or HTTP on loopback without a resolver)."""

    roles: Mapping[str, frozenset[str]]
    principals: Mapping[str, tuple[str, ...]]
    local: tuple[str, ...]

    def permissions(self, principal: str | None) -> frozenset[str]:
        held = self.local if principal is None else self.principals.get(principal, ())
        return frozenset().union(*(self.roles.get(role, frozenset()) for role in held))


_DEFAULT_ACCESS = Access(
    roles={"operator": frozenset(PERMISSIONS)}, principals={}, local=("operator",)
)


class GatewayConfig(msgspec.Struct, frozen=True, kw_only=True):
    domain: str
    worker: str
    upstreams: Mapping[str, Upstream]
    jobs: Mapping[str, Job]
    access: Access
    path: str

    def job(self, name: str) -> Job | None:
        return self.jobs.get(name)


class _Errors:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, problem: str) -> None:
        self.items.append(f"{where}: {problem}")


def _text(
    errors: _Errors, table: Mapping[str, Any], key: str, where: str, *, required: bool = True
) -> str | None:
    value = table.get(key)
    if value is None:
        if required:
            errors.add(f"{where}.{key}", "is required")
        return None
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT:
        errors.add(
            f"{where}.{key}", f"must be a non-empty string of at most {_MAX_TEXT} characters"
        )
        return None
    if not value.isprintable():
        errors.add(f"{where}.{key}", "must not contain control characters")
        return None
    return value


def _unknown_keys(errors: _Errors, table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in sorted(set(table) - allowed):
        errors.add(f"{where}.{key}", "is not a known setting")


def _upstream(errors: _Errors, raw: Any, where: str) -> Upstream | None:
    if not isinstance(raw, dict):
        errors.add(where, "must be a table")
        return None
    _unknown_keys(errors, raw, {"id", "command", "args", "env", "cwd", "url"}, where)
    upstream_id = _text(errors, raw, "id", where)
    if upstream_id is not None and not _NAME.match(upstream_id):
        errors.add(f"{where}.id", "must match [A-Za-z][A-Za-z0-9_]{0,47}")
    command = _text(errors, raw, "command", where, required=False)
    url = _text(errors, raw, "url", where, required=False)
    if (command is None) == (url is None):
        errors.add(where, "needs exactly one of command (stdio) or url (streamable HTTP)")
    if command is not None and not Path(command).is_absolute():
        errors.add(f"{where}.command", "must be an absolute path")
    if url is not None and not url.startswith(("http://", "https://")):
        errors.add(f"{where}.url", "must be an http:// or https:// URL")
    args = raw.get("args", [])
    if url is not None and ("args" in raw or "env" in raw or "cwd" in raw):
        errors.add(where, "args, env and cwd apply to a command upstream only")
    if not isinstance(args, list) or len(args) > _MAX_ARGS:
        errors.add(f"{where}.args", f"must be a list of at most {_MAX_ARGS} strings")
        args = []
    for index, arg in enumerate(args):
        if not isinstance(arg, str) or len(arg) > _MAX_TEXT:
            errors.add(
                f"{where}.args[{index}]", f"must be a string of at most {_MAX_TEXT} characters"
            )
    env = raw.get("env")
    if env is not None and (
        not isinstance(env, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        errors.add(f"{where}.env", "must be a table of strings")
        env = None
    cwd = _text(errors, raw, "cwd", where, required=False)
    if cwd is not None and not Path(cwd).is_absolute():
        errors.add(f"{where}.cwd", "must be an absolute path")
    if upstream_id is None:
        return None
    return Upstream(
        id=upstream_id,
        command=command,
        args=tuple(a for a in args if isinstance(a, str)),
        env=env,
        cwd=cwd,
        url=url,
    )


def _business_key(errors: _Errors, key: str, where: str) -> None:
    if len(key) > _MAX_KEY:
        errors.add(f"{where}.business_key", f"must be at most {_MAX_KEY} characters")
    try:
        parts = list(string.Formatter().parse(key))
    except ValueError as error:
        errors.add(f"{where}.business_key", f"is not a valid template ({error})")
        return
    for _, field, spec, conversion in parts:
        if field is None:
            continue
        if not field.isidentifier():
            errors.add(f"{where}.business_key", f"placeholder {{{field}}} must name one argument")
        if spec or conversion:
            errors.add(
                f"{where}.business_key", f"placeholder {{{field}}} takes no format or conversion"
            )


def _timeout(errors: _Errors, raw: Mapping[str, Any], where: str) -> float:
    value = raw.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int | float):
        errors.add(f"{where}.timeout_seconds", "must be a number")
        return DEFAULT_TIMEOUT_SECONDS
    if not _MIN_TIMEOUT <= value <= _MAX_TIMEOUT:
        errors.add(f"{where}.timeout_seconds", f"must be between {_MIN_TIMEOUT} and {_MAX_TIMEOUT}")
    return float(value)


def _job(errors: _Errors, raw: Any, where: str, upstreams: Mapping[str, Upstream]) -> Job | None:
    if not isinstance(raw, dict):
        errors.add(where, "must be a table")
        return None
    allowed = {"name", "upstream", "tool", "business_key", "require_approval", "timeout_seconds"}
    _unknown_keys(errors, raw, allowed, where)
    name = _text(errors, raw, "name", where)
    if name is not None and not _NAME.match(name):
        errors.add(f"{where}.name", "must match [A-Za-z][A-Za-z0-9_]{0,47}")
    if name in RESERVED_TOOLS:
        errors.add(f"{where}.name", f"{name} is reserved for inspection")
    upstream = _text(errors, raw, "upstream", where)
    if upstream is not None and upstream not in upstreams:
        errors.add(f"{where}.upstream", f"names no upstream ({upstream!r})")
    tool = _text(errors, raw, "tool", where)
    key = _text(errors, raw, "business_key", where)
    if key is not None:
        _business_key(errors, key, where)
    approval = raw.get("require_approval", False)
    if not isinstance(approval, bool):
        errors.add(f"{where}.require_approval", "must be true or false")
    timeout = _timeout(errors, raw, where)
    if name is None or upstream is None or tool is None or key is None:
        return None
    return Job(
        name=name,
        upstream=upstream,
        tool=tool,
        business_key=key,
        require_approval=approval is True,
        timeout_seconds=timeout,
    )


def _names(errors: _Errors, raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        errors.add(where, "must be a list of strings")
        return ()
    return tuple(raw)


def _access(errors: _Errors, raw: Any) -> Access:
    if raw is None:
        return _DEFAULT_ACCESS
    if not isinstance(raw, dict):
        errors.add("access", "must be a table")
        return _DEFAULT_ACCESS
    _unknown_keys(errors, raw, {"roles", "principals", "local"}, "access")
    roles: dict[str, frozenset[str]] = {}
    raw_roles = raw.get("roles", {})
    if not isinstance(raw_roles, dict):
        errors.add("access.roles", "must be a table of role = [permissions]")
        raw_roles = {}
    for role, permissions in raw_roles.items():
        held = _names(errors, permissions, f"access.roles.{role}")
        for permission in sorted(set(held) - PERMISSIONS):
            errors.add(
                f"access.roles.{role}", f"unknown permission {permission!r} (execute, inspect)"
            )
        roles[role] = frozenset(held) & PERMISSIONS
    principals: dict[str, tuple[str, ...]] = {}
    raw_principals = raw.get("principals", {})
    if not isinstance(raw_principals, dict):
        errors.add("access.principals", "must be a table of principal = [roles]")
        raw_principals = {}
    for principal, held_roles in raw_principals.items():
        principals[principal] = _names(errors, held_roles, f"access.principals.{principal}")
    local = _names(errors, raw.get("local", []), "access.local")
    for where, held_roles in [("access.local", local)] + [
        (f"access.principals.{p}", r) for p, r in principals.items()
    ]:
        for role in held_roles:
            if role not in roles:
                errors.add(where, f"names no role ({role!r})")
    return Access(roles=roles, principals=principals, local=local)


def _unique(errors: _Errors, items: list[Any], attribute: str, where: str) -> None:
    seen: set[str] = set()
    for index, item in enumerate(items):
        value = getattr(item, attribute)
        if value in seen:
            errors.add(f"{where}[{index}].{attribute}", f"{value!r} is used twice")
        seen.add(value)


def parse_gateway_config(data: Mapping[str, Any], *, path: str = "<memory>") -> GatewayConfig:
    """Validate the decoded TOML ``data``; raise listing every problem at once."""
    errors = _Errors()
    _unknown_keys(errors, data, {"domain", "worker", "upstreams", "jobs", "access"}, "config")
    domain = _text(errors, data, "domain", "config")
    worker = _text(errors, data, "worker", "config", required=False) or "gateway"
    raw_upstreams = data.get("upstreams")
    if not isinstance(raw_upstreams, list) or not 1 <= len(raw_upstreams) <= _MAX_UPSTREAMS:
        errors.add("config.upstreams", f"must list 1 to {_MAX_UPSTREAMS} [[upstreams]]")
        raw_upstreams = raw_upstreams if isinstance(raw_upstreams, list) else []
    upstream_list = [
        u for i, raw in enumerate(raw_upstreams) if (u := _upstream(errors, raw, f"upstreams[{i}]"))
    ]
    _unique(errors, upstream_list, "id", "upstreams")
    upstreams = {u.id: u for u in upstream_list}
    raw_jobs = data.get("jobs")
    if not isinstance(raw_jobs, list) or not 1 <= len(raw_jobs) <= _MAX_JOBS:
        errors.add("config.jobs", f"must list 1 to {_MAX_JOBS} [[jobs]]")
        raw_jobs = raw_jobs if isinstance(raw_jobs, list) else []
    jobs = [
        j for i, raw in enumerate(raw_jobs) if (j := _job(errors, raw, f"jobs[{i}]", upstreams))
    ]
    _unique(errors, jobs, "name", "jobs")
    _unique(errors, jobs, "business_key", "jobs")
    access = _access(errors, data.get("access"))
    if errors.items or domain is None:
        msg = "gateway config is invalid: " + "; ".join(errors.items)
        raise GatewayError(msg, code="GATEWAY_CONFIG_INVALID", errors=errors.items, path=path)
    return GatewayConfig(
        domain=domain,
        worker=worker,
        upstreams=upstreams,
        jobs={job.name: job for job in jobs},
        access=access,
        path=path,
    )


def load_gateway_config(path: str | Path) -> GatewayConfig:
    """Read and validate ``path`` (TOML)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        msg = f"cannot read gateway config {path}: {error.strerror}"
        raise GatewayError(msg, code="GATEWAY_CONFIG_INVALID", errors=[msg]) from None
    except tomllib.TOMLDecodeError as error:
        msg = f"gateway config {path} is not valid TOML: {error}"
        raise GatewayError(msg, code="GATEWAY_CONFIG_INVALID", errors=[msg]) from None
    return parse_gateway_config(data, path=str(path))
