"""schemathesis fuzzes the served OpenAPI document: no 5xx, every response as documented."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.schemas import APIOperation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow


# "No 5xx, every response matches the document." Whether schema-valid input is always
# accepted is not among them: the document cannot say "expiresAt in the future".
_CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


Operation = APIOperation[Any, Any, Any, Any]


def _operations(server: ServerProcess) -> list[Operation]:
    document = schemathesis.openapi.from_url(server.url("/schema/openapi.json"))
    operations: list[Operation] = []
    for result in document.get_all_operations():
        assert isinstance(result, Ok), result.err()  # an operation the document cannot describe
        operations.append(result.ok())
    return operations


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_conforms_to_the_served_document(
    server: ServerProcess, mode: GenerationMode
) -> None:
    # Built per run (not with schemathesis' pytest loader) because the document is served
    # by a process the session fixture starts; checks: no 5xx, status codes, content types,
    # headers and bodies as documented.
    operations = _operations(server)
    assert len(operations) == 12
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=30,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case: schemathesis.Case[Operation]) -> None:
            case.call_and_validate(base_url=server.base_url, checks=_CHECKS)

        try:
            fuzz()
        except Unsatisfiable:
            # Nothing to negate: an operation without parameters or body (the probes).
            assert mode is GenerationMode.NEGATIVE
            assert not operation.body
            assert not operation.path_parameters


def test_the_served_document_describes_every_route(server: ServerProcess) -> None:
    document = httpx.get(server.url("/schema/openapi.json")).json()
    assert set(document["paths"]) == {
        "/healthz",
        "/readyz",
        "/v1/continuations",
        "/v1/continuations/{continuation_id}",
        "/v1/continuations/{continuation_id}/events",
        "/v1/continuations/{continuation_id}/resume",
        "/v1/continuations/{continuation_id}/cancel",
        "/v1/continuations/{continuation_id}/projections/ag-ui",
        "/v1/continuations/{continuation_id}/projections/mcp",
        "/v1/continuations/{continuation_id}/projections/a2a",
        "/v1/approvals",
        "/v1/approvals/{continuation_id}",
    }
    resume = document["paths"]["/v1/continuations/{continuation_id}/resume"]["post"]
    assert resume["security"] == [{"pausemeshResumeToken": []}]
    assert "pausemeshResumeToken" in document["components"]["securitySchemes"]
    problem = resume["responses"]["401"]["content"]["application/problem+json"]
    assert problem["schema"]
