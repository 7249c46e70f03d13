"""Redacted lifecycle observations: ids, versions, statuses and codes; never tokens or payloads."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

import msgspec

__all__ = (
    "ContinuationCreatedObservation",
    "ContinuationRejectedObservation",
    "ContinuationTransitionedObservation",
    "Observation",
    "Observer",
)


class _Observation(msgspec.Struct, frozen=True, kw_only=True, rename="camel", tag_field="name"):
    continuation_id: str
    observed_at: datetime


class ContinuationCreatedObservation(_Observation, frozen=True, tag="continuation.created"):
    correlation_id: str
    version: int
    status: str = "pending"


class ContinuationTransitionedObservation(
    _Observation, frozen=True, tag="continuation.transitioned"
):
    version: int
    status: str
    # Lets an observer pick its own protocol's pauses (``mcp:…``) without a store read.
    correlation_id: str = ""


class ContinuationRejectedObservation(_Observation, frozen=True, tag="continuation.rejected"):
    code: str


Observation = (
    ContinuationCreatedObservation
    | ContinuationTransitionedObservation
    | ContinuationRejectedObservation
)


class Observer(Protocol):
    """Where observations go (a port: ``core.ports`` names it too). Must never raise into the
    lifecycle: ``observer.observe_safely`` guards every call."""

    def observe(self, observation: Observation) -> None: ...
