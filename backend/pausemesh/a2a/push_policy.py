"""Which webhook URLs the server may call: the A2A push-notification allow policy.

A push URL is chosen by the client, and the server POSTs to it: without a policy any caller
could make the server reach its own network (cloud metadata, internal admin ports). By
default only public unicast addresses are allowed; ``PAUSEMESH_A2A_PUSH_ALLOW`` widens it with
the ranges ``loopback``, ``private`` (RFC 1918, unique-local, shared 100.64/10) and
``link-local``, and with host names allowed whatever they resolve to. Every address a host
resolves to must pass. The check runs when a configuration is set (refused with the A2A
invalid-params error) and again before each delivery (DNS may have changed since).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.parse

__all__ = ("RANGES", "PushUrlPolicy")

RANGES = frozenset({"loopback", "private", "link-local"})


def _category(address: str) -> str | None:
    """The range an address is in (``None`` for public unicast; ``"never"`` for the rest)."""
    try:
        ip = ipaddress.ip_address(address.split("%", maxsplit=1)[0])
    except ValueError:
        return "never"
    mapped = getattr(ip, "ipv4_mapped", None)
    if mapped is not None:
        ip = mapped
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast or ip.is_unspecified or ip.is_reserved:
        return "never"
    if ip.is_private or not ip.is_global:
        return "private"
    return None


class PushUrlPolicy:
    """``allow``: the ``PAUSEMESH_A2A_PUSH_ALLOW`` list (ranges and host names)."""

    __slots__ = ("hosts", "ranges")

    def __init__(self, allow: str | None = None) -> None:
        items = {item.strip().lower() for item in (allow or "").split(",") if item.strip()}
        self.ranges = frozenset(items & RANGES)
        self.hosts = frozenset(items - RANGES)

    async def __call__(self, url: str) -> bool:
        """Whether the server may POST to ``url`` now (an unresolvable host may not)."""
        try:
            parsed = urllib.parse.urlsplit(url)
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
        except ValueError:
            return False
        host = (parsed.hostname or "").lower()
        if parsed.scheme not in ("http", "https") or not host or parsed.username is not None:
            return False
        if host in self.hosts:
            return True
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError:
            return False
        categories = {_category(str(info[4][0])) for info in infos}
        return bool(categories) and all(c is None or c in self.ranges for c in categories)
