"""What every HTTP binding of the AG-UI routes shares (Litestar controller, native Starlette).

The framework code only moves bytes; these decide what a request means.
"""

from __future__ import annotations

from pausemesh.agui.input import RunAgentInput, check_thread_id, decode_run_input
from pausemesh.core.errors import InvalidInputError
from pausemesh.core.validation import check_id

__all__ = ("SSE_HEADERS", "read_run_input", "replay_cursor")

# No caching anywhere, and no proxy buffering (nginx honours X-Accel-Buffering).
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_MAX_SEQUENCE = 2**63 - 1


def read_run_input(body: bytes) -> RunAgentInput:
    """A request body as a validated ``RunAgentInput`` (4xx errors before any stream starts)."""
    run_input = decode_run_input(body)
    check_thread_id(run_input.thread_id)
    check_id(run_input.run_id, "runId")
    return run_input


def replay_cursor(last_event_id: str | None, after: str | None) -> int:
    """The replay cursor: ``Last-Event-ID`` (what a reconnecting client sends) wins over ``?after=``."""
    raw = last_event_id if last_event_id is not None else after
    text = "" if raw is None else raw.strip()
    if text == "":
        return 0
    if not text.isdigit() or int(text) > _MAX_SEQUENCE:
        msg = "Last-Event-ID / after must be a non-negative integer thread sequence"
        raise InvalidInputError(msg, code="INVALID_CURSOR")
    return int(text)
