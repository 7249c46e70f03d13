"""The ``Host`` allow-list: which names this server answers to (DNS rebinding).

A page on ``http://rebind.attacker.example:8787`` whose name is made to resolve to 127.0.0.1
talks to a loopback server as its own origin: the Origin check sees the same origin, and the
browser shows it every answer. What gives it away is ``Host``, which still names the
attacker's domain. So every request whose ``Host`` is not a name the server answers to gets
421 ``MISDIRECTED_REQUEST`` before routing's work is done (the REST, AG-UI, MCP, A2A and demo
routes, the direct create/resume path too):

* ``PAUSEMESH_ALLOWED_HOSTS`` unset, loopback bind: ``127.0.0.1``, ``localhost``, ``[::1]`` and
  the bound address, with any port;
* ``PAUSEMESH_ALLOWED_HOSTS`` set: those names too (``*.example.com`` covers subdomains), on
  any bind; ``*`` turns the check off;
* unset on another bind: any ``Host`` (the CLI warns at start). Such a bind needs a principal
  resolver, and a rebinding page carries none of the user's credentials.

The probes (``/healthz``, ``/readyz``) answer any ``Host``: an orchestrator's probe names the
pod's address, and they tell nothing. A route opts out the same way with
``opt={ANY_HOST_OPT: True}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from pausemesh.core.errors import MisdirectedRequestError
from pausemesh.core.hosts import is_loopback_host
from pausemesh.settings import Settings
from pausemesh.web.problems import problem_for, send_encoded

__all__ = (
    "ANY_HOST_OPT",
    "LOOPBACK_NAMES",
    "HostGuard",
    "HostPolicy",
    "host_policy",
    "request_host",
)

LOOPBACK_NAMES: Final = frozenset({"127.0.0.1", "localhost", "[::1]"})
ANY_HOST_OPT: Final = "pausemesh_any_host"
"""A route handler ``opt`` key: this route answers any ``Host`` (the probes)."""

# Distinct Host values remembered with their answer; a client sending new names each time only
# refills the table (cleared when full), so it stays small.
_SEEN_MAX: Final = 1024


def _hostname(raw: bytes) -> str | None:
    """The name in a ``Host`` value (lower case, no port, no trailing dot), None if malformed."""
    text = raw.decode("latin-1").strip().lower()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        name, rest = text[: end + 1], text[end + 1 :]
    else:
        name, colon, port = text.partition(":")
        rest = colon + port
    if rest and not (rest[0] == ":" and rest[1:].isdigit()):
        return None
    name = name.removesuffix(".")
    return name or None


class HostPolicy:
    """The names one app answers to: exact names and ``*.`` suffixes, with a memo per value."""

    __slots__ = ("_seen", "names", "suffixes")

    def __init__(self, names: Iterable[str], suffixes: Iterable[str] = ()) -> None:
        self.names = frozenset(names)
        self.suffixes = tuple(suffixes)
        self._seen: dict[bytes, bool] = {}

    def allows_name(self, name: str) -> bool:
        return name in self.names or any(name.endswith(s) for s in self.suffixes)

    def admits(self, raw: bytes | None) -> bool:
        """Whether a request with this ``Host`` value (None: absent) may be answered."""
        if raw is None:
            return False
        known = self._seen.get(raw)
        if known is not None:
            return known
        name = _hostname(raw)
        answer = name is not None and self.allows_name(name)
        if len(self._seen) >= _SEEN_MAX:
            self._seen.clear()
        self._seen[raw] = answer
        return answer


def _bracketed(host: str) -> str:
    host = host.lower()
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def host_policy(settings: Settings) -> HostPolicy | None:
    """The policy ``settings`` ask for; None when any ``Host`` is answered."""
    configured = settings.allowed_host_names
    if "*" in configured:
        return None
    loopback_bind = is_loopback_host(settings.host)
    if not configured and not loopback_bind:
        return None
    # Loopback names are always answered: only this machine's own pages use them.
    names = set(LOOPBACK_NAMES)
    if loopback_bind:
        names.add(_bracketed(settings.host))
    suffixes: list[str] = []
    for entry in configured:
        if entry.startswith("*."):
            suffixes.append(entry[1:])
        else:
            names.add(entry.removesuffix("."))
    return HostPolicy(names, suffixes)


def request_host(scope: Mapping[str, Any]) -> bytes | None:
    """The request's ``Host`` value (the first), None when absent."""
    headers: Iterable[tuple[bytes, bytes]] = scope.get("headers", ())
    for name, value in headers:
        if name == b"host":
            return value
    return None


def _any_host(scope: Scope) -> bool:
    handler: Any = scope.get("route_handler")
    opt = getattr(handler, "opt", None)
    return bool(opt and opt.get(ANY_HOST_OPT))


class HostGuard:
    """ASGI middleware answering 421 to a request whose ``Host`` ``policy`` does not admit."""

    __slots__ = ("app", "policy")

    def __init__(self, app: ASGIApp, policy: HostPolicy | None = None) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        policy = self.policy
        if policy is None:
            await self.app(scope, receive, send)
            return
        host = None
        # Inline rather than ``request_host``: this runs on every request (Host comes first).
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
                break
        if policy.admits(host) or _any_host(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == ScopeType.WEBSOCKET:
            # Closing before accepting refuses the handshake (403).
            await send({"type": "websocket.close", "code": 1008, "reason": ""})
            return
        await send_encoded(send, problem_for(MisdirectedRequestError()))
