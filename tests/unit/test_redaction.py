"""No token or token hash ever reaches an observation or a log line."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from a2a.server.routes.common import DefaultServerCallContextBuilder
from starlette.datastructures import Headers as StarletteHeaders
from starlette.requests import Request

from pausemesh.core import ContinuationService, ManualClock
from pausemesh.core.errors import TokenMismatchError
from pausemesh.core.resume import Resume, TokenHolder
from pausemesh.core.tokens import hash_token
from pausemesh.observability.log_format import JsonFormatter, TextFormatter
from pausemesh.observability.observations import Observation
from pausemesh.observability.observer import CollectingObserver, LoggingObserver, RedactingFilter
from pausemesh.serving.process_logging import configure_process_logging
from pausemesh.settings import Settings
from pausemesh.stores.sqlite import open_sqlite_store
from tests.support.identity import JwksServer


class _TeeObserver:
    def __init__(self, *observers: CollectingObserver | LoggingObserver) -> None:
        self._observers = observers

    def observe(self, observation: Observation) -> None:
        for observer in self._observers:
            observer.observe(observation)


class _Exploding:
    def observe(self, observation: Observation) -> None:
        raise RuntimeError("observer is broken")


async def test_observations_and_logs_of_a_full_lifecycle_carry_no_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    collecting = CollectingObserver()
    store = await open_sqlite_store(tmp_path / "redaction.db")
    service = ContinuationService(
        store=store,
        clock=ManualClock(),
        observer=_TeeObserver(collecting, LoggingObserver()),
    )
    secret_payload = "card-4242-secret-payload"
    with caplog.at_level(logging.DEBUG):
        created = await service.create(payload={"kind": "input", "message": secret_payload})
        cid = created.continuation.continuation_id
        with pytest.raises(TokenMismatchError):
            await service.resume(
                Resume(
                    continuation_id=cid, idempotency_key="k", payload=1, by=TokenHolder("W" * 43)
                )
            )
        await service.resume(
            Resume(
                continuation_id=cid,
                idempotency_key="k",
                payload={"answer": secret_payload},
                by=TokenHolder(created.resume_token),
            )
        )
    await store.close()

    names = [o.__struct_config__.tag for o in collecting.observations]
    assert names == ["continuation.created", "continuation.rejected", "continuation.transitioned"]
    observed = msgspec.json.encode(collecting.observations).decode()
    logged = "\n".join(f"{r.getMessage()} {getattr(r, 'pausemesh', '')}" for r in caplog.records)
    assert len(caplog.records) >= 3
    for text in (observed, logged):
        assert created.resume_token not in text
        assert hash_token(created.resume_token) not in text
        assert "W" * 43 not in text
        assert secret_payload not in text


async def test_an_observer_that_raises_never_changes_an_outcome(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from pausemesh.stores.memory import InMemoryEventStore  # noqa: PLC0415 - local to this test

    service = ContinuationService(store=InMemoryEventStore(), observer=_Exploding())
    created = await service.create(payload=1)
    result = (
        await service.resume(
            Resume(
                continuation_id=created.continuation.continuation_id,
                idempotency_key="k",
                payload=2,
                by=TokenHolder(created.resume_token),
            )
        )
    ).continuation
    assert result.status == "resumed"
    assert any("observer" in r.getMessage() for r in caplog.records)
    await asyncio.sleep(0)


# Credentials of the shapes the server meets: an identity provider's JWT, an API key made by
# ``pausemesh keys create``, a resume token (43 URL-safe base64 characters), a session cookie.
JWT = (
    "eyJhbGciOiJSUzI1NiIsImtpZCI6ImlkcC0xIiwidHlwIjoiSldUIn0"
    ".eyJpc3MiOiJodHRwczovL2lkcC50ZXN0Iiwic3ViIjoiYWxpY2UifQ"
    ".c2lnbmF0dXJlLW9mLXRoZS1pZGVudGl0eS1wcm92aWRlci1rZXk"
)
API_KEY_ID = "0123456789ab"
API_KEY_SECRET = "Kq2vX9_rT4-bLm8Np3Ws6Yd1Zc5Hf7Jg0Ue2Ra9Tx4E"
API_KEY = f"pmk_{API_KEY_ID}_{API_KEY_SECRET}"
RESUME_TOKEN = "Zt7Qw2Ne9Lr4Xy6Pa1Vb8Mc3Kd5Hf0Gj2Sk7Rl9Tm4U"
COOKIE = "pm_session=c00k1e-v4lue-0f-the-session"
SECRETS = (JWT, API_KEY_SECRET, RESUME_TOKEN, "c00k1e-v4lue-0f-the-session", "cHJveHk6cGFzcw")


def request_headers() -> list[tuple[str, str]]:
    """A request's headers with every credential header a client sends."""
    return [
        ("host", "127.0.0.1:8787"),
        ("authorization", f"Bearer {JWT}"),
        ("x-api-key", API_KEY),
        ("pausemesh-token", RESUME_TOKEN),
        ("cookie", COOKIE),
        ("proxy-authorization", "Basic cHJveHk6cGFzcw=="),
        ("content-type", "application/json"),
    ]


def filtered(record: logging.LogRecord) -> logging.LogRecord:
    assert RedactingFilter().filter(record)
    return record


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, text
    assert "[REDACTED]" in text, text


def test_redacting_filter_scrubs_authorization_values_and_secret_keys() -> None:
    record = logging.LogRecord(
        "host",
        logging.INFO,
        __file__,
        1,
        f"got header PauseMesh {RESUME_TOKEN} and %s",
        ({"token": "t0k", "ok": 1},),
        None,
    )
    message = filtered(record).getMessage()
    assert RESUME_TOKEN not in message
    assert "t0k" not in message
    assert "'ok': 1" in message


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Bearer eyJhbGciOi.x", "eyJhbGciOi.x"),
        ("bEaReR eyJhbGciOi.x", "eyJhbGciOi.x"),
        (f"auth=PAUSEMESH {RESUME_TOKEN}", RESUME_TOKEN),
        (f"a line with\tPauseMesh\n{RESUME_TOKEN} in it", RESUME_TOKEN),
        (f"Authorization: PauseMesh {RESUME_TOKEN}.", RESUME_TOKEN),
        # Case folding maps U+017F (the long s) onto "s": the pattern matches it.
        (f"Pau\u017feMesh {RESUME_TOKEN}", RESUME_TOKEN),
        ("BEARER\u00a0pm1.abc", "pm1.abc"),
        (f"a JWT alone {JWT} in a line", JWT),
        (f"key {API_KEY} in prose", API_KEY_SECRET),
    ],
)
def test_every_spelling_of_a_credential_the_pattern_knows_is_scrubbed_in_each_place(
    text: str, secret: str
) -> None:
    fields = {"continuationId": text, "nested": {"id": text}}
    record = filtered(logging.makeLogRecord({"msg": "%s", "args": (text,), "pausemesh": fields}))
    assert secret not in record.msg
    assert "[REDACTED]" in record.msg
    assert record.args is None  # formatted, then scrubbed
    assert record.__dict__["pausemesh"] == {
        "continuationId": record.msg,
        "nested": {"id": record.msg},
    }


def test_text_without_a_credential_is_kept_as_it_is() -> None:
    text = "01a24cce-a1f5-78ad-ac05-d1f34bb8d86b bearing PauseMeshy things, \u017f"
    fields = {"continuationId": text}
    record = filtered(logging.makeLogRecord({"msg": "%s", "args": (text,), "pausemesh": fields}))
    assert record.getMessage() == text
    assert record.__dict__["pausemesh"] == fields


@pytest.mark.parametrize(
    "text",
    [
        "PauseMesh tables are missing; run `pausemesh migrate`",
        "PauseMesh schema needs migration 14; run `pausemesh migrate`",
        "PauseMesh tables are missing; run `pausemesh migrate` (MIGRATION_REQUIRED)",
        (
            "cannot connect to PostgreSQL at 127.0.0.1:5432/pausemesh: the database does not"
            " exist; create the database or check PAUSEMESH_DATABASE_URL"
        ),
        "cannot write /srv/data/.secret.key.812.9f3a: the directory /srv/data is not writable",
        "cannot listen on 127.0.0.1:8787: port 8787 is in use (try --port)",
        "upstream 'invoices' is unavailable (MCPError); its stderr ended with: token expired",
        "bearer token refused: expired",
        'Bearer realm="pausemesh", error="invalid_token"',
        f"revoked pmk_{API_KEY_ID}",
        "dropped an SSE reader that accepted nothing for 30.0 s",
    ],
)
def test_prose_about_credentials_is_not_redacted(text: str) -> None:
    assert filtered(logging.makeLogRecord({"msg": text})).getMessage() == text


def test_an_api_key_keeps_its_id_and_loses_its_secret() -> None:
    record = filtered(logging.makeLogRecord({"msg": "key %s refused", "args": (API_KEY,)}))
    assert record.getMessage() == f"key pmk_{API_KEY_ID}_[REDACTED] refused"


def _scope() -> dict[str, Any]:
    headers = [(n.encode(), v.encode()) for n, v in request_headers()]
    return {"type": "http", "method": "POST", "path": "/a2a/jsonrpc", "headers": headers}


def _carriers() -> dict[str, Any]:
    """Request headers as each library holds them."""
    pairs = request_headers()
    scope = _scope()
    raw = "\r\n".join(f"{name}: {value}" for name, value in pairs)
    return {
        "dict": dict(pairs),
        "list of pairs": pairs,
        "ASGI raw headers": scope["headers"],
        "httpx Headers": httpx.Headers(pairs),
        "Starlette Headers": StarletteHeaders(scope=scope),
        "a2a call context": DefaultServerCallContextBuilder().build(Request(scope)),
        "repr text": repr(dict(pairs)),
        "JSON text": json.dumps(dict(pairs)),
        "raw header lines": raw,
        "query string": f"/callback?access_token={RESUME_TOKEN}&api_key={API_KEY}&x=1",
    }


@pytest.mark.parametrize("carrier", list(_carriers()))
def test_credential_headers_are_redacted_by_name_in_every_carrier(carrier: str) -> None:
    value = _carriers()[carrier]
    as_argument = filtered(logging.makeLogRecord({"msg": "request %s", "args": (value,)}))
    assert_no_secret(as_argument.getMessage())
    assert "127.0.0.1:8787" in as_argument.getMessage() or carrier == "query string"
    as_field = filtered(logging.makeLogRecord({"msg": "request", "headers": value}))
    assert_no_secret(JsonFormatter().format(as_field) + str(as_field.__dict__["headers"]))
    nested = filtered(logging.makeLogRecord({"msg": "request", "pausemesh": {"req": value}}))
    assert_no_secret(JsonFormatter().format(nested))


def test_a_traceback_loses_the_credentials_its_exception_holds() -> None:
    logger = logging.getLogger("tests.redaction.traceback")
    try:
        raise ValueError(f"upstream refused {dict(request_headers())}")
    except ValueError:
        record = logger.makeRecord(
            logger.name, logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )
    text = TextFormatter().format(filtered(record))
    assert "Traceback" in text
    assert_no_secret(text)


_LIBRARY_LOGGERS = (
    "a2a",
    "a2a.server.agent_execution.active_task",
    "mcp",
    "mcp.server.streamable_http",
    "httpx",
    "uvicorn",
    "uvicorn.asgi",
    "uvicorn.error",
    "litestar",
)


@pytest.fixture(name="cli_logs")
def cli_logs_fixture() -> Iterator[Callable[[], str]]:
    """Logging configured as ``pausemesh serve`` does with ``PAUSEMESH_LOG_LEVEL=debug`` and
    ``PAUSEMESH_LOG_FORMAT=json``, its stream read back; restored afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.logThreads, logging.logMultiprocessing)
    saved_srcfile = logging._srcfile
    # Other tests in the same process may have left a library logger disabled, quiet or with
    # handlers of its own (an app's logging config): start from a fresh process's state.
    libraries = [logging.getLogger(name) for name in _LIBRARY_LOGGERS]
    saved_libraries = [(lg.disabled, lg.propagate, lg.level, lg.handlers[:]) for lg in libraries]
    for library in libraries:
        library.disabled, library.propagate, library.handlers[:] = False, True, []
        library.setLevel(logging.NOTSET)
    configure_process_logging(Settings(log_level="debug", log_format="json"))
    stream = io.StringIO()
    (handler,) = root.handlers
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)

    def written() -> str:
        handler.flush()
        return stream.getvalue()

    try:
        yield written
    finally:
        root.handlers[:], level, logging.logThreads, logging.logMultiprocessing = saved
        root.setLevel(level)
        logging._srcfile = saved_srcfile
        for library, (disabled, propagate, lib_level, handlers) in zip(
            libraries, saved_libraries, strict=True
        ):
            library.disabled, library.propagate, library.handlers[:] = disabled, propagate, handlers
            library.setLevel(lib_level)


def test_debug_logs_of_every_library_logger_hold_no_credential(
    cli_logs: Callable[[], str],
) -> None:
    scope = _scope()
    pairs = request_headers()
    # The a2a-sdk's own line, with the call context it builds from a request.
    context = DefaultServerCallContextBuilder().build(Request(scope))
    logging.getLogger("a2a.server.agent_execution.active_task").debug(
        "ActiveTask[%s]: Executing setup (call_context: %s, create_task_if_missing: %s)",
        "task-1",
        context,
        True,
    )
    # The MCP SDK formats its messages itself (f-strings).
    logging.getLogger("mcp.server.streamable_http").debug(f"request headers: {scope['headers']}")  # noqa: G004
    # httpx logs each request's URL at INFO: a real request to a loopback server, with
    # credentials in its query and headers.
    with JwksServer().running() as idp, httpx.Client(headers=pairs[1:]) as client:
        url = f"{idp.url}?access_token={RESUME_TOKEN}&api_key={API_KEY}"
        response = client.get(url)
        assert response.status_code == 200
        logging.getLogger("httpx").debug("request headers %s", response.request.headers)
    # uvicorn's message logger shows the ASGI scope; Litestar a request's headers and cookies.
    logging.getLogger("uvicorn.asgi").debug("%s ASGI [%d] Started scope=%s", "peer", 1, scope)
    logging.getLogger("uvicorn.error").debug("headers %r", dict(pairs))
    logging.getLogger("litestar").debug(
        "request", extra={"headers": StarletteHeaders(scope=scope), "cookies": {"pm": COOKIE}}
    )

    output = cli_logs()
    lines = [json.loads(line) for line in output.splitlines()]
    loggers = {line["logger"] for line in lines}
    expected = {"a2a.server.agent_execution.active_task", "mcp.server.streamable_http", "httpx"}
    assert expected | {"uvicorn.asgi", "uvicorn.error", "litestar"} <= loggers, output
    assert any(line["message"].startswith("HTTP Request: GET") for line in lines), output
    assert_no_secret(output)
