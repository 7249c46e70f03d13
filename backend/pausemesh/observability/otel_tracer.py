"""``LeanTracerProvider``: the SDK's tracer provider, recording the same spans with less work.

Only ``pausemesh.observability.otel`` imports this module, and only when tracing is configured: it needs the
SDK (the ``pausemesh[otel]`` extra). Every span processor, exporter, sampler, id generator and
span limit the SDK reads (``OTEL_*``) applies unchanged; per span, the SDK's tracer

- looks the parent span up twice with the default sampler (``FollowParent`` decides here with
  the lookup the tracer already made, as ``FollowParent.should_sample`` would);
- cleans every attribute value one by one (``BoundedAttributes``): a ``str``, ``int``, ``float``
  or ``bool`` (PauseMesh's ids, versions, codes, sizes) is stored as it is, so such values are
  stored directly, within the same count and length limits; anything else takes the SDK's path;
- copies the ended span into a new ``ReadableSpan`` for the processors: an ended span is already
  read-only (the SDK ignores every change after ``end``), so the span itself is handed over.
- builds each span through two ``__init__`` layers, four locks and two bounded lists: here its
  fields are set directly, with one lock, and the event and link lists are made on first use.

It relies on the SDK's private span and attribute internals, pinned in ``requirements.lock``;
``tests/unit/test_otel_tracer.py`` checks its spans against the SDK tracer's, field by field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from threading import Lock
from time import time_ns
from typing import Any

from opentelemetry import context as context_api
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import (
    EventBase,
    Tracer,
    TracerProvider,
    _Span,
)
from opentelemetry.sdk.trace._tracer_metrics import NoOpTracerMetrics
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    get_current_span,
)
from opentelemetry.trace import Span as ApiSpan
from opentelemetry.util import types

from pausemesh.observability.otel_sampler import FollowParent

__all__ = ("LeanTracerProvider",)

_NUMBERS = frozenset({int, float, bool})
_UNSET = Status(StatusCode.UNSET)

# (sampled, random trace id) -> the new span's flags, made once (the SDK makes them per span).
_FLAGS = {
    (sampled, random): TraceFlags(
        (TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
        | (TraceFlags.RANDOM_TRACE_ID if random else 0)
    )
    for sampled in (False, True)
    for random in (False, True)
}


def _plain(attributes: Mapping[str, Any], limit: int | None) -> bool:
    """Whether every key is a non-empty ``str`` and every value a ``str`` within ``limit``, an
    ``int``, a ``float`` or a ``bool``: pairs the SDK's cleaning keeps as they are."""
    for key, value in attributes.items():
        if type(key) is not str or not key:
            return False
        kind = type(value)
        if kind is str:
            if limit is not None and len(value) > limit:
                return False
        elif kind not in _NUMBERS:
            return False
    return True


def _add(target: Any, attributes: Mapping[str, Any]) -> None:
    """``target._set_items(attributes)`` (a ``BoundedAttributes``), without cleaning values
    that need none (``_plain``) when they all fit within its count limit."""
    stored = target._dict  # noqa: SLF001 - the SDK's storage (see the module's docstring)
    fits = not target._immutable and (  # noqa: SLF001 - (the SDK's path raises)
        target.maxlen is None or len(stored) + len(attributes) <= target.maxlen
    )
    if not (fits and _plain(attributes, target.max_value_len)):
        target._set_items(attributes)  # noqa: SLF001
        return
    with target._lock:  # noqa: SLF001
        for key, value in attributes.items():
            if key in stored:  # as the SDK: a key set again moves to the end
                del stored[key]
            stored[key] = value


class _LeanSpan(_Span):
    """The SDK's span; clean attributes stored directly, its event and link lists made on
    first use (most spans have none), and itself handed to the processors when it ends."""

    def _add_event(self, event: EventBase) -> None:
        self._make_list("_events", self._limits.max_events)
        super()._add_event(event)  # the SDK's: refused (with a warning) once ended

    def _add_link(self, link: Link) -> None:
        self._make_list("_links", self._limits.max_links)
        super()._add_link(link)

    def _make_list(self, name: str, maxlen: int | None) -> None:
        with self._lock:
            if self._end_time is None and not isinstance(getattr(self, name), BoundedList):
                setattr(self, name, BoundedList(maxlen))

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        with self._lock:
            ended = self._end_time is not None
            if not ended:
                _add(self._attributes, attributes)
        if ended:
            super().set_attributes(attributes)  # the SDK's warning, nothing set

    def end(self, end_time: int | None = None) -> None:
        """The SDK's ``end``, handing the processors this span (read-only once ended) rather
        than a ``ReadableSpan`` copy of it."""
        with self._lock:
            if self._start_time is None or self._end_time is not None:
                ended = True
            else:
                ended = False
                self._end_time = end_time if end_time is not None else time_ns()
                frozen: Any = self._attributes  # its changes are refused from now on
                frozen._immutable = True  # noqa: SLF001
        if ended:
            super().end(end_time)  # the SDK's error or warning
            return
        if self._record_end_metrics:
            self._record_end_metrics()
        processor = self._span_processor
        processor._on_ending(self)  # noqa: SLF001
        processor.on_end(self)


class _LeanTracer(Tracer):
    def start_span(  # noqa: PLR0917 - the SDK's signature
        self,
        name: str,
        context: context_api.Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = (),
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> ApiSpan:
        if links or not self._tracer_config.is_enabled:
            return super().start_span(
                name,
                context,
                kind,
                attributes,
                links,
                start_time,
                record_exception,
                set_status_on_exception,
            )
        found = get_current_span(context).get_span_context()
        parent = found if found.is_valid else None
        trace_id = parent.trace_id if parent else self.id_generator.generate_trace_id()
        sampler = self.sampler
        if type(sampler) is FollowParent:  # its decision, without a second parent lookup
            sampled = parent is None or parent.trace_flags.sampled
            decision = Decision.RECORD_AND_SAMPLE if sampled else Decision.DROP
            trace_state = parent.trace_state if parent else None
            recorded = attributes if sampled else None
        else:
            result = sampler.should_sample(context, trace_id, name, kind, attributes, links)
            decision, trace_state, recorded = result.decision, result.trace_state, result.attributes
            sampled = decision is Decision.RECORD_AND_SAMPLE
        random = (
            parent.trace_flags.random_trace_id if parent else self.id_generator.is_trace_id_random()
        )
        span_context = SpanContext(
            trace_id,
            self.id_generator.generate_span_id(),
            is_remote=False,
            trace_flags=_FLAGS[sampled, random],
            trace_state=trace_state,
        )
        metrics = self._tracer_metrics  # the SDK's own metrics, when they are on
        record_end_metrics = (
            None if type(metrics) is NoOpTracerMetrics else metrics.start_span(parent, decision)
        )
        if decision is Decision.DROP:
            return NonRecordingSpan(context=span_context)
        # What ``Span.__init__`` (and ``ReadableSpan.__init__`` under it) sets, written out:
        # its chain of calls, checks and lists is a third of a span's cost. The unit test
        # checks that the fields are the SDK span's, so an SDK upgrade that adds one fails it.
        span = object.__new__(_LeanSpan)
        span._name = name
        span._context = span_context
        span._kind = kind
        span._instrumentation_info = self.instrumentation_info
        span._instrumentation_scope = self._instrumentation_scope
        span._parent = parent
        span._start_time = start_time if start_time is not None else time_ns()
        span._end_time = None
        span._resource = self.resource
        span._status = _UNSET
        span._sampler = sampler
        span._trace_config = None
        span._record_exception = record_exception
        span._set_status_on_exception = set_status_on_exception
        span._span_processor = self.span_processor
        limits = self._span_limits
        span._limits = limits
        span._lock = Lock()
        span._attributes = BoundedAttributes(
            limits.max_span_attributes,
            None,
            immutable=False,
            max_value_len=limits.max_span_attribute_length,
        )
        span._events = ()  # made on first use (``_add_event``), as the links
        span._links = ()
        span._record_end_metrics = record_end_metrics
        if recorded:
            _add(span._attributes, recorded)
        # ``Span.start`` (the start time is set above; nothing else has the span yet).
        self.span_processor.on_start(span, parent_context=context)
        return span


class LeanTracerProvider(TracerProvider):
    """The SDK's ``TracerProvider`` whose tracers start ``_LeanSpan``s (see the module)."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        made = super().get_tracer(*args, **kwargs)
        if type(made) is Tracer:  # the SDK's own (not its no-op one when disabled)
            made.__class__ = _LeanTracer  # same state; the provider keeps this one
        return made
