"""The example refund agents with two test hooks, served by real processes (``--agent``).

- ``PAUSEMESH_TEST_REFUND_LOG``: a file; each refund the payment side effect really performs
  appends one line, so a test counts executions, not what the agent says.
- ``PAUSEMESH_TEST_CRASH_MARKER``: a file path; the first time the model is called after a
  refund ran (the tool's outcome is recorded, the run has not finished), the file is created and
  the process SIGKILLs itself: a crash between the side effect and the end of the run.
- ``PAUSEMESH_TEST_CRASH_IN_TOOL``: a file path; the first refund SIGKILLs the process right after
  the payment (logged) and before the ledger records its outcome: the outcome is unknown.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from examples import langgraph_refund
from examples.pydantic_ai_refund import build_agent, fake_payments, scripted_model, scripted_stream
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, ToolMessage
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCalls

from pausemesh.integrations.pydantic_ai import PydanticAIAgent

__all__ = ("langgraph_agent", "pydantic_agent", "refund_log_lines")


def refund_log_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


async def _logged_payments(order_id: str, amount_cents: int) -> dict[str, Any]:
    refund = await fake_payments(order_id, amount_cents)
    log = os.environ.get("PAUSEMESH_TEST_REFUND_LOG")
    if log:
        with Path(log).open("a") as out:
            out.write(json.dumps(refund) + "\n")
            out.flush()
            os.fsync(out.fileno())
    _crash_once("PAUSEMESH_TEST_CRASH_IN_TOOL")
    return refund


def _refund_ran(messages: list[ModelMessage]) -> bool:
    last = messages[-1] if messages else None
    return isinstance(last, ModelRequest) and any(
        isinstance(p, ToolReturnPart) and p.outcome == "success" for p in last.parts
    )


def _crash_once(variable: str = "PAUSEMESH_TEST_CRASH_MARKER") -> None:
    marker = os.environ.get(variable)
    if marker and not Path(marker).exists():
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)


async def _crashing_stream(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    if _refund_ran(messages):
        _crash_once()
    async for chunk in scripted_stream(messages, info):
        yield chunk


pydantic_agent = PydanticAIAgent(
    build_agent(scripted_model(_crashing_stream), payments=_logged_payments),
    initial_state={"refunds": []},
)


def _crashing_chat(messages: Sequence[BaseMessage]) -> BaseChatModel:
    last = messages[-1] if messages else None
    if isinstance(last, ToolMessage) and last.status != "error":
        _crash_once()
    return langgraph_refund.scripted_model(messages)


langgraph_agent = langgraph_refund.build_graph(_crashing_chat, payments=_logged_payments)
