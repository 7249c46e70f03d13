"""The embedding examples (``examples/``) run an interrupt → resume under a real uvicorn.

Each example is started as its own server process on a fresh SQLite file; a client asks, gets
the interrupt outcome, answers with a whole-batch resume, and reads the thread back. Every
streamed event must parse strictly under the official ``ag-ui-protocol`` models.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import Event
from asgi_lifespan import LifespanManager
from pydantic import TypeAdapter

from pausemesh.settings import Settings
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

EVENT: TypeAdapter[Any] = TypeAdapter(Event)


class UvicornProcess(ServerProcess):
    """``python -m uvicorn <module:app>`` instead of the ``pausemesh`` CLI."""

    def command(self) -> list[str]:
        (app,) = self.args
        return [
            sys.executable,
            "-m",
            "uvicorn",
            app,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--no-access-log",
        ]


def run(client: httpx.Client, url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST a RunAgentInput and return the streamed events (each checked against the SDK)."""
    with client.stream("POST", url, json=body, headers={"accept": "text/event-stream"}) as reply:
        assert reply.status_code == 200, reply.read()
        assert reply.headers["content-type"].startswith("text/event-stream")
        text = reply.read().decode()
    assert "\r" not in text, "frames must be LF-framed"
    events = []
    for frame in text.split("\n\n"):
        data = [line[len("data: ") :] for line in frame.split("\n") if line.startswith("data: ")]
        if data:
            EVENT.validate_json(data[0], strict=True)
            events.append(json.loads(data[0]))
    return events


def said(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def interrupt_then_resume(
    base_url: str, prefix: str, payload: dict[str, Any], expected_reply: str
) -> None:
    thread = f"t-{uuid.uuid4()}"
    question = {
        "threadId": thread,
        "runId": "run-1",
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    with httpx.Client(base_url=base_url, timeout=30) as client:
        first = run(client, f"{prefix}/agui", question)
        assert first[0]["type"] == "RUN_STARTED"
        finished = first[-1]
        assert finished["type"] == "RUN_FINISHED"
        assert finished["outcome"]["type"] == "interrupt"
        (interrupt,) = finished["outcome"]["interrupts"]
        assert "responseSchema" in interrupt

        snapshot = client.get(f"{prefix}/agui/threads/{thread}").json()
        assert [i["id"] for i in snapshot["pendingInterrupts"]] == [interrupt["id"]]

        answer = {
            **question,
            "runId": "run-2",
            "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}],
        }
        second = run(client, f"{prefix}/agui", answer)
        assert [second[0]["type"], second[-1]["type"]] == ["RUN_STARTED", "RUN_FINISHED"]
        assert "outcome" not in second[-1] or second[-1]["outcome"]["type"] == "success"
        assert said(second) == expected_reply

        after = client.get(f"{prefix}/agui/threads/{thread}").json()
        assert after["pendingInterrupts"] == []
        assert any(m.get("content") == expected_reply for m in after["messages"])

        # The identical resume again: answered from the record, the agent does not act twice.
        replay = run(client, f"{prefix}/agui", {**answer, "runId": "run-3"})
        assert said(replay) == ""
        assert replay[-1]["type"] == "RUN_FINISHED"
        again = client.get(f"{prefix}/agui/threads/{thread}").json()
        assert [m.get("content") for m in again["messages"]].count(expected_reply) == 1


@pytest.fixture(name="database_env")
def database_env_fixture(tmp_path: Path) -> dict[str, str]:
    return {"PAUSEMESH_DATABASE_PATH": str(tmp_path / "host.db"), "PAUSEMESH_LOG_LEVEL": "warning"}


def serve(app: str, env: dict[str, str]) -> UvicornProcess:
    return UvicornProcess([app], env=env, ready_path="/")


@pytest.fixture(name="litestar_host")
def litestar_host_fixture(database_env: dict[str, str]) -> Iterator[UvicornProcess]:
    with serve("examples.litestar_plugin:app", database_env) as server:
        yield server


@pytest.fixture(name="fastapi_host")
def fastapi_host_fixture(database_env: dict[str, str]) -> Iterator[UvicornProcess]:
    with serve("examples.fastapi_mount:app", database_env) as server:
        yield server


@pytest.fixture(name="starlette_host")
def starlette_host_fixture(database_env: dict[str, str]) -> Iterator[UvicornProcess]:
    with serve("examples.starlette_native:app", database_env) as server:
        yield server


def test_litestar_host_with_the_plugin_pauses_and_resumes_once(
    litestar_host: UvicornProcess,
) -> None:
    assert httpx.get(litestar_host.url("/")).json()["service"] == "refunds"
    interrupt_then_resume(litestar_host.base_url, "", {"approved": True}, "Refund sent.")


def test_fastapi_host_with_the_mounted_app_pauses_and_resumes_once(
    fastapi_host: UvicornProcess,
) -> None:
    assert httpx.get(fastapi_host.url("/")).json()["service"] == "deployments"
    interrupt_then_resume(
        fastapi_host.base_url,
        "/pausemesh",
        {"environment": "staging"},
        "Deployed build 42 to staging.",
    )


def test_starlette_host_with_native_sse_starlette_routes_pauses_and_resumes_once(
    starlette_host: UvicornProcess,
) -> None:
    assert httpx.get(starlette_host.url("/")).json()["service"] == "calendar"
    interrupt_then_resume(
        starlette_host.base_url, "", {"slot": "Tue 14:00"}, "Meeting set for Tue 14:00."
    )


def test_starlette_routes_refuse_bad_input_before_streaming(
    starlette_host: UvicornProcess,
) -> None:
    with httpx.Client(base_url=starlette_host.base_url, timeout=10) as client:
        broken = client.post(
            "/agui", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert broken.status_code == 400
        assert broken.headers["content-type"].startswith("application/problem+json")
        assert broken.json()["code"] == "INVALID_RUN_INPUT"
        unknown = client.get("/agui/threads/no-such-thread")
        assert unknown.status_code == 404
        assert unknown.json()["code"] == "THREAD_NOT_FOUND"
        cursor = client.get("/agui/threads/x/events", headers={"last-event-id": "-1"})
        assert cursor.status_code == 400
        assert cursor.json()["code"] == "INVALID_CURSOR"
        too_big = client.post(
            "/agui", content=b"x" * 70_000, headers={"content-type": "application/json"}
        )
        assert too_big.status_code == 413
        assert too_big.json()["code"] == "PAYLOAD_TOO_LARGE"


async def test_a_mount_whose_host_skips_our_lifespan_fails_loudly(tmp_path: Path) -> None:
    from examples import fastapi_mount  # noqa: PLC0415 - imported where it is exercised

    host = fastapi_mount.create_host_app(
        Settings(database_path=str(tmp_path / "x.db")), enter_lifespan=False
    )
    async with (
        LifespanManager(host),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=host), base_url="http://localhost"
        ) as client,
    ):
        reply = await client.post(
            "/pausemesh/agui", json={"threadId": "t", "runId": "r", "messages": []}
        )
    assert reply.status_code == 500
    problem = reply.json()
    assert problem["code"] == "NOT_STARTED"
    assert "lifespan" in problem["detail"]


async def test_native_routes_without_their_lifespan_fail_loudly(tmp_path: Path) -> None:
    from examples import starlette_native  # noqa: PLC0415
    from starlette.applications import Starlette  # noqa: PLC0415

    from pausemesh.web.agui_starlette import StarletteAgui  # noqa: PLC0415

    pausemesh = StarletteAgui(
        Settings(database_path=str(tmp_path / "x.db")), agent=starlette_native.meeting_agent
    )
    host = Starlette(routes=pausemesh.routes())  # lifespan=pausemesh.lifespan forgotten
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=host), base_url="http://localhost"
    ) as client:
        reply = await client.get("/agui/threads/t")
    assert reply.status_code == 500
    assert reply.json()["code"] == "NOT_STARTED"
    assert "lifespan" in reply.json()["detail"]


async def test_native_routes_scope_threads_to_the_resolved_principal(tmp_path: Path) -> None:
    from examples import starlette_native  # noqa: PLC0415
    from starlette.applications import Starlette  # noqa: PLC0415
    from starlette.requests import Request  # noqa: PLC0415

    from pausemesh.web.agui_starlette import StarletteAgui  # noqa: PLC0415

    async def resolver(request: Request) -> str | None:
        return request.headers.get("x-user")

    pausemesh = StarletteAgui(
        Settings(database_path=str(tmp_path / "p.db")),
        agent=starlette_native.meeting_agent,
        principal_resolver=resolver,
    )
    host = Starlette(routes=pausemesh.routes(), lifespan=pausemesh.lifespan)
    body = {
        "threadId": "shared-name",
        "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
    }
    async with (
        LifespanManager(host),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=host), base_url="http://localhost"
        ) as client,
    ):
        alice = await client.post("/agui", json=body, headers={"x-user": "alice"})
        assert alice.status_code == 200
        assert '"type":"RUN_FINISHED"' in alice.text
        mine = await client.get("/agui/threads/shared-name", headers={"x-user": "alice"})
        assert mine.status_code == 200
        assert len(mine.json()["pendingInterrupts"]) == 1
        theirs = await client.get("/agui/threads/shared-name", headers={"x-user": "bob"})
        assert theirs.status_code == 404
        intruder = await client.post("/agui", json=body, headers={"x-user": "bob"})
        assert intruder.status_code == 404
        anonymous = await client.get("/agui/threads/shared-name")
        assert anonymous.status_code == 401
        assert anonymous.json()["code"] == "UNAUTHENTICATED"


async def test_native_routes_refuse_a_cross_site_or_non_json_run(tmp_path: Path) -> None:
    from examples import starlette_native  # noqa: PLC0415
    from starlette.applications import Starlette  # noqa: PLC0415

    from pausemesh.web.agui_starlette import StarletteAgui  # noqa: PLC0415

    pausemesh = StarletteAgui(
        Settings(database_path=str(tmp_path / "o.db")), agent=starlette_native.meeting_agent
    )
    host = Starlette(routes=pausemesh.routes(), lifespan=pausemesh.lifespan)
    body = json.dumps({"threadId": "t-csrf", "runId": "r", "messages": []})
    async with (
        LifespanManager(host),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=host), base_url="http://localhost"
        ) as client,
    ):
        foreign = await client.post(
            "/agui",
            content=body,
            headers={"origin": "https://evil.example", "content-type": "application/json"},
        )
        plain = await client.post("/agui", content=body, headers={"content-type": "text/plain"})
        snapshot = await client.get("/agui/threads/t-csrf")
    assert foreign.status_code == 403
    assert foreign.json()["code"] == "ORIGIN_NOT_ALLOWED"
    assert plain.status_code == 415
    assert plain.json()["code"] == "UNSUPPORTED_MEDIA_TYPE"
    assert snapshot.status_code == 404
