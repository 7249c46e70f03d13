"""The continuation REST API (docs/http-api.md: paths, status codes and error codes).

Out-of-band callers (an OAuth callback, an e-mail link, another service) use it to
create, inspect, project, resume and cancel a pause.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from litestar import Controller, Request, get, post
from litestar.di import NamedDependency
from litestar.params import HeaderParameter, JSONBody, PathParameter

from pausemesh.core.errors import ProtocolAdapterError, TokenMismatchError
from pausemesh.core.model import Continuation
from pausemesh.core.resume import Resume, TokenHolder
from pausemesh.core.validation import check_idempotency_key
from pausemesh.web.context import PauseMeshCaller
from pausemesh.web.direct_call import DirectCall
from pausemesh.web.problems import problem_responses
from pausemesh.web.projections import PROTOCOLS, project_a2a, project_agui, project_mcp
from pausemesh.web.schemas import (
    ID_PATTERN,
    A2AProjectionBody,
    AguiProjectionBody,
    CancelBody,
    ContinuationBody,
    CreateBody,
    CreatedBody,
    EventsBody,
    McpProjectionBody,
    ProjectionBody,
    ResumeBody,
    StrictBody,
    strict_body,
)

__all__ = ("ContinuationController",)

_AUTH_RE = re.compile(r"^PauseMesh\s+(\S+)\s*$", re.IGNORECASE)

ContinuationId = Annotated[
    str,
    PathParameter(
        min_length=1, max_length=200, pattern=ID_PATTERN, description="The continuation id"
    ),
]
IdempotencyKey = Annotated[
    str | None,
    HeaderParameter(
        name="idempotency-key",
        required=False,
        description="1-200 printable characters; an exact retry returns the stored outcome",
    ),
]
# One dependency per route: the caller carries the limits and the owed runs (see context.py).
Caller = NamedDependency[PauseMeshCaller]
# Bodies arrive as parsed JSON (``StrictBody``) and are converted strictly by ``strict_body``.


def _resume_token(
    pausemesh_token: str | None, authorization: str | None, continuation_id: str
) -> str:
    """``PauseMesh-Token: <token>`` (needed when ``Authorization`` carries the caller's bearer
    identity), else ``Authorization: PauseMesh <token>``; anything else is a 401 that echoes
    nothing."""
    if pausemesh_token is not None:
        token = pausemesh_token.strip()
        if not token or any(c.isspace() for c in token):
            raise TokenMismatchError(continuation_id)
        return token
    match = _AUTH_RE.match(authorization or "")
    if match is None:
        raise TokenMismatchError(continuation_id)
    return match.group(1)


async def _continuation(caller: PauseMeshCaller, continuation_id: str) -> Continuation:
    """The continuation as the caller may see it (404 for another principal's)."""
    return await caller.service.get(continuation_id, principal=caller.principal)


def _projection_route(protocol: str, summary: str) -> post:
    """``POST .../projections/{protocol}``: answers like a write (409/410 for a settled pause)."""
    return post(
        f"/{{continuation_id:str}}/projections/{protocol}",
        status_code=200,
        summary=summary,
        responses=problem_responses(400, 401, 404, 409, 410, 413, 503),
    )


class ContinuationController(Controller):
    path = "/v1/continuations"
    tags = ["continuations"]  # noqa: RUF012 - Litestar reads this class attribute

    @post(
        "/",
        status_code=201,
        summary="Create a pending continuation",
        description="Returns the envelope and the raw resume token; the token is shown only here.",
        responses=problem_responses(400, 401, 409, 413, 429, 503),
        middleware=[DirectCall],
    )
    async def create(
        self,
        request: Request[Any, Any, Any],
        data: JSONBody[StrictBody[CreateBody]],
        caller: Caller,
    ) -> CreatedBody:
        body = strict_body(data, CreateBody)
        await caller.limits.admit_work(caller.principal, request.scope)
        created = await caller.service.create(
            payload=body.payload,
            continuation_id=body.continuation_id,
            correlation_id=body.correlation_id,
            expires_at=body.expires_at,
            metadata=body.metadata,
            owner=caller.principal,
        )
        return CreatedBody(continuation=created.continuation, resume_token=created.resume_token)

    @get(
        "/{continuation_id:str}",
        summary="Inspect a continuation (materializes expiry)",
        responses=problem_responses(400, 401, 404, 503),
    )
    async def inspect(self, continuation_id: ContinuationId, caller: Caller) -> ContinuationBody:
        return ContinuationBody(continuation=await _continuation(caller, continuation_id))

    @get(
        "/{continuation_id:str}/events",
        summary="The continuation's event stream (without the token hash)",
        responses=problem_responses(400, 401, 404, 503),
    )
    async def events(self, continuation_id: ContinuationId, caller: Caller) -> EventsBody:
        return EventsBody(
            events=await caller.service.history(continuation_id, principal=caller.principal)
        )

    @post(
        "/{continuation_id:str}/resume",
        status_code=200,
        summary="Resume exactly once",
        description=(
            "Needs the resume token (`PauseMesh-Token: <token>`, or `Authorization: PauseMesh"
            " <token>` when `Authorization` does not carry the caller's bearer identity) and an"
            " `idempotency-key` header. An exact retry (same key, canonically equal payload)"
            " returns the identical stored body. When the continuation's payload carries a"
            " `responseSchema`, the payload must match it (400 `INVALID_PAYLOAD`, nothing"
            " written)."
        ),
        security=[{"pausemeshResumeToken": []}],
        responses=problem_responses(400, 401, 404, 409, 410, 413, 429, 503),
        middleware=[DirectCall],
    )
    async def resume(
        self,
        *,
        request: Request[Any, Any, Any],
        continuation_id: ContinuationId,
        data: JSONBody[StrictBody[ResumeBody]],
        idempotency_key: IdempotencyKey,
        authorization: Annotated[
            str | None,
            HeaderParameter(name="authorization", required=False, include_in_schema=False),
        ],
        pausemesh_token: Annotated[
            str | None,
            HeaderParameter(name="pausemesh-token", required=False, include_in_schema=False),
        ],
        caller: Caller,
    ) -> ContinuationBody:
        body = strict_body(data, ResumeBody)
        key = check_idempotency_key((idempotency_key or "").strip())
        token = _resume_token(pausemesh_token, authorization, continuation_id)
        await caller.limits.admit_work(caller.principal, request.scope)
        outcome = await caller.service.resume(
            Resume(
                continuation_id=continuation_id,
                idempotency_key=key,
                payload=body.payload,
                by=TokenHolder(token, principal=caller.principal, roles=caller.roles),
            )
        )
        # A pause an AG-UI thread asked, decided here: the thread continues with it.
        caller.owed.poke(outcome)
        return ContinuationBody(continuation=outcome.continuation)

    @post(
        "/{continuation_id:str}/cancel",
        status_code=200,
        summary="Cancel a pending continuation",
        description="Optional `expectedVersion` fence; an exact retry returns the stored envelope.",
        responses=problem_responses(400, 401, 404, 409, 410, 413, 503),
    )
    async def cancel(
        self,
        continuation_id: ContinuationId,
        data: JSONBody[StrictBody[CancelBody]],
        caller: Caller,
    ) -> ContinuationBody:
        body = strict_body(data, CancelBody)
        continuation = await caller.service.cancel(
            continuation_id=continuation_id,
            reason=body.reason,
            expected_version=body.expected_version,
            principal=caller.principal,
        )
        return ContinuationBody(continuation=continuation)

    @_projection_route("ag-ui", "Project as an AG-UI interrupt (a one-continuation cohort)")
    async def project_agui(
        self,
        continuation_id: ContinuationId,
        data: JSONBody[StrictBody[AguiProjectionBody]],
        caller: Caller,
    ) -> ProjectionBody:
        body = strict_body(data, AguiProjectionBody)
        continuation = await _continuation(caller, continuation_id)
        return project_agui(continuation, body)

    @_projection_route("mcp", "Project as an MCP elicitation/create request")
    async def project_mcp(
        self,
        continuation_id: ContinuationId,
        data: JSONBody[StrictBody[McpProjectionBody]],
        caller: Caller,
    ) -> ProjectionBody:
        body = strict_body(data, McpProjectionBody)
        continuation = await _continuation(caller, continuation_id)
        return project_mcp(continuation, body, caller.config.mcp_projection_policy)

    @_projection_route("a2a", "Project as an A2A interrupted task")
    async def project_a2a(
        self,
        continuation_id: ContinuationId,
        data: JSONBody[StrictBody[A2AProjectionBody]],
        caller: Caller,
    ) -> ProjectionBody:
        body = strict_body(data, A2AProjectionBody)
        continuation = await _continuation(caller, continuation_id)
        return project_a2a(continuation, body)

    @post(
        "/{continuation_id:str}/projections/{protocol:str}",
        status_code=200,
        summary="Any other protocol: 404 UNSUPPORTED_PROTOCOL",
        include_in_schema=False,
    )
    async def project_unknown(
        self,
        continuation_id: ContinuationId,
        protocol: Annotated[str, PathParameter()],
        caller: Caller,
    ) -> ProjectionBody:
        await _continuation(caller, continuation_id)
        raise ProtocolAdapterError(
            f"Protocol must be one of: {', '.join(PROTOCOLS)}",
            code="UNSUPPORTED_PROTOCOL",
            protocol=protocol[:40],
        )
