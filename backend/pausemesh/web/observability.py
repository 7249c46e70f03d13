"""Per request: a server span (an incoming ``traceparent`` honoured), a request id, the app's
metrics sink, and one access log line.

The access line says method, route template (never the raw path: ids and query strings stay
out), status, duration, bytes sent and a short hash of the principal; never a header, a query
string or a body.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Iterable
from typing import Any

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry import context as otel_context
from opentelemetry import propagate
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import SpanKind, Status, StatusCode

from pausemesh.observability.telemetry import (
    MetricsSink,
    RequestInfo,
    make_current,
    set_metrics,
    set_request,
    tracer,
)

__all__ = ("REQUEST_ID_HEADER", "TelemetryMiddleware", "route_template")

REQUEST_ID_HEADER = "x-request-id"
# An incoming request id is kept only when it is short and plain (it ends up in every line).
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")

_access = logging.getLogger("pausemesh.access")


class _HeaderGetter(Getter[list[tuple[bytes, bytes]]]):
    """Reads ASGI's raw header list for the W3C trace-context propagator."""

    def get(self, carrier: list[tuple[bytes, bytes]], key: str) -> list[str] | None:
        wanted = key.lower().encode("latin-1")
        found = [v.decode("latin-1") for k, v in carrier if k.lower() == wanted]
        return found or None

    def keys(self, carrier: list[tuple[bytes, bytes]]) -> list[str]:
        return [k.decode("latin-1") for k, _ in carrier]


_GETTER = _HeaderGetter()


def route_template(scope: Scope) -> str:
    """The matched route's template (``/v1/continuations/{continuation_id:str}``), or the
    mount's path for a protocol mount; ``unmatched`` when nothing matched."""
    handler: Any = scope.get("route_handler")
    template: Any = scope.get("path_template")
    if isinstance(template, str) and template:
        return template
    paths: Iterable[str] = getattr(handler, "paths", ()) or ()
    for path in paths:
        return path
    return "unmatched"


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class TelemetryMiddleware:
    """Plain ASGI middleware (streams pass through untouched; it only watches ``send``)."""

    def __init__(self, app: ASGIApp, *, metrics: MetricsSink | None, access_log: bool) -> None:
        self.app = app
        self.metrics = metrics
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        if self.metrics is not None:
            set_metrics(self.metrics)
        headers = scope.get("headers", ())
        incoming = _header(headers, REQUEST_ID_HEADER.encode())
        # 16 hex digits (64 random bits); `uuid4().hex` builds a UUID object per request.
        request_id = incoming if incoming and _REQUEST_ID.match(incoming) else secrets.token_hex(8)
        info = RequestInfo(request_id=request_id)
        set_request(info)
        method = str(scope.get("method", "GET"))
        route = route_template(scope)
        status = 500
        sent = 0
        started = time.perf_counter()
        # Only a request that carries trace context pays for reading it.
        parent = (
            propagate.extract(list(headers), getter=_GETTER)
            if _header(headers, b"traceparent") is not None
            else None
        )
        current = tracer().start_span(
            f"{method} {route}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": method,
                "http.route": route,
                "pausemesh.request_id": request_id,
            },
        )
        token = make_current(current, parent)

        async def watch(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [
                    *message.get("headers", ()),
                    (REQUEST_ID_HEADER.encode(), request_id.encode()),
                ]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if current.is_recording():
                current.set_attributes(
                    {"http.response.status_code": status, "http.response.body.size": sent}
                )
                if status >= 500:
                    current.set_status(Status(StatusCode.ERROR))
            current.end()
            if token is not None:
                otel_context.detach(token)
            if self.access_log and _access.isEnabledFor(logging.INFO):
                _log_access(info, method, route, status, sent, started)


def _log_access(  # noqa: PLR0917 - the fields of one access line
    info: RequestInfo, method: str, route: str, status: int, sent: int, started: float
) -> None:
    duration_ms = round((time.perf_counter() - started) * 1000, 3)
    _access.info(
        "%s %s %d",
        method,
        route,
        status,
        extra={
            "pausemesh": {
                "method": method,
                "route": route,
                "status": status,
                "durationMs": duration_ms,
                "bytes": sent,
                "principalHash": info.principal_hash,
            }
        },
    )
