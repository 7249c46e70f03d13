"""``DirectCall``: the hot write routes' handler called without Litestar's generic machinery.

Creating and resuming a continuation are the two requests of every pause, and Litestar's
generic path around a handler (the kwargs model, the signature model's conversion, the
``Response`` object and its ASGI response) cost about a fifth of the CPU PauseMesh spends on
them (measured: ``bench/ab.py``, ``docs/benchmarks.md``). For these routes that path does
little: the body is parsed JSON handed over as it is (``StrictBody``), the headers are plain
text, the path id has one pattern, the one dependency takes the request. So this
handler-level middleware reads exactly those, calls the same handler function, and encodes
its return value as Litestar would (same serializer, status code and media type).

It is the same route either way: whenever something this path does not do could apply (a
guard, a before/after hook, response headers or cookies, a DTO, a custom response class, a
sync handler, the response cache, CSRF, compression, allowed hosts), the path id does not
match its pattern or the body is empty, it hands the request to Litestar unchanged, so
Litestar's own checks answer exactly as before. Errors raised here are rendered by Litestar's exception handling inside the other
middlewares (as Litestar itself places it), so a problem body carries the request id and
is counted in the access line like any other.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, cast

from litestar import Request, Response
from litestar._asgi.utils import wrap_in_exception_handler
from litestar.di import Provide
from litestar.enums import MediaType
from litestar.exceptions import (
    ClientException,
    ImproperlyConfiguredException,
    SerializationException,
)
from litestar.handlers import HTTPRouteHandler
from litestar.params import HeaderParameter, PathParameter
from litestar.serialization import encode_json, get_serializer
from litestar.types import ASGIApp, Receive, Scope, Send, Serializer

from pausemesh.web.schemas import ID_PATTERN

__all__ = ("DirectCall",)

_ID: Final = re.compile(ID_PATTERN)
_ID_MAX: Final = 200  # the longest id ``ID_PATTERN`` admits
# The parameters every direct route takes besides its headers and path ids.
_ALWAYS: Final = frozenset({"request", "data", "caller"})
_JSON: Final = MediaType.JSON.value.encode()


@dataclass(frozen=True, slots=True)
class _Plan:
    fn: Callable[..., Awaitable[Any]]
    """The handler function itself (the route's one implementation)."""
    request_class: type[Request[Any, Any, Any]]
    caller: Provide
    serializer: Serializer
    status: int
    headers: dict[bytes, str]
    """Header name (lower case) -> the handler's parameter."""
    path_ids: tuple[str, ...]


def _parameters(handler: HTTPRouteHandler) -> tuple[dict[bytes, str], tuple[str, ...]]:
    """The handler's header and path-id parameters, read from its own signature (so the
    names cannot drift from what Litestar reads). Any other kind of parameter is a
    programming error: the route is not one this path can answer."""
    headers: dict[bytes, str] = {}
    path_ids: list[str] = []
    for name, field in handler.parsed_fn_signature.parameters.items():
        kwarg = field.kwarg_definition
        if name in _ALWAYS:
            continue
        if (
            isinstance(kwarg, HeaderParameter)
            and not kwarg.is_constrained
            and not field.is_required
            and (not field.has_default or field.default is None)  # absent: None
        ):
            # Litestar's alias: the parameter's ``name``, else the argument's own name.
            headers[(kwarg.name or name).lower().encode("latin-1")] = name
        elif (
            isinstance(kwarg, PathParameter)
            and kwarg.pattern == ID_PATTERN
            and (kwarg.min_length or 1) <= 1
            and (kwarg.max_length or _ID_MAX) >= _ID_MAX
        ):
            path_ids.append(name)
        else:
            raise ImproperlyConfiguredException(
                f"DirectCall for {handler}: parameter {name!r} is neither an optional plain"
                " header nor an id path parameter"
            )
    return headers, tuple(path_ids)


def _plan(app: Any, handler: HTTPRouteHandler) -> _Plan | None:
    """How to answer directly, or None when a layer asks for something only Litestar's own
    path does (checked once per route)."""
    missing = _ALWAYS - set(handler.parsed_fn_signature.parameters)
    if missing:
        raise ImproperlyConfiguredException(
            f"DirectCall for {handler}: the handler does not take {sorted(missing)}"
        )
    headers, path_ids = _parameters(handler)
    caller = handler.resolve_dependencies().get("caller")
    if (
        caller is None
        or list(inspect.signature(caller.dependency).parameters) != ["request"]
        or caller.has_sync_generator_dependency
        or caller.has_async_generator_dependency
        or handler.has_sync_callable
        or handler.resolve_guards()
        or handler.resolve_before_request() is not None
        or any(layer.after_request for layer in handler.ownership_layers)
        or handler.resolve_after_response() is not None
        or handler.resolve_response_headers()
        or handler.resolve_response_cookies()
        or handler.resolve_data_dto() is not None
        or handler.resolve_return_dto() is not None
        or handler.resolve_response_class() is not Response
        or handler.background is not None
        or handler.cache
        or app.csrf_config
        or app.compression_config
        or app.allowed_hosts
        or handler.media_type != MediaType.JSON
    ):
        return None
    return _Plan(
        fn=handler.fn,
        request_class=handler.resolve_request_class(),
        caller=caller,
        serializer=get_serializer(handler.resolve_type_encoders()),
        status=handler.status_code,
        headers=headers,
        path_ids=path_ids,
    )


def _handler(scope: Scope) -> HTTPRouteHandler:
    # A handler-level middleware of an HTTP route: its handler is an HTTP route handler.
    return cast("HTTPRouteHandler", scope["route_handler"])


def _ids_match(plan: _Plan, scope: Scope) -> bool:
    params = scope["path_params"]
    # ``fullmatch``: no trailing newline before the pattern's ``$`` either, so every id
    # answered here is one Litestar's own check accepts too (anything else goes to it).
    return all(_ID.fullmatch(params[name]) is not None for name in plan.path_ids)


class DirectCall:
    """Handler-level middleware: ``middleware=[DirectCall]`` on a route whose handler takes
    ``request``, ``data`` (``JSONBody[StrictBody[...]]``), the ``caller`` dependency, and
    otherwise only optional plain header parameters and path ids of ``ID_PATTERN`` (read
    from the handler's signature when the route first serves)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._planned = False
        self._plan: _Plan | None = None
        # As Litestar places it between a handler and the middlewares wrapping it: an error
        # raised while answering is rendered through their ``send``.
        self._answer_guarded = wrap_in_exception_handler(app=self._answer)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._planned:
            self._plan = _plan(scope["litestar_app"], _handler(scope))
            self._planned = True
        plan = self._plan
        if plan is None or not _ids_match(plan, scope):
            await self.app(scope, receive, send)
            return
        await self._answer_guarded(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        plan = self._plan
        assert plan is not None  # noqa: S101 - only called with a plan
        request = plan.request_class(scope=scope, receive=receive, send=send)
        # Litestar's order: the body (400/413), then the dependency (401), then the handler.
        if not await request.body():
            # No body: Litestar's own answer (it reads the body kept in the scope's state).
            await self.app(scope, receive, send)
            return
        try:
            data = await request.json()
        except SerializationException as error:
            raise ClientException(str(error)) from error
        wanted = plan.headers
        kwargs: dict[str, Any] = dict.fromkeys(wanted.values())
        for header, value in scope["headers"]:
            kwarg = wanted.get(header.lower())
            # The first of repeated headers, as Litestar's parameter does.
            if kwarg is not None and kwargs[kwarg] is None:
                kwargs[kwarg] = value.decode("latin-1")
        params = scope["path_params"]
        for name in plan.path_ids:
            kwargs[name] = params[name]
        kwargs["request"] = request
        kwargs["data"] = data
        kwargs["caller"] = await plan.caller(request=request)
        result = await plan.fn(**kwargs)
        body = encode_json(result, plan.serializer)
        await send(
            {
                "type": "http.response.start",
                "status": plan.status,
                "headers": [
                    (b"content-type", _JSON),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})
