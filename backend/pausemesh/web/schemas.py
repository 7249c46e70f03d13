"""Request and response bodies of the continuation REST API (msgspec Structs).

Request bodies are strict: an unknown field is a 400, never silently dropped. The
OpenAPI document is generated from these Structs, so it cannot drift from the code.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from litestar.params import SkipValidation
from msgspec import Meta

from pausemesh.core.errors import InvalidInputError
from pausemesh.core.model import Continuation, PublicEvent

__all__ = (
    "ID_PATTERN",
    "A2AProjectionBody",
    "AguiProjectionBody",
    "CancelBody",
    "ContinuationBody",
    "CreateBody",
    "CreatedBody",
    "EventsBody",
    "HealthBody",
    "McpProjectionBody",
    "ProjectionBody",
    "ReadinessBody",
    "ReadinessCheck",
    "ResumeBody",
    "StrictBody",
    "ThreadTitleBody",
    "strict_body",
)

T = TypeVar("T", bound="_Strict")

# REST ids are printable ASCII without edge spaces: a rule JSON Schema can state exactly, so
# the OpenAPI document (and the clients generated from it) agree with the server.
ID_PATTERN = r"^[!-~](?:[ -~]{0,198}[!-~])?$"
Id = Annotated[str, Meta(min_length=1, max_length=200, pattern=ID_PATTERN)]


class _Strict(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    rename="camel",
    forbid_unknown_fields=True,
    omit_defaults=True,
):
    pass


StrictBody = SkipValidation[T]
"""Annotate ``data`` as ``JSONBody[StrictBody[X]]``: documented as ``X`` in OpenAPI, handed
over as parsed JSON, then converted by ``strict_body`` (Litestar's own conversion is lax:
it would turn ``"1"`` into ``1``)."""


def strict_body(data: object, body_type: type[T]) -> T:
    try:
        return msgspec.convert(data, body_type, strict=True)
    except msgspec.ValidationError as error:
        raise InvalidInputError(
            f"Request validation failed: {error}", code="INVALID_REQUEST"
        ) from None


class CreateBody(_Strict, frozen=True):
    payload: Any
    continuation_id: Id | None = None
    correlation_id: Id | None = None
    expires_at: Annotated[datetime, Meta(tz=True)] | None = None
    metadata: dict[str, Any] | None = None


class ResumeBody(_Strict, frozen=True):
    payload: Any


class ThreadTitleBody(_Strict, frozen=True):
    title: Annotated[str, Meta(min_length=1, max_length=200)]


class CancelBody(_Strict, frozen=True):
    expected_version: Annotated[int, Meta(ge=1, le=2**53 - 1)] | None = None
    reason: Annotated[str, Meta(max_length=500)] | None = None


class AguiProjectionBody(_Strict, frozen=True):
    run_id: Id
    thread_id: Id


class A2AProjectionBody(_Strict, frozen=True):
    context_id: Id
    task_id: Id


class McpRelatedTask(_Strict, frozen=True):
    task_id: Id


class McpUrlBinding(_Strict, frozen=True):
    elicitation_id: Id
    url: Annotated[str, Meta(min_length=1, max_length=2048)]


class McpProjectionBody(_Strict, frozen=True):
    # The client declares more than elicitation; the projection checks what it needs.
    client_capabilities: dict[str, Any]
    request_id: Id | int
    related_task: McpRelatedTask | None = None
    url_binding: McpUrlBinding | None = None


class ContinuationBody(msgspec.Struct, frozen=True, kw_only=True):
    continuation: Continuation


class CreatedBody(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    continuation: Continuation
    resume_token: str


class EventsBody(msgspec.Struct, frozen=True, kw_only=True):
    events: list[PublicEvent]


class ProjectionBody(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    projection: dict[str, Any]
    receipt: dict[str, Any] | None = None


class HealthBody(msgspec.Struct, frozen=True, kw_only=True):
    status: Literal["ok"]


class ReadinessCheck(msgspec.Struct, frozen=True, kw_only=True):
    component: str
    status: Literal["ready", "unavailable"]


class ReadinessBody(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    status: Literal["ready", "not_ready"]
    checks: list[ReadinessCheck]
    # With ``--workers N`` > 1: which worker process answered (its pid), so an operator (and
    # the tests) can tell the workers behind one port apart. Absent with one process.
    worker: int | None = None
