"""A small upstream MCP server for the gateway quick start: one tool, ``create_invoice``, that
writes the invoice it creates as one JSON line to ``$INVOICES_FILE`` (default
``data/invoices.jsonl``). An ordinary MCP server (the official SDK, no PauseMesh import): the
gateway in front of it makes each invoice happen once per order however often an agent calls.

    .venv/bin/python examples/gateway/invoices.py    # MCP over stdio (the gateway starts it)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("invoices")


@server.tool()
def create_invoice(order_id: str, amount: int) -> dict[str, Any]:
    """Create the invoice of an order (an effect: one line in the invoices file)."""
    invoice = {"invoice": f"inv-{order_id}", "order_id": order_id, "amount": amount}
    path = Path(os.environ.get("INVOICES_FILE", "data/invoices.jsonl"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as invoices:
        invoices.write(json.dumps(invoice, sort_keys=True) + "\n")
    return invoice


if __name__ == "__main__":
    server.run("stdio")
