"""The identity provider's signing keys (a JWKS), fetched without blocking and cached.

Keys are parsed once per fetch into PyJWT key objects, so a request costs one dictionary
lookup and one signature check. A token naming an unknown ``kid`` triggers a refetch (key
rotation works without a restart), at most once per ``refresh_interval``: a flood of forged
kids cannot turn into a flood of requests to the identity provider. Only asymmetric keys for
RS256, ES256 and EdDSA are kept; a symmetric (``oct``) key in the set is ignored, so a token
"signed" with a public key as an HMAC secret has nothing to verify against.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlsplit

import anyio
import httpx
import jwt
import msgspec

__all__ = ("ALGORITHMS", "JwksCache", "JwksUnavailableError", "KeySet", "fetch_jwks", "parse_jwks")

ALGORITHMS: Final = frozenset({"RS256", "ES256", "EdDSA"})
"""The signature algorithms accepted; ``none`` and every HMAC (HS*) algorithm are not."""

_FETCH_TIMEOUT_SECONDS = 5.0
_MAX_JWKS_BYTES = 512 * 1024

_log = logging.getLogger("pausemesh.credentials")


class JwksUnavailableError(Exception):
    """The JWKS could not be fetched or parsed (the message is for the log, not a client)."""


@dataclass(frozen=True, slots=True)
class KeySet:
    """Parsed signing keys by ``kid`` (``""`` for a key published without one)."""

    keys: Mapping[str, jwt.PyJWK] = field(default_factory=dict)

    def only(self) -> jwt.PyJWK | None:
        """The single key of a one-key set (for tokens that name no ``kid``)."""
        return next(iter(self.keys.values())) if len(self.keys) == 1 else None


def parse_jwks(raw: bytes) -> KeySet:
    """A JWKS document into its usable signing keys; anything else in it is skipped."""
    try:
        document = msgspec.json.decode(raw)
    except msgspec.DecodeError as error:
        raise JwksUnavailableError(f"the JWKS is not JSON ({error})") from None
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise JwksUnavailableError("the JWKS has no 'keys' list")
    keys: dict[str, jwt.PyJWK] = {}
    for entry in entries:
        key = _signing_key(entry)
        if key is not None:
            keys[str(entry.get("kid", ""))] = key
    return KeySet(keys)


def _signing_key(entry: Any) -> jwt.PyJWK | None:
    if not isinstance(entry, dict) or entry.get("kty") == "oct":
        return None
    if entry.get("use", "sig") != "sig":
        return None  # an encryption key is never a signature key
    try:
        key = jwt.PyJWK(entry)
    except (jwt.PyJWKError, jwt.InvalidKeyError) as error:
        _log.warning("JWKS: skipping a key (kid=%r): %s", entry.get("kid"), error)
        return None
    if key.algorithm_name not in ALGORITHMS:
        _log.warning("JWKS: skipping a %s key (kid=%r)", key.algorithm_name, entry.get("kid"))
        return None
    return key


async def fetch_jwks(url: str) -> bytes:
    """The JWKS document's bytes: over HTTPS (or loopback HTTP), or from a ``file://`` path."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        path = Path(unquote(parts.path))
        try:
            # Off the event loop: a slow disk must not stall every other request.
            return await anyio.to_thread.run_sync(path.read_bytes)
        except OSError as error:
            raise JwksUnavailableError(f"cannot read {path}: {error.strerror}") from None
    try:
        async with httpx.AsyncClient(timeout=_FETCH_TIMEOUT_SECONDS) as client:
            reply = await client.get(url, headers={"accept": "application/json"})
    except httpx.HTTPError as error:
        raise JwksUnavailableError(f"cannot fetch the JWKS: {type(error).__name__}") from None
    if reply.status_code != 200:
        raise JwksUnavailableError(f"the JWKS answered {reply.status_code}")
    if len(reply.content) > _MAX_JWKS_BYTES:
        raise JwksUnavailableError("the JWKS is larger than 512 KiB")
    return reply.content


class JwksCache:
    """The current ``KeySet``, refetched when it is stale or a token names an unknown kid.

    One fetch at a time (later callers wait for it and share its result), and at most one
    attempt per ``refresh_interval`` whatever the reason; a failed refetch keeps the keys
    already known, so an identity provider outage does not log everyone out.
    """

    def __init__(
        self,
        url: str,
        *,
        refresh_interval: float,
        max_age: float,
        fetch: Callable[[str], Awaitable[bytes]] = fetch_jwks,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.refresh_interval = refresh_interval
        self.max_age = max_age
        self._fetch = fetch
        self._now = monotonic
        self._keys: KeySet | None = None
        self._fetched_at = 0.0
        self._attempted_at: float | None = None
        self._lock = anyio.Lock()
        self.fetches = 0
        """How many fetches were attempted (for tests and the log)."""
        self.generation = 0
        """Counts the key sets fetched: what was verified under another one is checked again."""

    def fresh(self) -> bool:
        """The keys were fetched within ``max_age``."""
        return self._keys is not None and self._now() - self._fetched_at < self.max_age

    async def key_for(self, kid: str | None) -> jwt.PyJWK | None:
        """The key a token's ``kid`` names (refetching once if unknown), or None."""
        if not self.fresh():
            await self._refresh()
        key = _lookup(self._keys, kid)
        if key is None and await self._refresh():
            key = _lookup(self._keys, kid)
        return key

    async def _refresh(self) -> bool:
        """Fetch unless one was tried within ``refresh_interval``; True if the keys changed."""
        before = self._keys
        async with self._lock:
            if self._keys is not before:
                return True  # another caller refreshed while this one waited
            attempted = self._attempted_at
            if attempted is not None and self._now() - attempted < self.refresh_interval:
                return False
            self._attempted_at = self._now()
            self.fetches += 1
            try:
                keys = parse_jwks(await self._fetch(self.url))
            except JwksUnavailableError as error:
                _log.warning("JWKS refresh failed (%s); keeping %s", error, _known(before))
                return False
            self._keys = keys
            self._fetched_at = self._now()
            self.generation += 1
            return True


def _lookup(keys: KeySet | None, kid: str | None) -> jwt.PyJWK | None:
    if keys is None:
        return None
    if kid is None:
        return keys.only()
    return keys.keys.get(kid)


def _known(keys: KeySet | None) -> str:
    return "no keys" if keys is None else f"{len(keys.keys)} known keys"
