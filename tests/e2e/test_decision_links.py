"""One-click decision links against a real ``pausemesh demo`` process on SQLite.

The demo asks ``role:manager`` to approve PM404. The server sends ``pause.created`` to a local
webhook receiver (signed, checked with the ``standardwebhooks`` verifier) with one link for
the manager; a person follows it: the page changes nothing, its button decides once, the
owner's thread continues with the decision; every later use is 410 Gone; a link altered in
any part is no link; the link is neither in the database file nor in the server's log.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from tests.e2e.agui_helpers import ask, bookings, new_thread, pending_ids, resolved, resume_body
from tests.support.agui import post_run
from tests.support.push_receiver import Delivery, Receiver
from tests.support.server import REPO_ROOT, ServerProcess, free_port

pytestmark = pytest.mark.slow

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
_RESOLVER = "tests.support.agui:header_identity"


@dataclass
class Demo:
    server: ServerProcess
    receiver: Receiver
    database: Path
    web: httpx.Client  # a person's browser: no identity, only the link

    def client(self, principal: str, roles: str = "") -> httpx.Client:
        headers = {"X-Principal": principal, "X-Roles": roles}
        return httpx.Client(base_url=self.server.base_url, timeout=30, headers=headers)


@pytest.fixture(name="example", scope="module")
def example_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """examples/approval_webhooks.py as its own process: its URL and the file it writes."""
    out = tmp_path_factory.mktemp("example") / "messages.jsonl"
    port = free_port()
    command = [sys.executable, "examples/approval_webhooks.py", "--port", str(port)]
    env = {**os.environ, "PAUSEMESH_WEBHOOK_SECRET": SECRET}
    process = subprocess.Popen([*command, "--out", str(out)], env=env, cwd=REPO_ROOT)
    try:
        deadline = time.monotonic() + 60
        while not listening(port):
            assert process.poll() is None, "the example receiver exited"
            assert time.monotonic() < deadline, "the example receiver never listened"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/hooks", out
    finally:
        process.terminate()
        process.wait(30)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(name="demo", scope="module")
def demo_fixture(
    tmp_path_factory: pytest.TempPathFactory, example: tuple[str, Path]
) -> Iterator[Demo]:
    folder = tmp_path_factory.mktemp("decision-links")
    with Receiver() as receiver:
        hook = {
            "id": "chat",
            "url": receiver.url,
            "events": ["pause.created", "pause.decided"],
            "secrets": [SECRET],
            "filters": {"roles": ["manager"]},
        }
        sample = {**hook, "id": "example", "url": example[0], "events": ["pause.created"]}
        (folder / "webhooks.json").write_text(json.dumps({"webhooks": [hook, sample]}))
        env = {
            "PAUSEMESH_SECRET_KEY": secrets.token_urlsafe(48),
            "PAUSEMESH_DEMO_AIRLINE_PATH": str(folder / "airline.db"),
            "PAUSEMESH_LOG_LEVEL": "info",
            "PAUSEMESH_WEBHOOKS_FILE": str(folder / "webhooks.json"),
            "PAUSEMESH_DECISION_LINKS": "1",
            "PAUSEMESH_A2A_PUSH_ALLOW": "loopback",
            "PAUSEMESH_A2A_PUSH_POLL_SECONDS": "0.1",
        }
        database = folder / "demo.db"
        args = ["demo", "--no-browser", "--database-path", str(database)]
        with (
            ServerProcess([*args, "--principal-resolver", _RESOLVER], env=env) as server,
            httpx.Client(timeout=30) as web,
        ):
            yield Demo(server=server, receiver=receiver, database=database, web=web)


def approval_asked(demo: Demo, alice: httpx.Client) -> tuple[str, str, dict[str, Any]]:
    """Alice picks PM404; returns the thread, the approval pause and its webhook's body."""
    thread_id = new_thread()
    question = ask(alice, thread_id).interrupts[0]
    run = post_run(alice, resume_body(thread_id, [resolved(question["id"], "PM404")]))
    [approval] = run.interrupts

    def created(d: Delivery) -> bool:
        data = json.loads(d.body)
        return bool(data["type"] == "pause.created" and data["data"]["pauseId"] == approval["id"])

    [delivery] = demo.receiver.wait_for(1, where=created)
    body: dict[str, Any] = Webhook(SECRET).verify(delivery.body, delivery.headers)
    return thread_id, approval["id"], body


def link_of(body: dict[str, Any]) -> str:
    [link] = body["data"]["links"]
    assert link["approver"] == "role:manager"
    assert [c["label"] for c in link["choices"]] == ["Approve", "Reject"]
    assert [c["url"] for c in link["choices"]] == [f"{link['url']}?choice={n}" for n in (0, 1)]
    return str(link["url"])


def booked(alice: httpx.Client, thread_id: str) -> list[str]:
    """The thread's bookings once its owed run has made one (polled, with a deadline)."""
    deadline = time.monotonic() + 60
    while not (found := [b["flight"] for b in bookings(alice, thread_id)]):
        assert time.monotonic() < deadline, "the thread never continued"
        time.sleep(0.05)
    return found


def buttons(page: httpx.Response) -> list[str]:
    return re.findall(r"action='([^']+)'", page.text)


@pytest.fixture(name="alice")
def alice_fixture(demo: Demo) -> Iterator[httpx.Client]:
    with demo.client("alice") as client:
        yield client


def test_a_link_page_changes_nothing_its_button_decides_once_and_the_thread_continues(
    demo: Demo, alice: httpx.Client
) -> None:
    thread_id, pause_id, body = approval_asked(demo, alice)
    url = link_of(body)
    assert "token" not in json.dumps(body).lower()
    assert body["data"]["threadTitle"] == "Flight to Lisbon"
    web = demo.web

    # A mail scanner or a preview fetches it, twice: nothing is decided.
    for _ in range(2):
        page = web.get(url)
        assert page.status_code == 200, page.text
        assert page.headers["cache-control"] == "no-store"
        assert "Approve the booking" in page.text or "PM404" in page.text
    assert pending_ids(alice, thread_id) == [pause_id]
    approve, _reject = buttons(page)
    # A chat message's "Approve" button opens the page with that choice alone.
    assert buttons(web.get(f"{url}?choice=0")) == [approve]

    decided = web.post(urllib.parse.urljoin(url, approve))
    assert decided.status_code == 200, decided.text
    # The owner's thread continues with the manager's decision: the flight is booked.
    assert booked(alice, thread_id) == ["PM404"]
    decision = demo.receiver.wait_for(
        1,
        where=lambda d: (
            json.loads(d.body)["type"] == "pause.decided"
            and json.loads(d.body)["data"]["pauseId"] == pause_id
        ),
    )[0]
    outcome = Webhook(SECRET).verify(decision.body, decision.headers)["data"]["decision"]
    assert outcome == {**outcome, "resolvedBy": "link:role:manager"}
    assert outcome["answer"] == {"decision": "approve"}
    assert "links" not in json.loads(decision.body)["data"]

    # Every later use is 410: the same button, the other one, the page itself.
    assert web.post(urllib.parse.urljoin(url, approve)).status_code == 410
    assert web.post(urllib.parse.urljoin(url, _reject)).status_code == 410
    assert web.get(url).status_code == 410


def test_an_altered_link_is_no_link_and_decides_nothing(demo: Demo, alice: httpx.Client) -> None:
    thread_id, pause_id, body = approval_asked(demo, alice)
    _, other_pause, other_body = approval_asked(demo, alice)
    url, other = link_of(body), link_of(other_body)
    web = demo.web
    mac = url.rsplit("/", 1)[1]
    approve = buttons(web.get(url))[0]

    forged = [
        url.replace(pause_id, other_pause),  # this pause's link on another pause
        url[: -len(mac)] + mac[:-2] + ("AA" if not mac.endswith("AA") else "BB"),
        url.replace(f"/{pause_id}/0/", f"/{pause_id}/1/"),  # another approver's slot
        other.replace(other_pause, pause_id),
    ]
    for link in forged:
        assert web.get(link).status_code == 404, link
    # A button without the page's token, or another choice's token, is refused.
    path = urllib.parse.urljoin(url, approve)
    assert web.post(path.rsplit("/", 1)[0] + "/AAAAAAAAAAAAAAAAAAAAAA").status_code == 403
    assert web.post(path.rsplit("/", 2)[0] + "/1/" + path.rsplit("/", 1)[1]).status_code == 403
    # From another site's page: refused before the route runs.
    assert web.post(path, headers={"Origin": "https://evil.example"}).status_code == 403
    assert pending_ids(alice, thread_id) == [pause_id]

    # The link itself is nowhere the server keeps things: not the database, not the log.
    stored = b"".join(p.read_bytes() for p in demo.database.parent.glob("demo.db*"))
    assert mac.encode() not in stored
    assert mac not in demo.server.output()


def test_the_example_receiver_turns_the_request_into_a_chat_message_with_its_links(
    demo: Demo, alice: httpx.Client, example: tuple[str, Path]
) -> None:
    _, pause_id, body = approval_asked(demo, alice)
    out = example[1]
    deadline = time.monotonic() + 60
    while not (found := [m for m in messages(out) if m["thread"] == pause_id]):
        assert time.monotonic() < deadline, "the example wrote no message"
        time.sleep(0.05)
    [message] = found
    [actions] = [b for b in message["blocks"] if b["type"] == "actions"]
    buttons_ = [(e["text"]["text"], e["url"]) for e in actions["elements"]]
    assert [label for label, _ in buttons_] == ["Approve", "Reject"]
    assert [url for _, url in buttons_] == [c["url"] for c in body["data"]["links"][0]["choices"]]
    # "Approve" in the chat opens the server's page offering that one choice.
    page = demo.web.get(buttons_[0][1])
    assert page.status_code == 200
    assert len(buttons(page)) == 1


def messages(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
