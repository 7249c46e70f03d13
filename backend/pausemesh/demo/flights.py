"""The travel demo's flights: one list and one schema for every surface (AG-UI, MCP, A2A).

Whichever protocol asks "which flight?", it asks with ``flight_choice_schema`` so an answer
is valid on one surface exactly when it is valid on the others; ``confirm_booking`` is the
fake airline call the durable operation ledger runs once per pause.
"""

from __future__ import annotations

from typing import Any

import msgspec

from pausemesh.core.canonical import canonical_sha256

__all__ = (
    "BOOKING_DOMAIN",
    "DEFAULT_APPROVAL_THRESHOLD",
    "FLIGHTS",
    "FLIGHT_NUMBERS",
    "Flight",
    "confirm_booking",
    "flight",
    "flight_choice_schema",
    "flight_question",
)


class Flight(msgspec.Struct, frozen=True, kw_only=True):
    """One offered flight: its code (what an answer names), price and local times."""

    code: str
    price: int
    currency: str
    departs: str
    arrives: str
    cabin: str = "economy"

    @property
    def label(self) -> str:
        return f"{self.code} \u00b7 {self.departs}\u2013{self.arrives} \u00b7 {self.price} {self.currency}"

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = msgspec.to_builtins(self)
        return data


# Lisbon, from the traveller's home airport. PM404 (business) costs more than the default
# approval threshold, so booking it needs a manager's approval in the AG-UI demo.
FLIGHTS: tuple[Flight, ...] = (
    Flight(code="PM101", price=89, currency="EUR", departs="07:05", arrives="09:10"),
    Flight(code="PM202", price=129, currency="EUR", departs="12:40", arrives="14:45"),
    Flight(code="PM303", price=179, currency="EUR", departs="18:20", arrives="20:25"),
    Flight(
        code="PM404", price=640, currency="EUR", departs="09:30", arrives="11:35", cabin="business"
    ),
)
FLIGHT_NUMBERS: tuple[str, ...] = tuple(f.code for f in FLIGHTS)
DEFAULT_APPROVAL_THRESHOLD = 500
"""Prices above this (``PAUSEMESH_DEMO_APPROVAL_THRESHOLD``) need a manager's approval."""
BOOKING_DOMAIN = "demo.flight-bookings"


def flight(code: str) -> Flight | None:
    return next((f for f in FLIGHTS if f.code == code), None)


def flight_choice_schema() -> dict[str, Any]:
    """A flat form (the MCP elicitation subset, so every protocol can render it)."""
    return {
        "type": "object",
        "properties": {
            "flight": {
                "type": "string",
                "title": "Flight",
                "description": "The flight to book",
                "enum": list(FLIGHT_NUMBERS),
                # Titles for the codes (the MCP form subset's legacy enumNames).
                "enumNames": [f.label for f in FLIGHTS],
            }
        },
        "required": ["flight"],
    }


def flight_question(destination: str) -> str:
    return f"Which flight to {destination} should I book?"


async def confirm_booking(booking_key: str, destination: str, flight: str) -> dict[str, Any]:
    """The airline's answer for the booking made under ``booking_key`` (the operation id).

    The code is derived from that key, so each booking gets its own (two conversations booking
    the same flight do not share one) and a reconciled result still reads the same.
    """
    code = canonical_sha256(["demo-booking", booking_key])[:8].upper()
    return {"destination": destination, "flight": flight, "confirmation": f"PM-{code}"}
