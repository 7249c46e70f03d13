"""``GET /metrics``: the catalogue of ``observability.telemetry`` in the Prometheus text format.

Opt-in (``PAUSEMESH_METRICS=1``). Each app has its own ``CollectorRegistry``, never
prometheus_client's global one, so several apps (and tests) in one process keep their counts
apart. The route follows the operational routes' rule (``/healthz``, ``/readyz``): it is served
with them, without a principal, and carries counts only (no ids, no payloads): keep it on the
private network the probes use. With ``PAUSEMESH_METRICS_TOKEN`` set it also asks for that
token (``Authorization: Bearer``; a Prometheus scrape config's ``authorization``), else 401.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from litestar import Request, Response, get
from litestar.di import NamedDependency
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from pausemesh.core.errors import UnauthenticatedError
from pausemesh.observability.telemetry import INTERRUPTS_WAITING, METRICS, MetricKind, MetricSpec
from pausemesh.stores.storage import Storage
from pausemesh.web.config import PauseMeshConfig
from pausemesh.web.problems import problem_responses

__all__ = ("PrometheusMetrics", "metrics_route")

_log = logging.getLogger("pausemesh.web")

# The waiting-questions gauge is one indexed query per scrape, capped so a huge backlog costs
# a bounded read; past the cap the gauge reads the cap (alert long before that).
WAITING_CAP = 10_000
_FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)

Collector = Counter | Gauge | Histogram


def _ignore(_value: float) -> None:
    """What a metric of the wrong kind does with a value (a counter is not observed)."""


class PrometheusMetrics:
    """A ``MetricsSink`` over one ``CollectorRegistry`` holding every ``METRICS`` entry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._collectors: dict[str, Collector] = {}
        # prometheus_client's labels() validates and locks on every call; a child's bound
        # inc/observe, once looked up, is kept here (label values are bounded: this stays small).
        self._adders: dict[tuple[str, tuple[str, ...]], Callable[[float], None]] = {}
        self._observers: dict[tuple[str, tuple[str, ...]], Callable[[float], None]] = {}
        for spec in METRICS:
            collector = self._make(spec)
            self._collectors[spec.name] = collector
            for labels in spec.initial:
                collector.labels(*labels)

    def _make(self, spec: MetricSpec) -> Collector:
        common = {"registry": self.registry, "labelnames": spec.labels}
        if spec.kind is MetricKind.COUNTER:
            return Counter(spec.name, spec.help, **common)  # type: ignore[arg-type]
        if spec.kind is MetricKind.GAUGE:
            return Gauge(spec.name, spec.help, **common)  # type: ignore[arg-type]
        return Histogram(spec.name, spec.help, buckets=spec.buckets, **common)  # type: ignore[arg-type]

    def _child(self, spec: MetricSpec, labels: tuple[str, ...]) -> Collector:
        collector = self._collectors[spec.name]
        return collector.labels(*labels) if labels else collector

    def _adder(self, spec: MetricSpec, labels: tuple[str, ...]) -> Callable[[float], None]:
        child = self._child(spec, labels)
        return _ignore if isinstance(child, Histogram) else child.inc

    def _observer(self, spec: MetricSpec, labels: tuple[str, ...]) -> Callable[[float], None]:
        child = self._child(spec, labels)
        if isinstance(child, Histogram):
            return child.observe
        return child.set if isinstance(child, Gauge) else _ignore

    def inc(self, spec: MetricSpec, labels: tuple[str, ...], amount: float) -> None:
        key = (spec.name, labels)
        add = self._adders.get(key)
        if add is None:
            add = self._adders[key] = self._adder(spec, labels)
        add(amount)

    def observe(self, spec: MetricSpec, labels: tuple[str, ...], value: float) -> None:
        key = (spec.name, labels)
        record = self._observers.get(key)
        if record is None:
            record = self._observers[key] = self._observer(spec, labels)
        record(value)

    async def refresh(self, storage: Storage) -> None:
        """Read what the store knows (not this process): the questions waiting."""
        try:
            due = await storage.events.list_due(_FAR_FUTURE, WAITING_CAP)
        except Exception as error:  # noqa: BLE001 - a scrape must answer; the gauge keeps its last value
            _log.warning("metrics: could not count waiting questions: %s", type(error).__name__)
            return
        self.observe(INTERRUPTS_WAITING, (), float(len(due)))

    def render(self) -> bytes:
        return generate_latest(self.registry)


_CHALLENGE = 'Bearer realm="metrics"'


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _check_token(authorization: str | None, token: str) -> None:
    """``Authorization: Bearer <token>`` or ``UnauthenticatedError``. Digests of equal length
    are compared in constant time, so neither the token nor its length leaks by timing."""
    scheme, _, presented = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        _digest(presented.strip()), _digest(token)
    ):
        msg = "GET /metrics needs the metrics token (Authorization: Bearer)"
        raise UnauthenticatedError(msg, challenge=_CHALLENGE)


@get(
    "/metrics",
    summary="Prometheus metrics (PAUSEMESH_METRICS=1)",
    tags=["health"],
    media_type=CONTENT_TYPE_LATEST,
    include_in_schema=True,
    responses=problem_responses(401),
)
async def metrics_route(
    request: Request[Any, Any, Any],
    pausemesh_metrics: NamedDependency[PrometheusMetrics],
    pausemesh_storage: NamedDependency[Storage],
    pausemesh_config: NamedDependency[PauseMeshConfig],
) -> Response[bytes]:
    token = pausemesh_config.settings.metrics_token
    if token is not None:
        _check_token(request.headers.get("authorization"), token)
    await pausemesh_metrics.refresh(pausemesh_storage)
    return Response(pausemesh_metrics.render(), media_type=CONTENT_TYPE_LATEST)
