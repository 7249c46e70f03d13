"""AG-UI test helpers: an SSE client for real servers, strict official-model checks, ordering.

Every event read through ``read_frames``/``post_run`` is checked on the way in:
- it parses under the official ``ag-ui-protocol`` 1.0 models in strict mode, the official dump
  equals our JSON (no nulls, no snake_case, nothing dropped) and no model holds unknown keys;
- the stream obeys the ordering rules the official client verifies (reference ag-ui.md §1.4).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from ag_ui._generated import models as official
from ag_ui.core import Event as OfficialEvent
from pydantic import BaseModel, TypeAdapter

from pausemesh.core.identity import Identity
from tests.support.builds import needs_build

__all__ = (
    "NODE",
    "NODE_DIR",
    "Frame",
    "RunResult",
    "StreamChecker",
    "assert_conformant",
    "header_identity",
    "header_principal",
    "needs_node",
    "post_run",
    "read_frames",
    "run_body",
    "run_node_harness",
)

NODE_DIR = Path(__file__).resolve().parents[1] / "protocols" / "node"
NODE = shutil.which("node")


def run_node_harness(script: str, *args: str) -> dict[str, Any]:
    """Run ``tests/protocols/node/<script>`` (the official ``@ag-ui/client`` against a server)
    and return the JSON report it prints last; it must have exited 0."""
    assert NODE is not None
    completed = subprocess.run(
        [NODE, str(NODE_DIR / script), *args],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.stdout, completed.stderr
    report: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    assert completed.returncode == 0, report.get("error", completed.stderr)
    return report


# Outside CI a machine without Node skips these with the reason; CI runs them always, so a
# missing `npm ci` fails there instead of passing silently (tests/support/builds.py).
needs_node = needs_build("ag-ui-client")

_EVENT: TypeAdapter[Any] = TypeAdapter(OfficialEvent)
_OPEN = (
    official.AddOperation,
    official.RemoveOperation,
    official.ReplaceOperation,
    official.MoveOperation,
    official.CopyOperation,
    official.TestOperation,
)


def _extras(obj: object, path: str = "$") -> list[str]:
    if isinstance(obj, BaseModel):
        found = [] if isinstance(obj, _OPEN) else [f"{path}.{k}" for k in obj.model_extra or {}]
        for name in type(obj).model_fields:
            found += _extras(getattr(obj, name), f"{path}.{name}")
        return found
    if isinstance(obj, list):
        return [x for i, item in enumerate(obj) for x in _extras(item, f"{path}[{i}]")]
    return []


def assert_conformant(raw: str | bytes) -> dict[str, Any]:
    """Parse one event strictly under the official models; return it as JSON."""
    parsed = _EVENT.validate_json(raw, strict=True)
    data: dict[str, Any] = json.loads(raw)
    # The official models already drop None optionals on dump; ``exclude_none`` would also
    # drop a legitimate required null (``CUSTOM.value``, ``STATE_SNAPSHOT.snapshot``).
    dumped = _EVENT.dump_python(parsed, mode="json", by_alias=True)
    assert dumped == data, raw
    if "null" not in (raw if isinstance(raw, str) else raw.decode()):
        exclude_none = _EVENT.dump_python(parsed, mode="json", by_alias=True, exclude_none=True)
        assert exclude_none == dumped, raw
    assert not _extras(parsed), (_extras(parsed), raw)
    return data


@dataclass
class StreamChecker:
    """The ordering rules of the official client's verifier, for one stream (several runs)."""

    state: str = "idle"  # idle | running | finished | errored
    open_text: set[str] = field(default_factory=set)
    open_tools: set[str] = field(default_factory=set)
    open_steps: set[str] = field(default_factory=set)

    def check(self, event: dict[str, Any]) -> None:  # noqa: PLR0912 - one branch per rule
        kind = event["type"]
        if self.state == "idle":
            assert kind in {"RUN_STARTED", "RUN_ERROR"}, f"first event is {kind}"
        if self.state in {"finished", "errored"}:
            allowed = {"RUN_STARTED"} | ({"RUN_ERROR"} if self.state == "finished" else set())
            assert kind in allowed, f"{kind} after the run ended"
        if kind == "RUN_STARTED":
            assert self.state != "running", "RUN_STARTED while a run is active"
            self.state = "running"
            self.open_text.clear()
            self.open_tools.clear()
            self.open_steps.clear()
        elif kind == "RUN_ERROR":
            self.state = "errored"
        elif kind == "RUN_FINISHED":
            assert not self.open_text, "RUN_FINISHED with a text message open"
            assert not self.open_tools, "RUN_FINISHED with a tool call open"
            assert not self.open_steps, "RUN_FINISHED with a step open"
            self.state = "finished"
        elif kind == "TEXT_MESSAGE_START":
            assert event["messageId"] not in self.open_text
            self.open_text.add(event["messageId"])
        elif kind in {"TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"}:
            assert event["messageId"] in self.open_text, f"{kind} for a closed message"
            if kind == "TEXT_MESSAGE_END":
                self.open_text.discard(event["messageId"])
        elif kind == "TOOL_CALL_START":
            assert event["toolCallId"] not in self.open_tools
            self.open_tools.add(event["toolCallId"])
        elif kind in {"TOOL_CALL_ARGS", "TOOL_CALL_END"}:
            assert event["toolCallId"] in self.open_tools, f"{kind} for a closed call"
            if kind == "TOOL_CALL_END":
                self.open_tools.discard(event["toolCallId"])
        elif kind == "STEP_STARTED":
            assert event["stepName"] not in self.open_steps
            self.open_steps.add(event["stepName"])
        elif kind == "STEP_FINISHED":
            assert event["stepName"] in self.open_steps
            self.open_steps.discard(event["stepName"])


@dataclass(frozen=True)
class Frame:
    sequence: int | None
    event: dict[str, Any]
    data: str


def read_frames(lines: Iterator[str], checker: StreamChecker | None = None) -> Iterator[Frame]:
    """Parse an SSE body (LF frames); check every event; skip comments (keep-alives)."""
    sequence: int | None = None
    data: list[str] = []
    for line in lines:
        assert "\r" not in line, "CRLF framing"
        if line == "":
            if data:
                text = "\n".join(data)
                event = assert_conformant(text)
                if checker is not None:
                    checker.check(event)
                yield Frame(sequence, event, text)
            sequence, data = None, []
        elif line.startswith(":"):
            continue
        elif line.startswith("id: "):
            sequence = int(line[4:])
        elif line.startswith("data: "):
            data.append(line[6:])


@dataclass(frozen=True)
class RunResult:
    frames: list[Frame]

    @property
    def events(self) -> list[dict[str, Any]]:
        return [f.event for f in self.frames]

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    @property
    def last(self) -> dict[str, Any]:
        return self.events[-1]

    @property
    def error_code(self) -> str | None:
        last = self.last
        return last.get("code") if last["type"] == "RUN_ERROR" else None

    @property
    def interrupts(self) -> list[dict[str, Any]]:
        outcome = self.last.get("outcome") or {}
        interrupts: list[dict[str, Any]] = outcome.get("interrupts", [])
        return interrupts

    def text(self) -> str:
        return "".join(
            e.get("delta", "") for e in self.events if e["type"] == "TEXT_MESSAGE_CONTENT"
        )


def run_body(thread_id: str, run_id: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"threadId": thread_id, "runId": run_id, "messages": []}
    body.update(fields)
    return body


def post_run(
    client: httpx.Client,
    body: dict[str, Any],
    *,
    path: str = "/agui",
    headers: dict[str, str] | None = None,
) -> RunResult:
    """POST a RunAgentInput and read the whole SSE answer (checked)."""
    with client.stream("POST", path, json=body, headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        frames = list(read_frames(response.iter_lines(), StreamChecker()))
    assert frames, "empty stream"
    return RunResult(frames)


async def header_principal(request: Any) -> str | None:
    """A principal resolver for tests: the ``X-Principal`` header names the caller."""
    value = request.headers.get("x-principal")
    return value if isinstance(value, str) and value else None


async def header_identity(request: Any) -> Identity | None:
    """A principal resolver for tests with roles: ``X-Principal`` names the caller and
    ``X-Roles`` (comma-separated) gives its roles."""
    principal = request.headers.get("x-principal")
    if not isinstance(principal, str) or not principal:
        return None
    roles = request.headers.get("x-roles") or ""
    return Identity(principal, frozenset(r.strip() for r in roles.split(",") if r.strip()))
