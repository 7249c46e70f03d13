"""``gateway.toml`` as the gateway holds it: upstreams, jobs and access (validated values).

The file is trusted host input, never agent input; ``config_load`` reads and validates it
(every error named). Example::

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

import string
from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec

from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import GatewayError

__all__ = (
    "DEFAULT_ACCESS",
    "DEFAULT_TIMEOUT_SECONDS",
    "IDENTITY_FIELDS",
    "MAX_TIMEOUT_SECONDS",
    "PERMISSIONS",
    "RESERVED_TOOLS",
    "Access",
    "GatewayConfig",
    "Job",
    "Permission",
    "Upstream",
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

DEFAULT_TIMEOUT_SECONDS: Final = 30.0
MAX_TIMEOUT_SECONDS: Final = 300.0


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

    def permissions(
        self, principal: str | None, roles: frozenset[str] = frozenset()
    ) -> frozenset[str]:
        """What the caller may do: the roles this config gives the principal, plus the roles
        its identity provider gave it (a JWT roles claim, an API key's ``--role``) that this
        config defines."""
        held = self.local if principal is None else self.principals.get(principal, ())
        granted = (self.roles.get(role, frozenset()) for role in (*held, *sorted(roles)))
        return frozenset().union(*granted)


DEFAULT_ACCESS: Final = Access(
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
