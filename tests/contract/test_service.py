"""ContinuationService semantics (docs/http-api.md, "Resume" and "Cancel"), over every store."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pausemesh.core import ContinuationService, ManualClock
from pausemesh.core.errors import (
    ContinuationCancelledError,
    ContinuationExpiredError,
    ContinuationNotFoundError,
    IdempotencyConflictError,
    InvalidInputError,
    InvalidTransitionError,
    TokenAlreadyUsedError,
    TokenMismatchError,
    VersionConflictError,
)
from pausemesh.core.model import CreatedContinuation
from pausemesh.core.ports import EventStore
from pausemesh.core.resume import Resume, TokenHolder, TrustedHost
from pausemesh.core.tokens import KeyedTokenIssuer

PAYLOAD = {"kind": "input", "message": "Which flight should I book?"}


async def _create(service: ContinuationService, **kwargs: Any) -> CreatedContinuation:
    return await service.create(payload=PAYLOAD, **kwargs)


async def _resume(
    service: ContinuationService,
    created: CreatedContinuation,
    key: str = "key-1",
    payload: Any = None,
) -> Any:
    return (
        await service.resume(
            Resume(
                continuation_id=created.continuation.continuation_id,
                idempotency_key=key,
                payload={"flight": "PM101"} if payload is None else payload,
                by=TokenHolder(created.resume_token),
            )
        )
    ).continuation


class TestCreate:
    async def test_create_returns_pending_envelope_and_a_token_once(
        self, service: ContinuationService
    ) -> None:
        created = await _create(service, correlation_id="thread-1", metadata={"a": 1})
        assert created.continuation.status == "pending"
        assert created.continuation.version == 1
        assert created.continuation.correlation_id == "thread-1"
        assert len(created.resume_token) == 43
        assert await service.get(created.continuation.continuation_id) == created.continuation

    async def test_duplicate_id_is_a_version_conflict(self, service: ContinuationService) -> None:
        await _create(service, continuation_id="dup")
        with pytest.raises(VersionConflictError):
            await _create(service, continuation_id="dup")

    @pytest.mark.parametrize(
        "bad_id", ["", " padded", "padded ", "x" * 201, "tab\tinside", 42, ["list"]]
    )
    async def test_malformed_ids_are_refused_without_a_write(
        self, service: ContinuationService, bad_id: Any
    ) -> None:
        with pytest.raises(InvalidInputError) as info:
            await service.create(payload=PAYLOAD, continuation_id=bad_id)
        assert info.value.code == "INVALID_ID"

    @pytest.mark.parametrize("bad", [float("nan"), {1: "int key"}, {"set": {1, 2}}, b"bytes"])
    async def test_non_json_payloads_are_refused(
        self, service: ContinuationService, bad: Any
    ) -> None:
        with pytest.raises(InvalidInputError) as info:
            await service.create(payload=bad, continuation_id="c-bad")
        assert info.value.code == "INVALID_PAYLOAD"
        with pytest.raises(ContinuationNotFoundError):
            await service.get("c-bad")

    async def test_a_deadline_in_the_past_is_refused(
        self, service: ContinuationService, clock: ManualClock
    ) -> None:
        with pytest.raises(InvalidInputError) as info:
            await _create(service, expires_at=clock.now() - timedelta(seconds=1))
        assert info.value.code == "INVALID_EXPIRY"
        with pytest.raises(InvalidInputError):
            await _create(service, expires_at=clock.now())

    async def test_a_deadline_past_the_pause_ttl_cap_is_refused_and_nothing_is_stored(
        self, event_store: EventStore, clock: ManualClock
    ) -> None:
        service = ContinuationService(store=event_store, clock=clock, max_pause_ttl_seconds=3600)
        at_cap = await _create(service, expires_at=clock.now() + timedelta(hours=1))
        assert at_cap.continuation.expires_at == clock.now() + timedelta(hours=1)
        for far in (
            clock.now() + timedelta(hours=1, microseconds=1),
            datetime.max.replace(tzinfo=UTC),
        ):
            with pytest.raises(InvalidInputError) as info:
                await _create(service, continuation_id="too-far", expires_at=far)
            assert info.value.code == "INVALID_EXPIRY"
            assert "PAUSEMESH_MAX_PAUSE_TTL_SECONDS" in info.value.message
        with pytest.raises(ContinuationNotFoundError):
            await service.get("too-far")

    async def test_an_agents_ttl_past_the_cap_is_refused_even_when_it_would_overflow(
        self, event_store: EventStore, clock: ManualClock
    ) -> None:
        service = ContinuationService(store=event_store, clock=clock, max_pause_ttl_seconds=3600)
        assert service.deadline_in(timedelta(hours=1)) == clock.now() + timedelta(hours=1)
        for ttl in (timedelta(hours=1, seconds=1), timedelta.max, timedelta(seconds=-1)):
            with pytest.raises(InvalidInputError) as info:
                service.deadline_in(ttl)
            assert info.value.code == "INVALID_EXPIRY"

    def test_the_cap_and_the_default_ttl_are_checked_together(
        self, event_store: EventStore
    ) -> None:
        with pytest.raises(ValueError, match="max_pause_ttl_seconds must be between"):
            ContinuationService(store=event_store, max_pause_ttl_seconds=366 * 24 * 3600)
        with pytest.raises(ValueError, match="token_ttl_seconds must be between 1 and 600"):
            ContinuationService(store=event_store, max_pause_ttl_seconds=600)


class TestResume:
    async def test_resume_once_then_exact_retry_returns_the_stored_envelope(
        self, service: ContinuationService
    ) -> None:
        created = await _create(service)
        first = await _resume(service, created)
        assert first.status == "resumed"
        assert first.version == 2
        assert first.resume_payload == {"flight": "PM101"}
        again = await _resume(service, created, payload={"flight": "PM101"})
        assert again == first

    async def test_retry_with_reordered_keys_is_the_same_payload(
        self, service: ContinuationService
    ) -> None:
        created = await _create(service)
        first = await _resume(service, created, payload={"a": 1, "b": [1, 2]})
        assert await _resume(service, created, payload={"b": [1, 2], "a": 1.0}) == first

    async def test_same_key_other_payload_is_an_idempotency_conflict(
        self, service: ContinuationService
    ) -> None:
        created = await _create(service)
        await _resume(service, created)
        with pytest.raises(IdempotencyConflictError):
            await _resume(service, created, payload={"flight": "PM202"})

    async def test_other_key_after_resume_is_token_already_used(
        self, service: ContinuationService
    ) -> None:
        created = await _create(service)
        await _resume(service, created)
        with pytest.raises(TokenAlreadyUsedError):
            await _resume(service, created, key="key-2")

    @pytest.mark.parametrize("token", ["", "short", "x" * 43, "a b" * 20, "é" * 43])
    async def test_wrong_or_malformed_token_is_refused_before_any_state_is_revealed(
        self, service: ContinuationService, token: str
    ) -> None:
        created = await _create(service)
        await service.cancel(continuation_id=created.continuation.continuation_id)
        with pytest.raises(TokenMismatchError):
            await service.resume(
                Resume(
                    continuation_id=created.continuation.continuation_id,
                    idempotency_key="k",
                    payload=None,
                    by=TokenHolder(token),
                )
            )

    @pytest.mark.parametrize("key", ["", " ", "x" * 201, "line\nbreak"])
    async def test_bad_idempotency_keys_are_refused(
        self, service: ContinuationService, key: str
    ) -> None:
        created = await _create(service)
        with pytest.raises(InvalidInputError) as info:
            await _resume(service, created, key=key)
        assert info.value.code == "INVALID_IDEMPOTENCY_KEY"
        assert (await service.get(created.continuation.continuation_id)).status == "pending"

    async def test_resume_after_deadline_expires_and_reports_expired(
        self, service: ContinuationService, clock: ManualClock
    ) -> None:
        created = await _create(service, expires_at=clock.now() + timedelta(seconds=5))
        clock.advance(5)
        with pytest.raises(ContinuationExpiredError):
            await _resume(service, created)
        assert (await service.get(created.continuation.continuation_id)).status == "expired"

    async def test_resume_of_cancelled_is_cancelled(self, service: ContinuationService) -> None:
        created = await _create(service)
        await service.cancel(continuation_id=created.continuation.continuation_id)
        with pytest.raises(ContinuationCancelledError):
            await _resume(service, created)

    async def test_exact_retry_after_the_deadline_still_returns_the_outcome(
        self, service: ContinuationService, clock: ManualClock
    ) -> None:
        created = await _create(service, expires_at=clock.now() + timedelta(seconds=5))
        first = await _resume(service, created)
        clock.advance(60)
        assert await _resume(service, created) == first

    async def test_unknown_continuation_is_not_found(self, service: ContinuationService) -> None:
        with pytest.raises(ContinuationNotFoundError):
            await service.resume(
                Resume(
                    continuation_id="missing",
                    idempotency_key="k",
                    payload=1,
                    by=TokenHolder("t" * 43),
                )
            )

    async def test_null_payload_is_a_valid_answer_and_is_kept(
        self, service: ContinuationService
    ) -> None:
        created = await _create(service)
        result = (
            await service.resume(
                Resume(
                    continuation_id=created.continuation.continuation_id,
                    idempotency_key="k",
                    payload=None,
                    by=TokenHolder(created.resume_token),
                )
            )
        ).continuation
        assert result.resume_payload is None


class TestCancelAndExpiry:
    async def test_cancel_with_fence_and_exact_retry(self, service: ContinuationService) -> None:
        created = await _create(service)
        cid = created.continuation.continuation_id
        with pytest.raises(VersionConflictError):
            await service.cancel(continuation_id=cid, expected_version=2)
        first = await service.cancel(continuation_id=cid, reason="no", expected_version=1)
        assert first.status == "cancelled"
        assert await service.cancel(continuation_id=cid, reason="no", expected_version=1) == first
        assert await service.cancel(continuation_id=cid, reason="no") == first
        with pytest.raises(InvalidTransitionError):
            await service.cancel(continuation_id=cid, reason="other")
        with pytest.raises(InvalidTransitionError):
            await service.cancel(continuation_id=cid)

    async def test_cancel_of_resumed_is_an_invalid_transition(
        self, service: ContinuationService
    ) -> None:
        created = await _create(service)
        await _resume(service, created)
        with pytest.raises(InvalidTransitionError):
            await service.cancel(continuation_id=created.continuation.continuation_id)

    async def test_cancel_after_deadline_materializes_expiry(
        self, service: ContinuationService, clock: ManualClock
    ) -> None:
        created = await _create(service, expires_at=clock.now() + timedelta(seconds=1))
        clock.advance(2)
        with pytest.raises(ContinuationExpiredError):
            await service.cancel(continuation_id=created.continuation.continuation_id)

    @pytest.mark.parametrize("version", [0, -1, True, 1.5])
    async def test_bad_fences_are_refused(self, service: ContinuationService, version: Any) -> None:
        created = await _create(service)
        with pytest.raises(InvalidInputError):
            await service.cancel(
                continuation_id=created.continuation.continuation_id, expected_version=version
            )

    async def test_sweeper_expires_due_continuations_without_anyone_reading_them(
        self, service: ContinuationService, clock: ManualClock
    ) -> None:
        soon = [
            await _create(service, expires_at=clock.now() + timedelta(seconds=1)) for _ in range(3)
        ]
        later = await _create(service)
        clock.advance(2)
        assert await service.expire_due() == 3
        assert await service.expire_due() == 0
        history = await service.history(soon[0].continuation.continuation_id)
        assert [e.type for e in history] == ["continuation.created", "continuation.expired"]
        assert (await service.get(later.continuation.continuation_id)).status == "pending"

    async def test_get_materializes_expiry(
        self, service: ContinuationService, clock: ManualClock
    ) -> None:
        created = await _create(service, expires_at=clock.now() + timedelta(seconds=1))
        clock.advance(1)
        state = await service.get(created.continuation.continuation_id)
        assert state.status == "expired"
        assert state.version == 2


class TestScopingAndTokens:
    async def test_other_principal_sees_not_found(self, service: ContinuationService) -> None:
        created = await _create(service, owner="alice")
        cid = created.continuation.continuation_id
        assert (await service.get(cid, principal="alice")).status == "pending"
        for principal in ("bob", None):
            with pytest.raises(ContinuationNotFoundError):
                await service.get(cid, principal=principal)
            with pytest.raises(ContinuationNotFoundError):
                await service.cancel(continuation_id=cid, principal=principal)

    async def test_history_never_carries_the_token_hash(self, service: ContinuationService) -> None:
        created = await _create(service)
        await _resume(service, created)
        for event in await service.history(created.continuation.continuation_id):
            assert not hasattr(event, "resume_token_hash")
            assert "resumeTokenHash" not in repr(event)

    async def test_keyed_token_is_rederived_for_a_trusted_resume(
        self, event_store: Any, clock: ManualClock
    ) -> None:
        keyed = KeyedTokenIssuer({"k1": b"k" * 32}, "k1")
        service = ContinuationService(store=event_store, clock=clock, keyed_issuer=keyed)
        created = await service.create(payload=PAYLOAD, keyed=True)
        cid = created.continuation.continuation_id
        result = (
            await service.resume(
                Resume(continuation_id=cid, idempotency_key="k", payload=1, by=TrustedHost())
            )
        ).continuation
        assert result.status == "resumed"
        # The same token also works for an out-of-band holder.
        again = (
            await service.resume(
                Resume(
                    continuation_id=cid,
                    idempotency_key="k",
                    payload=1,
                    by=TokenHolder(created.resume_token),
                )
            )
        ).continuation
        assert again == result

    async def test_trusted_resume_refuses_random_token_continuations(
        self, event_store: Any, clock: ManualClock
    ) -> None:
        keyed = KeyedTokenIssuer({"k1": b"k" * 32}, "k1")
        service = ContinuationService(store=event_store, clock=clock, keyed_issuer=keyed)
        created = await service.create(payload=PAYLOAD)
        with pytest.raises(TokenMismatchError):
            await service.resume(
                Resume(
                    continuation_id=created.continuation.continuation_id,
                    idempotency_key="k",
                    payload=1,
                    by=TrustedHost(),
                )
            )


class TestRaces:
    async def test_fifty_concurrent_resumes_with_distinct_keys_have_one_winner(
        self, service: ContinuationService
    ) -> None:
        created = await _create(service)
        results = await asyncio.gather(
            *(_resume(service, created, key=f"key-{i}") for i in range(50)),
            return_exceptions=True,
        )
        winners = [r for r in results if not isinstance(r, BaseException)]
        assert len(winners) == 1
        losers = [r for r in results if isinstance(r, BaseException)]
        assert all(isinstance(r, TokenAlreadyUsedError) for r in losers)
        assert len(await service.history(created.continuation.continuation_id)) == 2

    async def test_fifty_identical_retries_all_get_the_one_stored_envelope(
        self, service: ContinuationService
    ) -> None:
        created = await _create(service)
        results = await asyncio.gather(*(_resume(service, created) for _ in range(50)))
        assert len({r.resumed_at for r in results}) == 1
        assert all(r == results[0] for r in results)

    async def test_resume_racing_cancel_loser_reports_the_winner(
        self, service: ContinuationService
    ) -> None:
        for _ in range(10):
            created = await _create(service)
            cid = created.continuation.continuation_id
            outcomes = await asyncio.gather(
                *(_resume(service, created, key=f"r{i}") for i in range(10)),
                *(service.cancel(continuation_id=cid, reason="stop") for _ in range(10)),
                return_exceptions=True,
            )
            final = await service.get(cid)
            resume_errors = [o for o in outcomes[:10] if isinstance(o, BaseException)]
            cancel_errors = [o for o in outcomes[10:] if isinstance(o, BaseException)]
            if final.status == "cancelled":
                assert all(isinstance(e, ContinuationCancelledError) for e in resume_errors)
                assert len(resume_errors) == 10
                assert not cancel_errors
            else:
                assert final.status == "resumed"
                assert all(isinstance(e, TokenAlreadyUsedError) for e in resume_errors)
                assert len(resume_errors) == 9
                assert all(isinstance(e, InvalidTransitionError) for e in cancel_errors)

    async def test_resume_racing_expiry_loser_reports_expired(
        self, service: ContinuationService, clock: ManualClock
    ) -> None:
        created = await _create(service, expires_at=clock.now() + timedelta(seconds=1))
        clock.advance(1)
        outcomes = await asyncio.gather(
            *(_resume(service, created, key=f"r{i}") for i in range(20)),
            service.expire_due(),
            return_exceptions=True,
        )
        assert all(isinstance(o, ContinuationExpiredError) for o in outcomes[:20])
