"""RFC 9457 problem details: every error leaves as ``application/problem+json`` with a code.

Domain errors stay HTTP-free (``pausemesh.core.errors``); this module is the one place
their codes become statuses and the one encoder of problem bodies: ``encode_problem`` (a
status, a code, a detail) and ``problem_for`` (a ``PauseMeshError``) give the status, the
bytes and the headers, which every binding sends as they are (the Litestar handlers below,
the raw ASGI protocol mounts, the Starlette AG-UI routes). Nothing here echoes a token, a
stack trace or a driver message.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi.datastructures import ResponseSpec
from litestar.types import Send

from pausemesh.core.errors import (
    ContinuationCancelledError,
    ContinuationExpiredError,
    ContinuationNotFoundError,
    IdempotencyConflictError,
    InvalidTransitionError,
    MisdirectedRequestError,
    NotStartedError,
    OriginNotAllowedError,
    PauseMeshError,
    PayloadTooLargeError,
    RateLimitedError,
    ShuttingDownError,
    StoreError,
    TokenAlreadyUsedError,
    TokenMismatchError,
    TooManyStreamsError,
    UnauthenticatedError,
    UnsupportedMediaTypeError,
    VersionConflictError,
)

__all__ = (
    "PROBLEM_MEDIA_TYPE",
    "EncodedProblem",
    "Problem",
    "encode_problem",
    "http_exception_to_problem",
    "internal_error_to_problem",
    "pausemesh_error_to_problem",
    "problem_for",
    "problem_response",
    "problem_responses",
    "send_encoded",
    "status_for",
    "undecodable_body_to_problem",
)

PROBLEM_MEDIA_TYPE = "application/problem+json"

_log = logging.getLogger("pausemesh.web")


class Problem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An RFC 9457 problem body; ``code`` is the stable, machine-readable member."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    # Names of the request fields at fault (validation errors only); never their values.
    errors: list[dict[str, str]] | None = None


class EncodedProblem(NamedTuple):
    """A problem ready for any binding: the status, the JSON bytes and the headers to send."""

    status: int
    body: bytes
    headers: dict[str, str]


_STATUS_BY_CLASS: tuple[tuple[type[PauseMeshError], int], ...] = (
    (ContinuationNotFoundError, 404),
    (TokenMismatchError, 401),
    (ContinuationExpiredError, 410),
    (ContinuationCancelledError, 409),
    (TokenAlreadyUsedError, 409),
    (IdempotencyConflictError, 409),
    (InvalidTransitionError, 409),
    (VersionConflictError, 409),
    (UnauthenticatedError, 401),
    (PayloadTooLargeError, 413),
    (OriginNotAllowedError, 403),
    (UnsupportedMediaTypeError, 415),
    (MisdirectedRequestError, 421),
    (RateLimitedError, 429),
    (TooManyStreamsError, 429),
    (ShuttingDownError, 503),
    (NotStartedError, 500),
    (StoreError, 503),
)
_STATUS_BY_CODE = {
    "UNAUTHENTICATED": 401,
    "INVALID_PROTOCOL_TRANSITION": 409,
    "UNSUPPORTED_PROTOCOL": 404,
    "THREAD_NOT_FOUND": 404,
    "THREAD_BUSY": 409,
    "LEASE_LOST": 409,
    "OPERATION_CONFLICT": 409,
    "NOT_AN_APPROVER": 403,
}
_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    421: "Misdirected Request",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_HTTP_CODES = {
    400: "INVALID_REQUEST",
    401: "UNAUTHENTICATED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
}
_encoder = msgspec.json.Encoder()


def status_for(error: PauseMeshError) -> int:
    if error.code in _STATUS_BY_CODE:
        return _STATUS_BY_CODE[error.code]
    for cls, status in _STATUS_BY_CLASS:
        if isinstance(error, cls):
            return status
    # Input, id/schema mismatches and protocol binding errors: the caller's mistake.
    return 400


def encode_problem(
    status: int,
    code: str,
    detail: str,
    *,
    errors: list[dict[str, str]] | None = None,
    challenge: str | None = None,
) -> EncodedProblem:
    """The one problem-body encoder; every binding sends what it returns unchanged."""
    body = _encoder.encode(
        Problem(
            type=f"urn:pausemesh:problem:{code.lower().replace('_', '-')}",
            title=_TITLES.get(status, "Error"),
            status=status,
            detail=detail,
            code=code,
            errors=errors,
        )
    )
    headers = {"content-type": PROBLEM_MEDIA_TYPE}
    if status == 401:
        # A resume token is a ``PauseMesh`` credential; the bearer resolvers name their own.
        headers["www-authenticate"] = challenge or "PauseMesh"
    return EncodedProblem(status, body, headers)


async def send_encoded(send: Send, problem: EncodedProblem) -> None:
    """A problem straight onto an ASGI channel (for code that answers before Litestar does)."""
    headers = [(k.encode(), v.encode()) for k, v in problem.headers.items()]
    headers.append((b"content-length", str(len(problem.body)).encode()))
    await send({"type": "http.response.start", "status": problem.status, "headers": headers})
    await send({"type": "http.response.body", "body": problem.body, "more_body": False})


def problem_for(error: PauseMeshError) -> EncodedProblem:
    """A ``PauseMeshError`` as a problem: its status, its code and a detail safe to show."""
    status = status_for(error)
    retry_after = error.details.get("retry_after")
    if isinstance(retry_after, int):
        # 429s and a draining server say when to come back.
        problem = encode_problem(status, error.code, error.message)
        problem.headers["retry-after"] = str(retry_after)
        return problem
    if isinstance(error, NotStartedError):
        # A deployment mistake, not a request's: the detail names the line to add.
        _log.error("%s", error.message)
        return encode_problem(status, error.code, error.message)
    if status >= 500:
        # The store's own words may name files, hosts or SQL; the log keeps them.
        _log.warning("store unavailable: %s (%s)", error.code, error.message)
        return encode_problem(status, error.code, "The store is unavailable; retry later")
    errors = None
    field = error.details.get("field")
    if isinstance(field, str):
        errors = [{"field": field}]
    challenge = error.challenge if isinstance(error, UnauthenticatedError) else None
    return encode_problem(status, error.code, error.message, errors=errors, challenge=challenge)


def _response(problem: EncodedProblem) -> Response[bytes]:
    headers = {k: v for k, v in problem.headers.items() if k != "content-type"}
    return Response(
        content=problem.body,
        status_code=problem.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers or None,
    )


def problem_response(
    status: int, code: str, detail: str, *, errors: list[dict[str, str]] | None = None
) -> Response[bytes]:
    """A Litestar response carrying ``encode_problem``'s body and headers."""
    return _response(encode_problem(status, code, detail, errors=errors))


def pausemesh_error_to_problem(_: Request[Any, Any, Any], error: Exception) -> Response[bytes]:
    assert isinstance(error, PauseMeshError)  # noqa: S101 - registered for this class only
    return _response(problem_for(error))


def _validation_errors(error: ValidationException) -> list[dict[str, str]] | None:
    extra = error.extra
    if not isinstance(extra, list):
        return None
    found: list[dict[str, str]] = []
    for item in extra:
        if isinstance(item, dict):
            entry = {k: str(item[k]) for k in ("key", "source", "message") if k in item}
            found.append(entry)
    return found or None


def http_exception_to_problem(  # noqa: PLR0911 - one answer per kind of HTTP error
    _: Request[Any, Any, Any], error: Exception
) -> Response[bytes]:
    assert isinstance(error, HTTPException)  # noqa: S101 - registered for this class only
    status = error.status_code
    if status >= 500:
        return internal_error_to_problem(_, error)
    code = _HTTP_CODES.get(status, "INVALID_REQUEST" if status < 500 else "INTERNAL_ERROR")
    if status == 413:
        return problem_response(413, code, "The request body exceeds the configured limit")
    detail = str(error.detail)
    # msgspec's decode errors say "malformed"/"truncated"; broken JSON gets its own code.
    if status == 400 and ("malformed" in detail.lower() or "truncated" in detail.lower()):
        return problem_response(400, "MALFORMED_JSON", "The request body is not valid JSON")
    if isinstance(error, ValidationException):
        errors = _validation_errors(error)
        if errors and any(e.get("message") == "'data'" for e in errors):
            # Litestar reports a missing body as a KeyError on the body parameter.
            return problem_response(400, "EMPTY_BODY", "The request needs a JSON body")
        return problem_response(400, "INVALID_REQUEST", "Request validation failed", errors=errors)
    if status == 404:
        return problem_response(404, code, "No route matches this path")
    if status == 405:
        return problem_response(405, code, "This path does not accept that method")
    return problem_response(status, code, str(error.detail) or _TITLES.get(status, "Error"))


def undecodable_body_to_problem(_: Request[Any, Any, Any], error: Exception) -> Response[bytes]:
    """Bodies the JSON decoder itself chokes on: invalid UTF-8, or nesting beyond its stack."""
    if isinstance(error, RecursionError):
        return problem_response(400, "MALFORMED_JSON", "The request body is nested too deeply")
    return problem_response(400, "MALFORMED_JSON", "The request body is not valid UTF-8 JSON")


def internal_error_to_problem(_: Request[Any, Any, Any], error: Exception) -> Response[bytes]:
    if isinstance(error, PauseMeshError):
        # Reached from the app-level handler, which sees errors raised outside the router.
        return _response(problem_for(error))
    _log.error("unhandled error in a PauseMesh route", exc_info=error)
    return problem_response(500, "INTERNAL_ERROR", "The continuation operation failed")


def problem_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI entries for the problem bodies a route can return."""
    return {
        status: ResponseSpec(
            data_container=Problem,
            media_type=PROBLEM_MEDIA_TYPE,
            description=_TITLES.get(status, "Error"),
            generate_examples=False,
        )
        for status in statuses
    }
