"""Liveness and readiness probes."""

from __future__ import annotations

import logging
import os

from litestar import Response, get
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec

from pausemesh.stores.storage import Storage
from pausemesh.web.config import PauseMeshConfig
from pausemesh.web.host_guard import ANY_HOST_OPT
from pausemesh.web.schemas import HealthBody, ReadinessBody, ReadinessCheck

__all__ = ("healthz", "readyz")

_log = logging.getLogger("pausemesh.web")


# An orchestrator's probe names the pod's address as Host, and a probe tells nothing: the
# Host allow-list does not apply (``web.host_guard``).
_ANY_HOST = {ANY_HOST_OPT: True}


@get(
    "/healthz",
    summary="Liveness (never touches the store)",
    tags=["health"],
    opt=_ANY_HOST,
)
async def healthz() -> HealthBody:
    return HealthBody(status="ok")


@get(
    "/readyz",
    summary="Readiness: the store can serve",
    tags=["health"],
    description="503 with `status: not_ready` when the store cannot serve; no internals leak.",
    opt=_ANY_HOST,
    responses={
        503: ResponseSpec(
            data_container=ReadinessBody, description="Not ready", generate_examples=False
        )
    },
)
async def readyz(
    pausemesh_storage: NamedDependency[Storage], pausemesh_config: NamedDependency[PauseMeshConfig]
) -> Response[ReadinessBody]:
    worker = os.getpid() if pausemesh_config.settings.workers > 1 else None
    try:
        await pausemesh_storage.readiness()
    except Exception as error:  # noqa: BLE001 - any failure means "not ready", details stay in the log
        _log.warning("readiness check failed: %s", type(error).__name__)
        check = ReadinessCheck(component="store", status="unavailable")
        return Response(
            ReadinessBody(status="not_ready", checks=[check], worker=worker), status_code=503
        )
    check = ReadinessCheck(component="store", status="ready")
    return Response(ReadinessBody(status="ready", checks=[check], worker=worker), status_code=200)
