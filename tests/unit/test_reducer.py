"""The pure reducer: typed refusals, and hypothesis properties over random event sequences."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace

from pausemesh.core.errors import (
    ContinuationIdMismatchError,
    InvalidTransitionError,
    PauseMeshError,
    UnsupportedSchemaVersionError,
    VersionConflictError,
)
from pausemesh.core.model import ContinuationEvent, ContinuationExpired
from pausemesh.core.reducer import apply_event, replay
from tests.support.events import T0, cancelled, created, resumed


def expired(cid: str, version: int = 2) -> ContinuationExpired:
    return ContinuationExpired(
        schema_version=1, continuation_id=cid, version=version, occurred_at=T0
    )


def test_created_then_resumed_folds_into_a_resumed_envelope() -> None:
    state = replay([created("c"), resumed("c")])
    assert state is not None
    assert state.status == "resumed"
    assert state.version == 2
    assert state.idempotency_key == "k1"
    assert state.resume_payload == {"flight": "PM101"}


def test_empty_stream_replays_to_none() -> None:
    assert replay([]) is None


def test_first_event_must_be_created() -> None:
    with pytest.raises(InvalidTransitionError):
        apply_event(None, resumed("c", version=1))


def test_terminal_states_accept_nothing_more() -> None:
    state = replay([created("c"), cancelled("c")])
    with pytest.raises(InvalidTransitionError):
        apply_event(state, expired("c", version=3))


def test_second_created_is_an_invalid_transition() -> None:
    state = replay([created("c")])
    with pytest.raises(InvalidTransitionError):
        apply_event(state, replace(created("c"), version=2))


def test_wrong_version_foreign_id_and_unknown_schema_are_typed_errors() -> None:
    state = replay([created("c")])
    with pytest.raises(VersionConflictError):
        apply_event(state, resumed("c", version=3))
    with pytest.raises(ContinuationIdMismatchError):
        apply_event(state, resumed("other"))
    with pytest.raises(UnsupportedSchemaVersionError):
        apply_event(state, replace(resumed("c"), schema_version=2))


_builders = st.sampled_from(["created", "resumed", "cancelled", "expired"])


def _make(kind: str, cid: str, version: int) -> ContinuationEvent:
    if kind == "created":
        return replace(created(cid), version=version)
    if kind == "resumed":
        return resumed(cid, version=version)
    if kind == "cancelled":
        return cancelled(cid, version=version)
    return expired(cid, version=version)


@given(
    st.lists(
        st.tuples(_builders, st.sampled_from(["c", "d"]), st.integers(min_value=0, max_value=4)),
        max_size=6,
    )
)
def test_random_event_sequences_never_reach_an_invalid_state(
    steps: list[tuple[str, str, int]],
) -> None:
    state = None
    for kind, cid, version in steps:
        event = _make(kind, cid, version)
        try:
            new_state = apply_event(state, event)
        except PauseMeshError:
            continue  # refused: the previous state stands unchanged
        # Only legal transitions are accepted.
        if state is None:
            assert kind == "created"
            assert version == 1
        else:
            assert state.status == "pending"
            assert kind != "created"
            assert cid == state.continuation_id
            assert version == state.version + 1
        state = new_state
        assert state.version in (1, 2)
        assert (state.status == "pending") == (state.version == 1)
        assert state.expires_at == T0 + timedelta(seconds=900)


@given(st.sampled_from(["resumed", "cancelled", "expired"]))
def test_replay_is_deterministic(kind: str) -> None:
    events = [created("c"), _make(kind, "c", 2)]
    assert replay(events) == replay(list(events))
    assert replay(events) == apply_event(apply_event(None, events[0]), events[1])
