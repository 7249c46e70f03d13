"""``pausemesh.agui`` is the one import an agent author needs, and it stays framework-free."""

from __future__ import annotations

import subprocess
import sys

import pausemesh.agui
from pausemesh.agui import agent, events, messages
from pausemesh.agui import input as run_input
from pausemesh.core import pause

EXPORTED = (
    "ActivityDeltaEvent",
    "ActivityMessage",
    "ActivitySnapshotEvent",
    "Agent",
    "AgentOutput",
    "Approver",
    "AssistantMessage",
    "AudioPart",
    "ContentPart",
    "Context",
    "CustomEvent",
    "DataSource",
    "Decision",
    "DeveloperMessage",
    "DocumentPart",
    "Event",
    "FileSource",
    "FunctionCall",
    "ImagePart",
    "Message",
    "MessagesSnapshotEvent",
    "Operations",
    "PauseRequest",
    "RawEvent",
    "ReasoningEncryptedValueEvent",
    "ReasoningEndEvent",
    "ReasoningMessage",
    "ReasoningMessageChunkEvent",
    "ReasoningMessageContentEvent",
    "ReasoningMessageEndEvent",
    "ReasoningMessageStartEvent",
    "ReasoningStartEvent",
    "RunContext",
    "RunErrorEvent",
    "StateDeltaEvent",
    "StateSnapshotEvent",
    "StepFinishedEvent",
    "StepStartedEvent",
    "SubagentErrorEvent",
    "SubagentFinishedEvent",
    "SubagentFinishedSuccessOutcome",
    "SubagentFinishedSuspendedOutcome",
    "SubagentStartedEvent",
    "SystemMessage",
    "TextMessageChunkEvent",
    "TextMessageContentEvent",
    "TextMessageEndEvent",
    "TextMessageStartEvent",
    "TextPart",
    "ThreadTitle",
    "Tool",
    "ToolCall",
    "ToolCallArgsEvent",
    "ToolCallChunkEvent",
    "ToolCallEndEvent",
    "ToolCallResultEvent",
    "ToolCallStartEvent",
    "ToolMessage",
    "UrlSource",
    "UserMessage",
    "VideoPart",
    "lazy_history",
    "pause_payload",
)


def test_the_agent_author_surface_is_exactly_the_pinned_names() -> None:
    assert pausemesh.agui.__all__ == EXPORTED


def test_every_exported_name_is_the_object_its_home_module_defines() -> None:
    homes = (agent, events, run_input, messages, pause)
    for name in EXPORTED:
        exported = getattr(pausemesh.agui, name)
        assert any(getattr(home, name, None) is exported for home in homes), name


def test_the_run_frame_events_are_not_offered_to_agents() -> None:
    # The run host sends RUN_STARTED and RUN_FINISHED itself; an agent that yields one is refused.
    assert "RunStartedEvent" not in EXPORTED
    assert "RunFinishedEvent" not in EXPORTED


def test_importing_the_agui_package_imports_no_web_framework() -> None:
    code = (
        "import sys, pausemesh.agui, pausemesh.agui.run, pausemesh.agui.sse;"
        " loaded = [m for m in ('litestar', 'starlette', 'sse_starlette') if m in sys.modules];"
        " assert not loaded, loaded"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
