"""A chat-shaped webhook receiver: PauseMesh approvals as Slack-like messages, no network.

Run the demo with it (``make demo-webhooks``: ``--with-demo``), or alone::

    PAUSEMESH_WEBHOOK_SECRET=whsec_... python examples/approval_webhooks.py --port 8790

It listens on loopback, checks each delivery's Standard Webhooks signature (``webhook-id``,
``webhook-timestamp``, ``webhook-signature``) with the ``standardwebhooks`` package, drops a
delivery it has already handled (by ``webhook-id``: deliveries are at least once), and turns
``pause.created`` into a Block Kit-like message with one button per decision link, written as
one JSON line to stdout (or ``--out FILE``). A person opens a button's URL: the server's page
confirms, and its button decides. Nothing is posted anywhere: where a real bot would call the
chat platform's API, this prints.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

__all__ = ("Handled", "chat_message", "handle", "main")


def chat_message(event: dict[str, Any]) -> dict[str, Any] | None:
    """The chat message for one verified event (None: nothing to post)."""
    data = event.get("data", {})
    if event.get("type") == "pause.decided":
        decision = data.get("decision") or {}
        return {
            "text": f"Decided by {decision.get('resolvedBy')}: {json.dumps(decision.get('answer'))}",
            "thread": data.get("pauseId"),
        }
    if event.get("type") != "pause.created":
        return None
    title = data.get("threadTitle") or "A request"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title}},
        {"type": "section", "text": {"type": "mrkdwn", "text": data.get("message") or ""}},
        {
            "type": "context",
            "elements": [
                {"type": "mrkdwn", "text": f"Asked by {data.get('askedBy')}"},
                {"type": "mrkdwn", "text": f"Decide by {data.get('deadline')}"},
            ],
        },
    ]
    blocks.extend(
        {
            "type": "actions",
            "block_id": f"{data.get('pauseId')}:{link['approver']}",
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": choice["label"]},
                    "url": choice["url"],
                }
                for choice in link["choices"]
            ],
        }
        for link in data.get("links") or []
    )
    return {
        "text": f"{title}: {data.get('message')}",
        "thread": data.get("pauseId"),
        "blocks": blocks,
    }


class Handled:
    """The delivery ids already handled (a real receiver keeps them in its database)."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._lock = threading.Lock()

    def first_time(self, delivery_id: str) -> bool:
        with self._lock:
            if delivery_id in self._ids:
                return False
            self._ids.add(delivery_id)
            return True


def handle(
    webhook: Webhook, handled: Handled, body: bytes, headers: dict[str, str], out: TextIO
) -> int:
    """One delivery: the HTTP status to answer (2xx: never send it again)."""
    try:
        event = webhook.verify(body, headers)  # the raw body, exactly as received
    except WebhookVerificationError:
        return 401
    if not handled.first_time(headers["webhook-id"]):
        return 200  # a retry of what was handled: acknowledged, not posted twice
    message = chat_message(event)
    if message is not None:
        out.write(json.dumps(message) + "\n")
        out.flush()
    return 204


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--out", type=Path, help="append messages here instead of stdout")
    parser.add_argument(
        "--with-demo",
        action="store_true",
        help="also run `pausemesh demo` sending its approvals here (a fresh secret, links on)",
    )
    args = parser.parse_args(argv)
    demo = _start_demo(args.port) if args.with_demo else None
    webhook = Webhook(os.environ["PAUSEMESH_WEBHOOK_SECRET"])
    handled = Handled()
    out: TextIO = args.out.open("a") if args.out else sys.stdout

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            self.send_response(handle(webhook, handled, body, headers, out))
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass  # the access line would carry nothing a person needs

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Receiver)
    signal.signal(signal.SIGTERM, _stop)  # `make` and supervisors stop it with SIGTERM
    sys.stderr.write(f"receiving approvals at http://127.0.0.1:{args.port}/hooks\n")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if demo is not None:
            demo.terminate()
            demo.wait(30)


def _stop(*_: object) -> None:
    raise KeyboardInterrupt


def _start_demo(port: int) -> subprocess.Popen[bytes]:
    """``pausemesh demo`` with a webhooks file naming this receiver (``make demo-webhooks``)."""
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    os.environ["PAUSEMESH_WEBHOOK_SECRET"] = secret
    folder = Path(os.environ.get("PAUSEMESH_DATA_DIR", "data"))
    folder.mkdir(parents=True, exist_ok=True)
    hooks = folder / "webhooks.json"
    hook = {
        "id": "chat",
        "url": f"http://127.0.0.1:{port}/hooks",
        "events": ["pause.created", "pause.decided"],
        "secrets": [secret],
        "filters": {"roles": ["manager"]},
    }
    hooks.write_text(json.dumps({"webhooks": [hook]}))
    hooks.chmod(0o600)  # it holds the signing secret
    env = {
        **os.environ,
        "PAUSEMESH_WEBHOOKS_FILE": str(hooks),
        "PAUSEMESH_DECISION_LINKS": "1",
        "PAUSEMESH_A2A_PUSH_ALLOW": "loopback",
    }
    return subprocess.Popen([sys.executable, "-m", "pausemesh", "demo"], env=env)


if __name__ == "__main__":
    main()
