"""Token issuers: random and keyed (HMAC) tokens, hashing and constant-time matching."""

from __future__ import annotations

import os
import time

import pytest

from pausemesh.core.tokens import (
    KeyedTokenIssuer,
    RandomTokenIssuer,
    hash_token,
    is_well_formed_token,
    tokens_match,
)


def test_random_tokens_are_43_char_base64url_and_distinct() -> None:
    issuer = RandomTokenIssuer()
    tokens = {issuer.issue("c").token for _ in range(100)}
    assert len(tokens) == 100
    assert all(len(t) == 43 and is_well_formed_token(t) for t in tokens)


def test_only_the_hash_matches_and_malformed_tokens_never_match() -> None:
    issued = RandomTokenIssuer().issue("c")
    assert issued.token_hash == hash_token(issued.token)
    assert tokens_match(issued.token, issued.token_hash)
    assert not tokens_match(issued.token + "x", issued.token_hash)
    assert not tokens_match("bad token!", hash_token("bad token!"))
    assert not tokens_match(issued.token, "not-a-hash")


def test_keyed_tokens_are_rederivable_from_key_id_and_nonce_only() -> None:
    issuer = KeyedTokenIssuer({"k1": b"a" * 32}, "k1")
    issued = issuer.issue("cont-1")
    assert issued.key_id == "k1"
    assert issued.nonce is not None
    assert issuer.derive("cont-1", "k1", issued.nonce) == issued.token
    assert issuer.derive("cont-2", "k1", issued.nonce) != issued.token


def test_keys_rotate_by_key_id() -> None:
    old = KeyedTokenIssuer({"k1": b"a" * 32}, "k1")
    issued = old.issue("c")
    assert issued.nonce is not None
    rotated = KeyedTokenIssuer({"k1": b"a" * 32, "k2": b"b" * 32}, "k2")
    assert rotated.derive("c", "k1", issued.nonce) == issued.token
    assert rotated.issue("c").key_id == "k2"


@pytest.mark.parametrize(
    ("keys", "active"),
    [({"k1": b"short"}, "k1"), ({"k1": b"a" * 32}, "k2"), ({"bad id": b"a" * 32}, "bad id")],
)
def test_weak_or_inconsistent_key_rings_are_refused(keys: dict[str, bytes], active: str) -> None:
    with pytest.raises(ValueError, match="key"):
        KeyedTokenIssuer(keys, active)


def test_sign_and_verify_detect_tampering() -> None:
    issuer = KeyedTokenIssuer({"k1": b"a" * 32}, "k1")
    signature = issuer.sign(b"state")
    assert issuer.verify(b"state", signature)
    assert not issuer.verify(b"state2", signature)
    assert not issuer.verify(b"state", signature, key_id="unknown")


def test_uuid7_ids_are_valid_version_7_and_sort_by_creation_time() -> None:
    import time  # noqa: PLC0415 - local to this test
    import uuid  # noqa: PLC0415 - local to this test

    from pausemesh.core.ids import uuid7  # noqa: PLC0415 - local to this test

    first = uuid7()
    time.sleep(0.002)
    second = uuid7()
    assert uuid.UUID(first).version == 7
    assert uuid.UUID(first).variant == uuid.RFC_4122
    assert first < second
    assert len({uuid7() for _ in range(1000)}) == 1000


def test_uuid7_puts_the_milliseconds_on_top_and_keeps_74_of_the_80_random_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import uuid  # noqa: PLC0415 - local to this test

    from pausemesh.core import ids  # noqa: PLC0415 - local to this test

    random = bytes(range(0xA1, 0xAB))  # ten distinct bytes: a misplaced bit changes the id
    # ``ids`` calls ``os.urandom`` and ``time.time_ns`` through the modules: patch them there.
    monkeypatch.setattr(os, "urandom", lambda n: random[:n])
    monkeypatch.setattr(time, "time_ns", lambda: 0x0123_4567_89AB * 1_000_000 + 999_999)
    # A process that has made no id yet (ids made earlier in this one are later than 2009).
    monkeypatch.setattr(ids, "_last", 0)
    parsed = uuid.UUID(ids.uuid7())
    expected = 0x0123_4567_89AB << 80 | int.from_bytes(random)
    expected = expected & ~(0xF << 76 | 0x3 << 62) | 0x7 << 76 | 0x2 << 62
    assert parsed.int == expected
    assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
    # The same millisecond and the same random bits again: the next id still sorts after it.
    again = uuid.UUID(ids.uuid7())
    assert again.int > parsed.int
    assert again.int >> 80 == parsed.int >> 80
    assert (again.version, again.variant) == (7, uuid.RFC_4122)


def test_uuid7_ids_a_process_makes_sort_in_the_order_it_made_them() -> None:
    import uuid  # noqa: PLC0415 - local to this test

    from pausemesh.core.ids import uuid7  # noqa: PLC0415 - local to this test

    # Thousands within a few milliseconds: many share one, and their order is still kept.
    made = [uuid7() for _ in range(5000)]
    assert made == sorted(made)
    assert len(set(made)) == len(made)
    assert len({m[:13] for m in made}) < len(made)
    assert {(uuid.UUID(m).version, uuid.UUID(m).variant) for m in made} == {(7, uuid.RFC_4122)}
