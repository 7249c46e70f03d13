"""One step of an MCP Tasks conversation, spoken by the official ``mcp`` 1.30 client.

Run with the Python of the venv built from ``requirements.txt`` next to this file (the app pins
``mcp`` 2.3.0, whose client has no tasks). Usage::

    python client.py URL STEP '{"json": "arguments"}'

Each run opens a 2025-11-25 session (``x-principal`` header from ``principal``), does ``STEP``
and prints one JSON object on stdout:

* ``call`` ``{tool, arguments}``: ``call_tool_as_task`` → ``{capabilities, task}``;
* ``get`` / ``cancel`` ``{taskId}``: ``get_task`` / ``cancel_task`` → ``{task}`` or ``{error}``;
* ``list`` ``{cursor?}``: ``list_tasks`` → ``{tasks, nextCursor}``;
* ``result`` ``{taskId, answer? | answers?}``: ``get_task_result``; each question sent on its
  stream is answered with the next of ``answers`` (``{"action": ..., "content": ...}``), or
  left unanswered when none is left → ``{result, asked, notifications}`` or ``{error}``;
* ``tools`` ``{}``: ``list_tools`` → ``{tools}``;
* ``watch`` ``{tool?, arguments?, until?, declare?}``: a session that stays connected without
  waiting on ``tasks/result``. With ``declare`` it declares ``capabilities.tasks`` (a
  ``tasks/list`` handler). With ``tool`` it first calls it as a task. It prints
  ``{ready, task?}`` as a first line, then waits until a ``notifications/tasks/status`` of
  the task (or of ``until``) says a terminal status, or until its stdin is closed, and prints
  ``{notifications}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
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


async def _no_tasks(_context: Any, _params: Any) -> types.ListTasksResult:
    return types.ListTasksResult(tasks=[])


async def _watch(
    session: ClientSession, args: dict[str, Any], notices: list[Any], seen: asyncio.Event
) -> dict[str, Any]:
    ready: dict[str, Any] = {"ready": True}
    until = args.get("until")
    if "tool" in args:
        created = await session.experimental.call_tool_as_task(args["tool"], args["arguments"])
        ready["task"] = _dump(created.task)
        until = until or created.task.taskId
    print(json.dumps(ready), flush=True)

    def terminal() -> bool:
        return any(
            n["params"].get("taskId") == until and n["params"].get("status") in _TERMINAL
            for n in notices
        )

    # A daemon thread: the process must not wait for stdin to close once the task ended.
    loop = asyncio.get_running_loop()
    stdin_closed: asyncio.Future[None] = loop.create_future()

    def read_stdin() -> None:
        sys.stdin.read()
        loop.call_soon_threadsafe(lambda: stdin_closed.done() or stdin_closed.set_result(None))

    threading.Thread(target=read_stdin, daemon=True).start()
    while not terminal() and not stdin_closed.done():
        seen.clear()
        await asyncio.wait(
            {stdin_closed, asyncio.ensure_future(seen.wait())}, return_when="FIRST_COMPLETED"
        )
    return {"notifications": notices}


async def step(url: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
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
        httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(60, read=120)) as http,
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
            return await _watch(session, args, notices, seen)

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
            raise SystemExit(f"unknown step {name}")
        try:
            return await steps[name]()
        except McpError as error:
            return {"error": _dump(error.error), "asked": asked}


def main() -> None:
    url, name, raw = sys.argv[1:4]
    print(json.dumps(asyncio.run(step(url, name, json.loads(raw)))))


if __name__ == "__main__":
    main()
