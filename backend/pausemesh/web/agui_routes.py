"""The AG-UI routes (docs/agui.md, "Routes"), as a Litestar controller over a ``RunHost``.

``POST /agui`` and ``POST /agui/connect`` validate their input before the response starts
(a 4xx problem body otherwise); after the 200 every failure is an in-stream ``RUN_ERROR``.
Streams are LF-framed SSE with ``id:`` = thread sequence and keep-alive comments while idle;
a client that goes away ends its stream (and its run) cleanly.

Threads belong to the principal that created them: another principal gets 404.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, cast

from litestar import Controller, MediaType, Request, delete, get, patch, post
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, HeaderParameter, JSONBody, QueryParameter
from litestar.response import Stream

from pausemesh.agui.agent import Agent
from pausemesh.agui.conversations import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    Conversations,
    ThreadList,
)
from pausemesh.agui.double_texting import requested_policy
from pausemesh.agui.input import RunAgentInput, check_thread_id, read_run_input
from pausemesh.agui.run import RunHost, each, snapshot_pieces, thread_snapshot
from pausemesh.agui.run.snapshots import (
    DEFAULT_SNAPSHOT_MESSAGES,
    MAX_MESSAGE_PAGE,
    MessagePage,
)
from pausemesh.agui.sse import MEDIA_TYPE, SSE_HEADERS, counted_stream, replay_cursor
from pausemesh.core.large_json import LARGE_BYTES
from pausemesh.web.context import PauseMeshCaller
from pausemesh.web.limits import Limits, keep_alive_writer
from pausemesh.web.problems import problem_responses
from pausemesh.web.schemas import StrictBody, ThreadTitleBody, strict_body

__all__ = ("AguiCaller", "AguiController", "agui_dependencies", "host_factory")


@dataclass(frozen=True, slots=True)
class AguiCaller:
    """What an AG-UI route needs, in one dependency (see ``context.py``: Litestar resolves
    sibling dependencies in an anyio task group, one task each, on every request)."""

    host: RunHost
    caller: PauseMeshCaller

    @property
    def principal(self) -> str | None:
        return self.caller.principal

    @property
    def limits(self) -> Limits:
        return self.caller.limits

    @property
    def conversations(self) -> Conversations:
        host = self.host
        return Conversations(threads=host.threads, service=host.service, clock=host.clock)


# The one dependency the plugin provides (``agui_dependencies``), over its ``caller``.
Agui = NamedDependency[AguiCaller]


def _sse(frames: Any) -> Stream:
    return Stream(frames, media_type=MEDIA_TYPE, headers=SSE_HEADERS)


async def _run_input(request: Request[Any, Any, Any]) -> RunAgentInput:
    return read_run_input(await request.body())


class AguiController(Controller):
    path = "/agui"
    tags = ["AG-UI"]  # noqa: RUF012 - Litestar reads it as a class attribute

    @post(
        "/",
        summary="Run the agent on a thread (AG-UI RunAgentInput in, SSE out)",
        status_code=200,
        media_type="text/event-stream",
        responses=problem_responses(400, 401, 404, 413, 429, 503),
    )
    async def run(
        self,
        request: Request[Any, Any, Any],
        agui: Agui,
    ) -> Stream:
        run_input = await _run_input(request)
        principal = agui.principal
        limits = agui.limits
        limits.refuse_if_draining()
        requested_policy(run_input)  # a bad doubleTexting is a 400 before the stream
        await limits.admit_work(principal, request.scope)
        await agui.host.check_access(run_input.thread_id, principal)
        # The roles travel to the agent (``ctx.roles``) beside the principal.
        roles = agui.caller.roles
        frames = counted_stream(agui.host.run(run_input, principal, roles=roles), "run")
        return _sse(limits.stream(principal, request.scope, frames))

    @post(
        "/connect",
        summary="Restore a thread without running the agent (snapshots and open interrupts)",
        status_code=200,
        media_type="text/event-stream",
        responses=problem_responses(400, 401, 413, 429, 503),
    )
    async def connect(
        self,
        request: Request[Any, Any, Any],
        agui: Agui,
    ) -> Stream:
        run_input = await _run_input(request)
        frames = counted_stream(agui.host.connect(run_input, agui.principal), "connect")
        return _sse(agui.limits.stream(agui.principal, request.scope, frames))

    @get(
        "/threads",
        summary="The caller's threads, most recently updated first (cursor-paginated)",
        responses=problem_responses(400, 401),
    )
    async def threads(
        self,
        agui: Agui,
        limit: Annotated[
            int, QueryParameter(name="limit", ge=1, le=MAX_PAGE_SIZE)
        ] = DEFAULT_PAGE_SIZE,
        cursor: Annotated[str | None, QueryParameter(name="cursor", max_length=1024)] = None,
    ) -> ThreadList:
        return await agui.conversations.page(agui.principal, limit=limit, cursor=cursor)

    @patch(
        "/threads/{thread_id:str}",
        summary="Rename a thread",
        responses=problem_responses(400, 401, 404, 413),
    )
    async def rename(
        self,
        thread_id: FromPath[str],
        data: JSONBody[StrictBody[ThreadTitleBody]],
        agui: Agui,
    ) -> dict[str, str]:
        check_thread_id(thread_id)
        body = strict_body(data, ThreadTitleBody)
        title = await agui.conversations.rename(thread_id, agui.principal, body.title)
        return {"threadId": thread_id, "title": title}

    @delete(
        "/threads/{thread_id:str}",
        summary="Erase a thread: cancel its pending questions, delete its messages and events",
        status_code=204,
        responses=problem_responses(400, 401, 404),
    )
    async def erase(self, thread_id: FromPath[str], agui: Agui) -> None:
        check_thread_id(thread_id)
        await agui.conversations.delete(thread_id, agui.principal)

    @get(
        "/threads/{thread_id:str}",
        summary="Thread snapshot: the newest messages, state, open interrupts",
        responses=problem_responses(400, 401, 404),
    )
    async def thread(self, thread_id: FromPath[str], agui: Agui) -> dict[str, Any]:
        check_thread_id(thread_id)
        record = await agui.host.snapshot(thread_id, agui.principal)
        if record.stored_bytes <= LARGE_BYTES:
            return thread_snapshot(record)
        # A long thread's snapshot goes out in pieces, each write its own turn of the loop (the
        # same JSON: Litestar sends a returned response as it is, whatever the annotation).
        pieces = await snapshot_pieces(record)
        return cast("dict[str, Any]", Stream(each(pieces), media_type=MediaType.JSON))

    @get(
        "/threads/{thread_id:str}/messages",
        summary="A page of the thread's messages, newest first, before a cursor",
        responses=problem_responses(400, 401, 404),
    )
    async def messages(
        self,
        thread_id: FromPath[str],
        agui: Agui,
        limit: Annotated[
            int, QueryParameter(name="limit", ge=1, le=MAX_MESSAGE_PAGE)
        ] = DEFAULT_SNAPSHOT_MESSAGES,
        before: Annotated[str | None, QueryParameter(name="before")] = None,
    ) -> MessagePage:
        check_thread_id(thread_id)
        return await agui.host.messages(thread_id, agui.principal, before=before, limit=limit)

    @get(
        "/threads/{thread_id:str}/events",
        summary="Replay the thread's events after a sequence, then tail live ones (SSE)",
        media_type="text/event-stream",
        responses=problem_responses(400, 401, 404, 429, 503),
    )
    async def events(
        self,
        *,
        request: Request[Any, Any, Any],
        thread_id: FromPath[str],
        agui: Agui,
        last_event_id: Annotated[str | None, HeaderParameter(name="Last-Event-ID")] = None,
        after: Annotated[str | None, QueryParameter(name="after")] = None,
    ) -> Stream:
        check_thread_id(thread_id)
        cursor = replay_cursor(last_event_id, after)
        await agui.host.load(thread_id, agui.principal)
        # The guard's writer rides down with the tail: the wheel writes its idle keep-alives.
        keep_alive = keep_alive_writer(request.scope)
        tail = agui.host.tail(thread_id, after_sequence=cursor, keep_alive=keep_alive)
        frames = counted_stream(tail, "tail")
        return _sse(agui.limits.tail(agui.principal, request.scope, frames))


def host_factory(runtime: Callable[[], Any], agent: Agent) -> Callable[[], RunHost]:
    """One ``RunHost`` per running runtime.

    ``runtime()`` returns the plugin's ``Runtime`` (service + storage); the host is built on
    first use and rebuilt if the runtime changes (an app started twice, e.g. in tests).
    """
    cache: dict[int, RunHost] = {}

    def agui_host() -> RunHost:
        current = runtime()
        host = cache.get(id(current))
        if host is None:
            threads = current.storage.threads
            if threads is None:
                msg = "the AG-UI routes need a thread store (Storage.threads)"
                raise RuntimeError(msg)
            cache.clear()
            host = cache[id(current)] = RunHost(
                agent=agent,
                service=current.service,
                threads=threads,
                operations=current.storage.operations,
                lease_seconds=current.settings.lease_seconds,
                keepalive_seconds=current.settings.keepalive_seconds,
                lease_holder=current.instance.holder,
                leases=current.leases,
                run_timeout_seconds=current.settings.run_timeout_seconds,
                drain=current.drain,
                max_thread_bytes=current.settings.max_thread_bytes,
                snapshot_messages=current.settings.snapshot_messages,
                double_texting=current.settings.double_texting,
                run_queue=current.storage.run_queue,
                queue_limit=current.settings.thread_queue_limit,
            )
        return host

    return agui_host


def agui_dependencies(agui_host: Callable[[], RunHost]) -> dict[str, Provide]:
    """The ``agui`` dependency (over the plugin's ``caller``), and ``agui_host`` and
    ``agui_conversations`` for a host's own routes, over ``host_factory``'s host."""

    def agui(caller: NamedDependency[PauseMeshCaller]) -> AguiCaller:
        return AguiCaller(host=agui_host(), caller=caller)

    def agui_conversations() -> Conversations:
        host = agui_host()
        return Conversations(threads=host.threads, service=host.service, clock=host.clock)

    return {
        "agui": Provide(agui, sync_to_thread=False),
        "agui_host": Provide(agui_host, sync_to_thread=False),
        "agui_conversations": Provide(agui_conversations, sync_to_thread=False),
    }
