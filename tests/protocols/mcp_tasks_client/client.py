"""MCP Tasks conversations, spoken by the official ``mcp`` 1.30 client, one session per step.

Run with the Python of the venv built from ``requirements.txt`` next to this file (the app pins
``mcp`` 2.3.0, whose client has no tasks). One process serves a whole test run (importing
``mcp`` costs about a CPU-second): it reads JSON lines on stdin and exits at EOF::

    {"id": 1, "url": URL, "step": STEP, "args": {...}}   run STEP in a session of its own
    {"id": 1, "stop": true}                              end watch 1 (it replies as usual)
    {"id": 1, "cancel": true}                            abandon step 1 (no reply)

Steps run concurrently. Each opens its own 2025-11-25 session (``x-principal`` header from
``principal``), does ``STEP`` and writes ``{"id", "reply": "done", ...output}`` on stdout, or
``{"id", "reply": "failed", "traceback"}`` if it raised:

* ``call`` ``{tool, arguments}``: ``call_tool_as_task`` → ``{capabilities, task}``;
* ``get`` / ``cancel`` ``{taskId}``: ``get_task`` / ``cancel_task`` → ``{task}`` or ``{error}``;
* ``list`` ``{cursor?}``: ``list_tasks`` → ``{tasks, nextCursor}``;
* ``result`` ``{taskId, answer? | answers?}``: ``get_task_result``; each question sent on its
  stream is answered with the next of ``answers`` (``{"action": ..., "content": ...}``), or
  left unanswered when none is left → ``{result, asked, notifications}`` or ``{error}``;
* ``tools`` ``{}``: ``list_tools`` → ``{tools}``;
* ``watch`` ``{tool?, arguments?, until?, declare?}``: a session that stays connected without
  waiting on ``tasks/result``. With ``declare`` it declares ``capabilities.tasks`` (a
  ``tasks/list`` handler). With ``tool`` it first calls it as a task. It writes
  ``{"id", "reply": "ready", "ready": true, "task"?}`` first, then waits until a
  ``notifications/tasks/status`` of the task (or of ``until``) says a terminal status, or until
  it is told to stop, and replies ``{notifications}``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import sys
import traceback
from collections.abc import Callable
from typing import Any

import httpx
from mcp import ClientSession, types
from mcp.client.experimental.task_handlers import ExperimentalTaskHandlers
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.shared.session import RequestResponder


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


_TERMINAL = {"completed", "failed", "cancelled"}


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # httpx would load the CA bundle again for every session; the servers are plain http anyway.
    return ssl.create_default_context()


async def _no_tasks(_context: Any, _params: Any) -> types.ListTasksResult:
    return types.ListTasksResult(tasks=[])


async def _watch(
    session: ClientSession,
    args: dict[str, Any],
    notices: list[Any],
    seen: asyncio.Event,
    ready: Callable[[dict[str, Any]], None],
    stop: asyncio.Event,
) -> dict[str, Any]:
    first: dict[str, Any] = {"ready": True}
    until = args.get("until")
    if "tool" in args:
        created = await session.experimental.call_tool_as_task(args["tool"], args["arguments"])
        first["task"] = _dump(created.task)
        until = until or created.task.taskId
    ready(first)

    def terminal() -> bool:
        return any(
            n["params"].get("taskId") == until and n["params"].get("status") in _TERMINAL
            for n in notices
        )

    stopped = asyncio.ensure_future(stop.wait())
    try:
        while not terminal() and not stop.is_set():
            seen.clear()
            waiting = asyncio.ensure_future(seen.wait())
            await asyncio.wait({stopped, waiting}, return_when="FIRST_COMPLETED")
            waiting.cancel()
    finally:
        stopped.cancel()
    return {"notifications": notices}


async def step(
    url: str,
    name: str,
    args: dict[str, Any],
    ready: Callable[[dict[str, Any]], None],
    stop: asyncio.Event,
) -> dict[str, Any]:
    asked: list[Any] = []
    notices: list[Any] = []
    seen = asyncio.Event()
    answers = list(args.get("answers") or ([args["answer"]] if "answer" in args else []))

    async def elicit(_context: Any, params: types.ElicitRequestParams) -> Any:
        asked.append(_dump(params))
        if not answers:
            await asyncio.Event().wait()
        return types.ElicitResult(**answers.pop(0))

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            notices.append(_dump(message.root))
            seen.set()
        elif isinstance(message, RequestResponder):
            return

    headers = {"x-principal": args.get("principal", "alice")}
    async with (
        httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(60, read=120), verify=_ssl_context()
        ) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(
            read,
            write,
            elicitation_callback=elicit,
            message_handler=on_message,
            experimental_task_handlers=(
                ExperimentalTaskHandlers(list_tasks=_no_tasks) if args.get("declare") else None
            ),
        ) as session,
    ):
        initialized = await session.initialize()
        tasks = session.experimental

        async def call() -> dict[str, Any]:
            created = await tasks.call_tool_as_task(args["tool"], args["arguments"])
            capabilities = _dump(initialized.capabilities)
            return {"capabilities": capabilities, "task": _dump(created.task)}

        async def listed() -> dict[str, Any]:
            page = await tasks.list_tasks(args.get("cursor"))
            return {"tasks": [_dump(t) for t in page.tasks], "nextCursor": page.nextCursor}

        async def result() -> dict[str, Any]:
            done = await tasks.get_task_result(args["taskId"], types.CallToolResult)
            return {"result": _dump(done), "asked": asked, "notifications": notices}

        async def get() -> dict[str, Any]:
            return {"task": _dump(await tasks.get_task(args["taskId"]))}

        async def cancel() -> dict[str, Any]:
            return {"task": _dump(await tasks.cancel_task(args["taskId"]))}

        async def tools() -> dict[str, Any]:
            return {"tools": [_dump(t) for t in (await session.list_tools()).tools]}

        async def watch() -> dict[str, Any]:
            return await _watch(session, args, notices, seen, ready, stop)

        steps = {
            "call": call,
            "get": get,
            "cancel": cancel,
            "list": listed,
            "result": result,
            "tools": tools,
            "watch": watch,
        }
        if name not in steps:
            raise ValueError(f"unknown step {name}")
        try:
            return await steps[name]()
        except McpError as error:
            return {"error": _dump(error.error), "asked": asked}


async def serve() -> None:
    """Read requests from stdin, each run as its own task; exit (cancelling what runs) at EOF."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    running: dict[int, tuple[asyncio.Task[None], asyncio.Event]] = {}

    def reply(request_id: int, kind: str, body: dict[str, Any]) -> None:
        # One thread writes, a line at a time: replies of concurrent sessions never interleave.
        sys.stdout.write(json.dumps({"id": request_id, "reply": kind, **body}) + "\n")
        sys.stdout.flush()

    async def run(request: dict[str, Any], stop: asyncio.Event) -> None:
        request_id = request["id"]
        try:
            output = await step(
                request["url"],
                request["step"],
                request["args"],
                lambda first: reply(request_id, "ready", first),
                stop,
            )
        except Exception:  # noqa: BLE001 - the test fails with this traceback
            reply(request_id, "failed", {"traceback": traceback.format_exc()})
        else:
            reply(request_id, "done", output)
        finally:
            running.pop(request_id, None)

    while line := await reader.readline():
        request = json.loads(line)
        request_id = request["id"]
        if "step" in request:
            stop = asyncio.Event()
            task = asyncio.create_task(run(request, stop))
            running[request_id] = (task, stop)
        elif request_id in running:
            task, stop = running[request_id]
            if request.get("cancel"):
                task.cancel()
            else:
                stop.set()
    left = [task for task, _ in running.values()]
    for task in left:
        task.cancel()
    await asyncio.gather(*left, return_exceptions=True)


def main() -> None:
    asyncio.run(serve())


if __name__ == "__main__":
    main()
