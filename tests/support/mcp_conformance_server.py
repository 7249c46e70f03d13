"""A ``pausemesh serve`` whose ``/mcp`` holds what the official MCP conformance suite calls.

``@modelcontextprotocol/conformance`` (``tests/protocols/mcp_conformance/``) runs its server
scenarios against a server that provides fixed tools, resources and prompts (its
"everything server" names: ``test_simple_text``, ``test://static-text``,
``test_simple_prompt``, ...). This module registers them on PauseMesh's own MCP mount
(``McpPlugin``, the demo's stores and settings), so the suite judges PauseMesh's protocol
behaviour. Every question a tool asks a person goes through PauseMesh's durable pause
(``McpPauses.ask``: a live ``elicitation/create`` for a 2025-11-25 client, an
``input_required`` result with a sealed ``requestState`` for a 2026-07-28 one). The tasks
extension's tools (``greet``, ``slow_compute``, ``confirm_delete``, ...) are allowed as tasks
(``McpPauses.allow_tasks``): a paused call of one is a task. What PauseMesh does not offer
(sampling, roots, logging levels, completion, subscriptions) is left out, and ``docs/protocols-mcp-a2a.md`` says why.

``python -m tests.support.mcp_conformance_server`` serves it through the CLI's ``serve_app``;
``McpConformanceServer`` is the ``ServerProcess`` that runs it.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import sys
import wave
from datetime import timedelta
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    InputRequiredResult,
    TextContent,
    TextResourceContents,
)
from pydantic import Field

from pausemesh import Settings
from pausemesh.cli.serve import serve_app
from pausemesh.mcp.pauses import McpAnswer, McpPauses
from pausemesh.observability.log_format import configure_logging
from pausemesh.web.mcp_mount import McpPlugin
from pausemesh.web.plugin import PauseMeshPlugin
from tests.support.server import ServerProcess

__all__ = ("McpConformanceServer", "register_conformance_fixtures")

# A 1x1 red PNG and a 10 ms silent 8 kHz WAV: the smallest media the scenarios accept.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
    "rkJggg=="
)
_PROGRESS_STEP_SECONDS = 0.05


def _wav() -> str:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(1)
        sound.setframerate(8000)
        sound.writeframes(b"\x80" * 80)
    return base64.b64encode(buffer.getvalue()).decode()


WAV = _wav()

# The suite's JSON Schema 2020-12 tool schema (SEP-1613, SEP-2106), kept whole in tools/list.
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

_CONTACT_FORM = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}
_DEFAULTS_FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "default": True},
    },
}
_ENUMS_FORM = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}
_OK_FORM = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}
_COLOR_FORM = {
    "type": "object",
    "properties": {"color": {"type": "string"}},
    "required": ["color"],
}
_CONTEXT_FORM = {
    "type": "object",
    "properties": {"context": {"type": "string"}},
    "required": ["context"],
}
_NAME_FORM = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
_CONFIRM_FORM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}
# The work tools run as tasks (``allow_tasks(work=...)``): the call is answered at once with a
# working task. The scenarios cancel the work they ask to take a minute or more; the rest is
# capped, so the suite does not wait for it.
_WORK_SECONDS = 0.05
_CANCELLED_WORK_SECONDS = 30
_WORK_TIME = timedelta(minutes=5)


def _text(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)])


def _said(answer: McpAnswer) -> str:
    return f"action={answer.action}, content={json.dumps(answer.content)}"


def _register_content_tools(server: MCPServer) -> None:
    @server.tool(name="test_simple_text", description="Returns simple text content")
    async def simple_text() -> CallToolResult:
        return _text("This is a simple text response for testing.")

    @server.tool(name="test_image_content", description="Returns image content")
    async def image_content() -> CallToolResult:
        return CallToolResult(content=[ImageContent(type="image", data=PNG, mime_type="image/png")])

    @server.tool(name="test_audio_content", description="Returns audio content")
    async def audio_content() -> CallToolResult:
        return CallToolResult(content=[AudioContent(type="audio", data=WAV, mime_type="audio/wav")])

    @server.tool(name="test_embedded_resource", description="Returns an embedded resource")
    async def embedded_resource() -> CallToolResult:
        resource = TextResourceContents(
            uri="test://embedded-resource",
            mime_type="text/plain",
            text="This is an embedded resource content.",
        )
        return CallToolResult(content=[EmbeddedResource(type="resource", resource=resource)])

    @server.tool(name="test_multiple_content_types", description="Returns mixed content")
    async def multiple_content_types() -> CallToolResult:
        resource = TextResourceContents(
            uri="test://mixed-content-resource",
            mime_type="application/json",
            text='{"test":"data","value":123}',
        )
        return CallToolResult(
            content=[
                TextContent(type="text", text="Multiple content types test:"),
                ImageContent(type="image", data=PNG, mime_type="image/png"),
                EmbeddedResource(type="resource", resource=resource),
            ]
        )

    @server.tool(name="test_error_handling", description="Always fails")
    async def error_handling() -> CallToolResult:
        return CallToolResult(
            content=[
                TextContent(
                    type="text", text="This tool intentionally returns an error for testing"
                )
            ],
            is_error=True,
        )

    @server.tool(name="test_tool_with_logging", description="Logs while it runs")
    async def tool_with_logging(ctx: Context[Any, Any]) -> CallToolResult:
        await ctx.info("Tool execution started")
        await asyncio.sleep(_PROGRESS_STEP_SECONDS)
        await ctx.info("Tool processing data")
        await asyncio.sleep(_PROGRESS_STEP_SECONDS)
        await ctx.info("Tool execution completed")
        return _text("Tool with logging executed successfully")

    @server.tool(name="test_tool_with_progress", description="Reports progress")
    async def tool_with_progress(ctx: Context[Any, Any]) -> CallToolResult:
        for step in (0, 50, 100):
            await ctx.report_progress(step, 100)
            if step < 100:
                await asyncio.sleep(_PROGRESS_STEP_SECONDS)
        return _text("Tool with progress executed successfully")

    @server.tool(
        name="json_schema_2020_12_tool", description="Tool with JSON Schema 2020-12 features"
    )
    async def json_schema_2020_12_tool() -> CallToolResult:
        return _text("ok")

    # The SDK derives a tool's schema from its signature; this one is the suite's, whole.
    registered = server._tool_manager.get_tool("json_schema_2020_12_tool")
    assert registered is not None
    registered.parameters = SCHEMA_2020_12


def _register_question_tools(server: MCPServer, pauses: McpPauses) -> None:
    """Tools that ask a person: each question is a PauseMesh durable pause."""

    @server.tool(name="test_elicitation", description="Asks the user for input")
    async def elicitation(message: str, ctx: Context[Any, Any]) -> Any:
        answer = await pauses.ask(
            ctx,
            tool="test_elicitation",
            arguments={"message": message},
            message=message,
            schema=_CONTACT_FORM,
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        return _text(f"User response: {_said(answer)}")

    for name, form in (
        ("test_elicitation_sep1034_defaults", _DEFAULTS_FORM),
        ("test_elicitation_sep1330_enums", _ENUMS_FORM),
    ):
        _register_form_tool(server, pauses, name, form)

    @server.tool(name="test_input_required_result_elicitation", description="Asks the user's name")
    async def input_required_elicitation(ctx: Context[Any, Any]) -> Any:
        answer = await pauses.ask(
            ctx,
            tool="test_input_required_result_elicitation",
            arguments={},
            message="What is your name?",
            schema=_NAME_FORM,
            key="user_name",
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        name = (answer.content or {}).get("name", "")
        return _text(f"Hello, {name}!")


def _register_state_tools(server: MCPServer, pauses: McpPauses) -> None:
    """The 2026-07-28 multi-round tools: PauseMesh's sealed ``requestState`` carries the pause."""
    for name in (
        "test_input_required_result_request_state",
        "test_input_required_result_tampered_state",
    ):
        _register_confirm_tool(server, pauses, name)

    @server.tool(name="test_input_required_result_multi_round", description="Asks twice")
    async def multi_round(ctx: Context[Any, Any]) -> Any:
        return await _two_questions(
            pauses,
            ctx,
            "test_input_required_result_multi_round",
            ("Step 1: What is your name?", _NAME_FORM, "step1"),
            ("Step 2: What is your favorite color?", _COLOR_FORM, "step2"),
        )

    @server.tool(name="test_reconnection", description="Closes its SSE stream mid-call")
    async def reconnection(ctx: Context[Any, Any]) -> CallToolResult:
        await ctx.close_sse_stream()
        await asyncio.sleep(_PROGRESS_STEP_SECONDS)
        return _text("Reconnection test completed successfully")

    @server.tool(name="test_custom_header", description="Reads a region sent as a header")
    async def custom_header(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    ) -> CallToolResult:
        return _text(f"region={region}")


Question = tuple[str, dict[str, Any], str]
"""A question of a two-step tool: its message, its form schema, its answer's key."""


async def _two_questions(
    pauses: McpPauses, ctx: Context[Any, Any], tool: str, first: Question, second: Question
) -> Any:
    """Ask ``first``, then (one pause per call) ``second`` once it is answered; the two answers
    as the tool's text."""
    answers = []
    for step, (message, schema, key) in enumerate((first, second), start=1):
        arguments = {} if step == 1 else {"step": step}
        answer = await pauses.ask(
            ctx, tool=tool, arguments=arguments, message=message, schema=schema, key=key
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        answers.append(_said(answer))
    return _text("; ".join(answers))


def _register_task_tools(server: MCPServer, pauses: McpPauses) -> None:
    """The tasks extension's tools (``tasks-*``, SEP-2663): a question is a durable pause (a
    paused call of a task-capable tool is the task), long work a working task."""

    @server.tool(name="greet", description="Says hello (never a task)")
    async def greet(name: str) -> CallToolResult:
        return _text(f"Hello, {name}!")

    @server.tool(name="slow_compute", description="Computes for a while (task-capable)")
    async def slow_compute(seconds: float = 0, label: str = "") -> CallToolResult:
        taken = seconds if seconds >= _CANCELLED_WORK_SECONDS else min(seconds, _WORK_SECONDS)
        await asyncio.sleep(max(taken, 0))
        return _text(f"computed {label}")

    @server.tool(name="failing_job", description="A job that reports a tool error (task only)")
    async def failing_job() -> CallToolResult:
        await asyncio.sleep(_WORK_SECONDS)
        return CallToolResult(content=[TextContent(type="text", text="job failed")], is_error=True)

    @server.tool(name="protocol_error_job", description="A job that fails the protocol")
    async def protocol_error_job() -> CallToolResult:
        raise MCPError(code=INTERNAL_ERROR, message="the job crashed")

    @server.tool(name="confirm_delete", description="Asks before deleting a file (task-capable)")
    async def confirm_delete(filename: str, ctx: Context[Any, Any]) -> Any:
        answer = await pauses.ask(
            ctx,
            tool="confirm_delete",
            arguments={"filename": filename},
            message=f"Delete {filename}?",
            schema=_CONFIRM_FORM,
            key="confirm",
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        deleted = answer.action == "accept" and (answer.content or {}).get("confirm") is True
        return _text(f"{'deleted' if deleted else 'kept'} {filename}")

    @server.tool(name="multi_input", description="Asks for a name and a confirmation")
    async def multi_input(ctx: Context[Any, Any]) -> Any:
        return await _two_questions(
            pauses,
            ctx,
            "multi_input",
            ("Name?", _NAME_FORM, "name"),
            ("Confirm?", _CONFIRM_FORM, "confirm"),
        )

    @server.tool(name="test_tool_with_task", description="Asks a name, then runs as a task")
    async def tool_with_task(ctx: Context[Any, Any]) -> Any:
        answer = await pauses.ask(
            ctx,
            tool="test_tool_with_task",
            arguments={},
            message="What is your name?",
            schema=_NAME_FORM,
            key="user_name",
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        return _text(f"Hello, {(answer.content or {}).get('name', '')}!")

    for tool in ("slow_compute", "protocol_error_job"):
        pauses.allow_tasks(tool, work=_WORK_TIME)
    pauses.allow_tasks("failing_job", "required", work=_WORK_TIME)
    for tool in ("confirm_delete", "multi_input"):
        pauses.allow_tasks(tool)
    pauses.allow_tasks("test_tool_with_task", "required")


def _register_diagnostic_tools(server: MCPServer, pauses: McpPauses) -> None:
    """The stateless era's diagnostic tools (``server-stateless``)."""

    @server.tool(name="test_streaming_elicitation", description="Asks on its response stream")
    async def streaming_elicitation(ctx: Context[Any, Any]) -> Any:
        answer = await pauses.ask(
            ctx,
            tool="test_streaming_elicitation",
            arguments={},
            message="What is your name?",
            schema=_NAME_FORM,
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        return _text(f"Hello: {_said(answer)}")

    @server.tool(name="test_logging_tool", description="Logs, unless no level was asked for")
    async def logging_tool(ctx: Context[Any, Any]) -> CallToolResult:
        await ctx.info("A log line nobody asked for")
        return _text("logged")

    @server.tool(name="test_trigger_tool_change", description="Adds or removes a tool")
    async def trigger_tool_change(ctx: Context[Any, Any]) -> CallToolResult:
        if server._tool_manager.get_tool("test_dynamic_tool") is None:
            server.add_tool(_dynamic, name="test_dynamic_tool", description="Comes and goes")
        else:
            server.remove_tool("test_dynamic_tool")
        await ctx.notify_tools_changed()
        return _text("tools changed")

    @server.tool(name="test_trigger_prompt_change", description="Adds or removes a prompt")
    async def trigger_prompt_change(ctx: Context[Any, Any]) -> CallToolResult:
        if "test_dynamic_prompt" in {p.name for p in await server.list_prompts()}:
            server.remove_prompt("test_dynamic_prompt")
        else:
            prompt = Prompt.from_function(
                _dynamic_prompt, name="test_dynamic_prompt", description="Comes and goes"
            )
            server.add_prompt(prompt)
        await ctx.notify_prompts_changed()
        return _text("prompts changed")


async def _dynamic() -> CallToolResult:
    return _text("dynamic")


def _dynamic_prompt() -> list[UserMessage]:
    return [UserMessage("dynamic")]


def _register_question_prompt(server: MCPServer, pauses: McpPauses) -> None:
    @server.prompt(name="test_input_required_result_prompt", description="Asks for context")
    async def question_prompt(ctx: Context[Any, Any]) -> Any:
        answer = await pauses.ask(
            ctx,
            tool="test_input_required_result_prompt",
            arguments={},
            message="What context should the prompt use?",
            schema=_CONTEXT_FORM,
            key="user_context",
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        return [UserMessage(f"Use this context: {(answer.content or {}).get('context', '')}")]


def _register_confirm_tool(server: MCPServer, pauses: McpPauses, name: str) -> None:
    @server.tool(name=name, description="Asks for a confirmation")
    async def confirm(ctx: Context[Any, Any]) -> Any:
        answer = await pauses.ask(
            ctx, tool=name, arguments={}, message="Please confirm", schema=_OK_FORM, key="confirm"
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        # Reaching here means the sealed state opened and named this pause.
        return _text(f"state-ok: {_said(answer)}")


def _register_form_tool(
    server: MCPServer, pauses: McpPauses, name: str, form: dict[str, Any]
) -> None:
    @server.tool(name=name, description="Asks the user to fill in a form")
    async def form_tool(ctx: Context[Any, Any]) -> Any:
        answer = await pauses.ask(
            ctx, tool=name, arguments={}, message="Please fill in the form", schema=form
        )
        if isinstance(answer, InputRequiredResult):
            return answer
        return _text(f"Elicitation completed: {_said(answer)}")


def _register_resources_and_prompts(server: MCPServer) -> None:
    @server.resource(
        "test://static-text",
        name="static-text",
        description="A static text resource",
        mime_type="text/plain",
    )
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource(
        "test://static-binary",
        name="static-binary",
        description="A static binary resource",
        mime_type="image/png",
    )
    def static_binary() -> bytes:
        return base64.b64decode(PNG)

    @server.resource(
        "test://template/{id}/data",
        name="template",
        description="A resource template",
        mime_type="application/json",
    )
    def template(id: str) -> str:  # noqa: A002 - the template's parameter
        return json.dumps(
            {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":")
        )

    @server.prompt(name="test_simple_prompt", description="A simple prompt")
    def simple_prompt() -> list[UserMessage]:
        return [UserMessage("This is a simple prompt for testing.")]

    @server.prompt(name="test_prompt_with_arguments", description="A prompt with arguments")
    def prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
        return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]

    @server.prompt(
        name="test_prompt_with_embedded_resource", description="A prompt with a resource"
    )
    def prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:  # noqa: N803 - the suite's name
        resource = TextResourceContents(
            uri=resourceUri,
            mime_type="text/plain",
            text="Embedded resource content for testing.",
        )
        return [
            UserMessage(EmbeddedResource(type="resource", resource=resource)),
            UserMessage("Please process the embedded resource above."),
        ]

    @server.prompt(name="test_prompt_with_image", description="A prompt with an image")
    def prompt_with_image() -> list[UserMessage]:
        return [
            UserMessage(ImageContent(type="image", data=PNG, mime_type="image/png")),
            UserMessage("Please analyze the image above."),
        ]


def register_conformance_fixtures(
    server: MCPServer, pauses: McpPauses, pausemesh: PauseMeshPlugin
) -> None:
    """An ``McpToolRegistrar``: the suite's tools, resources and prompts."""
    del pausemesh  # the pauses carry what the questions need
    _register_content_tools(server)
    _register_question_tools(server, pauses)
    _register_state_tools(server, pauses)
    _register_question_prompt(server, pauses)
    _register_diagnostic_tools(server, pauses)
    _register_task_tools(server, pauses)
    _register_resources_and_prompts(server)


class McpConformanceServer(ServerProcess):
    """This module as a real server process (settings through ``env``)."""

    def __init__(self, *, env: dict[str, str]) -> None:
        super().__init__([], env=env)
        self.env.update(PAUSEMESH_HOST=self.host, PAUSEMESH_PORT=str(self.port))

    def command(self) -> list[str]:
        return [sys.executable, "-m", "tests.support.mcp_conformance_server"]


def main() -> None:
    settings = Settings.load(env_file=None)
    configure_logging(settings.log_level, settings.log_format)
    serve_app(settings, plugins=[McpPlugin(register_conformance_fixtures)])


if __name__ == "__main__":
    main()
