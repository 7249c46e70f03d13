"""The travel demo's catalogue: a few cities with a few flights each, one schema and one
booking record for every surface (AG-UI, MCP, A2A).

Whichever protocol asks "which flight?", it asks with ``flight_choice_schema(destination)``,
so an answer is valid on one surface exactly when it is valid on the others; every booking is
``booking_record`` (flight, times, cabin, price, confirmation), so a booking reads the same
whether it was made in the chat, by an MCP tool call or by an A2A task; ``confirm_booking`` is
the fake airline call the durable operation ledger runs once per pause.

``find_city`` reads a destination out of a person's words: case, accents and punctuation do not
matter ("zurich", "ZÜRICH!", "to Zürich next week"). A destination outside the catalogue (an
MCP or A2A caller may name any) is offered the standard timetable, Lisbon's flights.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import msgspec

from pausemesh.core.canonical import canonical_sha256

__all__ = (
    "BOOKING_DOMAIN",
    "CATALOGUE",
    "DEFAULT_APPROVAL_THRESHOLD",
    "FLIGHTS",
    "FLIGHT_NUMBERS",
    "NEEDS_APPROVAL",
    "City",
    "Flight",
    "booking_record",
    "booking_summary",
    "city_names",
    "city_of",
    "confirm_booking",
    "destination_name",
    "find_city",
    "flight",
    "flight_choice_schema",
    "flight_question",
    "flights_to",
    "normalize",
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
        """ "PM101 · 07:05-09:10 · 89 EUR" (a business fare says so: "· business")."""
        cabin = "" if self.cabin == "economy" else f" \u00b7 {self.cabin}"
        times = f"{self.departs}\u2013{self.arrives}"
        return f"{self.code} \u00b7 {times} \u00b7 {self.price} {self.currency}{cabin}"

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = msgspec.to_builtins(self)
        return data


class City(msgspec.Struct, frozen=True, kw_only=True):
    """A destination of the catalogue: its name, other spellings people type, its flights."""

    name: str
    flights: tuple[Flight, ...]
    aliases: tuple[str, ...] = ()


def _f(code: str, price: int, departs: str, arrives: str, cabin: str = "economy") -> Flight:
    return Flight(
        code=code, price=price, currency="EUR", departs=departs, arrives=arrives, cabin=cabin
    )


# From the traveller's home airport. Each city has one business fare above the default
# approval threshold (or none), so booking it needs a manager's approval in the AG-UI demo.
CATALOGUE: tuple[City, ...] = (
    City(
        name="Lisbon",
        aliases=("lisboa",),
        flights=(
            _f("PM101", 89, "07:05", "09:10"),
            _f("PM202", 129, "12:40", "14:45"),
            _f("PM303", 179, "18:20", "20:25"),
            _f("PM404", 640, "09:30", "11:35", "business"),
        ),
    ),
    City(
        name="Porto",
        aliases=("oporto",),
        flights=(
            _f("PM111", 79, "06:50", "08:45"),
            _f("PM211", 119, "13:15", "15:10"),
            _f("PM311", 149, "19:40", "21:35"),
            _f("PM411", 560, "10:00", "11:55", "business"),
        ),
    ),
    City(
        name="Madrid",
        flights=(
            _f("PM121", 99, "08:00", "10:25"),
            _f("PM221", 139, "15:30", "17:55"),
            _f("PM421", 590, "11:10", "13:35", "business"),
        ),
    ),
    City(
        name="M\u00e1laga",
        flights=(_f("PM131", 109, "07:45", "11:05"), _f("PM231", 159, "16:20", "19:40")),
    ),
    City(
        name="Z\u00fcrich",
        aliases=("zuerich",),
        flights=(
            _f("PM141", 149, "06:30", "08:05"),
            _f("PM241", 199, "17:45", "19:20"),
            _f("PM441", 720, "12:15", "13:50", "business"),
        ),
    ),
    City(
        name="Krak\u00f3w",
        aliases=("cracow",),
        flights=(_f("PM151", 69, "09:10", "11:30"), _f("PM251", 99, "20:05", "22:25")),
    ),
    City(
        name="Reykjav\u00edk",
        flights=(
            _f("PM161", 229, "10:40", "13:20"),
            _f("PM461", 880, "14:00", "16:40", "business"),
        ),
    ),
)
FLIGHTS: tuple[Flight, ...] = CATALOGUE[0].flights
"""The standard timetable (Lisbon's flights): what a destination outside the catalogue gets."""
FLIGHT_NUMBERS: tuple[str, ...] = tuple(f.code for f in FLIGHTS)
DEFAULT_APPROVAL_THRESHOLD = 500
"""Prices above this (``PAUSEMESH_DEMO_APPROVAL_THRESHOLD``) need a manager's approval."""
BOOKING_DOMAIN = "demo.flight-bookings"


def normalize(text: str) -> str:
    """Lower case, accents and punctuation gone, words separated by single spaces."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(re.findall(r"[a-z0-9]+", plain.replace("\u00df", "ss")))


def _spellings(city: City) -> tuple[str, ...]:
    return (normalize(city.name), *(normalize(a) for a in city.aliases))


def find_city(text: str) -> City | None:
    """The catalogue city named in ``text``: the last one named ("Madrid, no, Porto" is
    Porto), one after "from" only when no other is named ("from Porto to Lisbon" is Lisbon)."""
    words = f" {normalize(text)} "
    found: list[tuple[bool, int, City]] = []
    for city in CATALOGUE:
        for spelling in _spellings(city):
            for match in re.finditer(rf"(?<= ){re.escape(spelling)}(?= )", words):
                to_it = not words[: match.start()].endswith(" from ")
                found.append((to_it, match.start(), city))
    if not found:
        return None
    return max(found, key=lambda hit: (hit[0], hit[1]))[2]


def city_of(code: str) -> City | None:
    """The catalogue city a flight flies to."""
    return next((c for c in CATALOGUE if any(f.code == code for f in c.flights)), None)


def destination_name(text: str) -> str:
    """The catalogue's spelling of the city named in ``text``, else ``text`` itself."""
    city = find_city(text)
    return text.strip() if city is None else city.name


def city_names() -> str:
    """ "Lisbon, Porto, ... and Reykjavík" (what the agent says it flies to)."""
    names = [c.name for c in CATALOGUE]
    return f"{', '.join(names[:-1])} and {names[-1]}"


def flights_to(destination: str | None) -> tuple[Flight, ...]:
    """The flights offered for ``destination``: its city's, or the standard timetable."""
    city = None if destination is None else find_city(destination)
    return FLIGHTS if city is None else city.flights


def flight(code: str) -> Flight | None:
    """The flight with this code, wherever it flies."""
    return next((f for c in CATALOGUE for f in c.flights if f.code == code), None)


NEEDS_APPROVAL = "needs approval"
"""The last part of an option's title when booking it waits for a manager (AG-UI)."""


def flight_choice_schema(
    destination: str | None = None, *, approval_above: int | None = None
) -> dict[str, Any]:
    """A flat form (the MCP elicitation subset, so every protocol can render it) naming the
    flights to ``destination`` (the standard timetable without one). With ``approval_above``,
    an option priced above it says up front that it ``needs approval``."""
    offered = flights_to(destination)

    def title(offer: Flight) -> str:
        over = approval_above is not None and offer.price > approval_above
        return f"{offer.label} \u00b7 {NEEDS_APPROVAL}" if over else offer.label

    return {
        "type": "object",
        "properties": {
            "flight": {
                "type": "string",
                "title": "Flight",
                "description": "The flight to book",
                "enum": [f.code for f in offered],
                # Titles for the codes (the MCP form subset's legacy enumNames).
                "enumNames": [title(f) for f in offered],
            }
        },
        "required": ["flight"],
    }


def flight_question(destination: str) -> str:
    return f"Which flight to {destination} should I book?"


def booking_record(destination: str, code: str, confirmation: str) -> dict[str, Any]:
    """One booking as every surface shows it: where, which flight, its times, cabin, price."""
    offer = flight(code)
    details: dict[str, Any] = {} if offer is None else offer.as_json()
    details.pop("code", None)
    return {"destination": destination, "flight": code, **details, "confirmation": confirmation}


def booking_summary(booking: dict[str, Any], by: str = "") -> str:
    """ "Booked flight PM101 to Lisbon, confirmation PM-…: departs 07:05, arrives 09:10, …"."""
    said = (
        f"Booked flight {booking['flight']} to {booking['destination']}{by},"
        f" confirmation {booking['confirmation']}"
    )
    if not isinstance(booking.get("departs"), str):
        return f"{said}."
    return (
        f"{said}: departs {booking['departs']}, arrives {booking['arrives']},"
        f" {booking['cabin']}, {booking['price']} {booking['currency']}."
    )


async def confirm_booking(booking_key: str, destination: str, flight: str) -> dict[str, Any]:
    """The airline's answer for the booking made under ``booking_key`` (the operation id).

    The code is derived from that key, so each booking gets its own (two conversations booking
    the same flight do not share one) and a reconciled result still reads the same.
    """
    code = canonical_sha256(["demo-booking", booking_key])[:8].upper()
    return booking_record(destination, flight, f"PM-{code}")
