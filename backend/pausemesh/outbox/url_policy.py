"""Which webhook URLs the server may call: the address policy of every outbox destination
(A2A push notifications, whose URLs clients choose, and the event webhooks of
``PAUSEMESH_WEBHOOKS_FILE``).

A push URL is chosen by the client, and the server POSTs to it: without a policy any caller
could make the server reach its own network (cloud metadata, internal admin ports). By
default only public unicast addresses are allowed; ``PAUSEMESH_A2A_PUSH_ALLOW`` widens it with
the ranges ``loopback``, ``private`` (RFC 1918, unique-local, shared 100.64/10) and
``link-local``, and with host names allowed whatever they resolve to. Every address a host
resolves to must pass; 6to4 and Teredo addresses pass only when the IPv4 addresses they carry
do (``core.urls``). The URL's text must hold no whitespace or control characters.

The check runs when a configuration is set (``refusal`` says why, and the A2A router answers
invalid params with it) and again before each delivery (DNS may have changed since). A URL
whose text or form is wrong (``static_refusal``) can never be sent, whenever it was stored.
"""

from __future__ import annotations

import asyncio
import socket
import urllib.parse

from pausemesh.core.urls import ADDRESS_RANGES, address_ranges, has_unsafe_characters

__all__ = ("RANGES", "PushUrlPolicy")

RANGES = ADDRESS_RANGES


class PushUrlPolicy:
    """``allow``: the ``PAUSEMESH_A2A_PUSH_ALLOW`` list (ranges and host names); ``what``:
    how refusals name the URL."""

    __slots__ = ("_what", "hosts", "ranges")

    def __init__(
        self, allow: str | None = None, *, what: str = "The push notification URL"
    ) -> None:
        self._what = what
        items = {item.strip().lower() for item in (allow or "").split(",") if item.strip()}
        self.ranges = frozenset(items & RANGES)
        self.hosts = frozenset(items - RANGES)

    def static_refusal(self, url: str) -> str | None:
        """Why ``url`` can never be called, from its text alone (``None``: it may be)."""
        if has_unsafe_characters(url):
            return f"{self._what} must not contain whitespace or control characters"
        try:
            parsed = urllib.parse.urlsplit(url)
            _ = parsed.port  # raises on a malformed port
        except ValueError:
            return f"{self._what} is not a valid absolute URL"
        if parsed.scheme not in ("http", "https"):
            return f"{self._what} must be an absolute http or https URL"
        if not parsed.hostname:
            return f"{self._what} must name a host"
        if parsed.username is not None:
            return f"{self._what} must not carry user information"
        return None

    async def refusal(self, url: str) -> str | None:
        """Why the server may not POST to ``url`` now (``None``: it may)."""
        static = self.static_refusal(url)
        if static is not None:
            return static
        parsed = urllib.parse.urlsplit(url)
        host = (parsed.hostname or "").lower()
        if host in self.hosts:
            return None
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError:
            infos = []
        ranges = {kind for info in infos for kind in address_ranges(str(info[4][0]))}
        # One message for "does not resolve" and "resolves inside": which names resolve on
        # the server's network is not the client's business.
        if not ranges or not all(kind is None or kind in self.ranges for kind in ranges):
            return f"{self._what}'s host does not resolve to an address the push policy allows"
        return None

    async def __call__(self, url: str) -> bool:
        """Whether the server may POST to ``url`` now (an unresolvable host may not)."""
        return await self.refusal(url) is None
