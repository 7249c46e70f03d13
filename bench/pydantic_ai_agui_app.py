"""pydantic-ai's own AG-UI app (not durable) on the example refund agent: ``bench/agents.py``'s
baseline, served by uvicorn as ``bench.pydantic_ai_agui_app:app``.

The same agent and scripted model as ``examples/pydantic_ai_refund.py``; the client sends the
history back with each run, as pydantic-ai's app expects.
"""

from __future__ import annotations

from examples.pydantic_ai_refund import build_agent
from pydantic_ai import DeferredToolRequests
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ("app",)

agent = build_agent()


async def run(request: Request) -> Response:
    return await AGUIAdapter.dispatch_request(
        request, agent=agent, output_type=[str, DeferredToolRequests]
    )


async def healthz(_: Request) -> Response:
    return JSONResponse({"status": "ok"})


app = Starlette(routes=[Route("/agui", run, methods=["POST"]), Route("/healthz", healthz)])
