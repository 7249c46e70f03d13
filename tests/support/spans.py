"""A parent span context for sampler and tracer tests (a fixed trace, one vendor entry)."""

from __future__ import annotations

from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.trace.span import TraceState

__all__ = ("PARENT_STATE", "parent_context")

PARENT_STATE = TraceState([("vendor", "value")])


def parent_context(flags: int, *, remote: bool = True) -> context_api.Context:
    """A context whose current span is a parent with ``flags`` (trace 0x1234, span 0x5678)."""
    parent = SpanContext(
        trace_id=0x1234,
        span_id=0x5678,
        is_remote=remote,
        trace_flags=TraceFlags(flags),
        trace_state=PARENT_STATE,
    )
    return trace.set_span_in_context(NonRecordingSpan(parent))
