"""``LeanTracerProvider`` records what the SDK's own ``TracerProvider`` records, field by field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, TraceIdRatioBased
from opentelemetry.trace import (
    Link,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from pausemesh.observability.otel_sampler import FollowParent
from pausemesh.observability.otel_tracer import LeanTracerProvider
from tests.support.spans import PARENT_STATE, parent_context

Scenario = Callable[[trace.Tracer], None]


class _Ids:
    """Fixed ids, so both providers make the same trace and span ids."""

    def __init__(self) -> None:
        self._next = 0

    def generate_span_id(self) -> int:
        self._next += 1
        return self._next

    def generate_trace_id(self) -> int:
        self._next += 1
        return 0xABC0000 + self._next

    def is_trace_id_random(self) -> bool:
        return True


def _fields(span: ReadableSpan) -> dict[str, Any]:
    return {
        "name": span.name,
        "context": span.context,
        "parent": span.parent,
        "kind": span.kind,
        "attributes": list(span.attributes.items()) if span.attributes else [],
        "events": [(e.name, dict(e.attributes or {})) for e in span.events],
        "links": [(link.context, dict(link.attributes or {})) for link in span.links],
        "status": (span.status.status_code, span.status.description),
        "dropped": (span.dropped_attributes, span.dropped_events, span.dropped_links),
        "scope": span.instrumentation_scope,
        "resource": span.resource.attributes,
        "timed": span.start_time is not None and span.end_time is not None,
    }


def _record(
    provider_type: type[TracerProvider], scenario: Scenario, **settings: Any
) -> list[dict[str, Any]]:
    exporter = InMemorySpanExporter()
    provider = provider_type(id_generator=_Ids(), **settings)  # type: ignore[arg-type]
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    scenario(provider.get_tracer("pausemesh"))
    provider.shutdown()
    return [_fields(span) for span in exporter.get_finished_spans()]


@pytest.fixture
def quiet_sdk_warnings(caplog: pytest.LogCaptureFixture) -> None:
    # The SDK logs a warning for a value it cleans; both providers must, neither may fail.
    caplog.set_level("ERROR", logger="opentelemetry")


def _steps(tracer: trace.Tracer) -> None:
    request = tracer.start_span(
        "POST /v1/continuations",
        kind=SpanKind.SERVER,
        attributes={"http.request.method": "POST", "pausemesh.request_id": "r-1"},
    )
    token = otel_context.attach(trace.set_span_in_context(request))
    try:
        with tracer.start_as_current_span(
            "continuation.create",
            attributes={"pausemesh.continuation_id": "c-1", "pausemesh.keyed": False},
        ) as create:
            create.set_attribute("pausemesh.version", 1)
            create.set_attributes({"pausemesh.version": 2, "pausemesh.size": 1.5})
            create.add_event("checked", {"pausemesh.code": "OK"})
            leaf = tracer.start_span("store.commit", attributes={"pausemesh.group_size": 3})
            leaf.end()
        with pytest.raises(ValueError, match="boom"), tracer.start_as_current_span("failing"):
            raise ValueError("boom")
        linked = tracer.start_span(
            "linked", links=[Link(request.get_span_context(), {"pausemesh.why": "follow"})]
        )
        linked.end()
    finally:
        otel_context.detach(token)
    request.set_attributes({"http.response.status_code": 201, "http.response.body.size": 42})
    request.set_status(Status(StatusCode.ERROR, "TypeError"))
    request.end()
    request.end()  # a warning from both, nothing else
    request.set_attribute("after.end", 1)  # ignored by both
    request.set_attributes({"after.end": 2})


def _unclean(tracer: trace.Tracer) -> None:
    # Values and keys the SDK cleans, converts or drops: the lean path defers to it.
    with tracer.start_as_current_span(
        "unclean",
        attributes={
            "list": [1, 2],
            "none": None,
            "bytes": b"x",
            "": "empty key",
            "long": "x" * 40,
        },
    ) as current:
        current.set_attributes({"tuple": ("a", "b"), "obj": 3j})  # type: ignore[dict-item]
        current.set_attributes({"list": [3], "plain": "y"})


def _remote_parents(tracer: trace.Tracer) -> None:
    for flags in (TraceFlags.SAMPLED, TraceFlags.DEFAULT):
        context = parent_context(flags)
        child = tracer.start_span("child", context=context, attributes={"pausemesh.n": 1})
        child.end()
        assert child.get_span_context().trace_state == PARENT_STATE
        assert child.is_recording() is False  # ended, or dropped with the unsampled parent


@pytest.mark.parametrize("scenario", [_steps, _unclean, _remote_parents])
@pytest.mark.parametrize(
    "settings",
    [
        {"sampler": FollowParent()},
        {"sampler": TraceIdRatioBased(0.5)},
        {"sampler": ALWAYS_OFF},
        {"sampler": FollowParent(), "span_limits": SpanLimits(max_span_attributes=2)},
        {"sampler": FollowParent(), "span_limits": SpanLimits(max_span_attribute_length=3)},
        {
            "sampler": FollowParent(),
            "span_limits": SpanLimits(max_events=0, max_links=0, max_span_attributes=0),
        },
    ],
    ids=["follow-parent", "ratio", "always-off", "max-2-attributes", "max-length-3", "zero"],
)
@pytest.mark.usefixtures("quiet_sdk_warnings")
def test_the_lean_provider_records_what_the_sdks_records(
    scenario: Scenario, settings: dict[str, Any]
) -> None:
    lean = _record(LeanTracerProvider, scenario, **settings)
    sdk = _record(TracerProvider, scenario, **settings)
    assert lean == sdk
    if settings["sampler"] is not ALWAYS_OFF:
        assert lean  # the comparison compared spans


def test_the_lean_provider_hands_every_processor_the_ended_span() -> None:
    exporter = InMemorySpanExporter()
    provider = LeanTracerProvider(sampler=FollowParent())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("pausemesh")
    assert provider.get_tracer("pausemesh") is tracer
    span = tracer.start_span("step", attributes={"pausemesh.continuation_id": "c-1"})
    span.end()
    (finished,) = exporter.get_finished_spans()
    assert finished.attributes == {"pausemesh.continuation_id": "c-1"}
    assert finished.events == ()
    assert finished.links == ()
    assert finished.to_json()  # an exporter's view of it works
    with pytest.raises(TypeError):
        finished.attributes["pausemesh.continuation_id"] = "c-2"  # type: ignore[index]


def test_a_lean_span_has_the_fields_of_an_sdk_span() -> None:
    # The lean tracer sets a span's fields itself: an SDK upgrade that adds one must fail here.
    lean = LeanTracerProvider(sampler=FollowParent()).get_tracer("pausemesh").start_span("a")
    sdk = TracerProvider(sampler=FollowParent()).get_tracer("pausemesh").start_span("a")
    assert sorted(vars(lean)) == sorted(vars(sdk))
    lean.end()
    sdk.end()
