"""``gateway.lock.json``: each job's approved upstream tool definition, pinned with its digest.

``pin`` connects to each upstream, lists its tools (one page, at most 64, unique names) and
writes the lock; the gateway refuses to start without a lock that matches its config (same
jobs, same upstream tools, same upstream launch configuration). The agent-facing input
schema is the pinned one, closed (``additionalProperties: false``); a tool whose schema
names an identity field (``operationId``, ``businessKey``, ``actor``, ...) cannot be pinned.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Final

import msgspec

from pausemesh.core.canonical import canonical_sha256
from pausemesh.core.errors import GatewayError
from pausemesh.gateway.config import IDENTITY_FIELDS, GatewayConfig, Job
from pausemesh.gateway.upstream import UpstreamPool, definition_of

__all__ = (
    "LOCK_VERSION",
    "GatewayLock",
    "PinnedJob",
    "agent_schema",
    "check_lock",
    "default_lock_path",
    "load_lock",
    "pin",
    "write_lock",
)

LOCK_VERSION: Final = "pausemesh-gateway-lock/1"


class PinnedJob(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    upstream: str
    upstream_digest: str
    tool: str
    definition: dict[str, Any]
    digest: str


class GatewayLock(msgspec.Struct, frozen=True, kw_only=True):
    version: str
    domain: str
    jobs: dict[str, PinnedJob]


def default_lock_path(config: GatewayConfig) -> Path:
    """``gateway.lock.json`` beside the config file."""
    return Path(config.path).with_name("gateway.lock.json")


def agent_schema(definition: dict[str, Any]) -> dict[str, Any]:
    """The input schema the agent sees: the pinned one, closed."""
    schema = dict(definition.get("inputSchema") or {"type": "object"})
    schema["additionalProperties"] = False
    return schema


def _check_definition(job: Job, definition: dict[str, Any]) -> None:
    schema = definition.get("inputSchema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        msg = f"job {job.name}: the upstream tool's input schema is not an object schema"
        raise GatewayError(msg, code="GATEWAY_LOCK_MISMATCH", job=job.name)
    properties = schema.get("properties") or {}
    named = sorted(IDENTITY_FIELDS & set(properties))
    if named:
        msg = f"job {job.name}: the tool takes identity fields the caller must not choose: {named}"
        raise GatewayError(msg, code="GATEWAY_LOCK_MISMATCH", job=job.name)
    required = set(schema.get("required") or ())
    missing = [field for field in job.key_fields if field not in required]
    if missing:
        msg = f"job {job.name}: business_key names arguments the tool does not require: {missing}"
        raise GatewayError(msg, code="GATEWAY_LOCK_MISMATCH", job=job.name)


async def pin(config: GatewayConfig) -> GatewayLock:
    """Read each job's live tool definition from its upstream; the lock to write."""
    # An upstream that fails to start is quoted from its stderr (the operator pins by hand).
    pool = UpstreamPool(dict(config.upstreams), capture_stderr=True)
    try:
        jobs: dict[str, PinnedJob] = {}
        for job in config.jobs.values():
            session = await pool.get(job.upstream)
            definition = definition_of(await session.list_tool(job.tool))
            _check_definition(job, definition)
            jobs[job.name] = PinnedJob(
                upstream=job.upstream,
                upstream_digest=config.upstreams[job.upstream].digest,
                tool=job.tool,
                definition=definition,
                digest=canonical_sha256(definition),
            )
    finally:
        await pool.close()
    return GatewayLock(version=LOCK_VERSION, domain=config.domain, jobs=jobs)


def write_lock(lock: GatewayLock, path: Path) -> None:
    """Write atomically (temp file, fsync, rename): a crash leaves the old lock or the new."""
    data = msgspec.json.format(msgspec.json.encode(lock), indent=2) + b"\n"
    path.parent.mkdir(parents=True, exist_ok=True)  # a --lock in a directory not made yet
    fd, temp = tempfile.mkstemp(prefix=".gateway-lock-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        Path(temp).replace(path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def load_lock(path: Path) -> GatewayLock:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        msg = f"no gateway lock at {path}: run `pausemesh gateway pin --config ...` first"
        raise GatewayError(msg, code="GATEWAY_LOCK_MISSING") from None
    try:
        lock = msgspec.json.decode(raw, type=GatewayLock)
    except msgspec.DecodeError as error:
        msg = f"gateway lock {path} is unreadable: {error}"
        raise GatewayError(msg, code="GATEWAY_LOCK_MISMATCH") from None
    if lock.version != LOCK_VERSION:
        msg = f"gateway lock {path} has version {lock.version!r}, expected {LOCK_VERSION!r}"
        raise GatewayError(msg, code="GATEWAY_LOCK_MISMATCH")
    return lock


def check_lock(config: GatewayConfig, lock: GatewayLock) -> None:
    """Refuse a lock that does not pin exactly this config's jobs and upstreams."""
    problems: list[str] = []
    if lock.domain != config.domain:
        problems.append(f"domain is {lock.domain!r} in the lock, {config.domain!r} in the config")
    problems.extend(
        f"job {name} is pinned but not configured"
        for name in sorted(set(lock.jobs) - set(config.jobs))
    )
    for name, job in sorted(config.jobs.items()):
        pinned = lock.jobs.get(name)
        if pinned is None:
            problems.append(f"job {name} is not pinned")
            continue
        if (pinned.upstream, pinned.tool) != (job.upstream, job.tool):
            problems.append(f"job {name} is pinned to another upstream tool")
        if pinned.upstream_digest != config.upstreams[job.upstream].digest:
            problems.append(f"job {name}: upstream {job.upstream} was reconfigured since pinning")
        if (
            pinned.digest != canonical_sha256(pinned.definition)
            or pinned.definition.get("name") != job.tool
        ):
            problems.append(f"job {name}: the pinned definition does not match its digest")
        else:
            try:
                _check_definition(job, pinned.definition)
            except GatewayError as error:
                problems.append(error.message)
    if problems:
        msg = "gateway lock does not match the config (re-pin): " + "; ".join(problems)
        raise GatewayError(msg, code="GATEWAY_LOCK_MISMATCH", errors=problems)
