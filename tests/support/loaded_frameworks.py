"""``python -m tests.support.loaded_frameworks <pausemesh args>``: runs ``pausemesh <args>`` in
this process as ``python -m pausemesh`` would, and when the command returns (the stdio gateway
returns at the end of its input, a server after SIGTERM) writes on stderr, after ``MARKER``,
the web framework modules the process loaded in its whole life, as a JSON list, and after
``AGENT_MARKER`` the agent frameworks it loaded (the optional extras).

Run with ``-m`` (not as a script): a script's own folder goes first on ``sys.path``, and this
folder's modules would shadow real packages (``copilotkit.py``).
"""

from __future__ import annotations

import json
import runpy
import sys

__all__ = ("AGENT_MARKER", "AGENT_WATCHED", "MARKER", "WATCHED", "loaded")

MARKER = "loaded frameworks: "
AGENT_MARKER = "loaded agent frameworks: "
AGENT_WATCHED = ("pydantic_ai", "langgraph")
# Litestar, and the web layer that holds it. (Starlette, uvicorn and sse_starlette come with
# the MCP SDK's server module itself, its streamable-HTTP app: any SDK server loads them.)
WATCHED = ("litestar", "pausemesh.web")


def loaded(watched: tuple[str, ...] = WATCHED) -> list[str]:
    return sorted(
        name for name in sys.modules if any(name == w or name.startswith(f"{w}.") for w in watched)
    )


if __name__ == "__main__":
    sys.argv = ["pausemesh", *sys.argv[1:]]
    try:
        runpy.run_module("pausemesh", run_name="__main__", alter_sys=True)
    finally:
        print(MARKER + json.dumps(loaded()), file=sys.stderr, flush=True)
        print(AGENT_MARKER + json.dumps(loaded(AGENT_WATCHED)), file=sys.stderr, flush=True)
