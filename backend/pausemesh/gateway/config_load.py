"""Reading ``gateway.toml``: the tables (upstreams, jobs, access) checked into a ``GatewayConfig``.

``load_gateway_config`` either returns the config or raises
``GatewayError(GATEWAY_CONFIG_INVALID)`` whose ``details["errors"]`` lists *every* problem.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pausemesh.core.errors import GatewayError
from pausemesh.gateway.config import (
    DEFAULT_ACCESS,
    PERMISSIONS,
    RESERVED_TOOLS,
    Access,
    GatewayConfig,
    Job,
    Upstream,
)
from pausemesh.gateway.config_fields import (
    MAX_TEXT,
    NAME,
    Problems,
    business_key,
    names,
    text,
    timeout,
    unique,
    unknown_keys,
)

__all__ = ("load_gateway_config", "parse_gateway_config")

_MAX_UPSTREAMS = 8
_MAX_JOBS = 32
_MAX_ARGS = 32


def _upstream(errors: Problems, raw: Any, where: str) -> Upstream | None:
    if not isinstance(raw, dict):
        errors.add(where, "must be a table")
        return None
    unknown_keys(errors, raw, {"id", "command", "args", "env", "cwd", "url"}, where)
    upstream_id = text(errors, raw, "id", where)
    if upstream_id is not None and not NAME.match(upstream_id):
        errors.add(f"{where}.id", "must match [A-Za-z][A-Za-z0-9_]{0,47}")
    command = text(errors, raw, "command", where, required=False)
    url = text(errors, raw, "url", where, required=False)
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
        if not isinstance(arg, str) or len(arg) > MAX_TEXT:
            errors.add(
                f"{where}.args[{index}]", f"must be a string of at most {MAX_TEXT} characters"
            )
    env = raw.get("env")
    if env is not None and (
        not isinstance(env, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        errors.add(f"{where}.env", "must be a table of strings")
        env = None
    cwd = text(errors, raw, "cwd", where, required=False)
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


def _job(errors: Problems, raw: Any, where: str, upstreams: Mapping[str, Upstream]) -> Job | None:
    if not isinstance(raw, dict):
        errors.add(where, "must be a table")
        return None
    allowed = {"name", "upstream", "tool", "business_key", "require_approval", "timeout_seconds"}
    unknown_keys(errors, raw, allowed, where)
    name = text(errors, raw, "name", where)
    if name is not None and not NAME.match(name):
        errors.add(f"{where}.name", "must match [A-Za-z][A-Za-z0-9_]{0,47}")
    if name in RESERVED_TOOLS:
        errors.add(f"{where}.name", f"{name} is reserved for inspection")
    upstream = text(errors, raw, "upstream", where)
    if upstream is not None and upstream not in upstreams:
        errors.add(f"{where}.upstream", f"names no upstream ({upstream!r})")
    tool = text(errors, raw, "tool", where)
    key = text(errors, raw, "business_key", where)
    if key is not None:
        business_key(errors, key, where)
    approval = raw.get("require_approval", False)
    if not isinstance(approval, bool):
        errors.add(f"{where}.require_approval", "must be true or false")
    seconds = timeout(errors, raw, where)
    if name is None or upstream is None or tool is None or key is None:
        return None
    return Job(
        name=name,
        upstream=upstream,
        tool=tool,
        business_key=key,
        require_approval=approval is True,
        timeout_seconds=seconds,
    )


def _access(errors: Problems, raw: Any) -> Access:
    if raw is None:
        return DEFAULT_ACCESS
    if not isinstance(raw, dict):
        errors.add("access", "must be a table")
        return DEFAULT_ACCESS
    unknown_keys(errors, raw, {"roles", "principals", "local"}, "access")
    roles: dict[str, frozenset[str]] = {}
    raw_roles = raw.get("roles", {})
    if not isinstance(raw_roles, dict):
        errors.add("access.roles", "must be a table of role = [permissions]")
        raw_roles = {}
    for role, permissions in raw_roles.items():
        held = names(errors, permissions, f"access.roles.{role}")
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
        principals[principal] = names(errors, held_roles, f"access.principals.{principal}")
    local = names(errors, raw.get("local", []), "access.local")
    for where, held_roles in [("access.local", local)] + [
        (f"access.principals.{p}", r) for p, r in principals.items()
    ]:
        for role in held_roles:
            if role not in roles:
                errors.add(where, f"names no role ({role!r})")
    return Access(roles=roles, principals=principals, local=local)


def parse_gateway_config(data: Mapping[str, Any], *, path: str = "<memory>") -> GatewayConfig:
    """Validate the decoded TOML ``data``; raise listing every problem at once."""
    errors = Problems()
    unknown_keys(errors, data, {"domain", "worker", "upstreams", "jobs", "access"}, "config")
    domain = text(errors, data, "domain", "config")
    worker = text(errors, data, "worker", "config", required=False) or "gateway"
    raw_upstreams = data.get("upstreams")
    if not isinstance(raw_upstreams, list) or not 1 <= len(raw_upstreams) <= _MAX_UPSTREAMS:
        errors.add("config.upstreams", f"must list 1 to {_MAX_UPSTREAMS} [[upstreams]]")
        raw_upstreams = raw_upstreams if isinstance(raw_upstreams, list) else []
    upstream_list = [
        u for i, raw in enumerate(raw_upstreams) if (u := _upstream(errors, raw, f"upstreams[{i}]"))
    ]
    unique(errors, upstream_list, "id", "upstreams")
    upstreams = {u.id: u for u in upstream_list}
    raw_jobs = data.get("jobs")
    if not isinstance(raw_jobs, list) or not 1 <= len(raw_jobs) <= _MAX_JOBS:
        errors.add("config.jobs", f"must list 1 to {_MAX_JOBS} [[jobs]]")
        raw_jobs = raw_jobs if isinstance(raw_jobs, list) else []
    jobs = [
        j for i, raw in enumerate(raw_jobs) if (j := _job(errors, raw, f"jobs[{i}]", upstreams))
    ]
    unique(errors, jobs, "name", "jobs")
    unique(errors, jobs, "business_key", "jobs")
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
