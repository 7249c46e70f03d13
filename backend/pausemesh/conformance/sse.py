"""One HTTP request to an AG-UI server and what came back: a status, a problem, SSE frames.

The SSE reading is the plain algorithm (lines, ``id:``/``data:`` fields, a blank line ends
an event, ``:`` lines are comments), so a server is read as any browser or client reads it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ("ConformanceError", "Frame", "Reply", "Target", "parse_frames")

# The item events a run's agent produces: a stream that carries one did run the agent.
AGENT_OUTPUT = frozenset(
    {
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CHUNK",
        "TOOL_CALL_START",
        "TOOL_CALL_CHUNK",
        "TOOL_CALL_RESULT",
        "REASONING_START",
        "REASONING_MESSAGE_START",
    }
)


# How much of a RUN_ERROR's message a verdict quotes when it has no code.
_SAID = 120


class ConformanceError(Exception):
    """The check could not be made (server unreachable, no interrupt to probe, bad scenario)."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One SSE event: its ``id:`` (None when the server sent none) and its ``data:``."""

    id: str | None
    data: str


def parse_frames(lines: Iterable[str]) -> Iterator[Frame]:
    """SSE events from decoded lines (without their line ends)."""
    event_id: str | None = None
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield Frame(event_id, "\n".join(data))
            event_id, data = None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "id":
            event_id = value
    if data:
        yield Frame(event_id, "\n".join(data))


@dataclass(frozen=True, slots=True)
class Reply:
    """What one request got: the status, a non-2xx body's code, and the SSE frames."""

    status: int
    frames: list[Frame] = field(default_factory=list)
    problem: str = ""

    @property
    def events(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for frame in self.frames:
            try:
                event = json.loads(frame.data)
            except ValueError:
                event = {"type": "<not JSON>", "data": frame.data[:80]}
            events.append(event if isinstance(event, dict) else {"type": "<not an object>"})
        return events

    @property
    def terminal(self) -> dict[str, Any] | None:
        """The last ``RUN_FINISHED`` or ``RUN_ERROR`` of the stream."""
        ends = [e for e in self.events if e.get("type") in {"RUN_FINISHED", "RUN_ERROR"}]
        return ends[-1] if ends else None

    @property
    def refusal(self) -> str | None:
        """How the request was refused: a 4xx/5xx, or a ``RUN_ERROR``; None if it was not."""
        if not 200 <= self.status < 300:
            return f"HTTP {self.status}" + (f" {self.problem}" if self.problem else "")
        for event in self.events:
            if event.get("type") == "RUN_ERROR":
                code = event.get("code")
                said = code or str(event.get("message", ""))[:_SAID]
                return f"RUN_ERROR {said}" if code else f"RUN_ERROR: {said}"
        return None

    @property
    def outcome(self) -> str:
        """``interrupt``, ``success`` or ``cancelled`` for a finished run; else what ended it."""
        end = self.terminal
        if end is None:
            return "no terminal event"
        if end["type"] == "RUN_ERROR":
            return "RUN_ERROR"
        outcome = end.get("outcome")
        return str(outcome.get("type")) if isinstance(outcome, dict) else "success"

    @property
    def interrupts(self) -> list[dict[str, Any]]:
        end = self.terminal
        if end is None or self.outcome != "interrupt":
            return []
        found = end["outcome"].get("interrupts")
        return [i for i in found if isinstance(i, dict)] if isinstance(found, list) else []

    def agent_output(self) -> list[str]:
        """Each item the agent produced, as ``TYPE id``."""
        said = []
        for event in self.events:
            if event.get("type") in AGENT_OUTPUT:
                item = event.get("messageId") or event.get("toolCallId") or ""
                said.append(f"{event['type']} {item}".strip())
        return said

    def describe(self) -> str:
        """A short account of the reply for a verdict's line."""
        refused = self.refusal
        if refused is not None:
            return refused
        said = self.agent_output()
        ran = f" after the agent ran ({', '.join(said[:3])})" if said else ""
        return f"RUN_FINISHED {self.outcome}{ran}" if self.terminal else f"{self.outcome}{ran}"


class Target:
    """The server under test: an httpx client, the run URL and the extra headers."""

    def __init__(
        self, url: str, *, headers: Mapping[str, str] | None = None, timeout: float = 30.0
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._client = httpx.Client(
            headers={"accept": "text/event-stream", **(headers or {})}, timeout=timeout
        )

    def close(self) -> None:
        self._client.close()

    def post(self, url: str, body: Mapping[str, Any]) -> Reply:
        """POST a JSON body and read the whole SSE answer."""
        return self._read("POST", url, json=body)

    def tail(self, url: str, last_event_id: str, until_id: str) -> Reply:
        """GET an event stream after ``last_event_id``, read until the frame ``until_id`` (the
        stream is live: it does not end by itself), the end of the stream or the timeout."""
        return self._read("GET", url, headers={"last-event-id": last_event_id}, until=until_id)

    def _read(
        self,
        method: str,
        url: str,
        *,
        json: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        until: str | None = None,
    ) -> Reply:
        deadline = time.monotonic() + self.timeout
        frames: list[Frame] = []
        try:
            with self._client.stream(method, url, json=json, headers=headers) as response:
                if not 200 <= response.status_code < 300:
                    return Reply(response.status_code, problem=_problem(response.read()))
                for frame in parse_frames(_until(response.iter_lines(), deadline)):
                    frames.append(frame)
                    if until is not None and frame.id == until:
                        break
                return Reply(response.status_code, frames)
        except httpx.TimeoutException:
            return Reply(200, frames, problem="timed out")
        except httpx.HTTPError as error:
            msg = f"{method} {url}: {error}"
            raise ConformanceError(msg) from error


def _until(lines: Iterator[str], deadline: float) -> Iterator[str]:
    """The lines read before the deadline (keep-alive comments count: they arrive)."""
    for line in lines:
        yield line
        if time.monotonic() > deadline:
            return


def _problem(body: bytes) -> str:
    """The stable code of a problem body, else its title, else nothing."""
    try:
        problem = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(problem, dict):
        return ""
    return str(problem.get("code") or problem.get("title") or problem.get("detail") or "")[:120]
