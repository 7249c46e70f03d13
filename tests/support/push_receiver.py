"""A webhook receiver for the A2A push tests: a real HTTP server that records each request.

``plan`` scripts the answers to the next requests (a status code, or ``HOLD`` to keep the
request open until ``release()``: the sender gets no answer, as when it dies mid-send); once
the plan is used up every request gets 200. ``verify`` checks a delivery's JWT against the
server's published JWKS the way the A2A push-notification guidance asks a receiver to.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import msgspec

__all__ = ("HOLD", "Delivery", "Receiver", "fetch_jwks", "verify")

HOLD = -1


class Delivery(msgspec.Struct, frozen=True, kw_only=True):
    headers: dict[str, str]
    body: bytes
    answered: int | None

    @property
    def delivery_id(self) -> str:
        return self.headers["x-a2a-notification-id"]

    @property
    def state(self) -> str:
        state: str = json.loads(self.body)["task"]["status"]["state"]
        return state

    @property
    def task_id(self) -> str:
        task_id: str = json.loads(self.body)["task"]["id"]
        return task_id


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Delivery] = []
        self.plan: list[int] = []
        self.arrived = threading.Condition()
        self._released = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                with receiver.arrived:
                    code = receiver.plan.pop(0) if receiver.plan else 200
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    answered = None if code == HOLD else code
                    receiver.requests.append(
                        Delivery(headers=headers, body=body, answered=answered)
                    )
                    receiver.arrived.notify_all()
                if code == HOLD:
                    receiver._released.wait(60)
                    return
                self.send_response(code)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    def release(self) -> None:
        self._released.set()

    def wait_for(self, count: int, *, where: Any = None, timeout: float = 60) -> list[Delivery]:
        """Block until ``count`` requests (matching ``where``) arrived; return those."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while True:
                found = [r for r in self.requests if where is None or where(r)]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(found)} of {count} deliveries arrived")
                self.arrived.wait(left)

    def accepted(self) -> list[Delivery]:
        with self.arrived:
            return [r for r in self.requests if r.answered == 200]


def verify(delivery: Delivery, jwks: dict[str, Any], url: str) -> dict[str, Any]:
    """The JWT's claims after checking it as a receiver should (raises if anything is off)."""
    token = delivery.headers["authorization"].removeprefix("Bearer ")
    kid = jwt.get_unverified_header(token)["kid"]
    key = next(k for k in jwt.PyJWKSet.from_dict(jwks).keys if k.key_id == kid)
    claims: dict[str, Any] = jwt.decode(
        token,
        key.key,
        algorithms=["ES256"],
        audience=url,
        options={"require": ["iat", "exp", "jti", "aud", "iss"]},
    )
    if claims["request_body_sha256"] != hashlib.sha256(delivery.body).hexdigest():
        raise AssertionError("the body is not the one that was signed")
    if claims["jti"] != delivery.delivery_id:
        raise AssertionError("the token is for another delivery")
    return claims


def fetch_jwks(card_url: str) -> tuple[str, dict[str, Any]]:
    """The JWKS URL named by the agent card, and the key set it serves."""
    card = httpx.get(card_url, timeout=10).json()
    extensions = card["capabilities"]["extensions"]
    uri = next(e["params"]["jwksUri"] for e in extensions if "push-jwks" in e["uri"])
    return uri, httpx.get(uri, timeout=10).json()
