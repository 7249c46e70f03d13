"""The travel demo's flights: one list and one schema for every surface (AG-UI, MCP, A2A).

Whichever protocol asks "which flight?", it asks with ``flight_choice_schema`` so an answer
is valid on one surface exactly when it is valid on the others; ``confirm_booking`` is the
fake airline call the durable operation ledger runs once per pause.
"""

from __future__ import annotations

from typing import Any

from pausemesh.core.canonical import canonical_sha256

__all__ = (
    "BOOKING_DOMAIN",
    "FLIGHT_NUMBERS",
    "confirm_booking",
    "flight_choice_schema",
    "flight_question",
)

FLIGHT_NUMBERS: tuple[str, ...] = ("PM101", "PM202", "PM303")
BOOKING_DOMAIN = "demo.flight-bookings"


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
            }
        },
        "required": ["flight"],
    }


def flight_question(destination: str) -> str:
    return f"Which flight to {destination} should I book?"


async def confirm_booking(destination: str, flight: str) -> dict[str, Any]:
    """The airline's answer; deterministic so a reconciled result reads the same."""
    code = canonical_sha256(["demo-booking", destination, flight])[:6].upper()
    return {"destination": destination, "flight": flight, "confirmation": f"PM-{code}"}
