"""``FollowParent``: the SDK's default sampler (``parentbased_always_on``), cheaper per span.

Only ``pausemesh.observability.otel`` imports this module, and only when tracing is configured: it needs the
SDK (the ``pausemesh[otel]`` extra).

The SDK's ``ParentBased(ALWAYS_ON)`` looks the parent span up twice per span (once to choose a
delegate, once more in the delegate for its trace state); this looks it up once and decides the
same way: a span whose parent is valid and not sampled is dropped, every other span (a root, or
a child of a sampled parent, local or remote) is recorded and sampled, keeping the parent's
trace state.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, get_current_span
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

__all__ = ("FollowParent",)


class FollowParent(Sampler):
    def should_sample(  # noqa: PLR0917 - the SDK's Sampler signature
        self,
        parent_context: Context | None,
        trace_id: int,  # noqa: ARG002 - the decision follows the parent, not the id
        name: str,  # noqa: ARG002
        kind: SpanKind | None = None,  # noqa: ARG002
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,  # noqa: ARG002
        trace_state: TraceState | None = None,  # noqa: ARG002
    ) -> SamplingResult:
        parent = get_current_span(parent_context).get_span_context()
        if not parent.is_valid:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, None)
        if parent.trace_flags.sampled:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, parent.trace_state)
        return SamplingResult(Decision.DROP, None, parent.trace_state)

    def get_description(self) -> str:
        return "ParentBased{root:AlwaysOnSampler}"
