"""No token or token hash ever reaches an observation or a log line."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import msgspec
import pytest

from pausemesh.core import ContinuationService, ManualClock
from pausemesh.core.errors import TokenMismatchError
from pausemesh.core.observations import Observation
from pausemesh.core.observer import CollectingObserver, LoggingObserver, RedactingFilter
from pausemesh.core.tokens import hash_token
from pausemesh.stores.sqlite import open_sqlite_store


class _TeeObserver:
    def __init__(self, *observers: CollectingObserver | LoggingObserver) -> None:
        self._observers = observers

    def observe(self, observation: Observation) -> None:
        for observer in self._observers:
            observer.observe(observation)


class _Exploding:
    def observe(self, observation: Observation) -> None:
        raise RuntimeError("observer is broken")


async def test_observations_and_logs_of_a_full_lifecycle_carry_no_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    collecting = CollectingObserver()
    store = await open_sqlite_store(tmp_path / "redaction.db")
    service = ContinuationService(
        store=store,
        clock=ManualClock(),
        observer=_TeeObserver(collecting, LoggingObserver()),
    )
    secret_payload = "card-4242-secret-payload"
    with caplog.at_level(logging.DEBUG):
        created = await service.create(payload={"kind": "input", "message": secret_payload})
        cid = created.continuation.continuation_id
        with pytest.raises(TokenMismatchError):
            await service.resume(
                continuation_id=cid, resume_token="W" * 43, idempotency_key="k", payload=1
            )
        await service.resume(
            continuation_id=cid,
            resume_token=created.resume_token,
            idempotency_key="k",
            payload={"answer": secret_payload},
        )
    await store.close()

    names = [o.__struct_config__.tag for o in collecting.observations]
    assert names == ["continuation.created", "continuation.rejected", "continuation.transitioned"]
    observed = msgspec.json.encode(collecting.observations).decode()
    logged = "\n".join(f"{r.getMessage()} {getattr(r, 'pausemesh', '')}" for r in caplog.records)
    assert len(caplog.records) >= 3
    for text in (observed, logged):
        assert created.resume_token not in text
        assert hash_token(created.resume_token) not in text
        assert "W" * 43 not in text
        assert secret_payload not in text


async def test_an_observer_that_raises_never_changes_an_outcome(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from pausemesh.stores.memory import InMemoryEventStore  # noqa: PLC0415 - local to this test

    service = ContinuationService(store=InMemoryEventStore(), observer=_Exploding())
    created = await service.create(payload=1)
    result = await service.resume(
        continuation_id=created.continuation.continuation_id,
        resume_token=created.resume_token,
        idempotency_key="k",
        payload=2,
    )
    assert result.status == "resumed"
    assert any("observer" in r.getMessage() for r in caplog.records)
    await asyncio.sleep(0)


def test_redacting_filter_scrubs_authorization_values_and_secret_keys() -> None:
    record = logging.LogRecord(
        "host",
        logging.INFO,
        __file__,
        1,
        "got header PauseMesh abc123def and %s",
        ({"token": "t0k", "ok": 1},),
        None,
    )
    assert RedactingFilter().filter(record)
    message = record.getMessage()
    assert "abc123def" not in message
    assert "t0k" not in message
    assert "'ok': 1" in message


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Bearer eyJhbGciOi.x", "eyJhbGciOi.x"),
        ("bEaReR eyJhbGciOi.x", "eyJhbGciOi.x"),
        ("auth=PAUSEMESH pm1.abc", "pm1.abc"),
        ("a line with\tPauseMesh\npm1.abc in it", "pm1.abc"),
        # Case folding maps U+017F (the long s) onto "s": the pattern matches it.
        ("Pau\u017feMesh pm1.abc", "pm1.abc"),
        ("BEARER\u00a0pm1.abc", "pm1.abc"),
    ],
)
def test_every_spelling_of_a_credential_the_pattern_knows_is_scrubbed_in_each_place(
    text: str, secret: str
) -> None:
    fields = {"continuationId": text, "nested": {"id": text}}
    record = logging.makeLogRecord({"msg": text, "args": (text,), "pausemesh": fields})
    assert RedactingFilter().filter(record)
    assert secret not in record.msg
    assert "[REDACTED]" in record.msg
    assert record.args == (record.msg,)
    assert record.__dict__["pausemesh"] == {
        "continuationId": record.msg,
        "nested": {"id": record.msg},
    }


def test_text_without_a_credential_is_kept_as_it_is() -> None:
    text = "01a24cce-a1f5-78ad-ac05-d1f34bb8d86b bearing PauseMeshy things, \u017f"
    fields = {"continuationId": text}
    record = logging.makeLogRecord({"msg": text, "args": (text,), "pausemesh": fields})
    assert RedactingFilter().filter(record)
    assert record.msg is text
    assert record.args == (text,)
    assert record.__dict__["pausemesh"] == {"continuationId": text}
