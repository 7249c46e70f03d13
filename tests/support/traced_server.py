"""A real ``pausemesh`` process whose spans are recorded by the OpenTelemetry SDK into a file.

``python -m tests.support.traced_server demo ...`` installs the SDK with a test-only exporter
that appends one JSON object per finished span to ``$TEST_SPANS_FILE`` (synchronously, so the
file is complete once the request has been answered), then runs ``pausemesh.cli.main``. No
``OTEL_*`` variable is set, so PauseMesh's own ``configure_tracing`` leaves this SDK in place.
``TracedServer`` is ``ServerProcess`` started this way; ``read_spans`` parses the file.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from pausemesh.observability.otel import tracer_provider
from tests.support.server import ServerProcess

__all__ = ("SPANS_FILE_ENV", "TracedServer", "read_spans")

SPANS_FILE_ENV = "TEST_SPANS_FILE"


class FileSpanExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self._file: IO[str] = Path(path).open("a", encoding="utf-8")  # noqa: SIM115 - the exporter's lifetime

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            context = span.get_span_context()
            assert context is not None
            record = {
                "name": span.name,
                "kind": span.kind.name,
                "traceId": format(context.trace_id, "032x"),
                "spanId": format(context.span_id, "016x"),
                "parentSpanId": None
                if span.parent is None
                else format(span.parent.span_id, "016x"),
                "attributes": dict(span.attributes or {}),
                "events": [
                    {"name": e.name, "attributes": dict(e.attributes or {})} for e in span.events
                ],
                "status": span.status.status_code.name,
                "statusDescription": span.status.description,
            }
            self._file.write(json.dumps(record, default=str) + "\n")
        self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._file.close()


class TracedServer(ServerProcess):
    """``ServerProcess`` whose spans land in ``spans_path``."""

    def __init__(self, args: Sequence[str], *, spans_path: Path, **kwargs: Any) -> None:
        env = dict(kwargs.pop("env", None) or {})
        env[SPANS_FILE_ENV] = str(spans_path)
        super().__init__(args, env=env, **kwargs)
        self.spans_path = spans_path

    def command(self) -> list[str]:
        command = super().command()
        index = command.index("pausemesh")
        command[index] = "tests.support.traced_server"
        return command

    def spans(self) -> list[dict[str, Any]]:
        return read_spans(self.spans_path)

    def wait_for_spans(
        self, ready: Callable[[list[dict[str, Any]]], bool], timeout: float = 30.0
    ) -> list[dict[str, Any]]:
        """The recorded spans once ``ready`` says so (a span is written when it ends)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if ready(spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.05)


def read_spans(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main(argv: Sequence[str]) -> int:
    import os  # noqa: PLC0415 - only the launched process needs it

    provider = tracer_provider()  # what configure_tracing installs
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(os.environ[SPANS_FILE_ENV])))
    trace.set_tracer_provider(provider)
    from pausemesh.cli import main as pausemesh_main  # noqa: PLC0415 - after the provider is set

    try:
        return pausemesh_main(list(argv))
    finally:
        provider.shutdown()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
