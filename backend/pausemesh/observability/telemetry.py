"""Telemetry hooks: spans through the OpenTelemetry API and metric counts through a sink.

Every layer calls these; none of them knows whether anyone listens. Without a configured
OpenTelemetry SDK the spans are the API's non-recording ones, and without ``PAUSEMESH_METRICS``
the sink is ``NOOP_METRICS``: both cost a function call.

The metric catalogue below (``METRICS``) is the one list of names, kinds and labels; the
Prometheus exporter in ``web/metrics.py`` registers every entry, so a metric exists (at zero)
before its first event. Labels take bounded values only (codes, outcomes, store kinds): never
a principal, thread or continuation id.

To count something new, add a ``MetricSpec`` to ``METRICS`` and call ``count``/``observe``/
``gauge_add`` with it; to trace a step, wrap it in ``with span("name", key=value):``.
"""

from __future__ import annotations

import enum
from contextvars import ContextVar, Token
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

__all__ = (
    "A2A_PUSH_DELIVERIES",
    "COMMIT_GROUP_SIZE",
    "COMMIT_SECONDS",
    "CONTINUATIONS_CREATED",
    "EXPIRIES",
    "EXPIRY_LAG_SECONDS",
    "GATEWAY_DISPATCHES",
    "INTERRUPTS_WAITING",
    "METRICS",
    "NOOP_METRICS",
    "OPERATION_DECISIONS",
    "RATE_LIMITED",
    "RESUMES",
    "RUNS_FINISHED",
    "RUNS_STARTED",
    "SSE_STREAMS_OPEN",
    "TAIL_DELIVERY_LAG_SECONDS",
    "THREAD_BUSY",
    "WAL_SYNC_SECONDS",
    "WEBHOOK_DELIVERIES",
    "WRITE_TURN_WAIT_SECONDS",
    "MetricKind",
    "MetricSpec",
    "MetricsSink",
    "RequestInfo",
    "count",
    "current_metrics",
    "current_request",
    "gauge_add",
    "leaf_span",
    "make_current",
    "observe",
    "set_metrics",
    "set_request",
    "span",
    "tracer",
)


class MetricKind(enum.Enum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    kind: MetricKind
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()
    # Label values registered at zero, so dashboards and alerts see the series before the
    # first event (a counter that appears from nowhere breaks rate() for its first sample).
    initial: tuple[tuple[str, ...], ...] = ()


_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

RUNS_STARTED = MetricSpec(
    "pausemesh_runs_started_total", MetricKind.COUNTER, "AG-UI agent runs started."
)
RUNS_FINISHED = MetricSpec(
    "pausemesh_runs_finished_total",
    MetricKind.COUNTER,
    "AG-UI agent runs finished, by outcome (success, interrupt, error, cancelled: the client"
    " went away before the end).",
    ("outcome",),
    initial=(("success",), ("interrupt",), ("error",), ("cancelled",)),
)
INTERRUPTS_WAITING = MetricSpec(
    "pausemesh_interrupts_waiting",
    MetricKind.GAUGE,
    "Pending continuations (questions waiting for a person) in the store, read at scrape time.",
)
CONTINUATIONS_CREATED = MetricSpec(
    "pausemesh_continuations_created_total", MetricKind.COUNTER, "Continuations created."
)
RESUMES = MetricSpec(
    "pausemesh_resumes_total",
    MetricKind.COUNTER,
    "Resume attempts by result code (OK, or the error code that refused it).",
    ("code",),
    initial=(("OK",), ("TOKEN_ALREADY_USED",), ("CONTINUATION_EXPIRED",)),
)
THREAD_BUSY = MetricSpec(
    "pausemesh_thread_busy_total",
    MetricKind.COUNTER,
    "Runs refused with THREAD_BUSY (another run holds the thread).",
)
EXPIRIES = MetricSpec(
    "pausemesh_expiries_total",
    MetricKind.COUNTER,
    "Continuations expired, by who noticed (sweeper, or read for a read/resume/cancel).",
    ("by",),
    initial=(("sweeper",), ("read",)),
)
EXPIRY_LAG_SECONDS = MetricSpec(
    "pausemesh_expiry_lag_seconds",
    MetricKind.HISTOGRAM,
    "How long after its deadline a continuation was expired (sweeper lag).",
    buckets=_LAG_BUCKETS,
)
COMMIT_SECONDS = MetricSpec(
    "pausemesh_store_commit_seconds",
    MetricKind.HISTOGRAM,
    "Store write transaction latency, from BEGIN to COMMIT (SQLite: after the write turn).",
    ("store",),
    _LATENCY_BUCKETS,
    (("sqlite",), ("postgres",)),
)
COMMIT_GROUP_SIZE = MetricSpec(
    "pausemesh_store_commit_group_size",
    MetricKind.HISTOGRAM,
    "Writes committed by one transaction (SQLite group commit; 1 on PostgreSQL).",
    ("store",),
    (1, 2, 4, 8, 16, 32, 64, 128, 256),
    (("sqlite",), ("postgres",)),
)
# Sub-millisecond steps: a write turn and an fsync take tenths of a millisecond when all is well.
_DISK_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5)
WRITE_TURN_WAIT_SECONDS = MetricSpec(
    "pausemesh_store_write_turn_wait_seconds",
    MetricKind.HISTOGRAM,
    "How long a SQLite write transaction waited for the write turn of its file, held by another"
    " worker process (0 when no other process was writing).",
    buckets=_DISK_BUCKETS,
)
WAL_SYNC_SECONDS = MetricSpec(
    "pausemesh_store_wal_sync_seconds",
    MetricKind.HISTOGRAM,
    "How long the fsync of a SQLite file's write-ahead log took after its write turn was given"
    " back (sqlite_sync=ack; one fsync may cover several write groups).",
    buckets=_DISK_BUCKETS,
)
SSE_STREAMS_OPEN = MetricSpec(
    "pausemesh_sse_streams_open",
    MetricKind.GAUGE,
    "Open AG-UI SSE responses (runs, connects and tails) of this process.",
    ("route",),
    initial=(("run",), ("connect",), ("tail",)),
)
TAIL_DELIVERY_LAG_SECONDS = MetricSpec(
    "pausemesh_tail_delivery_lag_seconds",
    MetricKind.HISTOGRAM,
    "Live tail (GET .../events): from the tail being woken by a new event (the commit's"
    " notification, LISTEN/NOTIFY on PostgreSQL) to its frames sent to the client.",
    buckets=_LAG_BUCKETS,
)
RATE_LIMITED = MetricSpec(
    "pausemesh_rate_limited_total",
    MetricKind.COUNTER,
    "Requests refused by a rate limit, by code (RATE_LIMITED, TOO_MANY_STREAMS).",
    ("code",),
    initial=(("RATE_LIMITED",), ("TOO_MANY_STREAMS",)),
)
OPERATION_DECISIONS = MetricSpec(
    "pausemesh_operation_decisions_total",
    MetricKind.COUNTER,
    "Operation ledger decisions (EXECUTE, RECONCILIATION_ONLY, RECOVERED, RESENT, or the"
    " refusing code: OUTCOME_UNKNOWN, OPERATION_CONFLICT).",
    ("decision",),
    initial=(("EXECUTE",), ("RECONCILIATION_ONLY",), ("OUTCOME_UNKNOWN",)),
)
GATEWAY_DISPATCHES = MetricSpec(
    "pausemesh_gateway_dispatches_total",
    MetricKind.COUNTER,
    "Continuity gateway job calls by status (RESPONSE_RETAINED, RECONCILIATION_ONLY, BUSY,"
    " OUTCOME_UNKNOWN, REFUSED, ...).",
    ("status",),
    initial=(("RESPONSE_RETAINED",), ("OUTCOME_UNKNOWN",), ("REFUSED",)),
)
WEBHOOK_DELIVERIES = MetricSpec(
    "pausemesh_webhook_deliveries_total",
    MetricKind.COUNTER,
    "Event webhook deliveries (PAUSEMESH_WEBHOOKS_FILE) by outcome: delivered, retry, failed"
    " (given up for good: out of attempts, 410 Gone, a URL that can never be called, or a"
    " subscription no longer configured).",
    ("outcome",),
    initial=(("delivered",), ("retry",), ("failed",)),
)
A2A_PUSH_DELIVERIES = MetricSpec(
    "pausemesh_a2a_push_deliveries_total",
    MetricKind.COUNTER,
    "A2A push deliveries by outcome: delivered, retry (an attempt failed; another is"
    " scheduled), failed (given up for good: out of attempts, 410 Gone, or a URL that can"
    " never be called).",
    ("outcome",),
    initial=(("delivered",), ("retry",), ("failed",)),
)

METRICS: tuple[MetricSpec, ...] = (
    RUNS_STARTED,
    RUNS_FINISHED,
    INTERRUPTS_WAITING,
    CONTINUATIONS_CREATED,
    RESUMES,
    THREAD_BUSY,
    EXPIRIES,
    EXPIRY_LAG_SECONDS,
    COMMIT_SECONDS,
    COMMIT_GROUP_SIZE,
    WRITE_TURN_WAIT_SECONDS,
    WAL_SYNC_SECONDS,
    SSE_STREAMS_OPEN,
    TAIL_DELIVERY_LAG_SECONDS,
    RATE_LIMITED,
    OPERATION_DECISIONS,
    GATEWAY_DISPATCHES,
    A2A_PUSH_DELIVERIES,
    WEBHOOK_DELIVERIES,
)


class MetricsSink(Protocol):
    """Where counts go (``web.metrics.PrometheusMetrics``); label values in spec order."""

    def inc(self, spec: MetricSpec, labels: tuple[str, ...], amount: float) -> None: ...

    def observe(self, spec: MetricSpec, labels: tuple[str, ...], value: float) -> None: ...


class _NoopMetrics:
    def inc(self, spec: MetricSpec, labels: tuple[str, ...], amount: float) -> None:
        pass

    def observe(self, spec: MetricSpec, labels: tuple[str, ...], value: float) -> None:
        pass


NOOP_METRICS: MetricsSink = _NoopMetrics()

# The sink of the app serving the current request (or running this background task). A
# context variable rather than a global: two apps in one process keep their own registries.
_metrics: ContextVar[MetricsSink] = ContextVar("pausemesh_metrics", default=NOOP_METRICS)


def set_metrics(sink: MetricsSink) -> None:
    _metrics.set(sink)


def current_metrics() -> MetricsSink:
    return _metrics.get()


def count(spec: MetricSpec, *labels: str, amount: float = 1.0) -> None:
    _metrics.get().inc(spec, labels, amount)


def gauge_add(spec: MetricSpec, amount: float, *labels: str) -> None:
    _metrics.get().inc(spec, labels, amount)


def observe(spec: MetricSpec, value: float, *labels: str) -> None:
    _metrics.get().observe(spec, labels, value)


# -- the request being served (for log lines) ---------------------------------------------


@dataclass(slots=True)
class RequestInfo:
    """Mutable on purpose: the auth dependency fills in the principal's hash later."""

    request_id: str
    principal_hash: str | None = None


_request: ContextVar[RequestInfo | None] = ContextVar("pausemesh_request", default=None)


def set_request(info: RequestInfo | None) -> None:
    _request.set(info)


def current_request() -> RequestInfo | None:
    return _request.get()


# -- spans ----------------------------------------------------------------------------------

_tracer = trace.get_tracer("pausemesh")

AttributeValue = str | int | float | bool


def tracer() -> trace.Tracer:
    return _tracer


def make_current(
    current: Span, parent: otel_context.Context | None = None
) -> Token[otel_context.Context] | None:
    """Make ``current`` the active span; the token for ``otel_context.detach``, or None when
    there was nothing to make current. Without an SDK (and without an incoming trace
    context) a span is the invalid no-op one: attaching it would only copy the context. A
    span the sampler dropped is valid and made current, so its children are dropped too."""
    if not current.get_span_context().is_valid:
        return None
    return otel_context.attach(trace.set_span_in_context(current, parent))


# ``key`` -> ``pausemesh.key``, made once per attribute name (spans run on every request).
_ATTRIBUTE_NAMES: dict[str, str] = {}


def _attribute_name(key: str) -> str:
    name = _ATTRIBUTE_NAMES.get(key)
    if name is None:
        name = _ATTRIBUTE_NAMES[key] = f"pausemesh.{key}"
    return name


def handed_context() -> otel_context.Context | None:
    """The trace context to hand with work another thread does for this one (its span then
    joins this trace), or None outside any recorded trace (nothing to join, nothing kept)."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    return otel_context.get_current()


class span:  # noqa: N801 - used like a function: ``with span("name", key=value):``
    """A span around a step, current while it runs. ``None`` attributes are left out; an
    error's ``code`` is recorded, its text never is.

    Attribute names are written with ``_`` and become ``pausemesh.<name>`` (ids, versions,
    codes, sizes only: callers never pass tokens, hashes, payloads or message text). A plain
    class rather than ``contextlib.contextmanager``: this runs on every request and commit.
    """

    __slots__ = ("_attributes", "_name", "_parent", "_span", "_token")

    # Whether the span is made current while it runs (so spans started inside are its
    # children, and log lines carry its id). ``leaf_span`` turns it off.
    _current = True

    def __init__(
        self,
        name: str,
        *,
        parent: otel_context.Context | None = None,
        **attributes: AttributeValue | None,
    ) -> None:
        self._name = name
        # Where the step was asked for, when it runs elsewhere (a writer thread's commit).
        self._parent = parent
        self._attributes = {
            _ATTRIBUTE_NAMES.get(k) or _attribute_name(k): v
            for k, v in attributes.items()
            if v is not None
        }
        self._token: Token[otel_context.Context] | None = None

    def __enter__(self) -> Span:
        self._span = current = _tracer.start_span(
            self._name, context=self._parent, attributes=self._attributes
        )
        if self._current:
            self._token = make_current(current)
        return current

    def __exit__(
        self,
        error_type: type[BaseException] | None,
        error: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        current = self._span
        if error is not None and isinstance(error, Exception) and current.is_recording():
            code = getattr(error, "code", None)
            if isinstance(code, str):
                current.set_attribute("pausemesh.code", code)
            # An exception's text can carry input; only its type is recorded.
            current.set_status(Status(StatusCode.ERROR, type(error).__name__))
        if self._token is not None:
            otel_context.detach(self._token)
        current.end()


class leaf_span(span):  # noqa: N801 - used like a function, as ``span``
    """A span that starts no other span (a store commit): it is not made current, which
    saves a context switch in and out per span. Its parent is the current span as usual; a
    log line written inside it carries the parent's span id."""

    __slots__ = ()

    _current = False
