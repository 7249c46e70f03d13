"""What a pause becomes at its deadline when nobody decided it: ``on_expiry``.

A pause may carry a default outcome (``PauseRequest(on_expiry=...)``, kept in its metadata's
``inbox`` as ``onExpiry``): at the deadline, instead of lapsing, it is

* ``"cancel"``: cancelled (reason ``expired: nobody decided in time``);
* ``"deny"``: decided with the denying choice of its ``responseSchema`` (the enumerated value
  ``deny``, ``denied``, ``reject``, ``rejected``, ``decline``, ``declined`` or ``no``, or
  ``false`` for one boolean property);
* any other JSON value: decided with that answer (checked against the schema when asked).

A default decision is recorded as decided by ``expiry`` and continues the thread as any
decision made elsewhere does: the conversation goes on ("the manager did not answer in time;
the booking was not made"). The webhook event is ``pause.expired`` either way.
"""

from __future__ import annotations

from typing import Any, Final

from pausemesh.core.links import choices

__all__ = (
    "EXPIRED_REASON",
    "EXPIRY_DECIDER",
    "ON_EXPIRY",
    "default_answer",
    "on_expiry_of",
)

ON_EXPIRY: Final = "onExpiry"
EXPIRY_DECIDER: Final = "expiry"
EXPIRED_REASON: Final = "expired: nobody decided in time"
_DENIALS: Final = frozenset({"deny", "denied", "reject", "rejected", "decline", "declined", "no"})


def default_answer(on_expiry: Any, schema: object) -> Any:
    """The answer ``on_expiry`` gives a pause with ``schema`` ("cancel" stays "cancel");
    ``ValueError`` when "deny" has no denying choice in the schema."""
    if on_expiry != "deny":
        return on_expiry
    for _, answer in choices(schema):
        [value] = answer.values()
        if value is False or (isinstance(value, str) and value.lower() in _DENIALS):
            return answer
    msg = "on_expiry='deny' needs a responseSchema with a denying choice (e.g. 'reject')"
    raise ValueError(msg)


def on_expiry_of(metadata: object) -> tuple[bool, Any]:
    """Whether a pause's metadata carries a default outcome, and the outcome."""
    inbox = metadata.get("inbox") if isinstance(metadata, dict) else None
    if isinstance(inbox, dict) and ON_EXPIRY in inbox:
        return True, inbox[ON_EXPIRY]
    return False, None
