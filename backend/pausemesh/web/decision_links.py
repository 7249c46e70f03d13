"""One-click decision links (``core/links.py``): a confirmation page, then one decision.

``GET /v1/links/{pause}/{slot}/{mac}`` shows the terms (the question, who asked, the deadline)
and one button per choice (``?choice=N``: that one alone), and changes nothing: mail scanners and link previews fetch links.
Each button POSTs, with no body, to ``.../{choice}/{csrf}``: the token is on the page only,
and ``BrowserGuard`` refuses a POST from another origin. The POST decides exactly once as the
approver the link names; the thread continues as after any approver's decision. A link whose
pause is no longer waiting (decided, cancelled, expired) answers 410 Gone, one that is not a
link of this server 404. Pages are ``no-store`` and send no referrer, so the link leaves no
trace in caches or in the next site's logs.
"""

from __future__ import annotations

import html
import uuid
from typing import Annotated, Any

from litestar import Controller, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, PathParameter, QueryParameter

from pausemesh.bootstrap import Runtime
from pausemesh.core.approvers import ROLE_PREFIX
from pausemesh.core.errors import (
    ContinuationCancelledError,
    ContinuationExpiredError,
    ContinuationNotFoundError,
    TokenAlreadyUsedError,
)
from pausemesh.core.links import DecisionLinks, choices
from pausemesh.core.model import Continuation
from pausemesh.core.resume import NamedApprover, Resume
from pausemesh.web.owed import OwedRuns
from pausemesh.web.schemas import ID_PATTERN

__all__ = ("DecisionLinkController",)

RuntimeDep = NamedDependency[Runtime]
OwedDep = NamedDependency[OwedRuns]
PauseId = Annotated[str, PathParameter(min_length=1, max_length=200, pattern=ID_PATTERN)]
Mac = Annotated[str, PathParameter(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
_HEADERS = {
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
}


def _page(status: int, title: str, body: str) -> Response[str]:
    text = (
        "<!doctype html><html><head><meta charset='utf-8'><title>"
        f"{html.escape(title)}</title><style>body{{font-family:sans-serif;max-width:36rem;"
        "margin:3rem auto}}button{{font-size:1.1rem;margin-right:1rem}}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    return Response(text, status_code=status, media_type="text/html", headers=_HEADERS)


def _gone(state: str) -> Response[str]:
    return _page(410, "This link has been used up", f"<p>The request is {html.escape(state)}.</p>")


def _not_found() -> Response[str]:
    return _page(404, "Unknown link", "<p>This is not a decision link of this server.</p>")


async def _pause(
    runtime: Runtime, pause_id: str, slot: int, mac: str
) -> tuple[DecisionLinks, Continuation, str] | Response[str]:
    links = runtime.links
    if links is None:
        return _not_found()
    try:
        loaded = await runtime.service.peek(pause_id)
    except ContinuationNotFoundError:
        return _not_found()
    approver = links.approver(pause_id, slot, mac, loaded.approvers)
    if approver is None:
        return _not_found()
    return links, loaded, approver


def _decider(approver: str) -> NamedApprover:
    """The approver a link names, deciding (``core/links.py``: the link authenticates it)."""
    if approver.startswith(ROLE_PREFIX):
        return NamedApprover(f"link:{approver}", roles=frozenset({approver[len(ROLE_PREFIX) :]}))
    return NamedApprover(approver)


def _payload(pause: Continuation) -> dict[str, Any]:
    return pause.payload if isinstance(pause.payload, dict) else {}


class DecisionLinkController(Controller):
    path = "/v1/links"
    include_in_schema = False

    @get("/{pause_id:str}/{slot:int}/{mac:str}")
    async def confirm(
        self,
        pause_id: PauseId,
        slot: FromPath[int],
        mac: Mac,
        pausemesh_runtime: RuntimeDep,
        choice: Annotated[int | None, QueryParameter(name="choice", ge=0, le=7)] = None,
    ) -> Response[str]:
        found = await _pause(pausemesh_runtime, pause_id, slot, mac)
        if isinstance(found, Response):
            return found
        links, pause, approver = found
        if pause.status != "pending":
            return _gone(pause.status)
        payload = _payload(pause)
        asked = pause.owner if isinstance(pause.owner, str) else "someone"
        buttons = "".join(
            f"<form method='post' action='{html.escape(links.path(pause_id, slot, approver))}"
            f"/{n}/{links.csrf(pause_id, slot, n)}' style='display:inline'>"
            f"<button type='submit'>{html.escape(label)}</button></form>"
            for n, (label, _) in enumerate(choices(payload.get("responseSchema")))
            if choice is None or n == choice
        )
        body = (
            f"<p>{html.escape(str(payload.get('message', '')))}</p>"
            f"<p>Asked by {html.escape(asked)}; you decide as {html.escape(approver)}."
            f" Open until {html.escape(pause.expires_at.isoformat())}.</p>{buttons}"
        )
        return _page(200, "A decision is asked of you", body)

    @post("/{pause_id:str}/{slot:int}/{mac:str}/{choice:int}/{csrf:str}", status_code=200)
    async def decide(  # noqa: PLR0911, PLR0917 - the link's parts; one answer per outcome
        self,
        pause_id: PauseId,
        slot: FromPath[int],
        mac: Mac,
        choice: FromPath[int],
        csrf: Mac,
        pausemesh_runtime: RuntimeDep,
        pausemesh_owed: OwedDep,
    ) -> Response[str]:
        found = await _pause(pausemesh_runtime, pause_id, slot, mac)
        if isinstance(found, Response):
            return found
        links, pause, approver = found
        offered = choices(_payload(pause).get("responseSchema"))
        if not 0 <= choice < len(offered) or links.csrf(pause_id, slot, choice) != csrf:
            return _page(403, "Refused", "<p>Decide from the link's own page.</p>")
        if pause.status != "pending":
            return _gone(pause.status)
        label, answer = offered[choice]
        try:
            outcome = await pausemesh_runtime.service.resume(
                Resume(
                    continuation_id=pause_id,
                    # Unique: a second use of the link is never an "exact retry" of the first.
                    idempotency_key=f"link-{uuid.uuid4()}",
                    payload=answer,
                    by=_decider(approver),
                )
            )
        except TokenAlreadyUsedError:
            return _gone("decided")
        except ContinuationCancelledError:
            return _gone("cancelled")
        except ContinuationExpiredError:
            return _gone("expired")
        pausemesh_owed.poke(outcome)
        return _page(200, "Decided", f"<p>Recorded: {html.escape(label)}. Thank you.</p>")
