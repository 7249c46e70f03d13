"""An ordinary upstream MCP server (official SDK, no PauseMesh imports) for the gateway tests.

``create_invoice`` appends one JSON line per real call to ``$UPSTREAM_CALLS`` (fsynced, before
anything else happens), then behaves as ``$UPSTREAM_CONTROL`` (a JSON file, read per call)
says: ``{"delay": seconds}`` sleeps before answering, ``{"hold": path}`` answers once
``path`` exists, ``{"exit": true}`` exits the process
mid-call, ``{"garbage": true}`` (stdio only) first writes a JSON-RPC response for the call that
is not a ``CallToolResult`` straight to stdout (an unreadable reply), ``{"pad": n}`` adds ``n``
characters to the result (an oversized reply). Started with ``{"changed": true}`` in the control file, the tool's definition
differs (an extra argument) from what a gateway pinned before; ``redefine_invoice`` makes the
same change on a running server and announces it (``notifications/tools/list_changed``).
``lookup_invoice`` is a second, read-only tool.

    python tests/support/upstream_mcp.py            # stdio
    python tests/support/upstream_mcp.py --http PORT
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer


def _control() -> dict[str, Any]:
    path = os.environ.get("UPSTREAM_CONTROL")
    if not path or not Path(path).exists():
        return {}
    loaded: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8") or "{}")
    return loaded


def _append(line: dict[str, Any]) -> None:
    with Path(os.environ["UPSTREAM_CALLS"]).open("a", encoding="utf-8") as calls:
        calls.write(json.dumps(line, sort_keys=True) + "\n")
        calls.flush()
        os.fsync(calls.fileno())


# The client's end of stdio, kept before the SDK moves fd 1 away from print() and friends.
_WIRE = os.dup(1)


def _unreadable_reply(request_id: str | int) -> None:
    """A response to ``request_id`` whose result no MCP client can read as a tool result."""
    rid = int(request_id) if str(request_id).isdigit() else request_id
    line = {"jsonrpc": "2.0", "id": rid, "result": {"content": "not a list of blocks"}}
    os.write(_WIRE, (json.dumps(line) + "\n").encode())


def _after_call() -> None:
    control = _control()
    if control.get("exit"):
        os._exit(3)
    hold = control.get("hold")
    for _ in range(2400 if hold else 0):  # held until the test creates the file (at most 2 min)
        if Path(str(hold)).exists():
            break
        time.sleep(0.05)
    delay = float(control.get("delay", 0))
    if delay:
        time.sleep(delay)


server = MCPServer("invoices")


def changed_create_invoice(order_id: str, amount: int, currency: str = "EUR") -> dict[str, Any]:
    """Create an invoice (a changed definition: it grew a currency)."""
    _append({"order_id": order_id, "amount": amount, "currency": currency})
    _after_call()
    return {"invoice": f"inv-{order_id}", "amount": amount, "currency": currency}


if _control().get("changed"):
    server.add_tool(changed_create_invoice, name="create_invoice")
else:

    @server.tool()
    def create_invoice(order_id: str, amount: int, ctx: Context) -> dict[str, Any]:
        """Create an invoice for an order (one line in the calls file per real call)."""
        _append({"order_id": order_id, "amount": amount})
        if _control().get("garbage"):
            _unreadable_reply(ctx.request_id)
        _after_call()
        pad = int(_control().get("pad", 0))
        return {
            "invoice": f"inv-{order_id}",
            "amount": amount,
            **({"pad": "x" * pad} if pad else {}),
        }


@server.tool()
async def redefine_invoice(ctx: Context) -> dict[str, Any]:
    """Change create_invoice's definition on this running server and announce it."""
    server.remove_tool("create_invoice")
    server.add_tool(changed_create_invoice, name="create_invoice")
    await ctx.session.send_tool_list_changed()
    return {"redefined": True}


@server.tool()
def lookup_invoice(order_id: str) -> dict[str, Any]:
    """Read an invoice (no effect)."""
    return {"invoice": f"inv-{order_id}"}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", port=int(sys.argv[2]), stateless_http=False)
    else:
        server.run("stdio")
