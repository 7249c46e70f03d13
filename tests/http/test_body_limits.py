"""One body limit on every route family: over ``PAUSEMESH_MAX_PAYLOAD_BYTES`` is refused, nothing
is stored and the database file does not grow (a real ``pausemesh demo`` on a SQLite file)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.rest import assert_problem
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow

_LIMIT = 4_096
_BIG = 5 * 1024 * 1024


@pytest.fixture(name="data_dir", scope="module")
def data_dir_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("body-limits")


@pytest.fixture(name="server", scope="module")
def server_fixture(data_dir: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(
        ["demo", "--no-browser", "--database-path", str(data_dir / "pausemesh.db")],
        env={"PAUSEMESH_DATA_DIR": str(data_dir), "PAUSEMESH_MAX_PAYLOAD_BYTES": str(_LIMIT)},
    )
    with server:
        yield server


def _rows(data_dir: Path) -> dict[str, int]:
    uri = f"file:{data_dir / 'pausemesh.db'}?mode=ro"
    with sqlite3.connect(uri, uri=True) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}  # noqa: S608 - names from sqlite_master


def _size(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.glob("pausemesh.db*"))


def _padded_bodies() -> dict[str, bytes]:
    pad = "x" * _BIG
    thread = f"t-{uuid.uuid4()}"
    return {
        "/v1/continuations": f'{{"payload": "{pad}"}}'.encode(),
        "/agui": (
            f'{{"threadId": "{thread}", "runId": "r", "state": {{}}, "tools": [], "context": [],'
            f' "forwardedProps": {{}}, "messages": [{{"id": "m", "role": "user",'
            f' "content": "{pad}"}}]}}'
        ).encode(),
        "/mcp": (
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book_flight",'
            f'"arguments":{{"destination":"{pad}"}}}}}}'
        ).encode(),
        "/a2a/jsonrpc": (
            '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":'
            f'{{"messageId":"m-big","role":"ROLE_USER","parts":[{{"text":"{pad}"}}]}}}}}}'
        ).encode(),
        "/a2a/rest/message:send": (
            '{"message":{"messageId":"m-big2","role":"ROLE_USER",'
            f'"parts":[{{"text":"{pad}"}}]}}}}'
        ).encode(),
    }


_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize(
    "path", ["/v1/continuations", "/agui", "/mcp", "/a2a/jsonrpc", "/a2a/rest/message:send"]
)
def test_an_over_limit_body_is_refused_and_stores_nothing(
    server: ServerProcess, data_dir: Path, path: str, *, chunked: bool
) -> None:
    body = _padded_bodies()[path]
    rows, size = _rows(data_dir), _size(data_dir)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 65_536):
            yield body[start : start + 65_536]

    with httpx.Client(timeout=60) as http:
        response = http.post(
            server.url(path), content=chunks() if chunked else body, headers=_HEADERS
        )
    assert_problem(response, 413, "PAYLOAD_TOO_LARGE")
    assert _rows(data_dir) == rows
    assert _size(data_dir) <= size


def test_a_body_within_the_limit_still_works(server: ServerProcess) -> None:
    with httpx.Client(timeout=30) as http:
        response = http.post(server.url("/v1/continuations"), json={"payload": "x" * 1_000})
    assert response.status_code == 201
