"""A LangGraph support assistant whose refunds need a person's approval, served by PauseMesh.

Run it (from the repository root)::

    pausemesh serve --agent examples.langgraph_refund:agent

A plain compiled graph: ``agent`` (the model) → ``approve`` (asks with ``interrupt()``, then
refunds through ``at_most_once``) → ``agent`` (confirms). PauseMesh keeps the graph's
checkpoints in its own database, so the question survives restarts, and the refund runs once
even though LangGraph re-runs ``approve`` from its start when it resumes. The graph state's
``refunds`` is the AG-UI state: one entry per refund actually issued.

With no model configured the graph uses LangChain's own scripted ``FakeMessagesListChatModel``
(no network, no key): a user message naming an order id such as ``A-1001`` makes it call
``issue_refund`` for that order (2500 cents), and after the tool result it confirms in text.
Set ``PAUSEMESH_EXAMPLE_MODEL`` (e.g. ``openai:gpt-4o-mini``; needs ``langchain`` and the
provider's package and key) to run the same file on a real model.
"""

from __future__ import annotations

import json
import operator
import os
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

from pausemesh.integrations.approval import approval_message, approval_schema
from pausemesh.integrations.langgraph import at_most_once

__all__ = ("REFUND_CENTS", "agent", "build_graph", "scripted_reply")

REFUND_CENTS = 2500
_ORDER = re.compile(r"\b[A-Z]-\d{4}\b")
_ARGUMENTS = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "amount_cents": {"type": "integer"}},
    "required": ["order_id", "amount_cents"],
    "additionalProperties": False,
}

Payments = Callable[[str, int], Awaitable[dict[str, Any]]]
Model = Callable[[Sequence[BaseMessage]], BaseChatModel]


class RefundState(MessagesState):
    refunds: Annotated[list[dict[str, Any]], operator.add]


async def fake_payments(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Stands in for the payment provider's refund call (the side effect that must happen once)."""
    return {
        "refundId": f"rf-{uuid.uuid4().hex[:12]}",
        "orderId": order_id,
        "amountCents": amount_cents,
    }


def scripted_reply(messages: Sequence[BaseMessage]) -> AIMessage:
    """The scripted model's next message: refund the order named, then confirm or report."""
    last = messages[-1] if messages else None
    if isinstance(last, ToolMessage):
        if last.status == "error":
            return AIMessage(content=f"The refund was declined: {last.content}")
        return AIMessage(content=f"Done: {last.content}.")
    text = last.content if isinstance(last, HumanMessage) and isinstance(last.content, str) else ""
    found = _ORDER.search(text)
    if found is None:
        return AIMessage(content="Which order should I refund? Tell me its id, like A-1001.")
    order_id = found.group(0)
    call = {
        "name": "issue_refund",
        "args": {"order_id": order_id, "amount_cents": REFUND_CENTS},
        "id": f"call-{uuid.uuid4().hex[:12]}",
    }
    return AIMessage(content=f"I will refund order {order_id}.", tool_calls=[call])


def scripted_model(messages: Sequence[BaseMessage]) -> BaseChatModel:
    return FakeMessagesListChatModel(responses=[scripted_reply(messages)])


def configured_model(name: str) -> Model:
    """A real model by name (``provider:model``), with ``issue_refund`` bound as a tool."""
    from langchain.chat_models import init_chat_model  # type: ignore[import-not-found]  # noqa: PLC0415

    def issue_refund(order_id: str, amount_cents: int) -> str:
        """Refund an order (needs a person's approval)."""
        return f"{order_id}:{amount_cents}"

    model = init_chat_model(name).bind_tools([issue_refund])
    return lambda _messages: model


def build_graph(model: Model | None = None, payments: Payments = fake_payments) -> Any:
    """The compiled graph (see the module docstring)."""
    configured = os.environ.get("PAUSEMESH_EXAMPLE_MODEL")
    chat = model or (configured_model(configured) if configured else scripted_model)

    async def agent_node(state: RefundState) -> dict[str, Any]:
        reply = await chat(state["messages"]).ainvoke(state["messages"])
        # "refunds" joins the state (empty) on the first turn; the reducer appends.
        return {"messages": [reply], "refunds": []}

    async def approve_node(state: RefundState) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)  # noqa: S101 - the router sends only tool calls here
        call = last.tool_calls[0]
        answer = interrupt(
            {
                "message": approval_message(
                    "issue_refund", json.dumps(call["args"], separators=(",", ":"))
                ),
                "reason": "tool_call",
                "tool_call_id": call["id"],
            },
            response_schema=approval_schema(_ARGUMENTS),
        )
        if not isinstance(answer, dict) or answer.get("approved") is not True:
            reason = answer.get("reason") if isinstance(answer, dict) else None
            message = reason or "The user declined this tool call."
            return {
                "messages": [ToolMessage(content=message, tool_call_id=call["id"], status="error")]
            }
        order = {**call["args"], **(answer.get("editedArgs") or {})}

        async def refund() -> dict[str, Any]:
            return await payments(order["order_id"], order["amount_cents"])

        # LangGraph re-runs this node from the top when it resumes (and a retried run re-runs a
        # node a crash cut short): the ledger makes the refund itself happen once.
        issued = await at_most_once(
            f"refund:{call['id']}", refund, tool="issue_refund", arguments=order
        )
        done = f"refund {issued['refundId']} of {issued['amountCents']} cents for {issued['orderId']} issued"
        return {
            "messages": [ToolMessage(content=done, tool_call_id=call["id"])],
            "refunds": [issued],
        }

    def route(state: RefundState) -> str:
        last = state["messages"][-1]
        return "approve" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(RefundState)
    builder.add_node("agent", agent_node)
    builder.add_node("approve", approve_node)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["approve", END])
    builder.add_edge("approve", "agent")
    return builder.compile()


agent = build_graph()
