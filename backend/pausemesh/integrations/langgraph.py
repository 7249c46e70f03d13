"""Compiled LangGraph graphs on PauseMesh: durable interrupts and at-most-once side effects.

Install with ``pip install pausemesh[langgraph]``; ``as_agent`` wraps a compiled graph in
``LangGraphAgent`` on its own. What a run does:

- The graph runs with a checkpointer on PauseMesh's own database: the official
  ``AsyncSqliteSaver`` on the same SQLite file, or ``AsyncPostgresSaver`` on the same PostgreSQL
  database (tables created on first use, so that role needs CREATE there). The checkpoint thread
  is the AG-UI thread, so a pending ``interrupt()`` survives SIGKILL, restarts and replicas.
- Messages stream as AG-UI events (``TEXT_MESSAGE_*`` for AI text, ``TOOL_CALL_*`` for the
  tool calls an AI message makes, ``TOOL_CALL_RESULT`` for tool messages); the graph's other
  state keys are the AG-UI state (``STATE_SNAPSHOT`` at the end of each run).
- Each pending ``interrupt(value)`` becomes one interrupt of the run's cohort. Its
  ``responseSchema`` is the interrupt's own (``interrupt(value, response_schema=...)``), else
  ``value["response_schema"]``, else ``{}`` (any JSON value); its message is
  ``value["message"]`` (or the value itself when it is a string); ``value["tool_call_id"]``
  links it to a tool call.
- The answers resume the graph with ``Command(resume={langgraph interrupt id: answer})`` (a
  cancelled interrupt resumes with ``None``). If the graph already moved past them (a crash
  after the node finished), the run continues from the last checkpoint instead.
- ``at_most_once(key, action, ...)`` runs a node's side effect through PauseMesh's operation
  ledger, keyed by thread and ``key``: LangGraph re-runs a node from its start when it resumes,
  and a retried run re-runs the node a crash interrupted; neither repeats the side effect.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

import aiosqlite
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel
from langgraph.types import Command
from pydantic_core import to_jsonable_python

from pausemesh.agui.agent import AgentOutput, Decision, Operations, PauseRequest, RunContext
from pausemesh.agui.events import (
    Event,
    Message,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from pausemesh.agui.events import TextPart as AguiTextPart
from pausemesh.core.errors import PauseMeshError
from pausemesh.integrations.agents_database import AgentDatabase

__all__ = ("DOMAIN", "LangGraphAgent", "at_most_once", "is_compiled_graph")

DOMAIN: Final = "langgraph"
"""The operation ledger domain of ``at_most_once`` side effects (business key: thread:key)."""

_META: Final = "langgraph"
_MESSAGES: Final = "messages"


@dataclass(frozen=True, slots=True)
class _Run:
    operations: Operations | None
    thread_id: str


_CURRENT: ContextVar[_Run | None] = ContextVar("pausemesh_langgraph_run", default=None)


def is_compiled_graph(obj: object) -> TypeGuard[Pregel[Any, Any, Any, Any]]:
    return isinstance(obj, Pregel)


async def at_most_once(
    key: str,
    action: Callable[[], Awaitable[Any]],
    *,
    tool: str,
    arguments: Any = None,
    domain: str = DOMAIN,
) -> Any:
    """Run ``action`` at most once per (thread, ``key``) and return its (recorded) result.

    Call it from a node of a graph served by PauseMesh. The result must be JSON. The same key
    with other ``tool``/``arguments`` is ``OPERATION_CONFLICT``; a crash while ``action`` ran
    leaves it ``OUTCOME_UNKNOWN`` (never retried automatically).
    """
    run = _CURRENT.get()
    if run is None or run.operations is None:
        msg = "at_most_once runs inside a graph served by PauseMesh (with its operation ledger)"
        raise RuntimeError(msg)
    outcome = await run.operations.run_once(
        domain,
        f"{run.thread_id}:{key}",
        tool=tool,
        arguments=to_jsonable_python(arguments, fallback=str),
        action=action,
    )
    return outcome.result


# -- checkpoints in PauseMesh's database -----------------------------------------------------

_POSTGRES_READY: set[tuple[str, str]] = set()
# Replicas starting together must not race CREATE TABLE IF NOT EXISTS (it can fail in PostgreSQL).
_SETUP_LOCK: Final = "SELECT pg_advisory_lock(hashtext('pausemesh:langgraph-checkpoints'))"
_SETUP_UNLOCK: Final = "SELECT pg_advisory_unlock(hashtext('pausemesh:langgraph-checkpoints'))"


@contextlib.asynccontextmanager
async def _checkpointer(database: AgentDatabase) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """A checkpointer on PauseMesh's database, for one run."""
    if database.postgres_url is not None:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver  # noqa: PLC0415 - PostgreSQL only
        from psycopg import AsyncConnection  # noqa: PLC0415
        from psycopg.conninfo import make_conninfo  # noqa: PLC0415
        from psycopg.rows import dict_row  # noqa: PLC0415

        # The checkpoint tables live in PauseMesh's schema (created there on first use).
        conninfo = make_conninfo(
            database.postgres_url, options=f"-c search_path={database.postgres_schema}"
        )
        # The connection AsyncPostgresSaver.from_conn_string would open, kept typed here.
        async with await AsyncConnection.connect(
            conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as connection:
            saver = AsyncPostgresSaver(conn=connection)
            key = (database.postgres_url, database.postgres_schema)
            if key not in _POSTGRES_READY:
                await connection.execute(_SETUP_LOCK)
                try:
                    await saver.setup()
                finally:
                    await connection.execute(_SETUP_UNLOCK)
                _POSTGRES_READY.add(key)
            yield saver
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: PLC0415 - SQLite only

    # The PauseMesh file is in WAL mode already; wait for its writers rather than fail.
    async with aiosqlite.connect(database.sqlite_path, timeout=30) as connection:
        yield AsyncSqliteSaver(connection)


# -- AG-UI events ------------------------------------------------------------------------------


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p if isinstance(p, str) else str(p.get("text", ""))
            for p in content
            if isinstance(p, str) or (isinstance(p, dict) and p.get("type") == "text")
        )
    return str(content)


class _EventMapper:
    """LangGraph ``messages`` stream items → AG-UI events."""

    def __init__(self) -> None:
        self._text: str | None = None  # the AI message whose text is open
        self._streamed: set[str] = set()  # AI message ids already sent as chunks
        self._tools: dict[int, str] = {}  # open streamed tool calls: chunk index → id
        self._parent: str | None = None

    def close(self) -> list[Event]:
        events: list[Event] = [ToolCallEndEvent(tool_call_id=i) for i in self._tools.values()]
        self._tools.clear()
        if self._text is not None:
            events.append(TextMessageEndEvent(message_id=self._text))
            self._text = None
        return events

    def _message_id(self, message: BaseMessage) -> str:
        if message.id is None:
            message.id = f"msg-{uuid.uuid4()}"
        return message.id

    def map(self, message: BaseMessage) -> list[Event]:
        if isinstance(message, AIMessageChunk):
            return self._chunk(message)
        if isinstance(message, AIMessage):
            return self._whole(message)
        if isinstance(message, ToolMessage):
            return [
                *self.close(),
                ToolCallResultEvent(
                    message_id=self._message_id(message),
                    tool_call_id=message.tool_call_id,
                    content=_content_text(message.content),
                    role="tool",
                ),
            ]
        return []

    def _chunk(self, chunk: AIMessageChunk) -> list[Event]:
        message_id = self._message_id(chunk)
        events: list[Event] = []
        if self._parent != message_id:
            events += self.close()
            self._parent = message_id
        self._streamed.add(message_id)
        text = _content_text(chunk.content)
        if text:
            if self._text is None:
                self._text = message_id
                events.append(TextMessageStartEvent(message_id=message_id, role="assistant"))
            events.append(TextMessageContentEvent(message_id=message_id, delta=text))
        for piece in chunk.tool_call_chunks:
            index = piece.get("index") or 0
            if index not in self._tools and piece.get("id"):
                self._tools[index] = str(piece["id"])
                events.append(
                    ToolCallStartEvent(
                        tool_call_id=self._tools[index],
                        tool_call_name=str(piece.get("name") or ""),
                        parent_message_id=message_id,
                    )
                )
            if index in self._tools and piece.get("args"):
                events.append(
                    ToolCallArgsEvent(tool_call_id=self._tools[index], delta=str(piece["args"]))
                )
        return events

    def _whole(self, message: AIMessage) -> list[Event]:
        message_id = self._message_id(message)
        if message_id in self._streamed:
            return self.close()  # already sent chunk by chunk
        events = self.close()
        text = _content_text(message.content)
        if text:
            events += [
                TextMessageStartEvent(message_id=message_id, role="assistant"),
                TextMessageContentEvent(message_id=message_id, delta=text),
                TextMessageEndEvent(message_id=message_id),
            ]
        for call in message.tool_calls:
            call_id = call.get("id") or f"call-{uuid.uuid4()}"
            events += [
                ToolCallStartEvent(
                    tool_call_id=call_id, tool_call_name=call["name"], parent_message_id=message_id
                ),
                ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(call["args"])),
                ToolCallEndEvent(tool_call_id=call_id),
            ]
        return events


# -- the agent -------------------------------------------------------------------------------


def _pause(interrupt: Any) -> PauseRequest:
    value = interrupt.value
    fields = value if isinstance(value, dict) else {}
    schema = getattr(interrupt, "response_schema", None)
    if not isinstance(schema, dict):
        schema = fields.get("response_schema", fields.get("responseSchema"))
    if isinstance(fields.get("message"), str):
        message = fields["message"]
    elif isinstance(value, str):
        message = value
    else:
        message = json.dumps(to_jsonable_python(value, fallback=str))
    tool_call_id = fields.get("tool_call_id", fields.get("toolCallId"))
    return PauseRequest(
        message=message,
        reason=str(fields.get("reason", "input_required")),
        # Without one, the empty schema: any JSON value answers it (LangGraph resumes with it).
        response_schema=schema if isinstance(schema, dict) else {},
        tool_call_id=tool_call_id if isinstance(tool_call_id, str) else None,
        metadata={_META: {"interruptId": interrupt.id}},
    )


def _resume_values(decisions: Mapping[str, Decision]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for decision in decisions.values():
        mine = decision.metadata.get(_META)
        if isinstance(mine, dict) and isinstance(mine.get("interruptId"), str):
            values[mine["interruptId"]] = (
                decision.payload if decision.status == "resolved" else None
            )
    return values


def _new_user_messages(messages: Sequence[Message], known: set[str]) -> list[HumanMessage]:
    added: list[HumanMessage] = []
    for message in messages:
        if isinstance(message, UserMessage) and message.id not in known:
            content = message.content
            text = (
                content
                if isinstance(content, str)
                else "".join(p.text for p in content if isinstance(p, AguiTextPart))
            )
            added.append(HumanMessage(content=text, id=message.id))
    return added


class LangGraphAgent:
    """A compiled LangGraph graph as a PauseMesh agent (see the module docstring).

    ``checkpointer`` (a factory of an async context manager yielding a saver) replaces the
    default one on PauseMesh's database.
    """

    framework = "langgraph"  # AG-UI capability discovery's identity.type
    # The graph's checkpoint holds its conversation: a run needs only the user messages its
    # request added (``ctx.messages`` of a lazy-history agent), never the thread's (issue 42).
    pausemesh_lazy_history = True

    def __init__(
        self,
        graph: Pregel[Any, Any, Any, Any],
        *,
        database: AgentDatabase | None = None,
        checkpointer: Callable[[], contextlib.AbstractAsyncContextManager[Any]] | None = None,
    ) -> None:
        self.graph = graph
        self.database = database
        self._checkpointer = checkpointer

    def bind_database(self, database: AgentDatabase) -> LangGraphAgent:
        """This agent on ``database`` (the app's), unless it already has one."""
        if self.database is not None or self._checkpointer is not None:
            return self
        return LangGraphAgent(self.graph, database=database)

    def _saver(self) -> contextlib.AbstractAsyncContextManager[Any]:
        if self._checkpointer is not None:
            return self._checkpointer()
        if self.database is None:
            msg = "a LangGraph agent needs PauseMesh's database for its checkpoints"
            raise RuntimeError(msg)
        return _checkpointer(self.database)

    async def __call__(self, ctx: RunContext) -> AsyncIterator[AgentOutput]:
        token = _CURRENT.set(_Run(ctx.operations, ctx.thread_id))
        try:
            async with self._saver() as saver:
                graph = self.graph.copy(update={"checkpointer": saver})
                config: Any = {"configurable": {"thread_id": ctx.thread_id}}
                async for output in self._run(graph, config, ctx):
                    yield output
        finally:
            _CURRENT.reset(token)

    async def _input(self, graph: Pregel[Any, Any, Any, Any], config: Any, ctx: RunContext) -> Any:
        current = await graph.aget_state(config)
        if ctx.decisions:
            pending = {i.id for i in current.interrupts}
            answers = {k: v for k, v in _resume_values(ctx.decisions).items() if k in pending}
            # Nothing left to answer: a crash came after those nodes finished; carry on.
            return Command(resume=answers) if answers else None
        values = current.values if isinstance(current.values, dict) else {}
        known = {m.id for m in values.get(_MESSAGES, ()) if isinstance(m, BaseMessage) and m.id}
        added = _new_user_messages(ctx.messages, known)
        return {_MESSAGES: added} if added else None

    async def _run(
        self, graph: Pregel[Any, Any, Any, Any], config: Any, ctx: RunContext
    ) -> AsyncIterator[AgentOutput]:
        graph_input = await self._input(graph, config, ctx)
        mapper = _EventMapper()
        try:
            async for mode, item in graph.astream(graph_input, config, stream_mode=["messages"]):
                if mode == "messages":
                    message = item[0] if isinstance(item, tuple) else item
                    if isinstance(message, BaseMessage):
                        for event in mapper.map(message):
                            yield event
        except PauseMeshError as error:
            from pausemesh.agui.events import RunErrorEvent  # noqa: PLC0415 - error path only

            for event in mapper.close():
                yield event
            yield RunErrorEvent(code=error.code, message=error.message)
            return
        for event in mapper.close():
            yield event
        state = await graph.aget_state(config)
        values = state.values if isinstance(state.values, dict) else {}
        shared = {k: v for k, v in values.items() if k != _MESSAGES}
        if shared:
            yield StateSnapshotEvent(snapshot=to_jsonable_python(shared, fallback=str))
        for interrupt in state.interrupts:
            yield _pause(interrupt)
