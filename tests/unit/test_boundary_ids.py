"""Ids that end up in a path, and replay cursors: refused at the boundary, never a 500 later."""

from __future__ import annotations

import pytest

from pausemesh.agui.input import check_thread_id
from pausemesh.agui.sse import replay_cursor
from pausemesh.core.errors import InvalidInputError
from pausemesh.core.service import ContinuationService
from pausemesh.core.validation import check_routable_id
from pausemesh.stores.memory import InMemoryEventStore


@pytest.mark.parametrize("value", ["a/b", "/lead", "trail/", "pay/42"])
def test_an_id_with_a_slash_is_not_routable(value: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        check_routable_id(value, "continuationId")
    assert refused.value.code == "INVALID_ID"


def test_a_thread_id_with_a_slash_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        check_thread_id("a/b")
    assert check_thread_id("a-b:c.d") == "a-b:c.d"


async def test_a_continuation_id_with_a_slash_is_refused_at_creation() -> None:
    service = ContinuationService(store=InMemoryEventStore())
    with pytest.raises(InvalidInputError) as refused:
        await service.create(payload={}, continuation_id="pay/42")
    assert refused.value.code == "INVALID_ID"


async def test_a_payload_with_a_lone_surrogate_is_refused_at_creation() -> None:
    service = ContinuationService(store=InMemoryEventStore())
    with pytest.raises(InvalidInputError) as refused:
        await service.create(payload={"destination": "\ud800"})
    assert refused.value.code == "INVALID_PAYLOAD"


@pytest.mark.parametrize("raw", ["\u00b2", "\u0663", "1\u00b2", "-1", "1.5", "x"])
def test_a_cursor_that_is_not_ascii_digits_is_refused(raw: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        replay_cursor(raw, None)
    assert refused.value.code == "INVALID_CURSOR"
    with pytest.raises(InvalidInputError):
        replay_cursor(None, raw)


def test_a_cursor_of_ascii_digits_is_read() -> None:
    assert replay_cursor(" 42 ", None) == 42
    assert replay_cursor(None, "7") == 7
    assert replay_cursor(None, None) == 0
