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
  left unanswered when none is left → ``{result, asked, notifications}`` or ``{error}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.shared.session import RequestResponder


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def step(url: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    asked: list[Any] = []
    notices: list[Any] = []
    answers = list(args.get("answers") or ([args["answer"]] if "answer" in args else []))

    async def elicit(_context: Any, params: types.ElicitRequestParams) -> Any:
        asked.append(_dump(params))
        if not answers:
            await asyncio.Event().wait()
        return types.ElicitResult(**answers.pop(0))

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            notices.append(_dump(message.root))
        elif isinstance(message, RequestResponder):
            return

    headers = {"x-principal": args.get("principal", "alice")}
    async with (
        httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(60, read=120)) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(
            read, write, elicitation_callback=elicit, message_handler=on_message
        ) as session,
    ):
        initialized = await session.initialize()
        tasks = session.experimental
        try:
            if name == "call":
                created = await tasks.call_tool_as_task(args["tool"], args["arguments"])
                capabilities = _dump(initialized.capabilities)
                return {"capabilities": capabilities, "task": _dump(created.task)}
            if name == "get":
                return {"task": _dump(await tasks.get_task(args["taskId"]))}
            if name == "cancel":
                return {"task": _dump(await tasks.cancel_task(args["taskId"]))}
            if name == "list":
                listed = await tasks.list_tasks(args.get("cursor"))
                return {"tasks": [_dump(t) for t in listed.tasks], "nextCursor": listed.nextCursor}
            if name == "result":
                result = await tasks.get_task_result(args["taskId"], types.CallToolResult)
                return {"result": _dump(result), "asked": asked, "notifications": notices}
        except McpError as error:
            return {"error": _dump(error.error), "asked": asked}
    raise SystemExit(f"unknown step {name}")


def main() -> None:
    url, name, raw = sys.argv[1:4]
    print(json.dumps(asyncio.run(step(url, name, json.loads(raw)))))


if __name__ == "__main__":
    main()
