"""A pydantic-ai support assistant whose refunds need a person's approval, served by PauseMesh.

Run it (from the repository root)::

    pausemesh serve --agent examples.pydantic_ai_refund:agent

``issue_refund`` is an ordinary pydantic-ai tool declared with ``requires_approval=True``. When
the model calls it the run ends with an approval interrupt; the answer (``{"approved": true}``,
optionally with ``editedArgs`` or a ``reason``) continues the run on the server's copy of the
history, and the approved refund executes exactly once, whatever is retried or restarted.
The AG-UI state holds ``refunds``: one entry per refund actually issued.

With no model configured the agent runs on pydantic-ai's own scripted ``FunctionModel`` (no
network, no key): a user message naming an order id such as ``A-1001`` makes it call
``issue_refund`` for that order (2500 cents), and after the tool result it confirms in text.
Set ``PAUSEMESH_EXAMPLE_MODEL`` (e.g. ``openai:gpt-4o-mini`` with ``OPENAI_API_KEY``) to run
the same file on a real model.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic_ai import Agent, ToolReturn
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from pausemesh.agui import StateDeltaEvent
from pausemesh.integrations.pydantic_ai import PydanticAIAgent

__all__ = ("REFUND_CENTS", "agent", "build_agent", "scripted_model", "support_agent")

REFUND_CENTS = 2500
_ORDER = re.compile(r"\b[A-Z]-\d{4}\b")

Payments = Callable[[str, int], Awaitable[dict[str, Any]]]


async def fake_payments(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Stands in for the payment provider's refund call (the side effect that must happen once)."""
    return {
        "refundId": f"rf-{uuid.uuid4().hex[:12]}",
        "orderId": order_id,
        "amountCents": amount_cents,
    }


def _last_request(messages: list[ModelMessage]) -> ModelRequest | None:
    last = messages[-1] if messages else None
    return last if isinstance(last, ModelRequest) else None


async def scripted_stream(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """The scripted model: refund the order the user names, then confirm or report a denial."""
    del info  # the script needs only the conversation
    request = _last_request(messages)
    parts = request.parts if request is not None else []
    for part in parts:
        if isinstance(part, ToolReturnPart) and part.tool_name == "issue_refund":
            if part.outcome == "denied":
                yield f"The refund was declined: {part.model_response_str()}"
            else:
                yield f"Done: {part.model_response_str()}."
            return
    prompts = [p.content for p in parts if isinstance(p, UserPromptPart)]
    found = _ORDER.search(" ".join(p for p in prompts if isinstance(p, str)))
    if found is None:
        yield "Which order should I refund? Tell me its id, like A-1001."
        return
    order_id = found.group(0)
    yield f"I will refund order {order_id}."
    arguments = f'{{"order_id": "{order_id}", "amount_cents": {REFUND_CENTS}}}'
    yield {
        0: DeltaToolCall(
            name="issue_refund", json_args=arguments, tool_call_id=f"call-{uuid.uuid4().hex[:12]}"
        )
    }


def scripted_model(
    stream: Callable[..., AsyncIterator[str | DeltaToolCalls]] = scripted_stream,
) -> Model:
    return FunctionModel(stream_function=stream, model_name="scripted-refunds")


def build_agent(
    model: Model | str | None = None, payments: Payments = fake_payments
) -> Agent[None, str]:
    """The support assistant (a plain pydantic-ai agent) with its approval-gated refund tool."""
    configured = os.environ.get("PAUSEMESH_EXAMPLE_MODEL")
    support = Agent(
        model or configured or scripted_model(),
        instructions="You are a support assistant. Refund orders with issue_refund when asked.",
    )

    @support.tool_plain(requires_approval=True)
    async def issue_refund(order_id: str, amount_cents: int) -> ToolReturn:
        """Refund an order (needs a person's approval)."""
        refund = await payments(order_id, amount_cents)
        return ToolReturn(
            return_value=f"refund {refund['refundId']} of {amount_cents} cents for {order_id} issued",
            # The AG-UI state change travels with the result, so a replayed result replays it too.
            metadata=[
                StateDeltaEvent(delta=[{"op": "add", "path": "/refunds/-", "value": refund}])
            ],
        )

    return support


support_agent = build_agent()
agent = PydanticAIAgent(support_agent, initial_state={"refunds": []})
