"""The one problem encoder: each error of the tree leaves with its status, code and headers."""

from __future__ import annotations

import inspect

import msgspec
import pytest

from pausemesh.core import errors
from pausemesh.core.errors import (
    InvalidInputError,
    NotStartedError,
    PauseMeshError,
    PayloadTooLargeError,
    SettingsError,
    StoreError,
    UnauthenticatedError,
)
from pausemesh.web.problems import PROBLEM_MEDIA_TYPE, encode_problem, problem_for


def test_every_error_class_of_the_tree_has_its_own_code() -> None:
    classes = [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, PauseMeshError) and cls is not PauseMeshError
    ]
    codes = [cls.default_code for cls in classes]
    assert len(codes) == len(set(codes)), codes
    assert {SettingsError, NotStartedError, UnauthenticatedError, PayloadTooLargeError} <= set(
        classes
    )


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (NotStartedError("enter the lifespan"), 500, "NOT_STARTED"),
        (UnauthenticatedError(), 401, "UNAUTHENTICATED"),
        (PayloadTooLargeError(1024), 413, "PAYLOAD_TOO_LARGE"),
        (InvalidInputError("bad", field="payload"), 400, "INVALID_INPUT"),
        (StoreError("disk /var/lib/x is full"), 503, "STORE_UNAVAILABLE"),
    ],
)
def test_an_error_becomes_a_problem_with_its_status_and_code(
    error: PauseMeshError, status: int, code: str
) -> None:
    problem = problem_for(error)
    body = msgspec.json.decode(problem.body)
    assert problem.status == body["status"] == status
    assert body["code"] == code
    assert problem.headers["content-type"] == PROBLEM_MEDIA_TYPE
    assert ("www-authenticate" in problem.headers) == (status == 401)


def test_a_store_error_keeps_its_own_words_out_of_the_body() -> None:
    body = msgspec.json.decode(problem_for(StoreError("disk /var/lib/x is full")).body)
    assert "/var/lib/x" not in body["detail"]


def test_a_not_started_problem_names_the_missing_line() -> None:
    body = msgspec.json.decode(problem_for(NotStartedError("enter app.lifespan()")).body)
    assert body["detail"] == "enter app.lifespan()"


def test_a_field_error_names_the_field_never_its_value() -> None:
    body = msgspec.json.decode(problem_for(InvalidInputError("bad", field="payload")).body)
    assert body["errors"] == [{"field": "payload"}]


def test_encode_problem_gives_the_rfc_9457_members() -> None:
    problem = encode_problem(409, "THREAD_BUSY", "Another run is active on this thread")
    assert msgspec.json.decode(problem.body) == {
        "type": "urn:pausemesh:problem:thread-busy",
        "title": "Conflict",
        "status": 409,
        "detail": "Another run is active on this thread",
        "code": "THREAD_BUSY",
    }
