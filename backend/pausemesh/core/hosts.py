"""The one loopback rule: which host names and addresses never leave this machine.

Used where a host decides safety: ``pausemesh serve`` refuses a non-loopback bind without a
principal resolver, and the MCP URL policy allows ``http://`` only for loopback hosts.
"""

from __future__ import annotations

import ipaddress

__all__ = ("is_loopback_host",)


def is_loopback_host(host: str) -> bool:
    """``localhost``, ``*.localhost`` (RFC 6761), ``::1`` or an IPv4 address in 127.0.0.0/8.

    Case and one trailing dot do not matter; IPv6 literals may be bracketed.
    """
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        # Only ::1 itself: an IPv4-mapped 127.x address is not how anyone names loopback.
        return address == ipaddress.IPv6Address("::1")
    return address.is_loopback
