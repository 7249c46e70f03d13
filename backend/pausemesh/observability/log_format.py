"""Log line formats: ``text`` for a terminal, ``json`` (one object per line) for a collector.

Both carry the request id and, when a span is recording, the trace and span ids, so one
conversation can be followed from the access line to the continuation events to the trace.
The fields a log call passes under ``extra={"pausemesh": {...}}`` (ids, versions, codes) join
the line; ``RedactingFilter`` runs first on every handler ``configure_logging`` installs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

import msgspec
from opentelemetry import trace

from pausemesh.observability.redaction import RedactingFilter
from pausemesh.observability.telemetry import current_request

__all__ = (
    "JsonFormatter",
    "LogFormat",
    "LoopBatchingHandler",
    "TextFormatter",
    "configure_logging",
    "trace_ids",
)

LogFormat = Literal["text", "json"]

_encoder = msgspec.json.Encoder(enc_hook=str)


def trace_ids() -> tuple[str | None, str | None]:
    """The current span's trace and span ids in hex, or ``(None, None)`` outside a span."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None, None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def _context_fields() -> dict[str, Any]:
    fields: dict[str, Any] = {}
    info = current_request()
    if info is not None:
        fields["requestId"] = info.request_id
    trace_id, span_id = trace_ids()
    if trace_id is not None:
        fields["traceId"] = trace_id
        fields["spanId"] = span_id
    return fields


def _ended(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value ...``: the fields stay greppable."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's name
        """``logging.Formatter``'s time, with the date and time of day formatted once per
        second rather than once per line (a server writes several lines per request)."""
        msec_format = self.default_msec_format
        if datefmt is not None or msec_format is None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        cached, stamp = self._second
        if cached != second:
            stamp = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (second, stamp)  # one assignment: a concurrent reader sees a pair
        return msec_format % (stamp, record.msecs)

    def format(self, record: logging.LogRecord) -> str:
        # What ``logging.Formatter.format`` does with this one fixed format, written out: its
        # generic path (``usesTime``, the style's ``%`` over the record's ``__dict__``) is most
        # of a line's formatting cost, and a server writes several lines per request.
        record.message = record.getMessage()
        record.asctime = self.formatTime(record)
        line = f"{record.asctime} {record.levelname} {record.name}: {record.message}"
        # As the generic path: a traceback (rare) first, the fields after it.
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line = _ended(line) + record.exc_text
        if record.stack_info:
            line = _ended(line) + self.formatStack(record.stack_info)
        info = current_request()
        if info is not None:
            line += f" requestId={info.request_id}"
        trace_id, span_id = trace_ids()
        if trace_id is not None:
            line += f" traceId={trace_id} spanId={span_id}"
        fields = getattr(record, "pausemesh", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                if key != "name" and value is not None:
                    line += f" {key}={value}"
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the request and trace ids, and
    the event's own fields. An exception is reduced to its type (its text can carry input)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(_context_fields())
        fields = getattr(record, "pausemesh", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                if key != "name" and value is not None:
                    line.setdefault(key, value)
        if record.exc_info and record.exc_info[0] is not None:
            line["exception"] = record.exc_info[0].__name__
        return _encoder.encode(line).decode()


class LoopBatchingHandler(logging.StreamHandler[TextIO]):
    """A stream handler that writes the lines of one event-loop iteration in one write.

    A server writes several lines per request, and each line written on its own is a write
    (and flush) to the stream. A line logged on a thread running an event loop is formatted
    at once (the request and trace ids are read there) and written by a callback at the end
    of the loop's current iteration, together with every other line of that iteration. A
    line from any other thread, ``flush()`` and ``logging.shutdown()`` write what is waiting
    first, so lines keep their order.
    """

    def __init__(self) -> None:
        super().__init__()
        self._waiting: list[str] = []
        self._last: logging.LogRecord | None = None  # for handleError's report
        self._flushing_on: asyncio.AbstractEventLoop | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
        except RecursionError:  # as logging.StreamHandler.emit
            raise
        except Exception:  # noqa: BLE001 - logging's contract: a bad record never raises
            self.handleError(record)
            return
        loop = asyncio._get_running_loop()  # noqa: SLF001 - the C-level check, no exception
        if loop is None:
            self._write(line, record)
            return
        if self._flushing_on is not loop:
            # Also when another loop (stopped since, say) was asked first: ask this one.
            loop.call_soon(self.flush)
            self._flushing_on = loop
        self._waiting.append(line)
        self._last = record

    def _write(self, line: str, record: logging.LogRecord | None = None) -> None:
        # Called with the handler's lock held (``handle`` and ``flush`` take it).
        self._flushing_on = None
        waiting = self._waiting
        if waiting:
            line = "".join(waiting) + line
            waiting.clear()
            record, self._last = record or self._last, None
        if line:
            try:
                self.stream.write(line)
                self.stream.flush()
            except RecursionError:
                raise
            except Exception:  # noqa: BLE001 - as logging.StreamHandler: never raise
                if record is not None:
                    self.handleError(record)

    def flush(self) -> None:
        self.acquire()
        try:
            self._write("")
        finally:
            self.release()


def configure_logging(level: str, fmt: LogFormat = "text") -> None:
    """Replace the root handlers with one stderr handler in ``fmt`` (the CLI calls this)."""
    handler = LoopBatchingHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    # The observer never logs a token or payload; the redactor is the fence for whatever
    # else ends up in a record. On the root's one handler, it sees every library's records.
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Neither format shows where a call was made, nor its thread: skip collecting them for
    # every record, as the logging HOWTO's "Optimization" section says (a server writes
    # several lines per request). The pid stays: worker lines are tagged with it.
    logging._srcfile = None  # noqa: SLF001 - the documented switch for the caller lookup
    logging.logThreads = False
    logging.logMultiprocessing = False
