"""Log lines: ``json`` is one object per line with the request and trace ids; ``text`` stays
readable; both carry the event's own fields and never an exception's text."""

from __future__ import annotations

import json
import logging

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from pausemesh.core.log_format import JsonFormatter, TextFormatter
from pausemesh.core.telemetry import RequestInfo, set_request


def _record(message: str = "continuation.created", **fields: object) -> logging.LogRecord:
    record = logging.LogRecord("pausemesh.observer", logging.INFO, __file__, 1, message, (), None)
    record.pausemesh = {"name": message, **fields}
    return record


def test_a_json_line_carries_the_request_and_trace_ids_and_the_event_fields() -> None:
    provider = TracerProvider()  # a local one: the global provider stays the API's
    span = provider.get_tracer("test").start_span("request")
    set_request(RequestInfo(request_id="req-1"))
    try:
        with trace.use_span(span, end_on_exit=True):
            line = JsonFormatter().format(_record(continuationId="c-1", version=1, code=None))
    finally:
        set_request(None)
    body = json.loads(line)
    assert "\n" not in line
    context = span.get_span_context()
    assert body["traceId"] == format(context.trace_id, "032x")
    assert body["spanId"] == format(context.span_id, "016x")
    assert body["requestId"] == "req-1"
    assert body["level"] == "info"
    assert body["logger"] == "pausemesh.observer"
    assert body["message"] == "continuation.created"
    assert body["continuationId"] == "c-1"
    assert body["version"] == 1
    assert "code" not in body  # None fields are left out
    assert body["time"].endswith("+00:00")


def test_outside_a_request_and_a_span_the_ids_are_left_out() -> None:
    body = json.loads(JsonFormatter().format(_record()))
    assert "traceId" not in body
    assert "requestId" not in body


def test_an_exception_is_reduced_to_its_type() -> None:
    try:
        raise ValueError("the user's secret answer")
    except ValueError:
        record = logging.LogRecord(
            "pausemesh.agui", logging.ERROR, __file__, 1, "run failed", (), sys_exc_info()
        )
    body = json.loads(JsonFormatter().format(record))
    assert body["exception"] == "ValueError"
    assert "secret answer" not in json.dumps(body)


def test_the_text_format_keeps_key_value_fields() -> None:
    set_request(RequestInfo(request_id="req-2"))
    try:
        line = TextFormatter().format(_record(continuationId="c-2", status="pending"))
    finally:
        set_request(None)
    assert "INFO pausemesh.observer: continuation.created" in line
    assert "requestId=req-2" in line
    assert "continuationId=c-2" in line
    assert "status=pending" in line


def sys_exc_info() -> tuple[type[BaseException], BaseException, object]:
    import sys  # noqa: PLC0415

    info = sys.exc_info()
    assert info[0] is not None
    assert info[1] is not None
    return info[0], info[1], info[2]
