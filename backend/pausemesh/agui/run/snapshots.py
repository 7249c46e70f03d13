"""Thread reads: what a reload, ``/connect`` and a replayed resume send back."""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET

from pausemesh.agui.events import (
    PROTOCOL_VERSION,
    Event,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
)
from pausemesh.core.threads import IssuedCohort, ThreadRecord

__all__ = ("cohort_interrupts", "open_interrupts", "restored", "thread_snapshot", "to_messages")

_MESSAGES: Final = msgspec.json.Decoder(list[Message])
_INTERRUPTS: Final = msgspec.json.Decoder(list[Interrupt])


def to_messages(data: list[Any]) -> list[Message]:
    return _MESSAGES.decode(msgspec.json.encode(data))


def cohort_interrupts(cohort: IssuedCohort) -> list[Interrupt]:
    return _INTERRUPTS.decode(msgspec.json.encode(cohort.interrupts))


def open_interrupts(record: ThreadRecord) -> list[Interrupt]:
    return [] if record.open_receipt is None else cohort_interrupts(record.open_receipt)


def restored(
    thread_id: str, run_id: str, messages: list[Message], state: Any, interrupts: list[Interrupt]
) -> list[Event]:
    """A run that only restores the thread: RUN_STARTED, both snapshots, RUN_FINISHED (with
    the open interrupts, if any)."""
    return [
        RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION),
        MessagesSnapshotEvent(messages=messages),
        StateSnapshotEvent(snapshot=state),
        RunFinishedEvent(
            thread_id=thread_id,
            run_id=run_id,
            outcome=RunFinishedInterruptOutcome(interrupts=interrupts) if interrupts else UNSET,
        ),
    ]


def thread_snapshot(record: ThreadRecord) -> dict[str, Any]:
    """``GET /agui/threads/{id}``: what a client needs to rebuild the thread."""
    return {
        "threadId": record.thread_id,
        "title": record.title,
        "messages": record.messages,
        "state": record.state,
        "pendingInterrupts": []
        if record.open_receipt is None
        else list(record.open_receipt.interrupts),
        "lastSequence": record.last_sequence,
    }
