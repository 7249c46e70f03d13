"""Shared steps of the AG-UI end-to-end tests against a real ``pausemesh demo`` process."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.support.agui import RunResult, post_run, run_body

QUESTION = "Which flight should I book?"


def new_thread() -> str:
    return f"thread-{uuid.uuid4()}"


def ask(client: httpx.Client, thread_id: str, **fields: Any) -> RunResult:
    """A user message on the thread: the demo replies and asks which flight to book."""
    message = {
        "id": f"user-{uuid.uuid4()}",
        "role": "user",
        "content": "Book me a flight to Lisbon",
    }
    result = post_run(
        client, run_body(thread_id, f"run-{uuid.uuid4()}", messages=[message], **fields)
    )
    assert result.last["type"] == "RUN_FINISHED", result.events
    assert result.last["outcome"]["type"] == "interrupt"
    return result


def resume_body(
    thread_id: str, entries: list[dict[str, Any]], run_id: str | None = None
) -> dict[str, Any]:
    return run_body(thread_id, run_id or f"run-{uuid.uuid4()}", resume=entries)


def resolved(interrupt_id: str, flight: Any = "PM202") -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": {"flight": flight}}


def snapshot(
    client: httpx.Client, thread_id: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    response = client.get(f"/agui/threads/{thread_id}", headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def bookings(client: httpx.Client, thread_id: str) -> list[Any]:
    state = snapshot(client, thread_id)["state"]
    found: list[Any] = state.get("bookings", []) if isinstance(state, dict) else []
    return found


def pending_ids(client: httpx.Client, thread_id: str) -> list[str]:
    return [i["id"] for i in snapshot(client, thread_id)["pendingInterrupts"]]
