"""The demo airline's reservation desk: a cooperating target for the operation ledger.

Bookings are keyed by the operation id (a Stripe-style idempotency key): booking twice under one
key books once, and ``lookup`` tells whether a key was ever booked. So when a replica dies
between "attempt recorded" and "outcome recorded", the ledger asks the desk instead of giving the
booking up (``run_once(lookup=...)``): found → recovered, never seen → sent again once.

The desk is a SQLite file of its own (the ``pausemesh demo`` data directory's ``airline.db``, or
``PAUSEMESH_DEMO_AIRLINE_PATH`` so several replicas share one airline), standing for the
airline's own database; without a path it keeps bookings in memory (unit tests).
``PAUSEMESH_DEMO_AIRLINE_LATENCY_SECONDS`` simulates the network: half before the booking
reaches the desk, half before its reply comes back, so a crash can land on either side.
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import msgspec

from pausemesh.core.operations import TargetAnswer, TargetFound, TargetNeverSaw
from pausemesh.demo.flights import confirm_booking
from pausemesh.stores.private_files import private_database_file

__all__ = ("Airline", "airline", "configure_airline")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS bookings (
    booking_key TEXT PRIMARY KEY,
    booking_json TEXT NOT NULL
) STRICT
"""


class Airline:
    """Bookings keyed by idempotency key, and a status lookup by that key."""

    def __init__(self, path: str | Path | None = None, *, latency_seconds: float = 0.0) -> None:
        self.path = None if path is None else Path(path)
        self.latency_seconds = latency_seconds
        self._memory: dict[str, dict[str, Any]] = {}
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            private_database_file(self.path)  # bookings hold travellers' names
            with closing(self._connect()) as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        assert self.path is not None  # noqa: S101 - only called for a file desk
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def _book_in_file(self, key: str, booking: dict[str, Any]) -> dict[str, Any]:
        with closing(self._connect()) as conn:
            conn.execute(
                "INSERT INTO bookings (booking_key, booking_json) VALUES (?, ?)"
                " ON CONFLICT DO NOTHING",
                (key, msgspec.json.encode(booking).decode()),
            )
            row = conn.execute(
                "SELECT booking_json FROM bookings WHERE booking_key = ?", (key,)
            ).fetchone()
        stored: dict[str, Any] = msgspec.json.decode(row[0])
        return stored

    def _find_in_file(self, key: str) -> dict[str, Any] | None:
        with closing(self._connect()) as conn:
            row = conn.execute(
                "SELECT booking_json FROM bookings WHERE booking_key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        found: dict[str, Any] = msgspec.json.decode(row[0])
        return found

    async def book(self, key: str, destination: str, flight: str) -> dict[str, Any]:
        """Book once under ``key``; a repeat returns the first booking unchanged."""
        await asyncio.sleep(self.latency_seconds / 2)
        booking = await confirm_booking(key, destination, flight)
        if self.path is None:
            stored = self._memory.setdefault(key, booking)
        else:
            stored = await asyncio.to_thread(self._book_in_file, key, booking)
        await asyncio.sleep(self.latency_seconds / 2)
        return stored

    async def lookup(self, key: str) -> TargetAnswer:
        """What the desk knows about ``key`` (the ledger's ``StatusLookup``)."""
        if self.path is None:
            found = self._memory.get(key)
        else:
            found = await asyncio.to_thread(self._find_in_file, key)
        return TargetNeverSaw() if found is None else TargetFound(result=found)

    def bookings(self) -> dict[str, dict[str, Any]]:
        """Every booking by key (what tests and the fault benchmark count)."""
        if self.path is None:
            return dict(self._memory)
        with closing(self._connect()) as conn:
            rows = conn.execute("SELECT booking_key, booking_json FROM bookings").fetchall()
        return {key: msgspec.json.decode(text) for key, text in rows}


_AIRLINE = Airline()


def airline() -> Airline:
    """The desk the demo books with (in memory until ``configure_airline``)."""
    return _AIRLINE


def configure_airline(desk: Airline) -> None:
    """Point the demo at ``desk`` (``pausemesh demo`` does, from its settings)."""
    global _AIRLINE  # noqa: PLW0603 - one desk per demo process, set once at start-up
    _AIRLINE = desk
