"""Sealed MCP requestState: the keyed codec and the pause-state bindings (expiry included)."""

from __future__ import annotations

import pytest
from mcp.server.request_state import InvalidRequestState
from mcp.shared.exceptions import MCPError

from pausemesh.core.tokens import KeyedTokenIssuer
from pausemesh.mcp.state import (
    KeyedRequestStateCodec,
    decode_pause_state,
    encode_pause_state,
    new_pause_state,
)

KEY_A = b"a" * 32
KEY_B = b"b" * 32


def codec(keys: dict[str, bytes], active: str) -> KeyedRequestStateCodec:
    issuer = KeyedTokenIssuer(keys, active)
    return KeyedRequestStateCodec(lambda: issuer)


def test_a_sealed_payload_round_trips_on_any_process_with_the_key() -> None:
    token = codec({"k1": KEY_A}, "k1").seal(b'{"x":1}')
    assert codec({"k1": KEY_A}, "k1").unseal(token) == b'{"x":1}'


def test_rotation_keeps_old_states_valid_while_the_old_key_is_in_the_ring() -> None:
    token = codec({"k1": KEY_A}, "k1").seal(b"state")
    rotated = codec({"k1": KEY_A, "k2": KEY_B}, "k2")
    assert rotated.unseal(token) == b"state"
    assert rotated.seal(b"state").startswith("pm1.k2.")


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t.replace("pm1.", "pm2.", 1),
        lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),
        lambda t: ".".join([*t.split(".")[:2], "e30", t.split(".")[3]]),
        lambda t: t.replace(".k1.", ".k9.", 1),
        lambda t: t + ".extra",
        lambda _t: "garbage",
    ],
    ids=["prefix", "signature", "payload", "unknown-key", "extra-part", "garbage"],
)
def test_any_change_to_a_sealed_state_is_refused(mangle: object) -> None:
    sealer = codec({"k1": KEY_A}, "k1")
    token = sealer.seal(b"state")
    with pytest.raises(InvalidRequestState):
        sealer.unseal(mangle(token))  # type: ignore[operator]


def test_another_servers_key_cannot_open_a_state() -> None:
    token = codec({"k1": KEY_A}, "k1").seal(b"state")
    with pytest.raises(InvalidRequestState):
        codec({"k1": KEY_B}, "k1").unseal(token)


def _state(expires_at: float = 2_000.0) -> str:
    return encode_pause_state(
        new_pause_state(
            "cont-1",
            principal="alice",
            tool="book_flight",
            arguments={"d": 1},
            expires_at=expires_at,
        )
    )


def test_the_pause_state_names_its_continuation_when_every_binding_holds() -> None:
    state = decode_pause_state(
        _state(), principal="alice", tool="book_flight", arguments={"d": 1}, now=1_000.0
    )
    assert state.continuation_id == "cont-1"


@pytest.mark.parametrize(
    ("principal", "tool", "arguments", "now"),
    [
        ("bob", "book_flight", {"d": 1}, 1_000.0),
        (None, "book_flight", {"d": 1}, 1_000.0),
        ("alice", "cancel_flight", {"d": 1}, 1_000.0),
        ("alice", "book_flight", {"d": 2}, 1_000.0),
        ("alice", "book_flight", {"d": 1}, 2_000.0),
        ("alice", "book_flight", {"d": 1}, 5_000.0),
    ],
    ids=["other-principal", "anonymous", "other-tool", "other-arguments", "at-expiry", "expired"],
)
def test_a_pause_state_off_its_binding_or_expired_is_the_sdk_invalid_state_error(
    principal: str | None, tool: str, arguments: dict[str, int], now: float
) -> None:
    with pytest.raises(MCPError) as refused:
        decode_pause_state(_state(), principal=principal, tool=tool, arguments=arguments, now=now)
    assert refused.value.error.code == -32602
    assert refused.value.error.message == "Invalid or expired requestState"
    assert refused.value.error.data == {"reason": "invalid_request_state"}


@pytest.mark.parametrize("raw", ["", "{}", '{"v":1}', "[1]", '{"v":2,"x":1}'])
def test_a_malformed_pause_state_is_the_invalid_state_error(raw: str) -> None:
    with pytest.raises(MCPError):
        decode_pause_state(raw, principal=None, tool="t", arguments={}, now=0.0)
