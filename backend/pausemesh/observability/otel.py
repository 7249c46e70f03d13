"""The OpenTelemetry SDK, only when the standard ``OTEL_*`` variables ask for it.

PauseMesh always speaks the OpenTelemetry *API* (``observability.telemetry``); without an SDK those
spans record nothing and cost a function call. ``pausemesh serve``/``demo`` call
``configure_tracing`` at start: it installs the SDK and an exporter when

- ``OTEL_TRACES_EXPORTER`` names one (``otlp``, ``console``, or any exporter registered under
  the ``opentelemetry_traces_exporter`` entry point), or
- ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set (OTLP),

and does nothing otherwise (nor with ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``),
so nothing is exported by default. The SDK comes with the ``pausemesh[otel]`` extra and is
imported only here, only when configured. The SDK itself reads the rest (``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``, the exporter's endpoint and headers...).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

__all__ = ("configure_tracing", "tracer_provider", "tracing_requested")

_log = logging.getLogger("pausemesh.observability.otel")


def tracing_requested(environ: Mapping[str, str] | None = None) -> list[str]:
    """The exporter names the environment asks for (empty: leave tracing off)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if names:
        return [] if names == ["none"] else [n for n in names if n != "none"]
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    return ["otlp"] if endpoint else []


def _exporter(name: str) -> Any:
    # Imported only when configured: the core never loads the SDK (pausemesh[otel]).
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )

        return OTLPSpanExporter()
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter  # noqa: PLC0415

        return ConsoleSpanExporter()
    from importlib.metadata import entry_points  # noqa: PLC0415

    for point in entry_points(group="opentelemetry_traces_exporter", name=name):
        return point.load()()
    msg = f"OTEL_TRACES_EXPORTER: no span exporter named {name!r}"
    raise ValueError(msg)


def tracer_provider(environ: Mapping[str, str] | None = None) -> Any:
    """The SDK's tracer provider as PauseMesh configures it (exporters are added by the caller).

    With no ``OTEL_TRACES_SAMPLER`` (or its default, ``parentbased_always_on``) the sampler is
    ``FollowParent``: the SDK default's decisions, at about half its cost per span. Any other
    sampler named there is the SDK's own. The provider is ``LeanTracerProvider``
    (``pausemesh.observability.otel_tracer``): the SDK's, recording the same spans with less work per span.
    Imports the SDK: call it only when tracing is wanted.
    """
    from pausemesh.observability.otel_sampler import FollowParent  # noqa: PLC0415 - imports the SDK
    from pausemesh.observability.otel_tracer import LeanTracerProvider  # noqa: PLC0415 - imports the SDK

    env = os.environ if environ is None else environ
    named = env.get("OTEL_TRACES_SAMPLER", "").strip().lower()
    default = named in {"", "parentbased_always_on"}
    return LeanTracerProvider(sampler=FollowParent() if default else None)


def configure_tracing(environ: Mapping[str, str] | None = None) -> bool:
    """Install the SDK's tracer provider with the requested exporters; False when none is.

    Raises ``RuntimeError`` when tracing is requested but the ``otel`` extra is missing, so a
    deployment that asked for traces does not run silently without them.
    """
    names = tracing_requested(environ)
    if not names:
        return False
    try:
        from opentelemetry import trace  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
    except ImportError as error:
        msg = f"OTEL_* asks for traces but the SDK is missing: pip install 'pausemesh[otel]' ({error})"
        raise RuntimeError(msg) from None
    provider = tracer_provider(environ)
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
    trace.set_tracer_provider(provider)
    _log.info("tracing on: exporting spans to %s", ", ".join(names))
    return True
