"""The lowest layer loads no optional SDK or framework when it is imported.

import-linter (``observability-pure`` in pyproject.toml) forbids the frameworks, but it sees one
``opentelemetry`` for the API and the SDK, so whether the SDK is loaded is checked here, on a
real interpreter: only ``otel_sampler`` and ``otel_tracer`` hold the SDK, and ``otel`` imports
them when ``OTEL_*`` asks for tracing.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
import textwrap

import pausemesh.observability

SDK_HOLDERS = {"otel_sampler", "otel_tracer"}
UNWANTED = (
    "opentelemetry.sdk",
    "opentelemetry.exporter",
    "litestar",
    "starlette",
    "uvicorn",
    "aiosqlite",
    "asyncpg",
    "mcp",
    "a2a",
    "httpx",
    "prometheus_client",
)


def _modules() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.iter_modules(pausemesh.observability.__path__)
        if info.name not in SDK_HOLDERS
    )


def test_the_sdk_holders_are_still_modules_of_the_layer() -> None:
    names = {info.name for info in pkgutil.iter_modules(pausemesh.observability.__path__)}
    assert names >= SDK_HOLDERS | {"otel", "telemetry", "log_format"}


def test_importing_every_observability_module_loads_no_sdk_and_no_framework() -> None:
    code = textwrap.dedent(
        f"""
        import importlib, json, sys
        for name in {_modules()!r}:
            importlib.import_module("pausemesh.observability." + name)
        unwanted = {UNWANTED!r}
        print(json.dumps(sorted(
            m for m in sys.modules if any(m == u or m.startswith(u + ".") for u in unwanted)
        )))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert json.loads(done.stdout) == []
