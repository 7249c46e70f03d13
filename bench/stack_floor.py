# ruff: noqa: E402 - sys.path is fixed before the imports (see below)
"""The stack under PauseMesh alone: what Litestar on uvicorn, served as ``pausemesh serve``
serves, can do on this machine with nothing of PauseMesh in it.

``bench/http.py --floor`` starts these beside ``pausemesh serve`` and drives them with the same
client, so issue 15's goals can be read against what the required stack allows here. Two apps,
each answering the bench's two requests (``POST /v1/continuations`` → 201 with a
``continuationId`` and a ``resumeToken``; ``POST /v1/continuations/{id}/resume`` → 200):

- ``litestar``: a Litestar app shaped like PauseMesh's two routes (the JSON body parsed into
  the handler's ``data``, the path parameter, the resume's two headers as parameters, a msgspec
  struct encoded as the response) and nothing else: no store, no log line, no middleware, no
  token, no schema check.
- ``asgi``: uvicorn alone: a bare ASGI callable that reads the body and sends fixed bytes.

Either is served as ``pausemesh serve --workers N`` serves PauseMesh: the same uvicorn settings
(``pausemesh.serving.server``), the same listening sockets per worker
(``pausemesh.serving.workers``) and the same process tuning (``pausemesh.serving.process_tuning``).

Usage (as ``bench/http.py --floor`` runs it):
       .venv/bin/python bench/stack_floor.py --app litestar|asgi --port PORT [--host HOST]
       [--workers N]
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse
import itertools
from typing import Annotated, Any

import msgspec
import uvicorn
from litestar import Litestar, get, post
from litestar.params import HeaderParameter, PathParameter
from tests.support.server import ServerProcess

from pausemesh.serving.process_tuning import tune_for_serving
from pausemesh.serving.server import supervise_workers, uvicorn_config
from pausemesh.serving.workers import listener_for_workers
from pausemesh.settings import load_settings, with_overrides

# Each app by name, with its label in ``bench/http.py --floor``'s table.
APPS = {"litestar": "Litestar", "asgi": "uvicorn"}
_TOKEN = "pm1." + "t" * 43


class _Continuation(msgspec.Struct, rename="camel"):
    continuation_id: str
    status: str


class _Created(msgspec.Struct, rename="camel"):
    continuation: _Continuation
    resume_token: str


class _Resumed(msgspec.Struct, rename="camel"):
    continuation: _Continuation


_ids = itertools.count()


@post("/v1/continuations", status_code=201)
async def _create(data: dict[str, Any]) -> _Created:
    # Each parameter is read, as a real handler would (Litestar parses them all the same).
    status = "pending" if data else "empty"
    continuation = _Continuation(continuation_id=f"c-{next(_ids)}", status=status)
    return _Created(continuation=continuation, resume_token=_TOKEN)


@post("/v1/continuations/{continuation_id:str}/resume", status_code=200)
async def _resume(
    continuation_id: Annotated[str, PathParameter()],
    data: dict[str, Any],
    idempotency_key: Annotated[str | None, HeaderParameter(name="idempotency-key")],
    authorization: Annotated[str | None, HeaderParameter(name="authorization")],
) -> _Resumed:
    status = "resolved" if data and idempotency_key and authorization else "pending"
    return _Resumed(continuation=_Continuation(continuation_id=continuation_id, status=status))


@get("/readyz")
async def _ready() -> dict[str, bool]:
    return {"ready": True}


def litestar_app() -> Litestar:
    return Litestar([_create, _resume, _ready], openapi_config=None)


_CREATED = b'{"continuation":{"continuationId":"c-%d","status":"pending"},"resumeToken":"%s"}'
_RESUMED = b'{"continuation":{"continuationId":"c-0","status":"resolved"}}'


async def asgi_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """uvicorn's share alone: read the body, answer with fixed bytes (lifespan ignored)."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    if scope["path"] == "/v1/continuations":
        status, body = 201, _CREATED % (next(_ids), _TOKEN.encode())
    else:
        status, body = 200, _RESUMED if scope["method"] == "POST" else b'{"ready":true}'
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def litestar_factory() -> Any:
    """Each worker's app (uvicorn imports it by name in every worker process)."""
    tune_for_serving()
    return litestar_app()


def asgi_factory() -> Any:
    tune_for_serving()
    return asgi_app


class FloorServer(ServerProcess):
    """This script as a server process: ``app`` served by ``workers`` processes."""

    def __init__(self, app: str, workers: int) -> None:
        super().__init__([], ready_path="/readyz")
        self.app = app
        self.workers = workers

    def command(self) -> list[str]:
        script = str(Path(__file__).resolve())
        port = ["--host", self.host, "--port", str(self.port)]
        return [sys.executable, script, "--app", self.app, *port, "--workers", str(self.workers)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", choices=list(APPS), required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    factory = f"bench.stack_floor:{args.app}_factory"

    settings = with_overrides(
        load_settings(environ={}, env_file=None),
        host=args.host,
        port=args.port,
        log_level="warning",
        workers=args.workers,
    )
    if args.workers == 1:
        uvicorn.Server(uvicorn_config(factory, settings, factory=True)).run()
        return
    supervise_workers(factory, settings, listener_for_workers(settings.host, settings.port))


if __name__ == "__main__":
    main()
