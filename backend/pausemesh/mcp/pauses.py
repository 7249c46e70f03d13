"""Durable pauses for MCP tools: one continuation behind both MCP eras.

A tool calls ``McpPauses.ask(ctx, ...)``:

* **2026-07-28** (multi-round-trip): the first call creates a keyed continuation and returns
  ``InputRequiredResult`` with a form elicitation and a sealed ``requestState`` referencing it.
  The retry (any replica, after any restart) decodes the state, validates the answer against
  the pause's schema and resumes the continuation exactly once; a replay of the same retry
  gets the stored outcome, a different answer after the fact is refused.
* **2025-11-25 and older** (handshake era): a live ``elicitation/create`` on the session,
  backed by the same kind of continuation, resumed or cancelled with the client's answer. With
  the thread store (``threads``), the question outlives the session: a later call of the same
  tool with the same arguments, in either era, gets the same pending question.

A bad answer is the protocol's ``-32602`` and the continuation stays pending; decline and
cancel cancel it. The answer a tool gets is ``McpAnswer``; it then acts (e.g. books through
the operation ledger with the continuation id as business key, so it happens once).

The work is split by concern: ``mcp.sdk_bridge`` (SDK context ↔ continuation service),
``mcp.form_pauses`` (questions) and ``mcp.url_authorization`` (links and their callback).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from mcp.server.mcpserver import Context
from mcp_types import InputRequiredResult

from pausemesh.core.model import Continuation
from pausemesh.core.service import ContinuationService
from pausemesh.core.threads import ThreadStore
from pausemesh.mcp.elicitation import McpProjectionPolicy
from pausemesh.mcp.form_pauses import FormPauses
from pausemesh.mcp.pause_slots import PauseSlots
from pausemesh.mcp.sdk_bridge import McpAnswer, PauseBridge, Question, principal_of, roles_of
from pausemesh.mcp.tasks import TaskSupport
from pausemesh.mcp.url_authorization import UrlAuthorizations

__all__ = ("McpAnswer", "McpPauses", "principal_of", "roles_of")


class McpPauses:
    """Creates and settles the continuations behind MCP elicitations."""

    def __init__(
        self,
        service: Callable[[], ContinuationService],
        policy: Callable[[], McpProjectionPolicy | None] = lambda: None,
        threads: Callable[[], ThreadStore | None] = lambda: None,
    ) -> None:
        """``threads`` (the thread store) lets a 2025-11-25 question outlive its session."""
        bridge = PauseBridge(service)
        self._forms = FormPauses(bridge, PauseSlots(service, threads))
        self._urls = UrlAuthorizations(bridge, policy)
        self._task_support: dict[str, TaskSupport] = {}
        self._work: dict[str, timedelta] = {}

    def allow_tasks(
        self, tool: str, support: TaskSupport = "optional", *, work: timedelta | None = None
    ) -> None:
        """Let 2025-11-25 clients call ``tool`` as an MCP task: ``tools/list`` shows it with
        ``execution.taskSupport`` = ``support`` (``"required"``: only as a task). A tool
        not named here is ``forbidden`` (the spec's default): a task call of it is ``-32601``.
        Only for tools whose pauses are questions (``ask``): a task carries a form question.

        ``work``: the tool works without asking (the tasks extension of 2026-07-28): a
        declaring client's call of it is answered at once with a ``working`` task while this
        process runs the tool, and the task ends ``failed`` if no result is recorded within
        ``work`` (the process running it stopped).
        """
        self._task_support[tool] = support
        if work is not None:
            self._work[tool] = work

    def work_time(self, tool: object) -> timedelta | None:
        """How long ``tool``'s work may take as a task (None: it is not work)."""
        return self._work.get(tool) if isinstance(tool, str) else None

    def task_support(self, tool: object) -> TaskSupport | None:
        """``tool``'s ``execution.taskSupport`` (None: forbidden)."""
        return self._task_support.get(tool) if isinstance(tool, str) else None

    async def ask(
        self,
        ctx: Context[Any, Any],
        *,
        tool: str,
        arguments: Mapping[str, Any],
        message: str,
        schema: dict[str, Any],
        key: str = "answer",
        expires_in: timedelta | None = None,
    ) -> McpAnswer | InputRequiredResult:
        """Ask ``message`` with the flat form ``schema``; the answer arrives under ``key``."""
        question = Question(tool, dict(arguments), message, schema, key, expires_in)
        return await self._forms.ask(ctx, question)

    async def authorize(
        self,
        ctx: Context[Any, Any],
        *,
        tool: str,
        arguments: Mapping[str, Any],
        message: str,
        url_for: Callable[[Continuation], str],
        key: str = "authorization",
        expires_in: timedelta | None = None,
    ) -> McpAnswer | InputRequiredResult:
        """Send the user to ``url_for(continuation)`` (URL mode) and wait for the trusted callback.

        The link must pass the static URL checks and the host's ``McpProjectionPolicy``; without
        one, URL mode fails closed. ``accept`` only means the user agreed to open the link: the
        pause completes when the host's callback calls ``complete_authorization``. Credentials
        never pass through the MCP client; ``content`` is whatever non-secret summary the
        callback recorded (e.g. ``{"connected": true}``).
        """
        question = Question(tool, dict(arguments), message, None, key, expires_in)
        return await self._urls.authorize(ctx, question, url_for)

    async def complete_authorization(
        self, continuation_id: str, *, result: dict[str, Any], principal: str | None
    ) -> Continuation:
        """For the host's trusted out-of-band callback: resume the pause exactly once.

        ``principal`` must be the user who opened the link (the callback verifies its own
        session); another principal is told the pause does not exist. ``result`` is a
        non-secret summary, never a credential. A live 2025-11-25 client is then sent
        ``notifications/elicitation/complete``.
        """
        return await self._urls.complete(continuation_id, result=result, principal=principal)
