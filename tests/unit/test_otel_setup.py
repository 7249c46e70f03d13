"""The OpenTelemetry SDK is installed only when the standard ``OTEL_*`` variables ask for it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pausemesh.observability.otel import configure_tracing, tracer_provider, tracing_requested


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, []),
        ({"OTEL_SERVICE_NAME": "pausemesh"}, []),
        ({"OTEL_TRACES_EXPORTER": "none"}, []),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "otlp, console"}, ["otlp", "console"]),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, []),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, []),
    ],
)
def test_tracing_is_requested_only_by_the_standard_variables(
    environ: dict[str, str], expected: list[str]
) -> None:
    assert tracing_requested(environ) == expected


def test_without_otel_variables_nothing_is_configured() -> None:
    assert configure_tracing({}) is False


def test_an_unknown_exporter_name_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="no span exporter named 'nowhere'"):
        configure_tracing({"OTEL_TRACES_EXPORTER": "nowhere"})


def _run(code: str, env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=True,
        env=env,
        timeout=120,
        capture_output=True,
    )


def test_the_app_loads_no_sdk_unless_configured() -> None:
    _run(
        """
        import sys
        from pausemesh.observability.otel import configure_tracing
        from pausemesh.web.app import create_app
        from pausemesh.settings import Settings
        create_app(Settings(metrics=True))
        assert configure_tracing() is False
        assert not [m for m in sys.modules if m.startswith("opentelemetry.sdk")]
        """,
        env={"PATH": "/usr/bin:/bin"},
    )


def test_otel_traces_exporter_installs_the_sdk_provider() -> None:
    _run(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from pausemesh.observability.otel import configure_tracing
        assert configure_tracing() is True
        assert isinstance(trace.get_tracer_provider(), TracerProvider)
        from pausemesh.observability.telemetry import span
        with span("probe") as current:
            assert current.is_recording()
        """,
        env={"PATH": "/usr/bin:/bin", "OTEL_TRACES_EXPORTER": "console"},
    )


def _sampler(environ: dict[str, str]) -> str:
    return str(tracer_provider(environ).sampler.get_description())


def test_the_default_sampler_is_follow_parent_and_a_named_one_is_the_sdks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pausemesh.observability.otel_sampler import FollowParent  # noqa: PLC0415

    assert isinstance(tracer_provider({}).sampler, FollowParent)
    assert _sampler({"OTEL_TRACES_SAMPLER": "parentbased_always_on"}).startswith("ParentBased")
    # Any other sampler is the SDK's, which reads it from the process environment.
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    assert _sampler({"OTEL_TRACES_SAMPLER": "always_off"}) == "AlwaysOffSampler"


@pytest.mark.parametrize(
    ("parent_flags", "remote"),
    [(None, False), (0x01, True), (0x00, True), (0x01, False), (0x00, False)],
)
def test_follow_parent_decides_like_the_sdk_default_sampler(
    parent_flags: int | None, remote: bool
) -> None:
    from opentelemetry.sdk.trace.sampling import DEFAULT_ON  # noqa: PLC0415

    from pausemesh.observability.otel_sampler import FollowParent  # noqa: PLC0415
    from tests.support.spans import parent_context  # noqa: PLC0415 - imports the SDK

    context = None if parent_flags is None else parent_context(parent_flags, remote=remote)
    attributes = {"pausemesh.continuation_id": "c-1"}
    ours = FollowParent().should_sample(context, 0x1234, "step", attributes=attributes)
    sdk = DEFAULT_ON.should_sample(context, 0x1234, "step", attributes=attributes)
    assert ours.decision == sdk.decision
    assert dict(ours.attributes) == dict(sdk.attributes)
    assert ours.trace_state == sdk.trace_state


def test_a_serving_process_freezes_what_it_loaded_and_collects_young_objects_less_often() -> None:
    _run(
        """
        import gc
        import sys
        from pausemesh.serving.process_tuning import (
            SWITCH_INTERVAL_SECONDS, YOUNG_THRESHOLD, tune_for_serving
        )
        before = gc.get_threshold()
        assert sys.getswitchinterval() == 0.005
        tune_for_serving()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (YOUNG_THRESHOLD, before[1], before[2])
        assert sys.getswitchinterval() == SWITCH_INTERVAL_SECONDS < 0.005
        """,
        env={"PATH": "/usr/bin:/bin"},
    )
