"""Typed approver entries: built by kind, matched by kind and name, stored as ``{kind, name}``,
and read back from the text form rows written before typed approvers hold."""

from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime

import msgspec
import pytest

from pausemesh.core.approvers import (
    Approver,
    caller_entries,
    check_approvers,
    decode_approver,
    may_decide,
    parse_approver,
)
from pausemesh.core.errors import InvalidInputError
from pausemesh.core.model import ContinuationCreated, decode_event, encode_event

MANAGER = Approver.role("manager")
ALICE = Approver.principal("alice")
OPERATION = Approver.operation("op-1")


def test_an_entry_is_equal_only_to_the_same_kind_and_name() -> None:
    assert Approver.role("manager") == MANAGER
    assert hash(Approver.role("manager")) == hash(MANAGER)
    assert Approver.principal("manager") != MANAGER
    assert Approver.operation("manager") != MANAGER
    assert len({MANAGER, Approver.role("manager"), Approver.principal("manager")}) == 2
    assert repr(MANAGER) == "Approver.role('manager')"


def test_an_entry_is_immutable_and_survives_copy_and_pickle() -> None:
    with pytest.raises(AttributeError):
        MANAGER._name = "admin"
    assert copy.deepcopy(MANAGER) == MANAGER
    assert pickle.loads(pickle.dumps(OPERATION)) == OPERATION  # noqa: S301 - our own bytes


@pytest.mark.parametrize(
    ("entry", "text"),
    [
        (MANAGER, "role:manager"),
        (OPERATION, "operation:op-1"),
        (ALICE, "alice"),
        (Approver.principal("key:billing-bot"), "key:billing-bot"),
    ],
)
def test_the_text_form_has_one_reading(entry: Approver, text: str) -> None:
    assert entry.text == text
    assert parse_approver(text) == entry


@pytest.mark.parametrize("name", ["role:manager", "operation:op-1", "Role:manager", "OPERATION:x"])
def test_a_principal_cannot_be_named_like_another_kind(name: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        Approver.principal(name)
    assert info.value.code == "INVALID_APPROVERS"


@pytest.mark.parametrize("name", ["", " padded ", "a\nb", "x" * 201])
def test_an_entry_needs_a_valid_name(name: str) -> None:
    with pytest.raises(InvalidInputError):
        Approver.role(name)


def test_strings_are_refused_as_approvers_whatever_they_spell() -> None:
    for bad in (["role:manager"], ["alice"], "role:manager", [MANAGER, "alice"]):
        with pytest.raises(InvalidInputError, match=r"Approver\.role") as info:
            check_approvers(bad)
        assert info.value.code == "INVALID_APPROVERS"
    assert check_approvers([MANAGER, ALICE, MANAGER]) == (MANAGER, ALICE)
    assert check_approvers(None) == ()


def test_matching_compares_kind_and_name() -> None:
    approvers = [MANAGER, ALICE, OPERATION]

    def decides(principal: str | None, *roles: str) -> bool:
        return may_decide(approvers, owner="owner", principal=principal, roles=roles)

    assert decides("bob", "manager")
    assert decides("alice")
    assert not decides("role:manager")
    assert not decides("operation:op-1")
    assert not decides("bob", "role:manager", "alice", "op-1")
    assert not decides(None, "manager")


def test_the_requester_never_decides_unless_the_pause_allows_it() -> None:
    def decides(principal: str, roles: tuple[str, ...], *, allow: bool) -> bool:
        return may_decide(
            [MANAGER], owner="alice", principal=principal, roles=roles, allow_requester=allow
        )

    assert not decides("alice", ("manager",), allow=False)
    assert decides("alice", ("manager",), allow=True)
    assert not decides("alice", (), allow=True)  # allowed, but still no approver
    assert decides("bob", ("manager",), allow=False)
    # Without approvers the owner decides, as always; an ownerless pause has no requester.
    assert may_decide([], owner="alice", principal="alice")
    assert may_decide([MANAGER], owner=None, principal="bob", roles=("manager",))


def test_caller_entries_name_the_principal_and_each_role() -> None:
    assert caller_entries("bob", ["manager", "clerk", "manager"]) == (
        Approver.principal("bob"),
        Approver.role("clerk"),
        MANAGER,
    )
    assert caller_entries(None, ["manager"]) == ()


def _created(**fields: object) -> ContinuationCreated:
    return ContinuationCreated(
        schema_version=1,
        continuation_id="c-1",
        version=1,
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        correlation_id="t-1",
        expires_at=datetime(2026, 1, 2, tzinfo=UTC),
        payload={"kind": "input", "message": "?"},
        metadata={},
        resume_token_hash="h",
        owner="alice",
        **fields,  # type: ignore[arg-type]
    )


def test_an_event_stores_its_approvers_typed_and_reads_them_back() -> None:
    event = _created(approvers=(MANAGER, ALICE, OPERATION), allow_requester=True)
    stored = msgspec.json.decode(encode_event(event))
    assert stored["approvers"] == [
        {"kind": "role", "name": "manager"},
        {"kind": "principal", "name": "alice"},
        {"kind": "operation", "name": "op-1"},
    ]
    assert stored["allowRequester"] is True
    assert decode_event(encode_event(event)) == event


def test_an_event_written_before_typed_approvers_reads_as_its_text_says() -> None:
    stored = msgspec.json.decode(encode_event(_created()))
    del stored["allowRequester"]
    stored["approvers"] = ["role:manager", "alice", "operation:op-1", "Role:odd"]
    event = decode_event(msgspec.json.encode(stored))
    assert isinstance(event, ContinuationCreated)
    # A legacy principal today's checks would refuse is still read, and matches nobody.
    assert event.approvers[:3] == (MANAGER, ALICE, OPERATION)
    assert event.approvers[3].kind == "principal"
    assert event.allow_requester is False


@pytest.mark.parametrize(
    "value", [{"kind": "group", "name": "x"}, {"kind": "role"}, {"kind": "role", "name": ""}, 7]
)
def test_a_stored_entry_of_no_known_shape_does_not_decode(value: object) -> None:
    with pytest.raises(ValueError, match="stored approver"):
        decode_approver(value)
