"""The ``/a2a`` endpoint: a2a-sdk 1.3.0 JSON-RPC and REST bindings plus the agent card.

``A2APlugin`` sits next to ``PauseMeshPlugin`` and mounts, under ``/a2a``:

* ``/.well-known/agent-card.json``: the agent card (interfaces for both bindings);
* ``/jsonrpc``: the JSON-RPC binding (``SendMessage``, ``SendStreamingMessage``, ``GetTask``...);
* ``/rest``: the HTTP+JSON binding (``/rest/message:send``, ``/rest/tasks/{id}``...);
* ``/.well-known/jwks.json``: the public key push notifications are signed with.

The card is also served at the domain root, ``/.well-known/agent-card.json``, where a generic
A2A client looks for it from the server's base URL (``A2ACardResolver``): by default when
PauseMesh serves the whole app (``create_app``, ``pausemesh serve``/``demo``); a host that
mounts the plugin in its own app chooses with ``root_card=True``/``False`` (the root path is
the host's: one agent card per origin).

A JSON-RPC request that is refused before the SDK reads it echoes its id whenever the id can
be read; a ``ListTasks`` filter that is not a value of its field (``"status":
"INVALID_STATUS"``) is refused as invalid params naming the field (-32602; 400 on REST)
instead of being read as no filter (``a2a.list_filters``).

With a push store (SQLite and PostgreSQL storage have one) the card declares push
notifications: configurations are stored durably per principal (``DurablePushConfigStore``),
webhook URLs are checked against ``PAUSEMESH_A2A_PUSH_ALLOW`` when set (refused with the
reason: ``PushUrlRegistration``) and before each delivery, each notified state change is
queued with the task write (the outbox), and a ``PushDispatcher`` per replica sends it,
signed, with retries that no delivery can jam.

Tasks live in ``ThreadBackedTaskStore`` (our thread store), scoped to the principal resolved
by the host's resolver. A follow-up ``SendMessage`` to an interrupted task is checked against
its pause (``A2aPauses.check_follow_up``) *before* the SDK runs the executor: a bad answer gets
the A2A ``InvalidParamsError`` and the task stays interrupted (the SDK would mark a raising
executor's task FAILED), and so is a message to a terminal task (``UnsupportedOperationError``).
Follow-ups to one task then run one at a time (``FollowUpGate``). The executor itself settles
pauses with ``A2aPauses`` too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qsl, unquote

import msgspec
from a2a.auth.user import User
from a2a.server.agent_execution import AgentExecutor
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import (
    DefaultServerCallContextBuilder,
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.types import (
    AgentCard,
    AgentExtension,
    AgentInterface,
    Message,
    SendMessageRequest,
    Task,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import InvalidParamsError, InvalidRequestError
from a2a.utils.task import apply_history_length
from litestar import Litestar, asgi
from litestar.config.app import AppConfig
from litestar.handlers import ASGIRouteHandler
from litestar.types import Receive, Scope, Send
from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse
from starlette.routing import Route

from pausemesh.a2a.follow_ups import FollowUpGate
from pausemesh.a2a.list_filters import ListFilterFault, list_filter_fault
from pausemesh.a2a.pauses import A2aPauses
from pausemesh.a2a.push_configs import DurablePushConfigStore, PushUrlRegistration
from pausemesh.a2a.push_delivery import PushDispatcher, PushOptions
from pausemesh.a2a.push_policy import PushUrlPolicy
from pausemesh.a2a.push_signing import PushSigner
from pausemesh.a2a.store import (
    PRINCIPAL_STATE_KEY,
    ThreadBackedTaskStore,
    is_terminal,
    principal_of_call,
)
from pausemesh.core.leases import LeaseKeeper
from pausemesh.core.principal_handoff import principal_in_scope
from pausemesh.core.push import PushStore
from pausemesh.core.threads import ThreadStore
from pausemesh.web.plugin import PauseMeshPlugin
from pausemesh.web.protocol_mount import (
    MESSAGE_SCOPE_KEY,
    ProtocolMount,
    call_span,
    jsonrpc_envelope_fault,
    jsonrpc_ids,
    jsonrpc_methods,
    readable_id,
    send_invalid_request,
    send_json,
    send_jsonrpc_error,
    send_jsonrpc_rate_limited,
    send_parse_error,
    send_problem,
)

__all__ = ("A2APlugin",)

# Parked input-required tasks are released quickly so a follow-up re-reads the store
# (another replica may have moved the task on: a2a-python#1188).
_INTERRUPTED_TASK_TIMEOUT = 1.0

ExecutorFactory = Callable[[PauseMeshPlugin], AgentExecutor]
JWKS_PATH = "/.well-known/jwks.json"
PUBLIC_PATHS = frozenset({"/.well-known/agent-card.json", JWKS_PATH})
# The agent card names the JWKS in this (optional) extension: A2A 1.0 has no card field for it.
PUSH_JWKS_EXTENSION = "https://pausemesh.dev/a2a/extensions/push-jwks/v1"

# What starts an agent's work, per binding (PAUSEMESH_RATE_LIMIT counts these).
_WORK_METHODS = frozenset({"SendMessage", "SendStreamingMessage", "message/send", "message/stream"})
_WORK_PATHS = ("/message:send", "/message:stream")
# Requests whose answer is an SSE stream held open (each takes a stream slot).
_STREAM_METHODS = frozenset(
    {"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"}
)
_STREAM_PATHS = ("/message:stream", ":subscribe")
# Of those, the ones that only wait on a task (idle tails, counted apart from runs).
_TAIL_METHODS = frozenset({"SubscribeToTask", "tasks/resubscribe"})
_TAIL_PATHS = (":subscribe",)


class _ClientMistakesAreWarnings(logging.Filter):
    """The SDK logs a request whose params do not parse as an ERROR with a traceback; it is the
    client's mistake (answered -32600/-32602), so it is logged as a WARNING, without one."""

    _MESSAGES = frozenset(
        {"Failed to validate base JSON-RPC request", "Failed to parse request params"}
    )

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and record.msg in self._MESSAGES:
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info, record.exc_text = None, None
        return True


def _quiet_client_mistakes() -> None:
    sdk = logging.getLogger("a2a.server.routes.jsonrpc_dispatcher")
    if not any(isinstance(f, _ClientMistakesAreWarnings) for f in sdk.filters):
        sdk.addFilter(_ClientMistakesAreWarnings())


def _is_jsonrpc(scope: Scope) -> bool:
    return bool(scope["path"].rstrip("/").endswith("/jsonrpc"))


def _list_filter_fault(scope: Scope) -> ListFilterFault | None:
    """A ``ListTasks`` filter the SDK would silently drop (JSON-RPC params or REST query)."""
    if _is_jsonrpc(scope):
        message: Any = scope.get(MESSAGE_SCOPE_KEY)
        if not isinstance(message, dict) or message.get("method") != "ListTasks":
            return None
        params = message.get("params")
        return list_filter_fault(params) if isinstance(params, dict) else None
    if scope.get("method") != "GET" or not scope["path"].rstrip("/").endswith("/rest/tasks"):
        return None
    query = scope.get("query_string", b"").decode("latin-1")
    return list_filter_fault(dict(parse_qsl(query, keep_blank_values=True)), query=True)


class _Principal(User):
    def __init__(self, principal: str | None) -> None:
        self._principal = principal

    @property
    def is_authenticated(self) -> bool:
        return self._principal is not None

    @property
    def user_name(self) -> str:
        return self._principal or ""


class _PrincipalContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context with our resolved principal as its user and in its state."""

    def build_user(self, request: StarletteRequest) -> User:
        return _Principal(principal_in_scope(request.scope))

    def build(self, request: StarletteRequest) -> ServerCallContext:
        context = super().build(request)
        context.state[PRINCIPAL_STATE_KEY] = principal_in_scope(request.scope)
        return context


class _PauseAwareRequestHandler(DefaultRequestHandlerV2):
    """Checks a follow-up against its pause, then runs it while holding the task's lease.

    A bad answer is refused before any executor runs, and so is a message to a terminal task
    (``UnsupportedOperationError``). Follow-ups to one task run one at a time
    (``FollowUpGate``): one that waited while another finished the task is answered with that
    final task; the executor never runs on it again.
    """

    def __init__(
        self,
        *,
        pauses: A2aPauses,
        tasks: ThreadBackedTaskStore,
        gate: FollowUpGate,
        **options: Any,
    ) -> None:
        super().__init__(task_store=tasks, **options)
        self._pauses = pauses
        self._tasks = tasks
        self._gate = gate

    async def _check_follow_up(self, message: Message, context: ServerCallContext) -> bool:
        """Whether ``message`` follows up one of the caller's tasks (and fits its pause)."""
        if not message.task_id:
            return False
        stored = await self._tasks.get(message.task_id, context)
        if stored is None:
            return False  # the SDK reports an unknown task itself
        task = stored.task
        if not message.context_id:
            # A2A: the context is inferred from the task when only the task id is sent.
            message.context_id = task.context_id
        await self._pauses.check_follow_up(task, message, principal_of_call(context))
        return True

    async def _finished_meanwhile(
        self, message: Message, context: ServerCallContext
    ) -> Task | None:
        """The task, if a racing follow-up finished it while this one waited for the lease."""
        stored = await self._tasks.get(message.task_id, context)
        return stored.task if stored is not None and is_terminal(stored.task) else None

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        message = params.message
        if not await self._check_follow_up(message, context):
            new: Message | Task = await super().on_message_send(params, context)
            return new
        async with self._gate.hold(message.task_id, run_id=message.message_id):
            final = await self._finished_meanwhile(message, context)
            if final is not None:
                return apply_history_length(final, params.configuration)
            result: Message | Task = await super().on_message_send(params, context)
            return result

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        message = params.message
        if not await self._check_follow_up(message, context):
            async for event in super().on_message_send_stream(params, context):
                yield event
            return
        async with self._gate.hold(message.task_id, run_id=message.message_id):
            final = await self._finished_meanwhile(message, context)
            if final is not None:
                yield apply_history_length(final, params.configuration)
                return
            async for event in super().on_message_send_stream(params, context):
                yield event


def _no_push() -> PushStore:
    raise RuntimeError("the A2A push configuration store needs a push store")


class A2APlugin(ProtocolMount):
    """Adds ``/a2a`` (under ``path``) to an app that also has a ``PauseMeshPlugin``."""

    __slots__ = ("_app", "_card", "_executor", "path", "public_url", "root_card")

    def __init__(
        self,
        executor: ExecutorFactory,
        card: AgentCard,
        *,
        path: str = "/a2a",
        public_url: str | None = None,
        root_card: bool | None = None,
    ) -> None:
        """``root_card``: also serve the card at ``/.well-known/agent-card.json`` (the domain
        root, where generic A2A clients look); None: when PauseMesh serves the whole app."""
        super().__init__()
        self.path = path
        self.public_url = public_url
        self.root_card = root_card
        self._executor = executor
        self._card = card
        self._app: Starlette | None = None

    def _threads(self) -> ThreadStore:
        threads = self.pausemesh.runtime.storage.threads
        if threads is None:
            msg = "the A2A router needs the thread store"
            raise RuntimeError(msg)
        return threads

    def _leases(self) -> LeaseKeeper:
        leases = self.pausemesh.runtime.leases
        if leases is None:
            msg = "the A2A router needs the thread store"
            raise RuntimeError(msg)
        return leases

    def _push_store(self) -> PushStore | None:
        return self.pausemesh.runtime.storage.push

    def _base_url(self) -> str:
        settings = self.pausemesh.config.settings
        return (self.public_url or f"http://{settings.host}:{settings.port}").rstrip("/")

    def agent_card(self, *, push: bool = False) -> AgentCard:
        base = self._base_url()
        card = AgentCard()
        card.CopyFrom(self._card)
        if push:
            card.capabilities.push_notifications = True
            card.capabilities.extensions.append(
                AgentExtension(
                    uri=PUSH_JWKS_EXTENSION,
                    description="Push notifications carry an ES256 JWT; its keys are here.",
                    required=False,
                    params={"jwksUri": f"{base}{self.path}{JWKS_PATH}"},
                )
            )
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(
            [
                AgentInterface(
                    url=f"{base}{self.path}/jsonrpc",
                    protocol_binding=TransportProtocol.JSONRPC,
                    protocol_version="1.0",
                ),
                AgentInterface(
                    url=f"{base}{self.path}/rest",
                    protocol_binding=TransportProtocol.HTTP_JSON,
                    protocol_version="1.0",
                ),
            ]
        )
        return card

    def _dispatcher(self, signer: PushSigner, policy: PushUrlPolicy) -> PushDispatcher:
        settings = self.pausemesh.config.settings
        options = PushOptions(
            max_attempts=settings.a2a_push_max_attempts,
            backoff_seconds=settings.a2a_push_backoff_seconds,
            backoff_max_seconds=settings.a2a_push_backoff_max_seconds,
            lease_seconds=settings.a2a_push_lease_seconds,
            timeout_seconds=settings.a2a_push_timeout_seconds,
            poll_seconds=settings.a2a_push_poll_seconds,
        )
        store = self._push_store

        def push_store() -> PushStore:
            current = store()
            if current is None:  # pragma: no cover - only built when there is one
                raise RuntimeError("no push store")
            return current

        holder = self.pausemesh.runtime.instance.holder
        return PushDispatcher(push_store, signer, policy, holder=holder, options=options)

    def _build_app(
        self,
    ) -> tuple[Starlette, _PauseAwareRequestHandler, PushDispatcher | None]:
        runtime = self.pausemesh.runtime
        push = runtime.storage.push is not None
        card = self.agent_card(push=push)
        policy = PushUrlPolicy(runtime.settings.a2a_push_allow)
        signer = PushSigner(runtime.key.key, issuer=f"{self._base_url()}{self.path}")
        dispatcher = self._dispatcher(signer, policy) if push else None
        push_options: dict[str, Any] = {}
        if push:
            push_options = {
                "push_config_store": DurablePushConfigStore(
                    lambda: self._push_store() or _no_push(), self._threads, policy=policy
                ),
                "push_url_validator": PushUrlRegistration(policy),
            }
        with warnings.catch_warnings():
            # The SDK warns that a versioned store without a cross-replica event stream serves
            # live streams from this process only: that is our model (a follow-up on another
            # replica re-reads the task from the shared store; the CAS version guards it).
            warnings.filterwarnings("ignore", message="A VersionedTaskStore was configured")
            handler = _PauseAwareRequestHandler(
                pauses=A2aPauses(lambda: self.pausemesh.runtime.service),
                agent_executor=self._executor(self.pausemesh),
                tasks=ThreadBackedTaskStore(
                    self._threads,
                    push=self._push_store,
                    on_notice=None if dispatcher is None else dispatcher.wake,
                ),
                gate=FollowUpGate(self._leases),
                agent_card=card,
                interrupted_task_timeout=_INTERRUPTED_TASK_TIMEOUT,
                **push_options,
            )
        builder = _PrincipalContextBuilder()

        async def jwks(_: StarletteRequest) -> JSONResponse:
            return JSONResponse(signer.jwks(), headers={"cache-control": "max-age=300"})

        routes = [
            *create_agent_card_routes(card),
            Route(JWKS_PATH, jwks, methods=["GET"]),
            *create_jsonrpc_routes(handler, "/jsonrpc", context_builder=builder),
            *create_rest_routes(handler, context_builder=builder, path_prefix="/rest"),
        ]
        return Starlette(routes=routes), handler, dispatcher

    @asynccontextmanager
    async def lifespan(self, _: Litestar) -> AsyncIterator[None]:
        # Fresh per lifespan: the handler owns in-memory active tasks it closes on the way out.
        app, handler, dispatcher = self._build_app()
        sender = None if dispatcher is None else asyncio.create_task(dispatcher.run())
        self._app = app
        try:
            yield
        finally:
            self._app = None
            await handler.aclose()
            if sender is not None:
                sender.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sender

    def route_handler(self) -> ASGIRouteHandler:
        plugin = self

        @asgi(plugin.path, is_mount=True, copy_scope=True, middleware=[plugin.stream_guard()])
        async def a2a_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            app = plugin._app
            if app is None:
                await send_problem(send, 503, "NOT_STARTED", "the A2A endpoint has not started")
                return
            # Litestar hands a mount the remaining path with a trailing slash added; give the
            # SDK's Starlette routes the exact sub-path of the request instead.
            full = unquote(scope["raw_path"].decode("latin-1"))
            prefix = scope.get("root_path", "") + plugin.path
            scope["path"] = full[len(prefix) :] if full.startswith(prefix) else scope["path"]
            scope["root_path"] = prefix
            # Discovery is public (the A2A card, the push-signing keys a webhook verifies with);
            # everything else needs a caller.
            method = scope.get("method", "")
            public = method in {"GET", "HEAD"} and scope["path"] in PUBLIC_PATHS
            if not public and not await plugin.admit(scope, receive, send):
                return
            checked = await plugin.read_json_body(scope, receive, send)
            if checked is None or await plugin._refused_list_filter(scope, send):
                return
            async with plugin.stream_slot(scope, send) as admitted:
                if not admitted:
                    return
                with call_span("a2a.call", scope):
                    await app(scope, checked, send)  # type: ignore[arg-type]

        return a2a_endpoint

    def root_card_handler(self) -> ASGIRouteHandler:
        """``/.well-known/agent-card.json`` at the domain root: the SDK's card route (its ETag,
        its 405 for another method), public like the card under ``path``."""
        plugin = self

        @asgi(AGENT_CARD_WELL_KNOWN_PATH, copy_scope=True)
        async def a2a_root_agent_card(scope: Scope, receive: Receive, send: Send) -> None:
            app = plugin._app
            if app is None:
                await send_problem(send, 503, "NOT_STARTED", "the A2A endpoint has not started")
                return
            scope["path"] = AGENT_CARD_WELL_KNOWN_PATH
            scope["root_path"] = ""
            await app(scope, receive, send)  # type: ignore[arg-type]

        return a2a_root_agent_card

    async def _refused_list_filter(self, scope: Scope, send: Send) -> bool:
        """Refuse a ``ListTasks`` filter that is no value of its field; True once answered."""
        fault = _list_filter_fault(scope)
        if fault is None:
            return False
        if _is_jsonrpc(scope):
            message = scope.get(MESSAGE_SCOPE_KEY)
            await send_jsonrpc_error(
                send, 200, -32602, fault.message, readable_id(message), data={"field": fault.field}
            )
            return True
        payload = build_rest_error_payload(InvalidParamsError(message=fault.message))
        await send_json(send, 400, msgspec.json.encode(payload), "application/json")
        return True

    def opens_stream(self, scope: Scope, rpc_method: str | None) -> bool:
        if _is_jsonrpc(scope):
            return rpc_method in _STREAM_METHODS
        return scope["path"].rstrip("/").endswith(_STREAM_PATHS)

    def is_tail(self, scope: Scope, rpc_method: str | None) -> bool:
        if _is_jsonrpc(scope):
            return rpc_method in _TAIL_METHODS
        return scope["path"].rstrip("/").endswith(_TAIL_PATHS)

    def starts_work(self, scope: Scope, message: Any) -> bool:
        if _is_jsonrpc(scope):
            return bool(jsonrpc_methods(message) & _WORK_METHODS)
        return scope.get("method") == "POST" and scope["path"].rstrip("/").endswith(_WORK_PATHS)

    def envelope_fault(self, scope: Scope, message: Any) -> str | None:
        # The SDK answers these too, but JSON-RPC ones after an ERROR traceback in the log,
        # and REST ones with Python's words ("TypeError: 'float' object is not iterable").
        if _is_jsonrpc(scope):
            return jsonrpc_envelope_fault(message)
        return None if isinstance(message, dict) else "The request body must be a JSON object"

    async def refuse_envelope(self, scope: Scope, send: Send, detail: str, message: Any) -> None:
        if _is_jsonrpc(scope):
            await send_invalid_request(send, 200, detail, readable_id(message))
            return
        await self.refuse_malformed(scope, send, detail)

    async def refuse_rate_limited(
        self, scope: Scope, send: Send, retry_after: int, message: Any
    ) -> None:
        if _is_jsonrpc(scope):
            ids = jsonrpc_ids(message)
            await send_jsonrpc_rate_limited(send, retry_after, ids[0] if len(ids) == 1 else None)
            return
        await super().refuse_rate_limited(scope, send, retry_after, message)

    async def refuse_malformed(self, scope: Scope, send: Send, detail: str) -> None:
        # Each binding's own answer to a body it cannot parse, so the SDK's clients read it.
        if _is_jsonrpc(scope):
            await send_parse_error(send, 200, detail)
            return
        payload = build_rest_error_payload(InvalidRequestError(message=detail))
        await send_json(send, 400, msgspec.json.encode(payload), "application/json")

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        pausemesh = self.attach(app_config)
        _quiet_client_mistakes()
        app_config.route_handlers.append(self.route_handler())
        root = self.root_card
        if root if root is not None else pausemesh.config.problem_details_for_app:
            app_config.route_handlers.append(self.root_card_handler())
        app_config.lifespan.append(self.lifespan)
        return app_config
