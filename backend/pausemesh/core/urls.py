"""The rules for URLs a client gives the server: what their text may hold, where they may point.

One place for both, so every check that takes a URL from a request applies the same ones: the
A2A push policy (``a2a.push_policy``: the server POSTs to the URL) and the MCP sign-in link
checks (``mcp.url_policy``: a browser opens it, so only the text rule applies there).

* **Text.** No whitespace and no control characters anywhere (C0, DEL, C1, Unicode spaces).
  URL parsers drop or trim some of them (``urllib.parse.urlsplit`` removes CR, LF and TAB,
  browsers do the same and trim spaces) while HTTP clients refuse them later: the URL that was
  checked would not be the URL that is used. Refused as written, never cleaned up.
* **Addresses.** ``address_ranges`` names the range of an address a host resolves to. An IPv6
  address that carries an IPv4 address (IPv4-mapped ``::ffff:0:0/96``, 6to4 ``2002::/16``,
  Teredo ``2001::/32``) is judged by the IPv4 address inside it, since that is the network a
  packet to it ends up on: ``2002:7f00:1::1`` is loopback, ``2002:a9fe:a9fe::1`` link-local
  (cloud metadata). A Teredo address carries two (its server and its client), and both count.
"""

from __future__ import annotations

import ipaddress
import unicodedata

__all__ = ("ADDRESS_RANGES", "NEVER", "address_ranges", "has_unsafe_characters")

# The ranges an operator may allow besides public unicast; NEVER is never allowed.
ADDRESS_RANGES = frozenset({"loopback", "private", "link-local"})
NEVER = "never"


def has_unsafe_characters(url: str) -> bool:
    """Whether ``url`` holds whitespace or a control character (C0, DEL, C1)."""
    return any(char.isspace() or unicodedata.category(char) == "Cc" for char in url)


def _range(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast or ip.is_unspecified or ip.is_reserved:
        return NEVER
    if ip.is_private or not ip.is_global:
        return "private"
    return None


def _embedded(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    if ip.ipv4_mapped is not None:
        return (ip.ipv4_mapped,)
    if ip.sixtofour is not None:
        return (ip.sixtofour,)
    if ip.teredo is not None:
        return ip.teredo
    return ()


def address_ranges(address: str) -> frozenset[str | None]:
    """The ranges of one address: ``None`` for public unicast, ``"loopback"``, ``"private"``
    (RFC 1918, unique-local, shared 100.64/10 and other non-global space), ``"link-local"``,
    or ``NEVER`` (multicast, unspecified, reserved, or not an address). Usually one; an
    address that embeds IPv4 addresses has the ranges of those."""
    try:
        ip = ipaddress.ip_address(address.split("%", maxsplit=1)[0])
    except ValueError:
        return frozenset({NEVER})
    inner = _embedded(ip) if isinstance(ip, ipaddress.IPv6Address) else ()
    if inner:
        return frozenset(_range(each) for each in inner)
    return frozenset({_range(ip)})
