"""Log lines: ``json`` is one object per line with the request and trace ids; ``text`` stays
readable; both carry the event's own fields and never an exception's text."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import threading
from types import TracebackType

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from pausemesh.observability.log_format import JsonFormatter, LoopBatchingHandler, TextFormatter
from pausemesh.observability.telemetry import RequestInfo, set_request


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


def sys_exc_info() -> tuple[type[BaseException], BaseException, TracebackType | None]:
    import sys  # noqa: PLC0415

    info = sys.exc_info()
    assert info[0] is not None
    assert info[1] is not None
    return info[0], info[1], info[2]


class _CountingStream(io.StringIO):
    """A stream that counts its writes (each is a syscall on a real stderr)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def _batching_logger(name: str) -> tuple[logging.Logger, LoopBatchingHandler, _CountingStream]:
    stream = _CountingStream()
    handler = LoopBatchingHandler()
    handler.setStream(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger(name)
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, handler, stream


async def test_the_lines_of_one_loop_iteration_reach_the_stream_in_one_write() -> None:
    logger, _, stream = _batching_logger("test.batching.iteration")
    for n in range(3):
        logger.info("line %d", n)
    assert stream.getvalue() == ""  # nothing written while the iteration runs
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert stream.getvalue() == "line 0\nline 1\nline 2\n"
    assert stream.writes == 1
    logger.info("next")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert stream.getvalue().endswith("line 2\nnext\n")
    assert stream.writes == 2


async def test_a_line_from_a_thread_without_a_loop_is_written_after_the_waiting_ones() -> None:
    logger, _, stream = _batching_logger("test.batching.thread")
    logger.info("on the loop")
    thread = threading.Thread(target=logger.info, args=("on a thread",))
    thread.start()
    thread.join()  # the loop has not run its callback yet
    assert stream.getvalue() == "on the loop\non a thread\n"
    await asyncio.sleep(0)
    assert stream.getvalue() == "on the loop\non a thread\n"  # nothing written twice


def test_lines_a_stopped_loop_never_wrote_are_written_by_flush_or_the_next_loop() -> None:
    logger, handler, stream = _batching_logger("test.batching.stopped")

    def log_as_the_loop_stops(text: str) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.call_soon(loop.stop)
            loop.call_soon(logger.info, text)  # its write callback would run next: it never does
            loop.run_forever()
        finally:
            loop.close()

    log_as_the_loop_stops("one")
    assert stream.getvalue() == ""
    second = asyncio.new_event_loop()
    try:
        second.call_soon(logger.info, "two")
        second.run_until_complete(asyncio.sleep(0))
    finally:
        second.close()
    assert (stream.getvalue(), stream.writes) == ("one\ntwo\n", 1)
    log_as_the_loop_stops("three")
    assert stream.getvalue() == "one\ntwo\n"
    handler.flush()  # what logging.shutdown() does at exit
    assert stream.getvalue() == "one\ntwo\nthree\n"


def test_without_a_running_loop_each_line_is_written_at_once() -> None:
    logger, _, stream = _batching_logger("test.batching.sync")
    logger.info("a")
    assert stream.getvalue() == "a\n"
    logger.info("b")
    assert (stream.getvalue(), stream.writes) == ("a\nb\n", 2)
